"""Statistics, low in the house and importing nothing of omnibench's studies: what the campaign,
A/B, history and bisect layers call to judge numbers.

- :mod:`.percentiles`  mean, median, linear percentiles, sd (sglang-omni's conventions; None when empty)
- :mod:`.estimators`   mean and sd, t quantiles (SciPy), paired and Welch t, exact permutation p, correlation
- :mod:`.designs`      each design's estimator (paired t, Welch t) behind one protocol, by name: a new
  statistic is a new entry, and the rule never branches on a design
- :mod:`.looks`        when ``invoke ab --max-rounds N`` looks, and each look's level, by the recorded boundary
- :mod:`.boundary`     Lan-DeMets Pocock-type alpha spending on the paired t statistics' own null law
- :mod:`.matched`      a round's values from the requests matched by id across the sides
- :mod:`.verdict`      better, worse, equivalent, inconclusive: intervals, Holm, the exact rule
"""

"""The sweep layer: one workload measured at several load points (concurrency, request rate),
each point a campaign, and what the points say together.

- :mod:`.points`   load points, their labels and options; the latency target (``--slo``)
- :mod:`.execute`  measure or resume each point's campaign
- :mod:`.reading`  one point summarised from its campaign and its runs' speed files
- :mod:`.curve`    the knee, the Pareto front, goodput: rules on numbers alone
- :mod:`.plots`    latency against throughput, per curve and per sweep
- :mod:`.writing`  sweep.json, sweep.md, sweep.png; the terminal text
- :mod:`.compare`  two sweeps, point by point, and one plot with both curves

Nothing is imported here: the history's reading of a point (``points``) costs only its own
imports, not the run layer's that ``execute`` brings.
"""

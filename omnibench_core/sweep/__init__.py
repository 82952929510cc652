"""The sweep layer: one workload measured at several load points (concurrency, request rate),
each point a campaign, and what the points say together.

- :mod:`.points`   load points, their labels and options; the latency target (``--slo``)
- :mod:`.execute`  measure or resume each point's campaign
- :mod:`.reading`  one point summarised from its campaign and its runs' speed files
- :mod:`.curve`    the knee, the Pareto front, goodput: rules on numbers alone
- :mod:`.plots`    latency against throughput, per curve and per sweep
- :mod:`.writing`  sweep.json, sweep.md, sweep.png; the terminal text
- :mod:`.compare`  two sweeps, point by point, and one plot with both curves
"""

from .compare import compare_sweeps, is_sweep
from .compare import compare_text as sweep_compare_text
from .execute import SweepResult, SweepSpec, run_sweep, spec_from
from .points import load_points, parse_concurrencies, parse_rates, parse_slo
from .writing import sweep_text, write_sweep

__all__ = ["SweepResult", "SweepSpec", "compare_sweeps", "is_sweep", "load_points", "parse_concurrencies", "parse_rates", "parse_slo",
           "run_sweep", "spec_from", "sweep_compare_text", "sweep_text", "write_sweep"]

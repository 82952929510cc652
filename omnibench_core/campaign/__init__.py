"""The campaign layer: run0 + N runs of one revision, resumed and retried, then reported and
compared. It drives the run layer only through :mod:`omnibench_core.api` (``run``,
``score_runs``) and the files runs leave (manifests, ``metrics.json``); nothing in the run layer
imports it.

- :mod:`.record`        the campaign file's records: what was asked, the environment, every run attempt
- :mod:`.campaign_file` that file, read and written (from the store's primitives)
- :mod:`.execute`       measure: resume, retries, per-run or deferred scoring (:mod:`.attempt`: one attempt)
- :mod:`.progress`      "run k of N", elapsed, estimate left, a line at least every 10 s
- :mod:`.directions`    which side of a metric is better, the runbook's notes applied as flags
- :mod:`.summary`       a campaign's (or named runs') statistics; refuses mixed runs
- :mod:`.compare`       two campaigns: comparability guard and verdicts (judged by :mod:`omnibench_core.stats`)
- :mod:`.writing`       report.md/json, compare.md/json, never overwriting, written whole or not at all
- :mod:`.pr_summary`    the pull-request summary renderer compare, ab and the history share
- :mod:`.plots`         PNG plots with the optional matplotlib extra
- :mod:`.front_door`    report and compare as the tasks call them

Nothing is imported here: a module of the layer (the history's reading of campaign files, say)
costs only its own imports, not the run layer's that ``execute`` brings.
"""

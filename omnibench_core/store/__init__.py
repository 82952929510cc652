"""The store: the one owner of the files omnibench keeps. Nothing else names these files or
parses them (``tests/test_store.py`` holds the code to it).

- :mod:`.names`            every file and folder name, defined once, and the paths built from them
- :mod:`.manifest`         a run's ``manifest.json``: the writer and the typed reader
- :mod:`.run_entries`      the manifest's steps and servers, typed
- :mod:`.metrics`          a run's ``metrics.json`` (the runbook's file)
- :mod:`.telemetry_file`   a run's ``telemetry.json`` (the GPU telemetry summary)
- :mod:`.sweep_file`       a sweep's ``sweep.json``
- :mod:`.capabilities_file` a checkout's capabilities cache
- :mod:`.fields`, :mod:`.versions`  the field checks every reader shares; the format version check on
  load (older migrated, newer refused)

A campaign file and an A/B file stand on their layers' records, so their owners live in those
layers (:mod:`omnibench_core.campaign.campaign_file`, :mod:`omnibench_core.ab.experiment_file`),
built from these primitives; the store imports nothing above it.
"""

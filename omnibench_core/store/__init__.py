"""The store: the one owner of the files omnibench keeps. Nothing else names these files or
parses them (``tests/test_store.py`` holds the code to it).

- :mod:`.names`            every file and folder name, defined once, and the paths built from them
- :mod:`.statuses`         the status words the files hold, as enums (JSON keeps the words)
- :mod:`.versions`         the format version check on load: older migrated, newer refused
- :mod:`.manifest`         a run's ``manifest.json``: the writer and the typed reader
- :mod:`.run_entries`      the manifest's steps and servers, typed
- :mod:`.metrics`          a run's ``metrics.json`` (the runbook's file)
- :mod:`.telemetry_file`   a run's ``telemetry.json`` (the GPU telemetry summary)
- :mod:`.campaign_file`    ``<revision>/campaigns/<name>.json``
- :mod:`.experiment_file`  ``<results>/ab/<name>.json``

Import the modules, not names from them (``from ..store import manifest``): the campaign and A/B
files' modules stand on those layers' records, which import the store's statuses.
"""

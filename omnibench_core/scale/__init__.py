"""The scale layer: many campaigns across revisions and option sets, on slots, through an engine.

It drives the campaign layer only through :mod:`.campaigns` (an adapter), and the run layer only
through the settings it hands down (port, GPUs, CPUs and checkout come from the slot and the
revision); nothing below imports it.

- :mod:`.jobs`        a campaign to run (revision x option set) and what it left
- :mod:`.slots`       a GPU (or pair) with its CPU group and port; planned, and checked free
- :mod:`.revisions`   revisions from a spec; a worktree and a venv per revision (VENV_OK rule)
- :mod:`.campaigns`   adapter to the campaign layer: run one, is it complete, compare two
- :mod:`.worker`      one campaign on one slot (what every engine runs)
- :mod:`.engine`      what an engine is, and an engine author's surface (docs/engines.md)
- :mod:`.engines`     the built-in engines, registered through the ``omnibench_engines`` hook
- :mod:`.local`       engine: this host's slots side by side, one subprocess per campaign
- :mod:`.ray_engine`  engine: one Ray task per campaign on an existing cluster
- :mod:`.schedule`    jobs onto free slots through an engine; lost slots' jobs go elsewhere
- :mod:`.matrix`      revisions x option sets, then a table and compares against the first
- :mod:`.bisect`      the first bad commit by a k-ary search over full campaigns
"""

"""Settings, with the runbook's values as defaults, in four sections.

Users set them through Invoke's configuration (``invoke.yaml``, ``INVOKE_OMNIBENCH_*``
environment variables, task flags) as one flat ``omnibench`` mapping of keys (``port``,
``ci_gpus``, ``bench_dir``, ``git``...). :meth:`Settings.from_mapping` checks that mapping and
sorts each key into its section; each key names exactly one field of one section, so the keys
users write never change when the code moves a setting between sections.

- :class:`RunSettings` (``settings.run``): what a run needs; workloads get only this section.
- :class:`CiSettings` (``settings.ci``): the model-CI stages (``nox -s ci_stages``).
- :class:`HostSettings` (``settings.host``): the GPU-host set-up tasks and ``doctor``.
- :class:`ToolSettings` (``settings.tools``): the commands omnibench runs, so tests can use fakes.
"""

from .record import (
    KIND_WORDS,
    SECTIONS,
    STREAM_DELAYS,
    CiSettings,
    HostSettings,
    RunSettings,
    Settings,
    ToolSettings,
    format_cpu_list,
    parse_cpu_list,
    parse_percentiles,
    results_problem,
)

__all__ = [
    "CiSettings",
    "HostSettings",
    "KIND_WORDS",
    "RunSettings",
    "SECTIONS",
    "STREAM_DELAYS",
    "Settings",
    "ToolSettings",
    "format_cpu_list",
    "parse_cpu_list",
    "parse_percentiles",
    "results_problem",
]

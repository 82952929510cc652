"""omnibench's command line: ``invoke --list``. Each task parses options and prints; the
library (omnibench_core) does the work."""

from __future__ import annotations

from invoke import Collection, Context, Exit, task

from omnibench_core import api, report
from omnibench_core.errors import OmnibenchError, RunInterrupted
from omnibench_core.settings import Settings


def settings_from(c: Context, **flags: object) -> Settings:
    """Invoke's ``omnibench`` configuration with the task's flags on top."""
    given = {k: v for k, v in flags.items() if v is not None}
    return Settings.from_mapping({**dict(c.config.omnibench), **given})


@task(
    iterable=["workload", "opt"],
    help={
        "workload": "workload to run (repeat for several, e.g. --workload videoamme --workload seedtts)",
        "target": "where the system under test comes from: local (default) or sglang-omni",
        "results": "results root; the run goes to RESULTS/<revision>/runN",
        "port": "port of every server the run starts (default 8000)",
        "run-name": "run directory name (default: the next free runN)",
        "opt": "workload option WORKLOAD.KEY=VALUE (repeatable; see `invoke plugins`)",
        "checkout": "sglang-omni checkout (target sglang-omni)",
        "gpus": "GPUs for the servers, CUDA_VISIBLE_DEVICES (default 0)",
        "cpus": "CPU set to pin every process to, e.g. 2-15,66-79 (BENCH_CPUS)",
        "client": "which client the workloads use: native (omnibench's) or sglang (the checkout's own)",
    },
)
def run(c, workload, target=None, results=None, port=None, run_name=None, opt=None, checkout=None, gpus=None,
        cpus=None, client=None):
    """Run workloads once: fresh server per workload, client, scoring, coverage, metrics.json."""
    try:
        settings = settings_from(c, target=target, results=results, port=port, checkout=checkout, gpus=gpus, cpus=cpus)
        result = api.run(settings, workload, options=opt or [], run_name=run_name, client=client, progress=print)
    except RunInterrupted as exc:
        raise Exit(f"error: {exc}", code=130) from None
    except OmnibenchError as exc:
        raise Exit(f"error: {exc}", code=1) from None
    print(report.run_summary(result))
    if not result.complete:
        raise Exit(code=1)


@task
def plugins(c):
    """List every workload, target and scorer with the plugin and distribution providing it."""
    try:
        rows = api.list_plugins()
    except OmnibenchError as exc:
        raise Exit(f"error: {exc}", code=1) from None
    print(report.table(((r.kind, r.name, r.description, r.plugin, r.distribution, r.version) for r in rows),
                       ("kind", "name", "description", "plugin", "distribution", "version")))


ns = Collection(run, plugins)
ns.configure({"omnibench": Settings.defaults()})

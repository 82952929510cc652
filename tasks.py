"""omnibench's command line: ``invoke --list``. Each task parses options and prints; the
library (omnibench_core) does the work."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from invoke import Collection, Context, Exit, task

from omnibench_core import api, campaign, report
from omnibench_core.errors import OmnibenchError, RunInterrupted
from omnibench_core.report import emit
from omnibench_core.scale import commands as scale
from omnibench_core.scale.bisect import bisect_text
from omnibench_core.scale.matrix import matrix_text
from omnibench_core.settings import Settings
from omnibench_core.setup import host as setup_host
from omnibench_core.standin import DEFAULT_GPUS, StandinSpec, history_text, make_standin


@contextmanager
def reported() -> Iterator[None]:
    """A typed omnibench error becomes a clean message and exit code (130 for an interrupt)."""
    try:
        yield
    except RunInterrupted as exc:
        raise Exit(f"error: {exc}", code=130) from None
    except OmnibenchError as exc:
        raise Exit(f"error: {exc}", code=1) from None


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
        "opt": "workload option WORKLOAD.KEY=VALUE (repeatable); `invoke plugins` lists each workload's options "
               "with type, range and default; a bad value is refused before any server starts",
        "checkout": "sglang-omni checkout (target sglang-omni)",
        "gpus": "GPUs for the servers, CUDA_VISIBLE_DEVICES (default 0)",
        "cpus": "CPU set to pin every process to, e.g. 2-15,66-79 (BENCH_CPUS)",
        "client": "which client the workloads use: native (omnibench's) or sglang (the checkout's own)",
    },
)
def run(c, workload, target=None, results=None, port=None, run_name=None, opt=None, checkout=None, gpus=None,
        cpus=None, client=None):
    """Run workloads once: fresh server per workload, client, scoring, coverage, metrics.json."""
    with reported():
        settings = settings_from(c, target=target, results=results, port=port, checkout=checkout, gpus=gpus, cpus=cpus)
        result = api.run(settings, workload, options=opt or [], run_name=run_name, client=client, progress=emit)
    emit(report.run_summary(result))
    if not result.complete:
        raise Exit(code=1)


RUN_FLAGS_HELP = {
    "target": "where the system under test comes from: local (default) or sglang-omni",
    "results": "results root; runs go to RESULTS/<revision>/runN",
    "port": "port of every server the runs start (default 8000)",
    "opt": "workload option WORKLOAD.KEY=VALUE (repeatable; see `invoke plugins`)",
    "checkout": "sglang-omni checkout (target sglang-omni)",
    "gpus": "GPUs for the servers, CUDA_VISIBLE_DEVICES (default 0)",
    "cpus": "CPU set to pin every process to, e.g. 2-15,66-79 (BENCH_CPUS)",
    "client": "which client the workloads use: native (omnibench's) or sglang (the checkout's own)",
}


# The flags follow `run`'s order, so the short flags are the same as run's (-w -t -r -p -o -c -g -s -l).
@task(iterable=["workload", "opt"], help={
    "workload": "workload to measure (repeat for several)",
    "runs": "measured runs after the warm-up run0 (default 3, as the runbook)",
    "retries": "tries again of a run that misses a gate or coverage rule (default 2)",
    "scoring": "deferred (default: every run generated, then one scoring server start for all) or per-run",
    "name": "campaign name (default: from the workloads, options and target; the same command resumes it)",
    **RUN_FLAGS_HELP})
def measure(c, workload, target=None, results=None, port=None, runs=3, opt=None, checkout=None, gpus=None,
            cpus=None, client=None, retries=2, scoring="deferred", name=None):
    """A campaign: warm-up run0, then --runs measured runs, resumed by the same command; then its report."""
    with reported():
        settings = settings_from(c, target=target, results=results, port=port, checkout=checkout, gpus=gpus, cpus=cpus)
        asked = campaign.asked_from(settings, workload, opt or [], client, int(runs), int(retries), scoring)
        outcome = campaign.measure(settings, asked, name=name, progress=emit)
        made = campaign.report(settings, outcome.campaign.name)
    emit(campaign.report_text(made))


@task(help={"name": "campaign name, REVISION/NAME or a campaign file (default: the latest campaign of the revision folder; Invoke has no optional positionals, so --name)",
            "runs": "report these complete runs instead of a campaign, comma-separated (they must match)",
            "target": "local or sglang-omni (which revision folder)", "results": "results root",
            "checkout": "sglang-omni checkout (its commit names the revision folder)"})
def report_runs(c, name="", runs="", target=None, results=None, checkout=None):
    """A campaign's report: each metric's mean, sample sd, values by run, direction, spread and flags."""
    with reported():
        settings = settings_from(c, target=target, results=results, checkout=checkout)
        made = campaign.report(settings, name or None, runs=[r.strip() for r in runs.split(",") if r.strip()])
    emit(campaign.report_text(made))


@task(help={"a": "the base campaign: NAME (this revision folder), REVISION/NAME, or a campaign file",
            "b": "the campaign compared with A, named the same ways",
            "force": "compare even when the setups differ (each difference is still named)",
            "min-effect": "smallest relative change that counts, in percent (default 5)",
            "alpha": "significance level of Welch's t-test (default 0.05)",
            "fail-on": "exit 1 when any metric's verdict is this (e.g. worse), for CI",
            "target": "local or sglang-omni", "results": "results root"})
def compare(c, a, b, force=False, min_effect="5", alpha="0.05", fail_on="", target=None, results=None):
    """Compare two campaigns (A is the base): per metric a verdict better, worse or no significant change."""
    with reported():
        settings = settings_from(c, target=target, results=results)
        made = campaign.compare(settings, a, b, force=force, min_effect=float(min_effect) / 100, alpha=float(alpha))
    emit(campaign.compare_text(made))
    if fail_on and any(m.verdict == fail_on for m in made.comparison.metrics):
        raise Exit(f"a metric's verdict is {fail_on!r}", code=1)


@task(help={"options": "list only the workload options (--opt WORKLOAD.KEY=VALUE)"})
def plugins(c, options=False):
    """List every workload, target and scorer with who provides it, then each workload's options."""
    with reported():
        rows = [] if options else api.list_plugins()
        option_rows = api.list_options()
    if rows:
        emit(report.plugins_table(rows))
        emit("\nworkload options (--opt WORKLOAD.KEY=VALUE):")
    emit(report.options_table(option_rows))


@task(help={"gpu-a": "the single-GPU measurement GPU (BENCH_CPUS)", "gpu-b": "the second GPU of the CI pair",
            "out": "also write the two lines to this file (e.g. $BENCH_DIR/cpus.env)",
            "cores-per-gpu": "cores per GPU group (default 14)", "skip-cores": "cores left out (default 0,1)"})
def cpus(c, gpu_a=None, gpu_b=None, out=None, cores_per_gpu=None, skip_cores=None):
    """CPU groups per GPU on its NUMA node: BENCH_CPUS and CI_CPUS, then CPUS_OK."""
    with reported():
        groups = setup_host.make_cpu_groups(settings_from(c), gpu_a=gpu_a, gpu_b=gpu_b,
                                            cores_per_gpu=int(cores_per_gpu) if cores_per_gpu else None,
                                            skip_cores=skip_cores, out=Path(out) if out else None)
    emit(groups.env_text() + "CPUS_OK")


@task(help={"execute": "run docker run (default: print the commands for copying)",
            "env-file": "the cpus.env with CI_CPUS (default $BENCH_DIR/cpus.env)"})
def container(c, execute=False, env_file=None):
    """The runbook's docker run for the GPU pair (printed, or run with --execute) and docker exec."""
    with reported():
        plan = setup_host.container(settings_from(c), Path(env_file) if env_file else None)
        if execute:
            emit(f"started {setup_host.create_container(plan)[:12]}")
    emit(plan.shell_lines())


@task(help={"commit": "commit, tag or branch to detach at (default origin/main)"})
def checkout(c, commit=None):
    """Clone or fetch sglang-omni into the checkout and detach at the commit."""
    with reported():
        setup_host.checkout(settings_from(c), commit)


@task
def venv(c):
    """Build the checkout's venv with CI's prepare_omni_venv.sh, then VENV_OK."""
    with reported():
        emit(f"VENV_OK {setup_host.venv(settings_from(c))}")


@task
def download(c):
    """Download the pinned models and data, write refs/main, run the checkout's preparation."""
    with reported():
        setup_host.download_all(settings_from(c))


@task
def verify(c):
    """REVISIONS_OK: every pin loads offline at its own revision; seed-tts has its count."""
    with reported():
        setup_host.verify_all(settings_from(c))
    emit("REVISIONS_OK")


@task(default=True, help={"where": "host (CPU groups, container) or container (checkout, venv, downloads); "
                                   "default: container when run inside one"})
def setup_all(c, where="auto"):
    """Every set-up step for this side, in order, skipping what is already done."""
    with reported():
        setup_host.setup_all(settings_from(c), where)


@task(help={"target": "the target to check for: local (default; needs no GPU or checkout) or sglang-omni",
            "checkout": "sglang-omni checkout (target sglang-omni)",
            "port": "the port the runs will serve on (default 8000): is it free?"})
def doctor(c, target=None, checkout=None, port=None):
    """Check every prerequisite of a run on this host: a table of OK/FAIL/n/a with the fix for each."""
    with reported():
        checks = api.diagnose(settings_from(c, target=target, checkout=checkout, port=port))
    emit(report.table(((k.name, k.status, k.detail, k.fix) for k in checks), ("check", "status", "detail", "fix")))
    failed = [k.name for k in checks if k.status == "FAIL"]
    if failed:
        raise Exit(f"{len(failed)} check(s) failed: {', '.join(failed)}", code=1)


@task(help={"out": "where to make it (default ./standin-sglang-omni; must not exist or be empty)",
            "commits": "how many commits of history (default 1)",
            "regress-at": "from this commit (1-based) on, a planted regression: --delay-ms per request, --fail-stage",
            "delay-ms": "latency added per request from --regress-at on (default 50)",
            "fail-stage": "a CI stage that cannot pass from --regress-at on (every commit without it)",
            "base-delay-ms": "latency every commit adds per request (default 0)",
            "fake-gpus": "also write a fake nvidia-smi into this folder (for a machine without a GPU; put it first on PATH)",
            "fake-gpu-count": f"GPUs the fake nvidia-smi has (default {DEFAULT_GPUS}, a pair)"})
def standin(c, out="standin-sglang-omni", commits=1, regress_at=None, delay_ms=50.0, fail_stage=None, fake_gpus=None,
            fake_gpu_count=DEFAULT_GPUS, base_delay_ms=StandinSpec.base_delay_ms):
    """Make a stand-in sglang-omni checkout: a git repo whose programs are real and run on CPU."""
    with reported():
        spec = StandinSpec(commits=int(commits), regress_at=int(regress_at) if regress_at else None,
                           delay_ms=float(delay_ms), fail_stage=fail_stage, base_delay_ms=float(base_delay_ms))
        made = make_standin(Path(out), spec, fake_gpus=Path(fake_gpus) if fake_gpus else None, gpus=int(fake_gpu_count))
    emit(history_text(made, spec))


SCALE_HELP = {
    "workload": "workload of every campaign (repeatable)",
    "runs": "measured runs per campaign after run0 (default 3)",
    "slots": "GPU ids of this host for the slots, e.g. 0,1,2,3 (default the gpus setting); slot k serves on port + k",
    "slot-per": "pair (default: a slot is a GPU pair whose second GPU stays idle, as the runbook measures) or gpu",
    "slot-cpus": "rule (default: the GPU's CPU group, as `invoke setup.cpus`) or shared (every slot the process's "
                 "CPUs, for small hosts; the report says so)",
    "engine": "local (this host's slots side by side) or ray (one Ray task per campaign; pip install -e '.[ray]')",
    "address": "Ray cluster address (default auto: the cluster `ray start` made on this host)",
    "opt": "workload option WORKLOAD.KEY=VALUE for every campaign (repeatable)",
    "client": "native or sglang", "target": "local or sglang-omni", "checkout": "sglang-omni checkout",
    "results": "results root", "port": "base port (slot k serves on port + k)",
    "threshold": "smallest change that counts, e.g. 5% (default 5%)",
}


@task(iterable=["workload", "sweep", "opt"], help={
    **SCALE_HELP, "revisions": "A,B,C or A..B (git rev-list A..B; A^..B includes A) of the checkout",
    "sweep": "WORKLOAD.KEY=V1,V2,... (repeatable): every combination is an option set",
    "resume": "keep complete campaigns and runs, continue the others"})
def matrix(c, workload, revisions="", sweep=None, opt=None, runs=3, slots="", slot_per="pair", slot_cpus="rule",
           engine="local", address="auto", resume=False, threshold="5%", client=None, target=None, checkout=None,
           results=None, port=None):
    """Every revision x option set one campaign, on slots side by side; then a table and compares."""
    with reported():
        settings = settings_from(c, target=target, checkout=checkout, results=results, port=port)
        eng = scale.make_engine(settings, engine=engine, slots=slots, slot_per=slot_per, slot_cpus=slot_cpus,
                                address=address, progress=emit)
        result = scale.matrix(settings, revisions_spec=revisions, workloads=workload, sweep=sweep or [],
                              options=opt or [], runs=int(runs), client=client, engine=eng, resume=resume,
                              threshold=scale.parse_threshold(threshold), progress=emit)
    emit(matrix_text(result))
    if any(o.status != "complete" for o in result.outcomes.values()):
        raise Exit(code=1)


@task(iterable=["workload", "opt"], help={
    **SCALE_HELP, "good": "a commit where the metric is good", "bad": "a later commit where it is worse",
    "metric": "metric to judge, e.g. seedtts.throughput_qps"})
def bisect(c, good, bad, metric, workload, threshold="5%", runs=3, opt=None, slots="", slot_per="pair",
           slot_cpus="rule", engine="local", address="auto", client=None, target=None, checkout=None, results=None,
           port=None):
    """The first commit where METRIC got worse, k commits a round on k slots; reuses campaigns."""
    with reported():
        settings = settings_from(c, target=target, checkout=checkout, results=results, port=port)
        eng = scale.make_engine(settings, engine=engine, slots=slots, slot_per=slot_per, slot_cpus=slot_cpus,
                                address=address, progress=emit)
        result = scale.bisect(settings, good=good, bad=bad, metric=metric, workloads=workload,
                              threshold=scale.parse_threshold(threshold), runs=int(runs), options=opt or [],
                              client=client, engine=eng, progress=emit)
    emit(bisect_text(result))


setup = Collection("setup", cpus, container, checkout, venv, download, verify)
setup.add_task(setup_all, name="all", default=True)
ns = Collection(run, measure, compare, matrix, bisect, plugins, doctor, standin, setup)
ns.add_task(report_runs, name="report")
ns.configure({"omnibench": Settings.defaults()})

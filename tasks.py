"""omnibench's command line: ``invoke --list``. Each task parses options and prints; the
library (omnibench_core) does the work."""

from __future__ import annotations

import importlib
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from functools import partial
from pathlib import Path
from typing import Any

import invoke
from invoke import Collection, Context, Exit
from invoke import main as invoke_main

from omnibench_core import defaults, tables
from omnibench_core.cli import config
from omnibench_core.cli import flags as f
from omnibench_core.errors import OmnibenchError, RunInterrupted, Terminated
from omnibench_core.heartbeat import working
from omnibench_core.scale.slots import SLOT_CPUS, SLOT_PER
from omnibench_core.settings import Settings
from omnibench_core.setup import host as setup_host
from omnibench_core.standin import DEFAULT_GPUS, StandinSpec, history_text, make_standin
from omnibench_core.standin.stages import KINDS as CI_STAGES
from omnibench_core.statuses import JobStatus
from omnibench_core.tables import emit


class _Lazy:
    """A library module imported on its first use: `invoke --list`, `--help` and a task pay only
    for the modules they use (issue 46: every command paid 0.7 s of CPU for all of them)."""

    def __init__(self, name: str) -> None:
        self._name = name

    def __getattr__(self, attr: str) -> Any:
        return getattr(importlib.import_module(self._name), attr)


ab_layer = _Lazy("omnibench_core.ab.front_door")
api = _Lazy("omnibench_core.api")
campaign = _Lazy("omnibench_core.campaign.front_door")
campaign_execute = _Lazy("omnibench_core.campaign.execute")
campaign_summary = _Lazy("omnibench_core.campaign.pr_summary")
sweep_compare = _Lazy("omnibench_core.sweep.compare")
sweep_execute = _Lazy("omnibench_core.sweep.execute")
sweep_points = _Lazy("omnibench_core.sweep.points")
sweep_writing = _Lazy("omnibench_core.sweep.writing")
compare_words = _Lazy("omnibench_core.campaign.compare")
campaign_record = _Lazy("omnibench_core.campaign.record")
history_layer = _Lazy("omnibench_core.history.front_door")
history_site = _Lazy("omnibench_core.history.site_command")
history_query = _Lazy("omnibench_core.history.query")
history_texts = _Lazy("omnibench_core.history.text")
plugin_manager = _Lazy("omnibench_core.registry.manager")
records = _Lazy("omnibench_core.records")
runner = _Lazy("omnibench_core.run.runner")
scale = _Lazy("omnibench_core.scale.front_door")
scale_bisect = _Lazy("omnibench_core.scale.bisect")
scale_matrix = _Lazy("omnibench_core.scale.matrix")
scale_revisions = _Lazy("omnibench_core.scale.revisions")

# Every task checks each of its flags (`checks=`) before its body starts anything; see
# omnibench_core/cli/flags.py. tests/test_flags.py fails for a flag without a check.
task = partial(invoke.task, klass=f.FlagTask)


@contextmanager
def reported() -> Iterator[None]:
    """A typed omnibench error becomes a clean message and exit code; Ctrl-C and SIGTERM anywhere
    (a report being written, say) exit 130 with a message, as an interrupted run does."""
    try:
        with runner.sigterm_as_exception():
            yield
    except RunInterrupted as exc:
        raise Exit(f"error: {exc}", code=130) from None
    except OmnibenchError as exc:
        raise Exit(f"error: {exc}", code=1) from None
    except (KeyboardInterrupt, Terminated) as exc:
        raise Exit(f"error: {runner.interrupted_message(exc)}", code=130) from None


def settings_from(c: Context, **flags: object) -> Settings:
    """Invoke's ``omnibench`` configuration with the task's flags on top; a bad value is blamed
    on its flag, variable or file."""
    return config.settings_from(c.config, flags)


# Checks of the flags several tasks share.
TARGET = f.choice(lambda: sorted(plugin_manager.load()[1].table("target")))
SETTING_CHECKS: dict[str, f.AnyCheck] = {
    "target": TARGET, "results": f.text(), "port": f.port(), "checkout": f.text(), "gpus": f.gpu_ids(),
    "cpus": f.cpu_set(here=True), "client": f.text(),  # --client: each workload checks it against its own choices
    "workload": f.Many(f.text(empty=False)), "opt": f.Many(f.text(empty=False)),  # --opt: the options' schemas
    "server_profile": f.choice(defaults.SERVER_PROFILES),
}
PROFILE_HELP = ("which server is measured: runbook (default: the model's defaults, the runbook's single-GPU server) "
                "or ci (code2wav batch 16 with a 100 ms wait, as CI's audio stages; target sglang-omni only)")
RUNS = f.whole(2)  # a campaign's spread needs two measured runs
# The library's defaults as the text a flag takes (Invoke shows a signature's default in --help).
PERCENT, THRESHOLD, ALPHA = f"{defaults.MIN_EFFECT * 100:g}", f"{defaults.MIN_EFFECT:.0%}", f"{defaults.ALPHA:g}"


@task(
    iterable=["workload", "opt"], checks={**SETTING_CHECKS, "run_name": f.name("run name")},
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
        "server-profile": PROFILE_HELP,
    },
)
def run(c, workload, target=None, results=None, port=None, run_name=None, opt=None, checkout=None, gpus=None,
        cpus=None, client=None, server_profile=None):
    """Run workloads once: fresh server per workload, client, scoring, coverage, metrics.json."""
    with reported():
        settings = settings_from(c, target=target, results=results, port=port, checkout=checkout, gpus=gpus, cpus=cpus,
                                 server_profile=server_profile)
        result = api.run(settings, workload, options=opt or [], run_name=run_name, client=client, progress=emit)
    emit(tables.run_summary(result))
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
    "server-profile": PROFILE_HELP,
}


# The flags follow `run`'s order, so the short flags are the same as run's (-w -t -r -p -o -c -g -s -l);
# so do sweep's, its own flags after them.
@task(iterable=["workload", "opt"], checks={
    **SETTING_CHECKS, "runs": RUNS, "retries": f.whole(0), "scoring": f.choice(lambda: campaign_record.SCORINGS), "name": f.name("campaign name")}, help={
    "workload": "workload to measure (repeat for several)",
    "runs": "measured runs after the warm-up run0 (default 3, as the runbook)",
    "retries": "tries again of a run that misses a gate or coverage rule (default 2)",
    "scoring": "deferred (default: every run generated, then one scoring server start for all) or per-run",
    "name": "campaign name (default: from the workloads, options and target; the same command resumes it)",
    **RUN_FLAGS_HELP})
def measure(c, workload, target=None, results=None, port=None, runs=defaults.RUNS, opt=None, checkout=None, gpus=None,
            cpus=None, client=None, retries=defaults.RETRIES, scoring=defaults.SCORING, name=None, server_profile=None):
    """A campaign: warm-up run0, then --runs measured runs, resumed by the same command; then its report."""
    with reported():
        settings = settings_from(c, target=target, results=results, port=port, checkout=checkout, gpus=gpus, cpus=cpus,
                                 server_profile=server_profile)
        asked = campaign_execute.asked_from(settings, workload, opt or [], client, runs, retries, scoring)
        made = campaign.measure(settings, asked, name=name, progress=emit)
    emit(campaign.report_text(made))


@task(iterable=["opt"], checks={
    **SETTING_CHECKS, "workload": f.text(empty=False), "runs": RUNS, "retries": f.whole(0),
    "scoring": f.choice(lambda: campaign_record.SCORINGS), "name": f.name("sweep name", empty=True), "upstream": f.SWITCH,
    "score": f.choice(lambda: records.SCORE_WORDS, empty=True),
    # "" (the default) is none given: the sweep itself asks for at least one kind of point
    "concurrency": f.library("1,2,4,8,16", lambda v: (v.strip() and sweep_points.parse_concurrencies(v), v)[1]),
    "request_rate": f.library("1,2,4,inf", lambda v: (v.strip() and sweep_points.parse_rates(v), v)[1]),
    "slo": f.library("latency_p95_s=2.0", lambda v: (v.strip() and sweep_points.parse_slo(v), v)[1])}, help={
    "concurrency": "requests in flight at each point, comma-separated, e.g. 1,2,4,8,16",
    "request-rate": "requests per second at each point, comma-separated, inf for all at once, e.g. 1,2,4,inf "
                    "(arrivals on a seeded Poisson schedule; with --concurrency, every combination is a point)",
    "runs": "measured runs per point after its warm-up run0 (default 3)",
    "slo": "a latency target METRIC=SECONDS (latency_mean_s, latency_p95_s, latency_p99_s or latency_median_s): "
           "each point's goodput is the requests per second within it, and the sweep names the highest "
           "throughput that holds it",
    "name": "sweep name (default: sweep-WORKLOAD, with a digest of the options); each point is the campaign "
            "NAME.POINT, and the same command resumes the sweep",
    "retries": "tries again of a run that misses a gate or coverage rule (default 2)",
    "scoring": "deferred (default) or per-run, as measure",
    "score": "which runs of each point are scored for quality (WER, SIM, UTMOS): last (the default, where the "
             "workload can leave runs unscored: the point's last run; its warm-up and other runs are generated and "
             "timed only), every-round (every run, as measure), or none. A load curve is speed: it needs no scoring",
    "upstream": "sglang-omni's own sweep: one campaign whose every run hands its one server to the checkout's "
                "seed-tts client, which runs every --concurrency level (needs --target sglang-omni and "
                "--opt seedtts.client=sglang; at most one --request-rate)",
    **RUN_FLAGS_HELP, "workload": "the workload to sweep (one; it needs a max_concurrency option for --concurrency "
                                  "and a request_rate option for --request-rate: seedtts has both)"})
def sweep_load(c, workload, target=None, results=None, port=None, runs=defaults.RUNS, opt=None, checkout=None,
               gpus=None, cpus=None, client=None, retries=defaults.RETRIES, scoring=defaults.SCORING, name="",
               server_profile=None, concurrency="", request_rate="", slo="", upstream=False, score=""):
    """A load sweep: the workload measured at each concurrency and/or request rate (each point a campaign), then
    a table and a plot of latency against throughput, the knee, the Pareto front and the goodput."""
    with reported():
        settings = settings_from(c, target=target, results=results, port=port, checkout=checkout, gpus=gpus, cpus=cpus,
                                 server_profile=server_profile)
        spec = sweep_execute.spec_from(workload, concurrency=concurrency, request_rate=request_rate, runs=runs,
                               options=opt or [], client=client, retries=retries, scoring=scoring, slo=slo, name=name,
                               upstream=upstream, score=score)
        result = sweep_execute.run_sweep(settings, spec, progress=emit)
        with working(emit, f"writing sweep {spec.sweep_name()} (table and plot)"):
            written = sweep_writing.write_sweep(result, settings.run.results_root)
    emit(sweep_writing.sweep_text(result, written))


@task(checks={"name": f.text(), "runs": f.distinct_list("run names"), "target": TARGET, "results": f.text(),
              "checkout": f.text()},
      help={"name": "campaign name, REVISION/NAME or a campaign file (default: the latest campaign of the revision folder; Invoke has no optional positionals, so --name)",
            "runs": "report these complete runs instead of a campaign, comma-separated (they must match)",
            "target": "local or sglang-omni (which revision folder)", "results": "results root",
            "checkout": "sglang-omni checkout (its commit names the revision folder)"})
def report_runs(c, name="", runs="", target=None, results=None, checkout=None):
    """A campaign's report: each metric's mean, sample sd, values by run, direction, spread and flags."""
    with reported():
        settings = settings_from(c, target=target, results=results, checkout=checkout)
        with working(emit, f"reporting {f'runs {runs}' if runs else name or 'the latest campaign'}: reading its runs, "
                           "writing the report and its plots"):
            made = campaign.report(settings, name or None, runs=runs)
    emit(campaign.report_text(made))


@task(checks={"a": f.text(empty=False), "b": f.text(empty=False), "force": f.SWITCH, "min_effect": f.percent(),
              "alpha": f.fraction_open(0, 1, "0.05"), "fail_on": f.choice(lambda: compare_words.VERDICTS, empty=True), "target": TARGET,
              "results": f.text()},
      help={"a": "the base campaign: NAME (this revision folder), REVISION/NAME, or a campaign file; or the base "
                 "sweep (NAME, REVISION/NAME or REVISION/NAME/POINTS): then every common load point is compared",
            "b": "the campaign (or sweep) compared with A, named the same ways",
            "force": "compare even when the setups differ (each difference is still named)",
            "min-effect": "smallest relative change that counts, in percent (default 5)",
            "alpha": "error rate of the family of metrics, Holm-held (default 0.05: 95 % intervals for one)",
            "fail-on": "exit 1 when any metric's verdict is this (e.g. worse), for CI (the words follow)",
            "target": "local or sglang-omni", "results": "results root"})
def compare(c, a, b, force=False, min_effect=PERCENT, alpha=ALPHA, fail_on="", target=None, results=None):
    """Compare two campaigns (A is the base): per metric better, worse, equivalent or inconclusive, with its interval."""
    with reported():
        settings = settings_from(c, target=target, results=results)
        if sweep_compare.is_sweep(settings, a) and sweep_compare.is_sweep(settings, b):
            with working(emit, f"comparing sweep {b} with base {a}, point by point"):
                swept = sweep_compare.compare_sweeps(settings, a, b, alpha=alpha, min_effect=min_effect, force=force)
            emit(sweep_compare.compare_text(swept))
            failing = [f"{p.label} {x}" for p in swept.points for x in p.comparison.fail_on(fail_on)] if fail_on else []
            if failing:
                raise Exit(f"--fail-on {fail_on}: " + "; ".join(failing), code=1)
            return
        with working(emit, f"comparing {b} with base {a}: reading their runs, judging each metric, writing "
                           "compare.md and its plot"):
            made = campaign.compare(settings, a, b, force=force, min_effect=min_effect, alpha=alpha,
                                    summary=campaign_summary.COMPARISON_SUMMARY)
    emit(campaign.compare_text(made))
    failing = made.comparison.fail_on(fail_on) if fail_on else []
    if failing:
        raise Exit(f"--fail-on {fail_on}: " + "; ".join(failing), code=1)


@task(checks={"options": f.SWITCH}, help={"options": "list only the options: each workload's (--opt WORKLOAD.KEY=VALUE), then each engine's"})
def plugins(c, options=False):
    """List every workload, target, scorer and engine with who provides it, then each workload's and
    each engine's options."""
    with reported():
        rows = [] if options else api.list_plugins()
        option_rows = api.list_options()
        engine_rows = api.list_engine_options()
    if rows:
        emit(tables.plugins_table(rows))
        emit("\nworkload options (--opt WORKLOAD.KEY=VALUE):")
    emit(tables.options_table(option_rows))
    emit("\nengine options (--engine NAME --engine-opt KEY=VALUE):")
    emit(tables.options_table(engine_rows, owner="engine"))


@task(checks={"gpu_a": f.gpu_index(), "gpu_b": f.gpu_index(), "out": f.text(), "cores_per_gpu": f.positive_int(),
              "skip_cores": f.cpu_set()},
      help={"gpu-a": "the single-GPU measurement GPU (BENCH_CPUS)", "gpu-b": "the second GPU of the CI pair",
            "out": "also write the two lines to this file (e.g. $BENCH_DIR/cpus.env)",
            "cores-per-gpu": "cores per GPU group (default 14)", "skip-cores": "cores left out (default 0,1)"})
def cpus(c, gpu_a=None, gpu_b=None, out=None, cores_per_gpu=None, skip_cores=None):
    """CPU groups per GPU on its NUMA node: BENCH_CPUS and CI_CPUS, then CPUS_OK."""
    with reported():
        groups = setup_host.make_cpu_groups(settings_from(c), gpu_a=gpu_a, gpu_b=gpu_b,
                                            cores_per_gpu=cores_per_gpu,
                                            skip_cores=skip_cores, out=Path(out) if out else None)
    emit(groups.env_text() + "CPUS_OK")


@task(checks={"execute": f.SWITCH, "env_file": f.text()},
      help={"execute": "run docker run (default: print the commands for copying)",
            "env-file": "the cpus.env with CI_CPUS (default $BENCH_DIR/cpus.env)"})
def container(c, execute=False, env_file=None):
    """The runbook's docker run for the GPU pair (printed, or run with --execute) and docker exec."""
    with reported():
        plan = setup_host.container(settings_from(c), Path(env_file) if env_file else None)
        if execute:
            emit(f"started {setup_host.create_container(plan)[:12]}")
    emit(plan.shell_lines())


@task(checks={"commit": f.revision()}, help={"commit": "commit, tag or branch to detach at (default origin/main)"})
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


@task(default=True, checks={"where": f.choice(setup_host.SIDES)}, help={"where": "host (CPU groups, container) or container (checkout, venv, downloads); "
                                   "default: container when run inside one"})
def setup_all(c, where="auto"):
    """Every set-up step for this side, in order, skipping what is already done."""
    with reported():
        setup_host.setup_all(settings_from(c), where)


@task(checks={"target": TARGET, "checkout": f.text(), "port": f.port()},
      help={"target": "the target to check for: local (default; needs no GPU or checkout) or sglang-omni",
            "checkout": "sglang-omni checkout (target sglang-omni)",
            "port": "the port the runs will serve on (default 8000): is it free?"})
def doctor(c, target=None, checkout=None, port=None):
    """Check every prerequisite of a run on this host: a table of OK/FAIL/n/a with the fix for each."""
    with reported():
        # on standard error: standard output is the table alone
        with working(partial(print, file=sys.stderr), "doctor: checking the tools, checkout, venv, pins, port, "
                     "GPUs and CPU set"):
            checks = api.diagnose(settings_from(c, target=target, checkout=checkout, port=port))
    emit(tables.table(((k.name, k.status, k.detail, k.fix) for k in checks), ("check", "status", "detail", "fix")))
    failed = [k.name for k in checks if k.status == "FAIL"]
    if failed:
        raise Exit(f"{len(failed)} check(s) failed: {', '.join(failed)}", code=1)


@task(checks={"out": f.text(empty=False), "commits": f.positive_int(), "regress_at": f.positive_int(),
              "delay_ms": f.number(0), "fail_stage": f.choice(CI_STAGES), "fake_gpus": f.text(empty=False),
              "fake_gpu_count": f.positive_int(), "base_delay_ms": f.number(0), "era_from": f.positive_int(),
              "startup_s": f.number(0)},
      help={"out": "where to make it (default ./standin-sglang-omni; must not exist or be empty)",
            "commits": "how many commits of history (default 1)",
            "regress-at": "from this commit (1-based) on, a planted regression: --delay-ms per request, --fail-stage",
            "delay-ms": "latency added per request from --regress-at on (default 50)",
            "fail-stage": "a CI stage that cannot pass from --regress-at on (every commit without it)",
            "base-delay-ms": "latency every commit adds per request (default 0)",
            "startup-s": "seconds every commit's server loads with its port closed, as a GPU host loads weights "
                         "(default 0)",
            "era-from": "commits before this one (1-based) are the old era: their seed-tts client has no "
                        "--reference-audio-field (argparse exits 2 on it)",
            "fake-gpus": "also write a fake nvidia-smi into this folder (for a machine without a GPU; put it first on PATH)",
            "fake-gpu-count": f"GPUs the fake nvidia-smi has (default {DEFAULT_GPUS}, a pair)"})
def standin(c, out="standin-sglang-omni", commits=1, regress_at=None, delay_ms=50.0, fail_stage=None, fake_gpus=None,
            fake_gpu_count=DEFAULT_GPUS, base_delay_ms=StandinSpec.base_delay_ms, era_from=None,
            startup_s=StandinSpec.startup_s):
    """Make a stand-in sglang-omni checkout: a git repo whose programs are real and run on CPU."""
    with reported():
        spec = StandinSpec(commits=commits, regress_at=regress_at, delay_ms=delay_ms, fail_stage=fail_stage,
                           base_delay_ms=base_delay_ms, era_from=era_from, startup_s=startup_s)
        made = make_standin(Path(out), spec, fake_gpus=Path(fake_gpus) if fake_gpus else None, gpus=fake_gpu_count)
    emit(history_text(made, spec))


SCALE_HELP = {
    "workload": "workload of every campaign (repeatable)",
    "runs": "measured runs per campaign after run0 (default 3)",
    "slots": "GPU ids of this host for the slots, e.g. 0,1,2,3 (default the gpus setting); slot k serves on port + k",
    "slot-per": "pair (default: a slot is a GPU pair whose second GPU stays idle, as the runbook measures) or gpu",
    "slot-cpus": "rule (default: the GPU's CPU group, as `invoke setup.cpus`) or shared (every slot the process's "
                 "CPUs, for small hosts; the report says so)",
    "engine": "local (default: this host's slots side by side), ray (one Ray task per campaign; pip install -e "
              "'.[ray]'), or one a plugin registers (`invoke plugins` lists them; docs/engines.md)",
    "engine-opt": "an option of the engine, KEY=VALUE (repeatable; `invoke plugins` lists each engine's options)",
    "address": "Ray cluster address (default auto: the cluster `ray start` made on this host)",
    "results-transport": "ray engine: auto (default: ship results home from nodes that do not see the results root), "
                         "ray (always ship them through Ray) or shared (every node sees the results root)",
    "checkout-url": "ray engine: the git URL (or path) each node clones the checkout from (default --checkout)",
    "opt": "workload option WORKLOAD.KEY=VALUE for every campaign (repeatable)",
    "client": "native or sglang", "target": "local or sglang-omni", "checkout": "sglang-omni checkout",
    "results": "results root", "port": "base port (slot k serves on port + k)",
    "threshold": "smallest change that counts, e.g. 5% (default 5%)",
    "server-profile": PROFILE_HELP,
}
SCALE_CHECKS: dict[str, f.AnyCheck] = {  # each slot has its own GPUs and CPUs: no --gpus, --cpus
    **{k: v for k, v in SETTING_CHECKS.items() if k not in ("gpus", "cpus")}, "runs": RUNS, "slots": f.gpu_ids(empty=True), "slot_per": f.choice(SLOT_PER),
    "slot_cpus": f.choice(SLOT_CPUS), "engine": f.choice(lambda: scale.engine_names()), "address": f.text(empty=False),
    "engine_opt": f.Many(f.text(empty=False)),
    "results_transport": f.choice(lambda: defaults.TRANSPORTS), "checkout_url": f.text(), "threshold": f.threshold()}


@task(iterable=["workload", "sweep", "opt", "engine_opt"], checks={
    **SCALE_CHECKS, "resume": f.SWITCH,
    # "" is the local target's own revision; a spec naming none (",,") or an option ("-x") is refused
    "revisions": f.library("A,B,C or A..B", lambda v: v if not v.strip() else (scale_revisions.split_spec(v), v)[1]),
    "sweep": f.Many(f.library("WORKLOAD.KEY=V1,V2,...", lambda v: (scale_matrix.parse_sweep([v]), v)[1]))}, help={
    **SCALE_HELP, "revisions": "A,B,C or A..B (git rev-list A..B; A^..B includes A) of the checkout",
    "sweep": "WORKLOAD.KEY=V1,V2,... (repeatable): every combination is an option set",
    "resume": "keep complete campaigns and runs, continue the others"})
def matrix(c, workload, revisions="", sweep=None, opt=None, runs=defaults.RUNS, slots="", slot_per="pair",
           slot_cpus="rule", engine="local", address="auto", resume=False, threshold=THRESHOLD, client=None, target=None,
           checkout=None, results=None, port=None, results_transport=defaults.TRANSPORT, checkout_url="",
           server_profile=None, engine_opt=None):
    """Every revision x option set one campaign, on slots side by side; then a table and compares."""
    with reported():
        settings = settings_from(c, target=target, checkout=checkout, results=results, port=port,
                                 server_profile=server_profile)
        ray = {"address": address, "results_transport": results_transport, "checkout_url": checkout_url}
        eng = scale.make_engine(settings, engine=engine, slots=slots, slot_per=slot_per, slot_cpus=slot_cpus,
                                engine_opts=[*scale.ray_flag_options(engine, ray), *(engine_opt or [])], progress=emit)
        result = scale.matrix(settings, revisions_spec=revisions, workloads=workload, sweep=sweep or [],
                              options=opt or [], runs=runs, client=client, engine=eng, resume=resume,
                              threshold=threshold, progress=emit)
    emit(scale_matrix.matrix_text(result))
    # a commit whose era lacks an option is listed as not measurable: an answer, not a failure
    if any(o.status not in (JobStatus.COMPLETE, JobStatus.NOT_MEASURABLE) for o in result.outcomes.values()):
        raise Exit(code=1)


@task(iterable=["workload", "opt", "engine_opt"], checks={
    **SCALE_CHECKS, "good": f.revision(), "bad": f.revision(), "metric": f.text(empty=False)}, help={
    **SCALE_HELP, "good": "a commit where the metric is good", "bad": "a later commit where it is worse",
    "metric": "metric to judge, e.g. seedtts.throughput_qps, or at a load point: seedtts@c16.throughput_qps "
              "(measured with that point's options)"})
def bisect(c, good, bad, metric, workload, threshold=THRESHOLD, runs=defaults.RUNS, opt=None, slots="", slot_per="pair",
           slot_cpus="rule", engine="local", address="auto", client=None, target=None, checkout=None, results=None,
           port=None, results_transport=defaults.TRANSPORT, checkout_url="", server_profile=None, engine_opt=None):
    """The first commit where METRIC got worse, k commits a round on k slots; reuses campaigns."""
    with reported():
        settings = settings_from(c, target=target, checkout=checkout, results=results, port=port,
                                 server_profile=server_profile)
        ray = {"address": address, "results_transport": results_transport, "checkout_url": checkout_url}
        eng = scale.make_engine(settings, engine=engine, slots=slots, slot_per=slot_per, slot_cpus=slot_cpus,
                                engine_opts=[*scale.ray_flag_options(engine, ray), *(engine_opt or [])], progress=emit)
        result = scale.bisect(settings, good=good, bad=bad, metric=metric, workloads=workload,
                              threshold=threshold, runs=runs, options=opt or [],
                              client=client, engine=eng, progress=emit)
    emit(scale_bisect.bisect_text(result))


@task(checks={
    "metric": f.text(), "workload": f.text(), "target": TARGET,
    "revisions": f.library("A..B or a branch (not starting with -)", lambda v: history_query.check_revisions(v)), "checkout": f.text(),
    "results": f.text(), "json": f.text(), "summary": f.text(), "rebuild": f.SWITCH, "bisect": f.SWITCH, "slots": f.gpu_ids(empty=True),
    "slot_per": f.choice(SLOT_PER), "slot_cpus": f.choice(SLOT_CPUS), "threshold": f.threshold(), "port": f.port(),
    "min_effect": f.percent()},
    help={"min-effect": "smallest step that is a change point, in percent (default 5, as compare's)",
          "metric": "only this metric, e.g. selftest.latency_mean_s, or a metric at a load point of a sweep, e.g. "
                    "seedtts@c16.throughput_qps (default every metric)",
          "workload": "only campaigns of this workload", "target": "only campaigns of this target",
          "revisions": "A..B or a branch of --checkout, in first-parent order (default HEAD; A..B leaves A out, as git)",
          "checkout": "the git repository whose first-parent order the series follow (default the checkout setting)",
          "results": "results root (its history.sqlite)", "json": "also save the history as JSON in this file",
          "summary": "also write the pull-request summary (Markdown) to this file; with --revisions it is "
                     "appended to $GITHUB_STEP_SUMMARY when that is set",
          "rebuild": "make the database again from the run directories first",
          "bisect": "bisect each change point that holds untested commits (needs --metric), as invoke bisect",
          "slots": SCALE_HELP["slots"] + " (--bisect)", "slot-per": SCALE_HELP["slot-per"] + " (--bisect)",
          "slot-cpus": SCALE_HELP["slot-cpus"] + " (--bisect)", "threshold": SCALE_HELP["threshold"] + " (--bisect)",
          "port": "base port of --bisect's slots (default 8000)"})
def history(c, metric="", workload="", revisions="", target=None, checkout=None, results=None, json="", summary="",
            rebuild=False, bisect=False, slots="", slot_per="pair", slot_cpus="rule", threshold=THRESHOLD, port=None, min_effect=PERCENT):
    """Per metric the series over commits (mean, interval) and its change points; --bisect names their commits."""
    with reported():
        settings = settings_from(c, target=target, checkout=checkout, results=results, port=port)
        done = history_layer.run_history(
            settings, metric=metric or None, workload=workload or None, revisions=revisions or None, target=target,
            checkout=checkout, rebuild=rebuild, bisect=bisect, json_out=json or None, min_effect=min_effect, progress=emit,
            summary_out=summary or None,
            slot_flags=history_layer.SlotFlags(slots, slot_per, slot_cpus, threshold))
    emit(history_layer.outcome_text(done, history_texts.history_text(done.history)))


@task(iterable=["workload", "opt", "a_opt", "b_opt", "a_set", "b_set"], checks={
    **SETTING_CHECKS, "a_rev": f.revision(), "b_rev": f.revision(), "rounds": f.whole(2),
    "max_rounds": f.whole(defaults.FIRST_LOOK), "decide": f.distinct_list("metric names"),
    "design": f.choice(lambda: ab_layer.DESIGN_WORDS), "a_opt": f.Many(f.text(empty=False)), "b_opt": f.Many(f.text(empty=False)),
    "a_set": f.Many(f.text(empty=False)), "b_set": f.Many(f.text(empty=False)), "aa": f.SWITCH, "seed": f.whole(0),
    "retries": f.whole(0), "scoring": f.choice(lambda: campaign_record.SCORINGS), "name": f.name("experiment name", empty=True), "alpha": f.fraction_open(0, 1, "0.05"),
    "score": f.choice(lambda: records.SCORE_WORDS, empty=True),
    "min_effect": f.percent(), "fail_on": f.choice(lambda: compare_words.VERDICTS, empty=True), "slots": f.gpu_ids(empty=True),
    "slot_per": f.choice(SLOT_PER), "slot_cpus": f.choice(SLOT_CPUS)}, help={
    "workload": "workload both sides measure (repeat for several)",
    "rounds": f"rounds after the warm-ups; each round measures each side once (default {defaults.ROUNDS}, at least "
              "2; not with --max-rounds)",
    "max-rounds": "rounds until the answer is known, at most this many: look at the verdicts after 3, 4, 6, 8, 12, "
                  "... rounds and N, each look held to alpha / the number of looks, and stop at the first look that "
                  "decides every --decide metric (not with --rounds or --design sequential)",
    "decide": "with --max-rounds: the metrics to decide, comma-separated (default: every latency and throughput "
              "metric with a better side, e.g. selftest.latency_mean_s); a metric at a load point, "
              "seedtts@c16.throughput_qps, measures both sides at that point",
    "design": "auto (default: duet with two --slots, else interleaved), duet (A and B at once on two slots, "
              "swapped every round), interleaved (each round A and B one after the other in a seeded random order) "
              "or sequential (A's rounds, then B's)",
    "slots": "two slot ids for a duet: GPU ids on sglang-omni (e.g. 0,1), any two ids on local (default: none, "
             "every run on the settings' own port, GPUs and CPUs)",
    "slot-per": SCALE_HELP["slot-per"], "slot-cpus": SCALE_HELP["slot-cpus"],
    "a-rev": "side A's revision of the checkout (target sglang-omni; prepared as matrix prepares one)",
    "b-rev": "side B's revision of the checkout (with --a-rev)",
    "a-opt": "workload option WORKLOAD.KEY=VALUE of side A only (repeatable)",
    "b-opt": "workload option WORKLOAD.KEY=VALUE of side B only (repeatable)",
    "a-set": "setting NAME=VALUE of side A only, e.g. local_delay_ms=0 (repeatable)",
    "b-set": "setting NAME=VALUE of side B only, e.g. local_delay_ms=40 (repeatable)",
    "aa": "both sides the same on purpose: an A/A experiment, to see the noise",
    "seed": "seed of the interleaved order (default 0; recorded)",
    "retries": "tries again of a run that misses a gate or coverage rule, inside its round (default 2)",
    "scoring": "deferred (default: every run generated, then each side scored together) or per-run",
    "score": "which rounds are scored for quality (WER, SIM, UTMOS): last (the default: the last round a side, and "
             "with --max-rounds each look's round; every round when a --decide metric is a quality one), "
             "every-round, or none; warm-ups never. A speed verdict needs no scoring",
    "name": "experiment name (default: from the whole request; the same command resumes it)",
    "alpha": "the family's error rate, held with Holm's correction (default 0.05; above 0, below 1)",
    "min-effect": "smallest relative change that counts, in percent (default 5)",
    "fail-on": "exit 1 when any metric's verdict is this word (worse, better, inconclusive, ...), for CI",
    **RUN_FLAGS_HELP, "opt": "workload option WORKLOAD.KEY=VALUE of both sides (repeatable)"})
def ab(c, workload, a_rev=None, b_rev=None, rounds=None, design="auto", a_opt=None, b_opt=None, a_set=None,
       b_set=None, opt=None, aa=False, seed="0", retries=str(defaults.RETRIES), scoring=defaults.SCORING, score="",
       name="",
       alpha=ALPHA, min_effect=PERCENT, fail_on="", max_rounds=None, decide="",
       slots="", slot_per="pair", slot_cpus="rule", target=None, results=None, port=None, checkout=None, gpus=None,
       cpus=None, client=None, server_profile=None):
    """An A/B experiment: warm-ups, then rounds of A and B on one host, judged on paired rounds."""
    with reported(), working(emit, "A/B: checking the request, planning the slots and preparing both sides") as say:
        settings = settings_from(c, target=target, results=results, port=port, checkout=checkout, gpus=gpus, cpus=cpus,
                                 server_profile=server_profile)
        on = ab_layer.slots_for(settings, design, slots, slot_per, slot_cpus, progress=say)
        request = ab_layer.request_from(settings, workload, a_opts=a_opt or [], b_opts=b_opt or [], a_sets=a_set or [],
                                        b_sets=b_set or [], options=opt or [], client=client,
                                        design=ab_layer.design_for(design, on), a_rev=a_rev or "", b_rev=b_rev or "",
                                        rounds=rounds, seed=seed, retries=retries, scoring=scoring,
                                        score=score or None, aa=aa, name=name,
                                        max_rounds=max_rounds, decide=decide, alpha=alpha, min_effect=min_effect)
        done = ab_layer.ab(settings, request, alpha=alpha, min_effect=min_effect, slots=on,
                           progress=say)
    emit(ab_layer.ab_text(done))
    failing = ab_layer.failing(done, fail_on) if fail_on else []
    if failing:
        raise Exit(f"--fail-on {fail_on}: " + "; ".join(failing), code=1)


@task(checks={"out": f.text(empty=False), "target": TARGET, "workload": f.text(empty=False),
              "metric": f.text(empty=False), "revisions": f.revision(), "results": f.text(), "checkout": f.text()},
      help={"out": "the site's folder (made, or replaced if it holds an earlier site; any other folder is refused)",
            "target": "only this target's series (default: every target)", "workload": "only this workload's series",
            "metric": "only this metric, e.g. seedtts.throughput_qps or seedtts@c16.throughput_qps", "revisions": "only A..B, or a branch",
            "results": "results root", "checkout": "sglang-omni checkout whose first-parent line orders the commits (default the checkout setting)"})
def publish(c, out, target=None, workload=None, metric=None, revisions=None, results=None, checkout=None):
    """A static site of the history: per metric a plot over commits, change points, regressions, reports."""
    with reported():
        settings = settings_from(c, results=results, checkout=checkout)
        done = history_site.publish(settings, Path(out), target=target, workload=workload, metric=metric,
                                    revisions=revisions, checkout=history_layer.checkout_of(settings, checkout))
    emit(history_site.publish_text(done))


setup = Collection("setup", cpus, container, checkout, venv, download, verify)
setup.add_task(setup_all, name="all", default=True)
ns = Collection(run, measure, compare, ab, matrix, bisect, history, publish, plugins, doctor, standin, setup)

# Invoke's own "No idea what 'X' is!" gets hints: close flags or tasks, --opt for a workload option.
f.explain_parse_errors(invoke_main.program, lambda: [(row.workload, row.name) for row in api.list_options()])
ns.add_task(report_runs, name="report")
ns.add_task(sweep_load, name="sweep")
ns.configure({"omnibench": Settings.config_defaults()})

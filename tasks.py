"""omnibench's command line: ``invoke --list``. Each task is a few lines over the library
(omnibench_core), which does the work; every flag is declared once, with its check and help, in
omnibench_core/cli/declared.py (tests/test_flags.py fails for a flag without a check)."""

from __future__ import annotations

import importlib
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from functools import partial
from pathlib import Path
from typing import Any

from invoke import Collection, Context, Exit
from invoke import main as invoke_main

from omnibench_core import tables
from omnibench_core.cli import config
from omnibench_core.cli import declared as d
from omnibench_core.cli import flags as f
from omnibench_core.cli.command import Given, command
from omnibench_core.cli.output import error_text
from omnibench_core.errors import OmnibenchError, RunInterrupted, Terminated
from omnibench_core.heartbeat import working
from omnibench_core.settings import Settings
from omnibench_core.setup import host as setup_host
from omnibench_core.standin import StandinSpec, history_text, make_standin
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
exports = _Lazy("omnibench_core.cli.exports")
sweep_compare = _Lazy("omnibench_core.sweep.compare")
sweep_execute = _Lazy("omnibench_core.sweep.execute")
sweep_writing = _Lazy("omnibench_core.sweep.writing")
history_layer = _Lazy("omnibench_core.history.front_door")
history_site = _Lazy("omnibench_core.history.site_command")
history_texts = _Lazy("omnibench_core.history.text")
runner = _Lazy("omnibench_core.run.runner")
scale = _Lazy("omnibench_core.scale.front_door")
scale_bisect = _Lazy("omnibench_core.scale.bisect")
scale_matrix = _Lazy("omnibench_core.scale.matrix")


@contextmanager
def reported() -> Iterator[None]:
    """A typed omnibench error becomes a clean message and exit code; Ctrl-C and SIGTERM anywhere
    (a report being written, say) exit 130 with a message, as an interrupted run does."""
    try:
        with runner.sigterm_as_exception():
            yield
    except RunInterrupted as exc:
        raise Exit(error_text(str(exc)), code=130) from None
    except OmnibenchError as exc:
        raise Exit(error_text(str(exc)), code=1) from None
    except (KeyboardInterrupt, Terminated) as exc:
        raise Exit(error_text(runner.interrupted_message(exc)), code=130) from None


def settings_from(c: Context, given: Given | None = None, **flags: object) -> Settings:
    """Invoke's ``omnibench`` configuration with the task's setting flags on top; a bad value is
    blamed on its flag, variable or file."""
    return config.settings_from(c.config, {**(given.pick(*d.SETTING_FLAGS) if given else {}), **flags})


def fail_on(verdict: str, failing: list[str]) -> None:
    """``--fail-on VERDICT``: exit 1 naming each metric that has it."""
    if failing:
        raise Exit(f"--fail-on {verdict}: " + "; ".join(failing), code=1)


@command(d.RUN)
def run(c, given):
    """Run workloads once: fresh server per workload, client, scoring, coverage, metrics.json."""
    with reported():
        result = api.run(settings_from(c, given), given.workload, options=given.opt or [], run_name=given.run_name,
                         client=given.client, progress=emit, estimate=True)
    emit(tables.run_summary(result))
    if not result.complete:
        raise Exit(code=1)


@command(d.MEASURE)
def measure(c, given):
    """A campaign: warm-up run0, then --runs measured runs, resumed by the same command; then its report."""
    with reported():
        settings = settings_from(c, given)
        asked = campaign_execute.asked_from(settings, given.workload, given.opt or [], given.client, given.runs,
                                            given.retries, given.scoring)
        made = campaign.measure(settings, asked, name=given.name, progress=emit)
    emit(campaign.report_text(made))


@command(d.SWEEP)
def sweep_load(c, given):
    """A load sweep: the workload at each concurrency and/or request rate, each point a campaign.
    Then a table and a plot of latency against throughput, the knee, the Pareto front and the goodput."""
    with reported():
        settings = settings_from(c, given)
        api.check_clean(settings, given.allow_dirty, "sweep")
        spec = sweep_execute.spec_from(
            given.workload, concurrency=given.concurrency, request_rate=given.request_rate, runs=given.runs,
            options=given.opt or [], client=given.client, retries=given.retries, scoring=given.scoring, slo=given.slo,
            name=given.name, upstream=given.upstream, score=given.score)
        result = sweep_execute.run_sweep(settings, spec, progress=emit)
        with working(emit, f"writing sweep {result.spec.sweep_name()} (table and plot)"):
            written = sweep_writing.write_sweep(result, settings.run.results_root)
        exports.sweep(given, result)
    emit(sweep_writing.sweep_text(result, written))


@command(d.REPORT)
def report_runs(c, given):
    """A campaign's report: each metric's mean, sample sd, values by run, direction, spread and flags."""
    name, runs = given.name, given.runs
    what = "runs " + ", ".join(runs) if runs else name or "the newest finished campaign"
    with reported():
        with working(emit, f"reporting {what}: reading its runs, writing the report and its plots"):
            made = campaign.report(settings_from(c, given), name or None, runs=runs)
        exports.report(given, made)
    emit(campaign.report_text(made))


@command(d.COMPARE)
def compare(c, given):
    """Compare two campaigns (A is the base): per metric better, worse, equivalent or inconclusive, with its interval."""
    a, b, judge = given.a, given.b, {"alpha": given.alpha, "min_effect": given.min_effect, "force": given.force}
    with reported():
        settings = settings_from(c, given)
        if sweep_compare.is_sweep(settings, a) and sweep_compare.is_sweep(settings, b):
            with working(emit, f"comparing sweep {b} with base {a}, point by point"):
                swept = sweep_compare.compare_sweeps(settings, a, b, **judge)
                exports.sweep_compare(given, swept)
            emit(sweep_compare.compare_text(swept))
            fail_on(given.fail_on, [f"{p.label} {x}" for p in swept.points for x in p.comparison.fail_on(given.fail_on)]
                    if given.fail_on else [])
            return
        with working(emit, f"comparing {b} with base {a}: reading their runs, judging each metric, writing "
                           "compare.md and its plot"):
            made = campaign.compare(settings, a, b, summary=campaign_summary.COMPARISON_SUMMARY, **judge)
        exports.compare(given, made)
    emit(campaign.compare_text(made))
    fail_on(given.fail_on, made.comparison.fail_on(given.fail_on) if given.fail_on else [])


@command(d.PLUGINS)
def plugins(c, given):
    """Every workload, target, scorer and engine with who provides it; then their options.
    Each workload's and each engine's options follow the list (--options: only those)."""
    with reported():
        rows = [] if given.options else api.list_plugins()
        option_rows, engine_rows = api.list_options(), api.list_engine_options()
    if rows:
        emit(tables.plugins_table(rows))
        emit("\nworkload options (--opt WORKLOAD.KEY=VALUE):")
    emit(tables.options_table(option_rows))
    emit("\nengine options (--engine NAME --engine-opt KEY=VALUE):")
    emit(tables.options_table(engine_rows, owner="engine"))


@command(d.SETUP_CPUS)
def cpus(c, given):
    """CPU groups per GPU on its NUMA node: BENCH_CPUS and CI_CPUS, then CPUS_OK."""
    with reported():
        groups = setup_host.make_cpu_groups(settings_from(c), gpu_a=given.gpu_a, gpu_b=given.gpu_b,
                                            cores_per_gpu=given.cores_per_gpu, skip_cores=given.skip_cores,
                                            out=Path(given.out) if given.out else None)
    emit(groups.env_text() + "CPUS_OK")


@command(d.SETUP_CONTAINER)
def container(c, given):
    """The runbook's docker run for the GPU pair (printed, or run with --execute) and docker exec."""
    with reported():
        plan = setup_host.container(settings_from(c), Path(given.env_file) if given.env_file else None)
        if given.execute:
            emit(f"started {setup_host.create_container(plan)[:12]}")
    emit(plan.shell_lines())


@command(d.SETUP_CHECKOUT)
def checkout(c, given):
    """Clone or fetch sglang-omni into the checkout and detach at the commit."""
    with reported():
        setup_host.checkout(settings_from(c), given.commit)


@command({})
def venv(c, given):
    """Build the checkout's venv with CI's prepare_omni_venv.sh, then VENV_OK."""
    with reported():
        emit(f"VENV_OK {setup_host.venv(settings_from(c))}")


@command({})
def download(c, given):
    """Download the pinned models and data, write refs/main, run the checkout's preparation."""
    with reported():
        setup_host.download_all(settings_from(c))


@command({})
def verify(c, given):
    """REVISIONS_OK: every pin loads offline at its own revision; seed-tts has its count."""
    with reported():
        setup_host.verify_all(settings_from(c))
    emit("REVISIONS_OK")


@command(d.SETUP_ALL, default=True)
def setup_all(c, given):
    """Every set-up step for this side, in order, skipping what is already done."""
    with reported():
        setup_host.setup_all(settings_from(c), given.where)


@command(d.DOCTOR)
def doctor(c, given):
    """Check every prerequisite of a run on this host: a table of OK/FAIL/n/a with the fix for each."""
    with reported():
        # on standard error: standard output is the table alone
        with working(partial(print, file=sys.stderr), "doctor: checking the tools, checkout, venv, pins, port, "
                     "GPUs and CPU set"):
            checks = api.diagnose(settings_from(c, given))
    emit(tables.table(((k.name, k.status, k.detail, k.fix) for k in checks), ("check", "status", "detail", "fix")))
    failed = [k.name for k in checks if k.status == "FAIL"]
    if failed:
        raise Exit(error_text(f"{len(failed)} check(s) failed: {', '.join(failed)}"), code=1)


@command(d.STANDIN)
def standin(c, given):
    """Make a stand-in sglang-omni checkout: a git repo whose programs are real and run on CPU."""
    with reported():
        spec = StandinSpec(commits=given.commits, regress_at=given.regress_at, delay_ms=given.delay_ms,
                           fail_stage=given.fail_stage, base_delay_ms=given.base_delay_ms, era_from=given.era_from,
                           startup_s=given.startup_s, serve_era_from=given.serve_era_from,
                           quality_flip=given.quality_flip)
        made = make_standin(Path(given.out), spec, fake_gpus=Path(given.fake_gpus) if given.fake_gpus else None,
                            gpus=given.fake_gpu_count)
    emit(history_text(made, spec))


def engine_of(settings: Settings, given: Given):
    """The engine --engine names, over the slot flags, with its options (the Ray engine's own flags among them)."""
    ray = given.pick("address", "results_transport", "checkout_url")
    return scale.make_engine(settings, engine=given.engine, slots=given.slots, slot_per=given.slot_per,
                             slot_cpus=given.slot_cpus, progress=emit,
                             engine_opts=[*scale.ray_flag_options(given.engine, ray), *(given.engine_opt or [])])


@command(d.MATRIX)
def matrix(c, given):
    """Every revision x option set one campaign, on slots side by side; then a table and compares."""
    with reported():
        settings = settings_from(c, given)
        api.check_clean(settings, given.allow_dirty, "matrix")
        result = scale.matrix(settings, revisions_spec=given.revisions, workloads=given.workload, sweep=given.sweep or [],
                              options=given.opt or [], runs=given.runs, client=given.client, resume=given.resume,
                              engine=engine_of(settings, given), threshold=given.threshold, score=given.score or None,
                              progress=emit)
    emit(scale_matrix.matrix_text(result))
    # a commit whose era lacks an option is listed as not measurable: an answer, not a failure
    if any(o.status not in (JobStatus.COMPLETE, JobStatus.NOT_MEASURABLE) for o in result.outcomes.values()):
        raise Exit(code=1)


@command(d.BISECT)
def bisect(c, given):
    """The first commit where METRIC got worse, k commits a round on k slots; reuses campaigns."""
    with reported():
        settings = settings_from(c, given)
        api.check_clean(settings, given.allow_dirty, "bisect")
        result = scale.bisect(settings, good=given.good, bad=given.bad, metric=given.metric, workloads=given.workload,
                              threshold=given.threshold, runs=given.runs, options=given.opt or [], client=given.client,
                              engine=engine_of(settings, given), score=given.score or None, progress=emit)
    emit(scale_bisect.bisect_text(result))


@command(d.HISTORY)
def history(c, given):
    """Per metric the series over commits (mean, interval) and its change points; --bisect names their commits."""
    with reported():
        done = history_layer.run_history(
            settings_from(c, given), metric=given.metric or None, workload=given.workload or None,
            revisions=given.revisions or None, target=given.target, checkout=given.checkout, rebuild=given.rebuild,
            bisect=given.bisect, json_out=given.json or None, min_effect=given.min_effect, progress=emit,
            summary_out=given.summary or None,
            slot_flags=history_layer.SlotFlags(given.slots, given.slot_per, given.slot_cpus, given.threshold))
    emit(tables.screenful(history_layer.outcome_text(done, history_texts.history_text(done.history)),
                          "--metric NAME shows one metric, --json FILE saves all of it, --wide prints it whole"))


@command(d.AB)
def ab(c, given):
    """An A/B experiment: warm-ups, then rounds of A and B on one host, judged on paired rounds."""
    with reported(), working(emit, "A/B: checking the request, planning the slots and preparing both sides") as say:
        settings = settings_from(c, given)
        api.check_clean(settings, given.allow_dirty, "ab")
        on = ab_layer.slots_for(settings, given.design, given.slots, given.slot_per, given.slot_cpus, progress=say)
        request = ab_layer.request_from(
            settings, given.workload, a_opts=given.a_opt or [], b_opts=given.b_opt or [], a_sets=given.a_set or [],
            b_sets=given.b_set or [], options=given.opt or [], client=given.client,
            design=ab_layer.design_for(given.design, on), a_rev=given.a_rev or "", b_rev=given.b_rev or "",
            rounds=given.rounds, seed=given.seed, retries=given.retries, scoring=given.scoring,
            score=given.score or None, aa=given.aa, name=given.name, max_rounds=given.max_rounds, decide=given.decide,
            alpha=given.alpha, min_effect=given.min_effect, noisy_retries=given.noisy_retries)
        done = ab_layer.ab(settings, request, alpha=given.alpha, min_effect=given.min_effect, slots=on, progress=say)
        exports.ab(given, done)
    emit(ab_layer.ab_text(done))
    fail_on(given.fail_on, ab_layer.failing(done, given.fail_on) if given.fail_on else [])


@command(d.PUBLISH)
def publish(c, given):
    """A static site of the history: per metric a plot over commits, change points, regressions, reports."""
    with reported():
        settings = settings_from(c, results=given.results, checkout=given.checkout)
        done = history_site.publish(settings, Path(given.out), target=given.target, workload=given.workload,
                                    metric=given.metric, revisions=given.revisions,
                                    checkout=history_layer.checkout_of(settings, given.checkout))
    emit(history_site.publish_text(done))


setup = Collection("setup", cpus, container, checkout, venv, download, verify)
setup.add_task(setup_all, name="all", default=True)
ns = Collection(run, measure, compare, ab, matrix, bisect, history, publish, plugins, doctor, standin, setup)

# Invoke's own "No idea what 'X' is!" gets hints: close flags or tasks, --opt for a workload option.
f.explain_parse_errors(invoke_main.program, lambda: [(row.workload, row.name) for row in api.list_options()])
ns.add_task(report_runs, name="report")
ns.add_task(sweep_load, name="sweep")
ns.configure({"omnibench": Settings.config_defaults()})

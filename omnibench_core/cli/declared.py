"""Every flag of the command line, declared once: its check, its help and its default, by the
name the tasks' bodies read (``server_profile`` is ``--server-profile``). A task names the flags it
takes, in the order that gives its short flags (:func:`.command.command`); a flag that means
something else in one task (``--runs`` of ``report``, ``--name`` of a sweep) is declared under that
task's own words with :func:`.command.flag`.

The library's words a check accepts (the scoring modes, the verdicts, the engines) are read when a
flag is checked, never when ``invoke --list`` builds the tasks: each is a module imported then."""

from __future__ import annotations

import importlib
from typing import Any

from .. import defaults
from ..scale.slots import SLOT_CPUS, SLOT_PER
from ..setup.host import SIDES
from ..standin import DEFAULT_GPUS, StandinSpec
from ..standin.stages import KINDS as CI_STAGES
from . import flags as f
from .command import REQUIRED, Flag


def _lib(module: str) -> Any:
    """A library module, imported when a check first needs it."""
    return importlib.import_module(f"omnibench_core.{module}")


# The library's defaults as the text a flag takes (Invoke shows a signature's default in --help).
PERCENT, THRESHOLD, ALPHA = f"{defaults.MIN_EFFECT * 100:g}", f"{defaults.MIN_EFFECT:.0%}", f"{defaults.ALPHA:g}"
TARGET = f.choice(lambda: sorted(_lib("registry.manager").load()[1].table("target")))
RUNS = f.whole(2)  # a campaign's spread needs two measured runs
PROFILE_HELP = ("which server is measured: runbook (default: the model's defaults, the runbook's single-GPU server) "
                "or ci (code2wav batch 16 with a 100 ms wait, as CI's audio stages; target sglang-omni only)")
SCORE_HELP = "which runs are scored for quality (WER, SIM, UTMOS)"

# The settings a task's flags set (the rest are the task's own arguments): settings_from reads these.
SETTING_FLAGS = ("target", "results", "port", "checkout", "gpus", "cpus", "server_profile", "percentiles")

FLAGS: dict[str, Flag] = {
    # where and what a run measures
    "workload": Flag(f.Many(f.text(empty=False)), "workload to measure (repeat for several, e.g. --workload videoamme "
                     "--workload seedtts)", REQUIRED, repeatable=True),
    "target": Flag(TARGET, "where the system under test comes from: local (default) or sglang-omni"),
    "results": Flag(f.text(), "results root; runs go to RESULTS/<revision>/runN"),
    "port": Flag(f.port(), "port of every server the runs start (default 8000)"),
    "opt": Flag(f.Many(f.text(empty=False)), "workload option WORKLOAD.KEY=VALUE (repeatable); `invoke plugins` lists "
                "each workload's options with type, range and default; a bad value is refused before any server "
                "starts", repeatable=True),
    "checkout": Flag(f.text(), "sglang-omni checkout (target sglang-omni)"),
    "allow_dirty": Flag(f.SWITCH, "measure a checkout with uncommitted changes (refused without it): its runs go to "
                        "<commit>-dirty-<digest> and record the changed files", False),
    "gpus": Flag(f.gpu_ids(), "GPUs for the servers, CUDA_VISIBLE_DEVICES (default 0)"),
    "cpus": Flag(f.cpu_set(here=True), "CPU set to pin every process to, e.g. 2-15,66-79 (BENCH_CPUS)"),
    # --client: each workload checks it against its own choices
    "client": Flag(f.text(), "which client the workloads use: native (omnibench's) or sglang (the checkout's own)"),
    "server_profile": Flag(f.choice(defaults.SERVER_PROFILES), PROFILE_HELP),
    "percentiles": Flag(f.library("50,90,99,99.9", lambda v: (_lib("settings").parse_percentiles(v), v)[1]),
                        f"percentiles of every latency-like metric beside the runbook's mean and p95, comma-separated "
                        f"(default {defaults.PERCENTILES}); one its sample count cannot support is marked thin, not "
                        "printed as measured"),
    # a campaign
    "runs": Flag(RUNS, "measured runs after the warm-up run0 (default 3, as the runbook)", defaults.RUNS),
    "retries": Flag(f.whole(0), "tries again of a run that misses a gate or coverage rule (default 2)",
                    defaults.RETRIES),
    "scoring": Flag(f.choice(lambda: _lib("campaign.record").SCORINGS), "deferred (default: every run generated, "
                    "then one scoring server start for all) or per-run", defaults.SCORING),
    "score": Flag(f.choice(lambda: _lib("records").SCORE_WORDS, empty=True), SCORE_HELP, ""),
    # judging
    "min_effect": Flag(f.percent(), "smallest relative change that counts, in percent (default 5)", PERCENT),
    "alpha": Flag(f.fraction_open(0, 1, "0.05"), "the family's error rate, held with Holm's correction (default "
                  "0.05; above 0, below 1)", ALPHA),
    "fail_on": Flag(f.choice(lambda: _lib("campaign.compare").VERDICTS, empty=True), "exit 1 when any metric's verdict "
                    "is this word (worse, better, inconclusive, ...), for CI", ""),
    "threshold": Flag(f.threshold(), "smallest change that counts, e.g. 5% (default 5%)", THRESHOLD),
    # slots and engines
    "slots": Flag(f.gpu_ids(empty=True), "GPU ids of this host for the slots, e.g. 0,1,2,3 (default the gpus "
                  "setting); slot k serves on port + k", ""),
    "slot_per": Flag(f.choice(SLOT_PER), "pair (default: a slot is a GPU pair whose second GPU stays idle, as the "
                     "runbook measures) or gpu", "pair"),
    "slot_cpus": Flag(f.choice(SLOT_CPUS), "rule (default: the GPU's CPU group, as `invoke setup.cpus`) or shared "
                      "(every slot the process's CPUs, for small hosts; the report says so)", "rule"),
    "engine": Flag(f.choice(lambda: _lib("scale.front_door").engine_names()), "local (default: this host's slots "
                   "side by side), ray (one Ray task per campaign; pip install -e '.[ray]'), or one a plugin "
                   "registers (`invoke plugins` lists them; docs/engines.md)", "local"),
    "engine_opt": Flag(f.Many(f.text(empty=False)), "an option of the engine, KEY=VALUE (repeatable; `invoke plugins` "
                       "lists each engine's options)", repeatable=True),
    "address": Flag(f.text(empty=False), "Ray cluster address (default auto: the cluster `ray start` made on this "
                    "host)", "auto"),
    "results_transport": Flag(f.choice(defaults.TRANSPORTS), "ray engine: auto (default: ship results home from nodes "
                              "that do not see the results root), ray (always ship them through Ray) or shared "
                              "(every node sees the results root)", defaults.TRANSPORT),
    "checkout_url": Flag(f.text(), "ray engine: the git URL (or path) each node clones the checkout from (default "
                         "--checkout)", ""),
    # exports: exact values a spreadsheet or notebook reads (report, compare, sweep, ab)
    "csv": Flag(f.export_path(), "also write the rows as CSV to this file (exact values, each column's "
                "unit in its name)", ""),
    "json": Flag(f.export_path(), "also write the rows as JSON (a list of objects) to this file", ""),
    # the terminal
    "wide": Flag(f.SWITCH, "print tables at their full width and long summaries whole (default: fitted to the "
                 "terminal, $COLUMNS and $LINES; a pipe gets everything)", False),
}


def pick(*names: str, **own: Flag) -> dict[str, Flag]:
    """The flags a task takes, in its order (its short flags follow it): each name's declaration
    above, or the task's own in ``own`` (a flag only it has, or a shared one in its words)."""
    stray = sorted(set(own) - set(names))
    if stray:
        raise TypeError(f"own flags not in the task's order: {stray}")
    return {name: own[name] if name in own else FLAGS[name] for name in names}


# -- each task's flags, in its order ----------------------------------------------------------
# A run's flags follow `run`'s order, so measure's and sweep's short flags are run's
# (-w -t -r -p -o -c -g -s -l), their own flags after them.

RUN = pick("workload", "target", "results", "port", "run_name", "opt", "checkout", "gpus", "cpus", "client",
           "server_profile", "wide", "percentiles",
           workload=FLAGS["workload"].but(help="workload to run (repeat for several, e.g. --workload videoamme "
                                          "--workload seedtts)"),
           results=FLAGS["results"].but(help="results root; the run goes to RESULTS/<revision>/runN"),
           port=FLAGS["port"].but(help="port of every server the run starts (default 8000)"),
           run_name=Flag(f.name("run name"), "run directory name (default: the next free runN)"))

MEASURE = pick("workload", "target", "results", "port", "runs", "opt", "checkout", "gpus", "cpus", "client",
               "retries", "scoring", "name", "server_profile", "wide", "percentiles",
               workload=FLAGS["workload"].but(help="workload to measure (repeat for several)"),
               opt=FLAGS["opt"].but(help="workload option WORKLOAD.KEY=VALUE (repeatable; see `invoke plugins`)"),
               name=Flag(f.name("campaign name"), "campaign name (default: from the workloads, options and target; "
                         "the same command resumes it)"))


def _parsed(example: str, parse: str) -> f.AnyCheck:
    """A check of a comma list the sweep's own parser reads ("" is none given: the sweep itself asks
    for at least one kind of point)."""
    module, _, name = parse.rpartition(".")
    return f.library(example, lambda v: (v.strip() and getattr(_lib(module), name)(v), v)[1])


SWEEP = pick(
    "workload", "target", "results", "port", "runs", "opt", "checkout", "allow_dirty", "gpus", "cpus", "client", "retries", "scoring",
    "name", "server_profile", "concurrency", "request_rate", "slo", "upstream", "score", "wide", "csv", "json", "percentiles",
    workload=Flag(f.text(empty=False), "the workload to sweep (one; it needs a max_concurrency option for "
                  "--concurrency and a request_rate option for --request-rate: seedtts has both)", REQUIRED),
    opt=MEASURE["opt"], runs=FLAGS["runs"].but(help="measured runs per point after its warm-up run0 (default 3)"),
    scoring=FLAGS["scoring"].but(help="deferred (default) or per-run, as measure"),
    name=Flag(f.name("sweep name", empty=True), "sweep name (default: sweep-WORKLOAD, with a digest of the options); "
              "each point is the campaign NAME.POINT, and the same command resumes the sweep", ""),
    concurrency=Flag(_parsed("1,2,4,8,16", "sweep.points.parse_concurrencies"),
                     "requests in flight at each point, comma-separated, e.g. 1,2,4,8,16", ""),
    request_rate=Flag(_parsed("1,2,4,inf", "sweep.points.parse_rates"), "requests per second at each point, "
                      "comma-separated, inf for all at once, e.g. 1,2,4,inf (arrivals on a seeded Poisson schedule; "
                      "with --concurrency, every combination is a point)", ""),
    slo=Flag(_parsed("latency_p95_s=2.0", "sweep.points.parse_slo"), "a latency target METRIC=SECONDS "
             "(latency_mean_s, latency_p95_s, latency_p99_s or latency_median_s): each point's goodput is the "
             "requests per second within it, and the sweep names the highest throughput that holds it", ""),
    upstream=Flag(f.SWITCH, "sglang-omni's own sweep: one campaign whose every run hands its one server to the "
                  "checkout's seed-tts client, which runs every --concurrency level (needs --target sglang-omni and "
                  "--opt seedtts.client=sglang; at most one --request-rate)", False),
    score=FLAGS["score"].but(help="which runs of each point are scored for quality (WER, SIM, UTMOS): last (the "
                             "default, where the workload can leave runs unscored: the "
                             "point's last run; its warm-up and other runs are generated and timed only), every-round "
                             "(every run, as measure), or none. A load curve is speed: it needs no scoring"))

REPORT = pick(
    "name", "runs", "target", "results", "checkout", "wide", "csv", "json",
    name=Flag(f.text(), "campaign name, REVISION/NAME or a campaign file (default: the latest campaign of the "
              "revision folder; Invoke has no optional positionals, so --name)", ""),
    runs=Flag(f.distinct_list("run names"), "report these complete runs instead of a campaign, comma-separated (they "
              "must match)", ""),
    target=FLAGS["target"].but(help="local or sglang-omni (which revision folder)"),
    results=FLAGS["results"].but(help="results root"),
    checkout=FLAGS["checkout"].but(help="sglang-omni checkout (its commit names the revision folder)"))

COMPARE = pick(
    "a", "b", "force", "min_effect", "alpha", "fail_on", "target", "results", "wide", "csv", "json",
    a=Flag(f.text(empty=False), "the base campaign: NAME (this revision folder), REVISION/NAME, or a campaign file; or "
           "the base sweep (NAME, REVISION/NAME or REVISION/NAME/POINTS): then every common load point is compared",
           REQUIRED),
    b=Flag(f.text(empty=False), "the campaign (or sweep) compared with A, named the same ways", REQUIRED),
    force=Flag(f.SWITCH, "compare even when the setups differ (each difference is still named)", False),
    alpha=FLAGS["alpha"].but(help="error rate of the family of metrics, Holm-held (default 0.05: 95 % intervals for "
                             "one)"),
    fail_on=FLAGS["fail_on"].but(help="exit 1 when any metric's verdict is this (e.g. worse), for CI (the words "
                                 "follow)"),
    target=FLAGS["target"].but(help="local or sglang-omni"), results=FLAGS["results"].but(help="results root"))

PLUGINS = {"options": Flag(f.SWITCH, "list only the options: each workload's (--opt WORKLOAD.KEY=VALUE), then each "
                           "engine's", False), "wide": FLAGS["wide"]}

SETUP_CPUS = {
    "gpu_a": Flag(f.gpu_index(), "the single-GPU measurement GPU (BENCH_CPUS)"),
    "gpu_b": Flag(f.gpu_index(), "the second GPU of the CI pair"),
    "out": Flag(f.text(), "also write the two lines to this file (e.g. $BENCH_DIR/cpus.env)"),
    "cores_per_gpu": Flag(f.positive_int(), "cores per GPU group (default 14)"),
    "skip_cores": Flag(f.cpu_set(), "cores left out (default 0,1)"),
}
SETUP_CONTAINER = {
    "execute": Flag(f.SWITCH, "run docker run (default: print the commands for copying)", False),
    "env_file": Flag(f.text(), "the cpus.env with CI_CPUS (default $BENCH_DIR/cpus.env)"),
}
SETUP_CHECKOUT = {"commit": Flag(f.revision(), "commit, tag or branch to detach at (default origin/main)")}
SETUP_ALL = {"where": Flag(f.choice(SIDES), "host (CPU groups, container) or container "
                           "(checkout, venv, downloads); default: container when run inside one", "auto")}

DOCTOR = pick("target", "checkout", "port", "wide",
              target=FLAGS["target"].but(help="the target to check for: local (default; needs no GPU or checkout) or "
                                         "sglang-omni"),
              port=FLAGS["port"].but(help="the port the runs will serve on (default 8000): is it free?"))

STANDIN = {
    "out": Flag(f.new_path(), "where to make it (default ./standin-sglang-omni; must not exist or be empty)",
                "standin-sglang-omni"),
    "commits": Flag(f.positive_int(), "how many commits of history (default 1)", 1),
    "regress_at": Flag(f.positive_int(), "from this commit (1-based) on, a planted regression: --delay-ms per "
                       "request, --fail-stage"),
    "delay_ms": Flag(f.number(0), "latency added per request from --regress-at on (default 50)", 50.0),
    "fail_stage": Flag(f.choice(tuple(CI_STAGES)), "a CI stage that cannot pass from --regress-at "
                       "on (every commit without it)"),
    "fake_gpus": Flag(f.new_path(), "also write a fake nvidia-smi into this folder (for a machine without a "
                      "GPU; put it first on PATH)"),
    "fake_gpu_count": Flag(f.positive_int(), f"GPUs the fake nvidia-smi has (default {DEFAULT_GPUS}, a pair)",
                           DEFAULT_GPUS),
    "base_delay_ms": Flag(f.number(0), "latency every commit adds per request (default 0)", StandinSpec.base_delay_ms),
    "quality_flip": Flag(f.fraction_closed(0, 1), "from --regress-at on (every commit without it), a planted quality "
                         "change: the share of samples the server answers differently (standin.json quality_flip, "
                         "the local server's --quality-flip; default 0)", StandinSpec.quality_flip),
    "era_from": Flag(f.positive_int(), "commits before this one (1-based) are the old era: their seed-tts client has "
                     "no --reference-audio-field (argparse exits 2 on it)"),
    "serve_era_from": Flag(f.positive_int(), "commits before this one (1-based) serve with upstream's legacy "
                           "sgl-omni serve: named flags (--thinker-mem-fraction-static), a dotted stage flag a "
                           "KeyError"),
    "startup_s": Flag(f.number(0), "seconds every commit's server loads with its port closed, as a GPU host loads "
                      "weights (default 0)", StandinSpec.startup_s),
}

_SCALE = dict(
    workload=FLAGS["workload"].but(help="workload of every campaign (repeatable)"),
    runs=FLAGS["runs"].but(help="measured runs per campaign after run0 (default 3)"),
    opt=FLAGS["opt"].but(help="workload option WORKLOAD.KEY=VALUE for every campaign (repeatable)"),
    client=FLAGS["client"].but(help="native or sglang"), target=FLAGS["target"].but(help="local or sglang-omni"),
    checkout=FLAGS["checkout"].but(help="sglang-omni checkout"), results=FLAGS["results"].but(help="results root"),
    port=FLAGS["port"].but(help="base port (slot k serves on port + k)"))

SCALE_SCORE_HELP = ("which runs of each campaign are scored for quality (WER, SIM, UTMOS): every-round (the default, "
                    "every run as invoke measure scores them: its campaigns are measure's), last (the last measured "
                    "run), or none, for a speed question (most of a seed-tts run's time is its scoring); a campaign "
                    "scored less is named apart (..._score-none, ..._score-last), so --resume never mixes the two")

MATRIX = pick(
    "workload", "revisions", "sweep", "opt", "runs", "allow_dirty", "slots", "slot_per", "slot_cpus", "engine", "address", "resume",
    "threshold", "client", "target", "checkout", "results", "port", "results_transport", "checkout_url",
    "server_profile", "engine_opt", "wide", "percentiles", "score", **_SCALE,
    score=FLAGS["score"].but(help=SCALE_SCORE_HELP),
    # "" is the local target's own revision; a spec naming none (",,") or an option ("-x") is refused
    revisions=Flag(f.library("A,B,C or A..B", lambda v: v if not v.strip() else (
        _lib("scale.revisions").split_spec(v), v)[1]), "A,B,C or A..B (git rev-list A..B; A^..B includes A) of the "
        "checkout", ""),
    sweep=Flag(f.Many(f.library("WORKLOAD.KEY=V1,V2,...", lambda v: (_lib("scale.matrix").parse_sweep([v]), v)[1])),
               "WORKLOAD.KEY=V1,V2,... (repeatable): every combination is an option set", repeatable=True),
    resume=Flag(f.SWITCH, "keep complete campaigns and runs, continue the others", False))

BISECT = pick(
    "good", "bad", "metric", "workload", "threshold", "runs", "allow_dirty", "opt", "slots", "slot_per", "slot_cpus", "engine",
    "address", "client", "target", "checkout", "results", "port", "results_transport", "checkout_url",
    "server_profile", "engine_opt", "wide", "score", **_SCALE,
    score=FLAGS["score"].but(help=SCALE_SCORE_HELP + "; a quality --metric needs every-round"),
    good=Flag(f.revision(), "a commit where the metric is good", REQUIRED),
    bad=Flag(f.revision(), "a later commit where it is worse", REQUIRED),
    metric=Flag(f.text(empty=False), "metric to judge, e.g. seedtts.throughput_qps, or at a load point: "
                "seedtts@c16.throughput_qps (measured with that point's options)", REQUIRED))


def _bisecting(name: str) -> Flag:
    """A slot flag of history's --bisect, in its words."""
    return FLAGS[name].but(help=FLAGS[name].help + " (--bisect)")


HISTORY = {
    "metric": Flag(f.text(), "only this metric, e.g. selftest.latency_mean_s, or a metric at a load point of a sweep, "
                   "e.g. seedtts@c16.throughput_qps (default every metric)", ""),
    "workload": Flag(f.text(), "only campaigns of this workload", ""),
    "revisions": Flag(f.library("A..B or a branch (not starting with -)",
                                lambda v: _lib("history.query").check_revisions(v)),
                      "A..B or a branch of --checkout, in first-parent order (default HEAD; A..B leaves A out, as "
                      "git)", ""),
    "target": FLAGS["target"].but(help="only campaigns of this target"),
    "checkout": FLAGS["checkout"].but(help="the git repository whose first-parent order the series follow (default "
                                      "the checkout setting)"),
    "results": FLAGS["results"].but(help="results root (its history.sqlite)"),
    "json": Flag(f.export_path(), "also save the history as JSON in this file", ""),
    "summary": Flag(f.export_path(), "also write the pull-request summary (Markdown) to this file; with --revisions it is "
                    "appended to $GITHUB_STEP_SUMMARY when that is set", ""),
    "rebuild": Flag(f.SWITCH, "make the database again from the run directories first", False),
    "bisect": Flag(f.SWITCH, "bisect each change point that holds untested commits (needs --metric), as invoke "
                   "bisect", False),
    "slots": _bisecting("slots"), "slot_per": _bisecting("slot_per"), "slot_cpus": _bisecting("slot_cpus"),
    "threshold": _bisecting("threshold"),
    "port": FLAGS["port"].but(help="base port of --bisect's slots (default 8000)"),
    "min_effect": FLAGS["min_effect"].but(help="smallest step that is a change point, in percent (default 5, as "
                                          "compare's)"),
    "wide": FLAGS["wide"],
}

AB = pick(  # --opt before the sides' options: -o is --opt here too, as in every other task
    "workload", "opt", "a_rev", "b_rev", "rounds", "design", "a_opt", "b_opt", "a_set", "b_set", "aa", "seed",
    "allow_dirty",
    "retries", "noisy_retries", "scoring", "score", "name", "alpha", "min_effect", "fail_on", "max_rounds", "decide",
    "slots", "slot_per", "slot_cpus", "target", "results", "port", "checkout", "gpus", "cpus", "client",
    "server_profile", "wide", "csv", "json", "percentiles",
    workload=FLAGS["workload"].but(help="workload both sides measure (repeat for several)"),
    a_rev=Flag(f.revision(), "side A's revision of the checkout (target sglang-omni; prepared as matrix prepares one)"),
    b_rev=Flag(f.revision(), "side B's revision of the checkout (with --a-rev)"),
    rounds=Flag(f.whole(2, defaults.MAX_ROUNDS), f"rounds after the warm-ups; each round measures each side once (default "
                f"{defaults.ROUNDS}, at least 2; not with --max-rounds)"),
    design=Flag(f.choice(lambda: _lib("ab.front_door").DESIGN_WORDS), "auto (default: duet with two --slots, else "
                "interleaved), duet (A and B at once on two slots, swapped every round), interleaved (each round A "
                "and B one after the other in a seeded random order) or sequential (A's rounds, then B's)", "auto"),
    a_opt=Flag(f.Many(f.text(empty=False)), "workload option WORKLOAD.KEY=VALUE of side A only (repeatable)",
               repeatable=True),
    b_opt=Flag(f.Many(f.text(empty=False)), "workload option WORKLOAD.KEY=VALUE of side B only (repeatable)",
               repeatable=True),
    a_set=Flag(f.Many(f.text(empty=False)), "setting NAME=VALUE of side A only, e.g. local_delay_ms=0 (repeatable)",
               repeatable=True),
    b_set=Flag(f.Many(f.text(empty=False)), "setting NAME=VALUE of side B only, e.g. local_delay_ms=40 (repeatable)",
               repeatable=True),
    opt=FLAGS["opt"].but(help="workload option WORKLOAD.KEY=VALUE of both sides (repeatable)"),
    aa=Flag(f.SWITCH, "both sides the same on purpose: an A/A experiment, to see the noise", False),
    seed=Flag(f.whole(0), "seed of the interleaved order (default 0; recorded)", "0"),
    retries=FLAGS["retries"].but(help="tries again of a run that misses a gate or coverage rule, inside its round "
                                 "(default 2)", default=str(defaults.RETRIES)),
    noisy_retries=Flag(f.whole(0, defaults.MAX_NOISY_RETRIES), "how often a round whose timed window the noise guard marked noisy (another "
                       "process busy on its CPUs or GPUs) is measured again before it is judged as it is; the noisy "
                       f"runs are kept and named in the report (default {defaults.NOISY_RETRIES}: judged as measured; "
                       "2 where a tenant comes and goes)", str(defaults.NOISY_RETRIES)),
    scoring=FLAGS["scoring"].but(help="deferred (default: every run generated, then each side scored together) or "
                                 "per-run"),
    score=FLAGS["score"].but(help="which rounds are scored for quality (WER, SIM, UTMOS): last (the default: the last "
                             "round a side, and with --max-rounds each look's round; every round when a --decide "
                             "metric is a quality one), every-round, or none; warm-ups never. A speed verdict needs no "
                             "scoring"),
    name=Flag(f.name("experiment name", empty=True), "experiment name (default: from the whole request; the same "
              "command resumes it)", ""),
    max_rounds=Flag(f.whole(defaults.FIRST_LOOK, defaults.MAX_ROUNDS), "rounds until the answer is known, at most this many: look at the "
                    "verdicts after 4, 6, 8, 12, 16, ... rounds and N (3 for N 3), each look held to its share of alpha "
                    "(Lan-DeMets' Pocock-type spending), "
                    "and stop at the first look that decides every --decide metric (not with --rounds or --design "
                    "sequential)"),
    decide=Flag(f.distinct_list("metric names"), "the decisive metrics, comma-separated (default: every latency and "
                "throughput metric with a better side, e.g. selftest.latency_mean_s), judged first: the other rows are "
                "called better or worse only once every one of them is; with --max-rounds, also what the looks wait "
                "for. A fixed design keeps its own once a round is measured, --max-rounds its rule from the first "
                "look; a metric at a load point, "
                "seedtts@c16.throughput_qps, measures both sides at that point", ""),
    slots=FLAGS["slots"].but(help="two slot ids for a duet: GPU ids on sglang-omni (e.g. 0,1), any two ids on local "
                             "(default: none, every run on the settings' own port, GPUs and CPUs)"))

PUBLISH = {
    "out": Flag(f.new_path(), "the site's folder (made, or replaced if it holds an earlier site; any other "
                "folder is refused)", REQUIRED),
    "target": FLAGS["target"].but(help="only this target's series (default: every target)"),
    "workload": Flag(f.text(empty=False), "only this workload's series"),
    "metric": Flag(f.text(empty=False), "only this metric, e.g. seedtts.throughput_qps or seedtts@c16.throughput_qps"),
    "revisions": Flag(f.revision(), "only A..B, or a branch"),
    "results": FLAGS["results"].but(help="results root"),
    "checkout": FLAGS["checkout"].but(help="sglang-omni checkout whose first-parent line orders the commits (default "
                                      "the checkout setting)"),
}

"""What a run is made of: the workload, target, scorer and step records plugins return, and the
contexts and results the runner hands back (the package's face re-exports them)."""

from __future__ import annotations

import builtins
import enum
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal, TextIO

from ..statuses import RunOutcome, RunStatus

if TYPE_CHECKING:
    from ..settings import RunSettings, Settings

NAME_RE = re.compile(r"^[a-z][a-z0-9_.-]*$")

Phase = Literal["generate", "score", "collect"]
PHASES: tuple[Phase, ...] = ("generate", "score", "collect")
# The phases a new run is made with: every one; generate alone (scored later, with others); generate
# and collect (a run a speed question leaves unscored: the generation's metrics only).
UNSCORED: tuple[Phase, ...] = ("generate", "collect")
RUN_PHASES: tuple[tuple[Phase, ...], ...] = (PHASES, ("generate",), UNSCORED)
# The note metrics.json of such a run carries (reports tell its missing quality metrics by it).
UNSCORED_NOTE = ("quality not scored: this run's score phase was skipped (--score last scores one run, --score "
                 "none none; --score every-round scores them all); its metrics are the generation's")
# Every note such a run has carried (the first one's words said "one run" only): all are recognised.
UNSCORED_NOTES: tuple[str, ...] = (UNSCORED_NOTE, "quality not scored: this run's score phase was skipped (a speed "
                                   "question scores one run; --score every-round scores them all); its metrics are "
                                   "the generation's")


class ScorePolicy(str, enum.Enum):
    """Which runs of a speed question are scored for quality (``--score``; issue 43): scoring is
    most of a seed-tts run's time, and a speed verdict needs none of it."""

    LAST = "last"  # one round a side, the last (and, with --max-rounds, each look's: it may be the last)
    EVERY_ROUND = "every-round"  # every measured round (what a --decide on a quality metric needs)
    NONE = "none"  # no run: speed only

    def campaign_runs(self) -> str:
        """Which runs of a campaign this scores, in words (a report's header, a matrix's note)."""
        return {ScorePolicy.LAST: "the last measured run only (--score last)",
                ScorePolicy.EVERY_ROUND: "every run (the runbook's)",
                ScorePolicy.NONE: "no run (--score none): speed only"}[self]


SCORE_WORDS: tuple[str, ...] = tuple(p.value for p in ScorePolicy)


OptionValue = int | float | str | bool | None
OPTION_TYPES: tuple[type, ...] = (int, float, str, bool)


@dataclass(frozen=True)
class Option:
    """One workload option a user sets with ``--opt WORKLOAD.NAME=VALUE``: its schema.

    ``type`` is ``int``, ``float``, ``str`` or ``bool``; ``choices`` (strings) restricts a ``str``
    option to those words. ``min``/``max`` bound a number (inclusive unless ``min_exclusive`` /
    ``max_exclusive``). ``optional``: the option may be unset (``None``, written as an empty
    value ``--opt w.seed=``); ``unset`` says in words what unset means. ``default`` is a typed
    value (``None`` for an optional option left unset). ``file``: a ``str`` option whose value names
    a file the workload reads; it must be a regular file of UTF-8 text within a size bound, read
    and checked with the options, before any server starts (:mod:`omnibench_core.records.user_files`).
    :mod:`omnibench_core.records.options` checks values against this record; ``invoke plugins``
    lists it.
    """

    name: str
    type: builtins.type = str
    default: OptionValue = None
    help: str = ""
    min: float | None = None
    max: float | None = None
    min_exclusive: bool = False
    max_exclusive: bool = False
    choices: tuple[str, ...] = ()
    optional: bool = False
    unset: str = ""
    file: bool = False

    def __post_init__(self) -> None:
        object.__setattr__(self, "choices", tuple(self.choices))


@dataclass(frozen=True)
class Command:
    """A program to run: an argv list (never a shell string), extra environment, working dir."""

    argv: tuple[str, ...]
    env: Mapping[str, str] = field(default_factory=dict)
    cwd: str | None = None

    def __post_init__(self) -> None:
        if isinstance(self.argv, str):
            raise TypeError("Command.argv must be a list of arguments, not a shell string")
        object.__setattr__(self, "argv", tuple(str(a) for a in self.argv))


@dataclass(frozen=True)
class ServeSpec:
    """The server a step needs.

    Either a model for the target to serve (``model_path``, ``model_name``, extra ``args``;
    the target builds the argv, e.g. ``sgl-omni serve ...``) or an explicit ``argv`` of a
    program the workload brings (the target still applies its environment and CPU pinning).
    In the generate phase each workload gets a fresh server; in the score phase, steps with
    equal specs share one server start (one ASR server for every scoring step of a run).
    ``label`` names the server's log, ``<run>/<label>.log``.
    """

    label: str
    model_path: str = ""
    model_name: str = ""
    args: tuple[str, ...] = ()
    argv: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        object.__setattr__(self, "args", tuple(str(a) for a in self.args))
        object.__setattr__(self, "argv", tuple(str(a) for a in self.argv))
        if not self.argv and not self.model_path:
            raise ValueError(f"ServeSpec {self.label!r} needs a model_path or an argv")


@dataclass(frozen=True)
class Endpoint:
    """Where a run's servers listen: the one place URLs are built."""

    port: int
    host: str = "127.0.0.1"

    @property
    def base_url(self) -> str:
        """``http://host:port``."""
        return f"http://{self.host}:{self.port}"

    def url(self, path: str) -> str:
        """``http://host:port/path``."""
        return f"{self.base_url}/{path.lstrip('/')}"

    @property
    def health_url(self) -> str:
        """The READY gate's ``/health``."""
        return self.url("/health")

    @property
    def chat_url(self) -> str:
        """The OpenAI-style ``/v1/chat/completions`` the clients post to."""
        return self.url("/v1/chat/completions")


@dataclass(frozen=True)
class Slot:
    """What one run holds while it runs: a port, the GPUs its servers use, a CPU set.

    A campaign or a matrix hands each run a slot; two runs at once never share one.
    ``gpus`` empty: the servers use no GPU; ``cpus`` empty: processes are not pinned.
    """

    port: int
    gpus: tuple[str, ...] = ()
    cpus: tuple[int, ...] = ()

    @property
    def endpoint(self) -> Endpoint:
        """The loopback endpoint of the slot's port."""
        return Endpoint(self.port)


class _InRun:
    """Where a workload's files go and where its servers listen, for the two contexts below."""

    run_dir: Path
    workload: str
    endpoint: Endpoint

    @property
    def workload_dir(self) -> Path:
        """``<run>/<workload>``, where the workload's files go."""
        return self.run_dir / self.workload

    @property
    def port(self) -> int:
        """The port of the run's servers."""
        return self.endpoint.port


@dataclass
class StepContext(_InRun):
    """What a Python-callable step receives."""

    run_dir: Path
    workload: str
    endpoint: Endpoint
    options: Mapping[str, Any]
    target: TargetEnv
    log: TextIO
    progress: Callable[[str], None]


StepAction = Callable[[StepContext], None]


@dataclass(frozen=True)
class Step:
    """One unit of a run.

    ``run`` is a :class:`Command` or a Python callable taking a :class:`StepContext`.
    ``outputs`` are paths relative to the run directory that the step must write; the runner
    records their sizes and hashes, and skips the step only when this run wrote them already.
    """

    name: str
    run: Command | StepAction
    phase: Phase = "generate"
    server: ServeSpec | None = None
    outputs: tuple[str, ...] = ()
    timeout_s: float | None = None


@dataclass(frozen=True)
class RuleResult:
    """One coverage rule of RUN_COMPLETE and whether it held."""

    name: str
    ok: bool
    detail: str = ""


@dataclass(frozen=True)
class Collected:
    """A workload's contribution to ``metrics.json``.

    ``notes`` are printed with the metrics and stored beside them, e.g. that a metric was
    computed by a local substitute. ``samples`` are per-request values by name (first-audio
    latencies, chunk gaps), kept in the run's ``samples.json`` for the report's distribution plots.
    ``by_request``: a mean metric's values per request id, which an A/B matches across its sides.
    """

    metrics: Mapping[str, Any]
    rates: frozenset[int] = frozenset()
    rules: tuple[RuleResult, ...] = ()
    notes: tuple[str, ...] = ()
    samples: Mapping[str, Sequence[float]] = field(default_factory=dict)
    # metric -> request id -> that request's value, for a metric that is the mean of them over the
    # requests that succeeded (kept in the run's request_values.json): the A/B matches requests by id
    by_request: Mapping[str, Mapping[str, float]] = field(default_factory=dict)


@dataclass(frozen=True)
class TargetFacts:
    """What a target says about itself, so workloads branch on facts and never on its name.

    ``own_clients``: the system under test brings its own clients and scorers (an sglang-omni
    checkout does; the local server does not, so omnibench's native ones run).
    ``substitutes``: what stands in for the real thing on this target, by role (``asr``,
    ``video_answer``...), in words for the reports; empty when nothing is substituted.
    ``uses_gpu``: its servers run on GPUs, so GPU_FREE and GPU facts apply.
    ``package``: the top-level python package of the system under test, which REV_OK finds in the
    revision's own worktree ("" where the target runs no checkout's code).
    ``from_checkout``: the system under test is the code of a checkout (``omnibench.checkout``), so a
    dirty one is refused where a verdict is asked (matrix, bisect, ab, sweep) unless allowed.
    """

    own_clients: bool = False
    substitutes: Mapping[str, str] = field(default_factory=dict)
    uses_gpu: bool = False
    package: str = ""
    from_checkout: bool = False

    def substitute(self, role: str) -> str:
        """What stands in for ``role`` here ("" when the real thing runs)."""
        return self.substitutes.get(role, "")


@dataclass(frozen=True)
class TargetEnv:
    """A target prepared for one run: how to start programs of the system under test.

    ``python`` runs client modules; ``env`` is set and ``unset`` removed on top of omnibench's
    own environment; ``gpus`` are the GPUs the GPU_FREE gate watches (empty: the gate does not
    apply); the CPUs a run pins to are its :class:`Slot`'s; ``revision`` names the results
    folder; ``serve_argv`` turns a model :class:`ServeSpec` and a port into an argv.
    """

    target: str
    python: str
    serve_argv: Callable[[ServeSpec, int], list[str]]
    facts: TargetFacts = field(default_factory=TargetFacts)
    env: Mapping[str, str] = field(default_factory=dict)
    unset: tuple[str, ...] = ()
    cwd: str | None = None
    gpus: tuple[str, ...] = ()
    revision: str = "unknown"
    dirty: str = ""
    dirty_files: tuple[str, ...] = ()  # a dirty tree's changed and untracked files: REV_OK lets them differ
    results_folder: str = ""
    details: Mapping[str, str] = field(default_factory=dict)

    @property
    def folder(self) -> str:
        """The results folder: ``results_folder`` if set, else the 7-character commit."""
        if self.results_folder:
            return self.results_folder
        return short_revision(self.revision)


def short_revision(revision: str) -> str:
    """``git rev-parse --short`` for a full SHA-1; other strings unchanged."""
    return revision[:7] if re.fullmatch(r"[0-9a-f]{40}", revision) else revision


@dataclass(frozen=True)
class Target:
    """Where the system under test comes from (``sglang-omni`` checkout, ``local`` server...).

    ``prepare(settings)`` checks the target's prerequisites (raising a typed error that names
    the setting to change) and returns a :class:`TargetEnv` carrying the same ``facts``. It gets
    the whole :class:`~omnibench_core.settings.Settings`: the run section and the tools (``git``).
    """

    name: str
    description: str
    prepare: Callable[[Settings], TargetEnv]
    facts: TargetFacts = field(default_factory=TargetFacts)


@dataclass(frozen=True)
class RunContext(_InRun):
    """What a workload's or scorer's ``plan`` receives to build its steps.

    ``options`` are the workload's checked option values (typed by its schema); ``params``
    are what the workload passes to a scorer it uses (see :class:`ScorerUse`). ``settings`` is
    the run section of the settings only (results, port, GPUs, CPUs, limits): a workload needs
    nothing of the CI, host set-up or tool settings.
    """

    run_dir: Path
    workload: str
    endpoint: Endpoint
    options: Mapping[str, Any]
    target: TargetEnv
    settings: RunSettings
    params: Mapping[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class Scorer:
    """A reusable scoring stage (ASR WER, speaker similarity...).

    ``plan(ctx)`` returns the scoring steps for the workload named in ``ctx.workload``; they run
    in the score phase unless they say otherwise.
    """

    name: str
    description: str
    plan: Callable[[RunContext], Sequence[Step]]


@dataclass(frozen=True)
class ScorerUse:
    """A workload's use of a registered scorer, with the parameters that scorer reads.

    ``on_own_clients``: also when the target brings its own clients and scorers (default no:
    there the target's own scoring runs, planned by the workload).
    """

    scorer: str
    params: Mapping[str, Any] = field(default_factory=dict)
    on_own_clients: bool = False


@dataclass(frozen=True)
class RunCheck:
    """A run-wide check (e.g. every WAV of the run is readable and not empty or NaN).

    ``collect(run_dir)`` returns metrics and rules over the whole run. Workloads name the
    checks they need in ``Workload.checks``; each named check runs once per run.
    """

    name: str
    description: str
    collect: Callable[[Path], Collected]


@dataclass(frozen=True)
class Workload:
    """A benchmark workload.

    ``plan(ctx)`` returns its steps for one run; ``scorers`` are registered scorers whose steps
    are added (a name, or a :class:`ScorerUse` with parameters); ``checks`` names run-wide
    checks (:class:`RunCheck`); ``collect(run_dir, options)`` reads the files and returns its
    metrics and coverage rules. ``options`` is its option schema, :class:`Option` records a user
    sets with ``--opt NAME.KEY=VALUE``; plans and ``collect`` receive the checked, typed values.
    ``targets`` lists the targets it supports (empty: any).

    A speed question needs no quality scoring: ``invoke ab`` and ``invoke sweep`` score one round
    (``--score last``) and finish the other runs without their score phase. ``collect_unscored``
    reads such a run: the generation's metrics and rules only (None: the workload's runs are
    always scored). ``quality_metrics`` names the metrics only its score phase makes (a name
    ending in ``.`` is a prefix), so a ``--decide`` on one of them scores every round.
    ``metrics`` names every metric its ``collect`` can write (a name ending in ``.`` is a prefix;
    the run adds ``<name>.server_ready_s`` and percentiles ``<base>_p<q>_s`` of its latencies), so a
    ``--decide`` no run of it could produce is refused before anything starts; empty: undeclared,
    such a name is found at the experiment's first look.
    """

    name: str
    description: str
    plan: Callable[[RunContext], Sequence[Step]]
    collect: Callable[[Path, Mapping[str, Any]], Collected] | None = None
    scorers: tuple[str | ScorerUse, ...] = ()
    options: Sequence[Option] = ()
    targets: tuple[str, ...] = ()
    checks: tuple[str, ...] = ()
    collect_unscored: Callable[[Path, Mapping[str, Any]], Collected] | None = None
    quality_metrics: tuple[str, ...] = ()
    metrics: tuple[str, ...] = ()

    def is_quality(self, metric: str) -> bool:
        """``metric`` is made by the score phase (one of ``quality_metrics``, or under a prefix of them)."""
        return any(metric == q or (q.endswith(".") and metric.startswith(q)) for q in self.quality_metrics)

    def may_report(self, metric: str) -> bool:
        """``metric`` is one a run of this workload can write: declared (or under a declared prefix),
        its server's READY time, or a percentile (``<base>_p<q>_s``) of a declared latency; True
        whenever nothing is declared."""
        if not self.metrics:
            return True
        declared = (*self.metrics, *self.quality_metrics, f"{self.name}.server_ready_s")
        if any(metric == m or (m.endswith(".") and metric.startswith(m)) for m in declared):
            return True
        base, _, q = metric.rpartition("_p")
        return bool(base) and q.endswith("_s") and q[:-2].replace(".", "", 1).isdigit() \
            and any(m.startswith(f"{base}_") for m in declared)

    def __post_init__(self) -> None:
        # A {name: default} mapping (the form before option schemas) is refused: its values had no type.
        if isinstance(self.options, Mapping) or not all(isinstance(o, Option) for o in self.options):
            raise TypeError(f"Workload {self.name!r}: options must be Option records (omnibench_core.plugin.Option), "
                            f"not {type(self.options).__name__} {self.options!r}")
        object.__setattr__(self, "options", tuple(self.options))

    def scorer_uses(self) -> tuple[ScorerUse, ...]:
        """``scorers`` with plain names turned into :class:`ScorerUse` records."""
        return tuple(s if isinstance(s, ScorerUse) else ScorerUse(s, on_own_clients=True) for s in self.scorers)


@dataclass(frozen=True)
class CiStage:
    """One stage of the model CI: a pytest file of the sglang-omni checkout.

    ``order`` sorts the stages; ``replaces`` lets a plugin swap out a stage another plugin
    registered under the same name (without it, the same name twice is an error).
    """

    name: str
    description: str
    test_file: str  # relative to the checkout root
    order: float
    pytest_args: tuple[str, ...] = ("-v", "-s", "-x")
    replaces: bool = False


@dataclass(frozen=True)
class RunInfo:
    """Passed to the run start/finish hooks."""

    run_dir: Path
    target: str
    workloads: tuple[str, ...]
    revision: str


@dataclass(frozen=True)
class RunResult:
    """What a finished (or failed) run left behind.

    ``generated``: the run stopped after its generate phase on purpose (``phases``); its score
    and collect phases run later, e.g. for several runs on one scoring server."""

    run_dir: Path
    complete: bool
    status: RunStatus
    metrics: Mapping[str, Any]
    rates: tuple[int, ...]
    broken_rules: tuple[RuleResult, ...]
    manifest: Path
    error: str = ""
    notes: tuple[str, ...] = ()
    run: str = ""  # the runN it claimed ("" for run_dir's own name)
    moved_to: Path | None = None  # where the run layer moved it aside, if it did
    # percentiles too few samples support ({metric: {"value", "n", "needed"}}): shown marked, not measured
    thin: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)

    @property
    def outcome(self) -> RunOutcome:
        """The run's :class:`RunOutcome`."""
        why = self.error or "; ".join(f"{r.name}: {r.detail}" for r in self.broken_rules)
        return RunOutcome(self.run or self.run_dir.name, RunStatus(self.status), self.run_dir, self.moved_to, why)


@dataclass(frozen=True)
class EngineRequest:
    """What an engine is made from (``invoke matrix`` / ``invoke bisect --engine NAME``): the
    settings, the slot flags as the user gave them (``--slots``, ``--slot-per``, ``--slot-cpus``),
    the engine's own options (typed, checked against its schema; ``--engine-opt KEY=VALUE``) and
    where its progress lines go."""

    settings: Settings
    slots: str = ""
    slot_per: str = "pair"
    slot_cpus: str = "rule"
    options: Mapping[str, OptionValue] = field(default_factory=dict)
    progress: Callable[[str], None] = print


@dataclass(frozen=True)
class EngineKind:
    """An engine a plugin provides (``omnibench_engines``): where a matrix's or a bisect's
    campaigns run. ``make`` builds one from an :class:`EngineRequest`; what it returns has the
    methods of :class:`omnibench_core.scale.engine.Engine` (slots, start, wait, cancel_all, close).
    ``options`` are declared and checked as a workload's are."""

    name: str
    description: str
    make: Callable[[EngineRequest], Any]
    options: tuple[Option, ...] = ()

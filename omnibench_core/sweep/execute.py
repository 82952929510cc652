"""``invoke sweep``: one workload measured at each load point, each point a campaign (or, with
``upstream``, one campaign whose every run hands its server to sglang-omni's own sweep).

A point's campaign is ``<sweep>.<label>`` in the revision folder, measured by the campaign layer
as ``invoke measure`` would (warm-up run0, ``--runs`` measured runs, a fresh server per run), so
the same command resumes a sweep: complete points are read again, not measured again. Then
each point is summarised from its runs' files (:mod:`.reading`) and the sweep is written
(:mod:`.writing`).
"""

from __future__ import annotations

import dataclasses
import hashlib
import re
import statistics
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from .. import api
from ..campaign import campaign_file
from ..campaign.execute import asked_from, measure
from ..campaign.front_door import campaign_done
from ..campaign.progress import Later
from ..errors import SettingsError
from ..identity import file_name
from ..records import ScorePolicy
from ..records.options import format_value
from ..settings import Settings
from ..store import sweep_file
from ..store.names import RECORD_SUFFIX, SWEEPS, campaigns_dir, check_name
from .curve import PointResult
from .points import (
    CONCURRENCY_OPTION,
    RATE_OPTION,
    UPSTREAM_OPTION,
    LoadPoint,
    Slo,
    load_points,
    parse_concurrencies,
    parse_rates,
    parse_slo,
)
from .reading import point_result

SWEEP_WORDS = 60  # characters of a sweep name's words before they are cut and hashed


@dataclass(frozen=True)
class SweepSpec:
    """What ``invoke sweep`` was asked: one workload, its points, runs per point, extra options."""

    workload: str
    points: tuple[LoadPoint, ...]
    runs: int
    options: tuple[str, ...] = ()
    client: str | None = None
    retries: int = 2
    scoring: str = "deferred"
    slo: Slo | None = None
    name: str = ""  # "": sweep-<workload>, with its options, client and design in words (:meth:`sweep_name`)
    upstream: bool = False  # sglang-omni's own sweep: every level in each run, on that run's one server
    score: ScorePolicy | None = None  # which runs of a point are scored for quality (None: last, where it can)

    def _extra(self) -> list[str]:
        """What sets this sweep apart from another of its workload: options, client and design."""
        return sorted(self.options) + ([f"client={self.client}"] if self.client else []) + \
            (["upstream"] if self.upstream else [])

    def options_digest(self) -> str:
        """A digest of :meth:`_extra` (8 hex digits; "" for none): the record keeps it, and sweeps
        named before issue 46 were named by it."""
        extra = self._extra()
        return hashlib.sha256("\n".join(extra).encode()).hexdigest()[:8] if extra else ""

    def sweep_name(self) -> str:
        """The sweep's name: given, or ``sweep-<workload>[-<its options, client and design>]`` in
        words read from its flags (``sweep-seedtts-max_samples-4_client-sglang``; an option's
        workload prefix and ``=`` dropped; a long one keeps its start and gets a hash). Its load
        points are not in it: sweeps of one name share their points' campaigns."""
        if self.name:
            return check_name(self.name, "sweep name")
        words = [e.removeprefix(f"{self.workload}.").replace("=", "-") for e in self._extra()]
        readable = re.sub(r"\.{2,}", ".", file_name(words, limit=SWEEP_WORDS)).strip("._-")
        return check_name(f"sweep-{self.workload}" + (f"-{readable}" if readable else ""), "sweep name", given=False)

    def older_name(self) -> str:
        """The name omnibench gave this sweep before issue 46: ``sweep-<workload>-<digest>``."""
        digest = self.options_digest()
        return f"sweep-{self.workload}" + (f"-{digest}" if digest else "")

    def on_disk(self, revision_dir: Path) -> SweepSpec:
        """This sweep under the name it has in ``revision_dir``: a sweep measured under its older
        name (:meth:`older_name`) and not yet under its new one is resumed there, never measured again."""
        old, new = self.older_name(), self.sweep_name()
        if self.name or old == new or (sweep_file.sweeps_dir(revision_dir) / new).exists():
            return self
        measured = (sweep_file.sweeps_dir(revision_dir) / old).is_dir() or \
            any(campaigns_dir(revision_dir).glob(f"{old}.*{RECORD_SUFFIX}"))
        return dataclasses.replace(self, name=old) if measured else self

    def campaign_name(self, point: LoadPoint) -> str:
        """``<sweep>.<label>``: the point's campaign; with ``upstream`` every point's is the one
        ``<sweep>.upstream-<labels>``."""
        if self.upstream:
            return check_name(f"{self.sweep_name()}.upstream-{'_'.join(p.label for p in self.points)}",
                              "campaign name", given=False)
        return check_name(f"{self.sweep_name()}.{point.label}", "campaign name", given=False)


def spec_from(workload: str, *, concurrency: str = "", request_rate: str = "", runs: int, options: Sequence[str] = (),
              client: str | None = None, retries: int, scoring: str, slo: str = "", name: str = "",
              upstream: bool = False, score: str = "") -> SweepSpec:
    """The sweep ``invoke sweep``'s flags ask for, each checked (``""``: not given; ``score`` not
    given is ``last`` where the workload can leave a run unscored, else every run)."""
    policy = api.score_word(score)
    points = load_points(parse_concurrencies(concurrency) if concurrency else [],
                         parse_rates(request_rate) if request_rate else [])
    return SweepSpec(workload, tuple(points), runs, tuple(options), client, retries, scoring,
                     parse_slo(slo) if slo else None, name, upstream, policy)


@dataclass(frozen=True)
class SweepResult:
    """A sweep measured: its points' summaries in load order, and where their campaigns are."""

    spec: SweepSpec
    revision_dir: Path
    results: tuple[PointResult, ...]
    campaign_files: tuple[Path, ...] = field(default_factory=tuple)


def check_spec(spec: SweepSpec) -> None:
    """Refuse what cannot be swept before anything runs: a workload without the option a point
    sets, or an ``--opt`` that sets it too."""
    names = {row.name for row in api.list_options() if row.workload == spec.workload}
    if not names:
        known = sorted({row.workload for row in api.list_options()})
        raise SettingsError(f"no workload named {spec.workload!r} with options to sweep",
                            evidence={"workloads": ", ".join(known)}, hint="see `invoke plugins --options`")
    needed = {CONCURRENCY_OPTION: any(p.concurrency is not None for p in spec.points),
              RATE_OPTION: any(p.rate is not None for p in spec.points)}
    flag = {CONCURRENCY_OPTION: "--concurrency", RATE_OPTION: "--request-rate"}
    for option, used in needed.items():
        if used and option not in names:
            raise SettingsError(f"workload {spec.workload!r} has no option {option!r}, so {flag[option]} cannot "
                                "set its load", evidence={"its options": ", ".join(sorted(names))},
                                hint=f"drop {flag[option]}, or sweep a workload that has {option}")
        clash = [o for o in spec.options if o.split("=", 1)[0].strip() == f"{spec.workload}.{option}"]
        if used and clash:
            raise SettingsError(f"--opt {clash[0]} sets what {flag[option]} sweeps",
                                hint=f"drop --opt {spec.workload}.{option}; {flag[option]} names its values")
    if spec.upstream:
        _check_upstream(spec, names)


def _check_upstream(spec: SweepSpec, names: set[str]) -> None:
    """sglang-omni's own sweep takes concurrency levels at one request rate (its ``--request-rate``
    is the whole sweep's), through the workload's ``concurrencies`` option."""
    if UPSTREAM_OPTION not in names:
        raise SettingsError(f"workload {spec.workload!r} has no option {UPSTREAM_OPTION!r}: --upstream is "
                            "sglang-omni's own sweep of seed-tts", hint="drop --upstream, or sweep --workload seedtts")
    if any(p.concurrency is None for p in spec.points) or len({p.rate for p in spec.points}) > 1:
        raise SettingsError("--upstream sweeps concurrency levels at one request rate (sglang-omni's client takes one "
                            "--request-rate for its whole sweep)",
                            evidence={"points": ", ".join(p.label for p in spec.points)},
                            hint="give --concurrency 1,4,16 and at most one --request-rate")
    clash = [o for o in spec.options if o.split("=", 1)[0].strip() == f"{spec.workload}.{UPSTREAM_OPTION}"]
    if clash:
        raise SettingsError(f"--opt {clash[0]} sets what --upstream --concurrency sweeps",
                            hint=f"drop --opt {clash[0].split('=', 1)[0]}")


def run_sweep(settings: Settings, spec: SweepSpec, *, progress: Callable[[str], None] = print) -> SweepResult:
    """Measure (or resume) every point's campaign in load order, then summarise each point; each
    campaign is told to the plugins (the history indexes each point as a series of its own: its
    options differ)."""
    result = _measure(settings, spec, progress)
    for path in result.campaign_files:
        campaign_done(settings, path, progress)
    return result


def _measure(settings: Settings, spec: SweepSpec, progress: Callable[[str], None]) -> SweepResult:
    check_spec(spec)
    revision = api.revision_dir(settings)
    spec = spec.on_disk(revision)
    if spec.upstream:
        return _run_upstream(settings, spec, revision, progress)
    paths: list[Path] = []
    took: list[float] = []  # each point's wall time in this command: the later points' estimate
    for number, point in enumerate(spec.points, 1):
        name = spec.campaign_name(point)
        prefix = f"[sweep point {number} of {len(spec.points)}: {point.label}] "
        asked = asked_from(settings, [spec.workload], [*spec.options, *point.options(spec.workload)], spec.client,
                           spec.runs, spec.retries, spec.scoring, api.score_policy([spec.workload], spec.score, ()))
        # every point measures the revision the sweep began on: a commit between points stops it
        # the point's estimate covers the points after it: as long as the points measured so far,
        # or before one was, as long as this one
        later = Later(len(spec.points) - number, statistics.mean(took) if took else None)
        record_path = campaign_file.campaign_path(revision, name)
        before = len(campaign_file.load(record_path).attempts) if record_path.exists() else 0
        t0 = time.monotonic()
        outcome = measure(settings, asked, name=name, progress=_prefixed(progress, prefix),
                          expect=(revision, f"sweep {spec.sweep_name()!r}", revision / SWEEPS / spec.sweep_name()),
                          later=later)
        if len(outcome.campaign.attempts) > before:  # a point done before this command says nothing of its pace
            took.append(time.monotonic() - t0)
        paths.append(outcome.path)
    return SweepResult(spec, revision, tuple(point_result(spec.workload, point, path, spec.slo)
                                             for point, path in zip(spec.points, paths, strict=True)), tuple(paths))


def _run_upstream(settings: Settings, spec: SweepSpec, revision: Path,
                  progress: Callable[[str], None]) -> SweepResult:
    """One campaign (``upstream``), each run sweeping every level on its one server with
    sglang-omni's client; each point read from that campaign's ``<workload>@c<level>.*`` metrics."""
    w, rate = spec.workload, spec.points[0].rate
    levels = ",".join(str(p.concurrency) for p in spec.points)
    options = [*spec.options, f"{w}.{UPSTREAM_OPTION}={levels}",
               *([f"{w}.{RATE_OPTION}={format_value(rate)}"] if rate is not None else [])]
    asked = asked_from(settings, [w], options, spec.client, spec.runs, spec.retries, spec.scoring,
                       api.score_policy([w], spec.score, ()))
    name = spec.campaign_name(spec.points[0])
    outcome = measure(settings, asked, name=name, progress=_prefixed(progress, f"[sweep {levels}, one server a run] "))
    results = tuple(point_result(w, p, outcome.path, spec.slo, upstream=True) for p in spec.points)
    return SweepResult(spec, revision, results, (outcome.path,))


def _prefixed(progress: Callable[[str], None], prefix: str) -> Callable[[str], None]:
    """``progress`` with every line led by ``prefix`` (which point of the sweep is running)."""
    def say(line: str) -> None:
        progress(prefix + line)

    return say

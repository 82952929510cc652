"""A sweep's load points and its latency target, parsed from the command line and checked.

A point is a concurrency, a request rate, or both (every combination of ``--concurrency`` and
``--request-rate``). Each point is one campaign of the sweep, named ``<sweep>.<label>`` (``c4``,
``r2``, ``c4-r2``, ``rinf``; see :attr:`LoadPoint.label`), measured with ``<workload>.max_concurrency`` and
``<workload>.request_rate`` set.

A metric at a point is named ``<workload>@<label>.<metric>`` (``seedtts@c16.throughput_qps``):
:func:`parse_point_metric` reads it, for ``history``, ``publish``, ``ab --decide`` and ``bisect``.
"""

from __future__ import annotations

import math
import re
from collections.abc import Sequence
from dataclasses import dataclass

from ..errors import SettingsError
from ..records.options import format_value
from ..toolkit.point_names import POINT_MARK

CONCURRENCY_OPTION = "max_concurrency"
RATE_OPTION = "request_rate"
UPSTREAM_OPTION = "concurrencies"  # the workload option of sglang-omni's own sweep (invoke sweep --upstream)
# The per-point statistics a target may bound (--slo KEY=VALUE): latencies, lower is better.
SLO_METRICS = ("latency_mean_s", "latency_p95_s", "latency_p99_s", "latency_median_s")
INF_WORDS = ("inf", "infinity")
# seedtts@c16.throughput_qps, seedtts@c4-r2.5.latency_p95_s, seedtts@rinf.latency_mean_s: a rate is
# digits with an optional fraction and exponent, so the dot after it starts the metric.
_RATE = r"(?:inf|\d+(?:\.\d+)?(?:e[-+]?\d+)?)"  # 1e-05 as format_value writes it
_POINT_METRIC = re.compile(rf"(?P<workload>[A-Za-z0-9_-]+){re.escape(POINT_MARK)}(?:c(?P<c>\d+)(?:-r(?P<cr>{_RATE}))?|r(?P<r>{_RATE}))"
                           r"\.(?P<metric>[A-Za-z_][A-Za-z0-9_.-]*)")  # a metric starts with a letter
POINT_METRIC_FORM = "WORKLOAD@POINT.METRIC, e.g. seedtts@c16.throughput_qps (points: c16, r2, c16-r2, rinf)"


@dataclass(frozen=True, order=True)
class LoadPoint:
    """One load point: requests in flight at most (None: the workload's default) and requests per
    second (None: every request at once, sglang-omni's ``inf``)."""

    concurrency: int | None
    rate: float | None

    @property
    def label(self) -> str:
        """``c4``, ``r2``, ``c4-r2`` or ``rinf``: the campaign's suffix and the plot's point label.
        All at once at a concurrency is that concurrency's closed-loop point: ``c4``, the same
        campaign a ``--concurrency`` sweep measures, so sweeps of one name share it."""
        parts = [f"c{self.concurrency}"] if self.concurrency is not None else []
        if self.rate is not None:
            parts.append(f"r{format_value(self.rate)}")
        return "-".join(parts) or "rinf"

    @property
    def words(self) -> str:
        """The point as a reader says it, for plots and pages: ``4 concurrent``, ``2 req/s``,
        ``4 concurrent, 2 req/s``, ``all at once`` (the label ``c4-r2`` is the campaign's suffix)."""
        parts = [f"{self.concurrency} concurrent"] if self.concurrency is not None else []
        if self.rate is not None:
            parts.append(f"{format_value(self.rate)} req/s")
        return ", ".join(parts) or "all at once"

    def options(self, workload: str) -> list[str]:
        """The ``--opt`` words that put a campaign at this point."""
        out = [f"{workload}.{CONCURRENCY_OPTION}={self.concurrency}"] if self.concurrency is not None else []
        if self.rate is not None:
            out.append(f"{workload}.{RATE_OPTION}={format_value(self.rate)}")
        return out


@dataclass(frozen=True)
class PointMetric:
    """A metric at a load point: ``seedtts@c16.throughput_qps`` is ``seedtts.throughput_qps``
    measured with ``seedtts.max_concurrency=16`` and no request rate (all at once)."""

    workload: str
    point: LoadPoint
    metric: str  # the plain name the runs hold: seedtts.throughput_qps

    @property
    def name(self) -> str:
        """The name as a user writes it, the point's label canonical (``c4-rinf`` is ``c4``)."""
        return f"{self.workload}{POINT_MARK}{self.point.label}.{self.metric.split('.', 1)[1]}"

    def options(self) -> list[str]:
        """The ``--opt`` words that put a run at this point."""
        return self.point.options(self.workload)

    def check_measured(self, workloads: Sequence[str], what: str) -> None:
        """Refuse a point of a workload that ``what`` (``this experiment``, ``this bisect``) does not
        measure: the metric names what is measured, not more."""
        if self.workload not in workloads:
            raise SettingsError(f"{self.name}: {self.workload} is not a workload of {what}",
                                evidence={"workloads": ", ".join(workloads)}, hint=f"add --workload {self.workload}")

    def holds(self, options: Sequence[str]) -> bool:
        """Whether a campaign measured with ``options`` is at this point: the same concurrency and
        rate, a missing one meaning the workload's default (no cap given; all at once, as a rate
        of ``inf`` or an empty one). Every word that sets one must agree."""
        want = {CONCURRENCY_OPTION: self.point.concurrency, RATE_OPTION: self.point.rate}
        for key, value in want.items():
            given = [v for k, _, v in (o.partition("=") for o in options) if k == f"{self.workload}.{key}"]
            if key == RATE_OPTION:
                given = [v for v in given if v.strip().lower() not in (*INF_WORDS, "")]  # all at once: as left out
            if (not given and value is not None) or any(_number(v) != value for v in given):
                return False
        return True


def parse_point_metric(name: str) -> PointMetric | None:
    """``seedtts@c16.throughput_qps`` -> PointMetric; a name without ``@`` -> None (a plain metric);
    a name with ``@`` that is not of the form -> SettingsError."""
    if POINT_MARK not in name:
        return None
    m = _POINT_METRIC.fullmatch(name.strip())
    if m is None:
        raise SettingsError(f"cannot read the metric {name!r} as a metric at a load point",
                            hint=f"write {POINT_METRIC_FORM}")
    rate_text = m["cr"] or m["r"]
    rate = None if rate_text in (None, "inf") else float(rate_text)
    if (m["c"] is not None and int(m["c"]) < 1) or (rate is not None and not (math.isfinite(rate) and rate > 0)):
        raise SettingsError(f"the metric {name!r} names no load point (a concurrency of 0, a rate of 0 or beyond a float)",
                            hint=f"write {POINT_METRIC_FORM}")
    point = LoadPoint(int(m["c"]) if m["c"] is not None else None, rate)
    return PointMetric(m["workload"], point, f"{m['workload']}.{m['metric']}")


def at_point(options: Sequence[str], point: PointMetric) -> list[str]:
    """``options`` with the point's own added. Options that put a run elsewhere are refused (one
    run measures one load): a concurrency or rate other than the point's, or one the point leaves
    at the workload's default (``c16`` has no rate: every request at once)."""
    given = {o.partition("=")[0] for o in options}
    out = [*options, *(w for w in point.options() if w.partition("=")[0] not in given)]
    if not point.holds(out):
        keys = {f"{point.workload}.{k}" for k in (CONCURRENCY_OPTION, RATE_OPTION)}
        clash = [o for o in options if o.partition("=")[0] in keys]
        c, r = point.point.concurrency, point.point.rate
        at = (f"{point.workload}.{CONCURRENCY_OPTION}={c}" if c is not None else "the workload's default concurrency") \
            + (f" and {point.workload}.{RATE_OPTION}={format_value(r)}" if r is not None else ", every request at once")
        raise SettingsError(f"{point.name} is measured at {at}, but the options give {', '.join(clash)}",
                            evidence={"options": " ".join(options)},
                            hint="leave the concurrency and the rate out of --opt (the metric's point sets them), "
                                 "or name the point those options measure")
    return out


def _number(text: str) -> float | None:
    try:
        return float(text)
    except ValueError:
        return None


@dataclass(frozen=True)
class Slo:
    """A latency target: a point holds it when its ``metric`` (mean over runs) is at most ``bound``
    seconds; a request is within it when its own latency is."""

    metric: str
    bound: float

    def text(self) -> str:
        """``latency_p95_s <= 2 s``."""
        return f"{self.metric} <= {format_value(self.bound)} s"


def parse_concurrencies(text: str) -> list[int]:
    """``1,2,4`` -> [1, 2, 4]: whole numbers of at least 1, each once."""
    values: list[int] = []
    for word in _words(text, "--concurrency", "1,2,4,8,16"):
        if not word.isdigit() or int(word) < 1:
            raise SettingsError(f"--concurrency {text!r}: {word!r} is not a whole number of at least 1",
                                hint="write --concurrency 1,2,4,8,16")
        values.append(int(word))
    return _distinct(values, "--concurrency", text)


def parse_rates(text: str) -> list[float | None]:
    """``1,2.5,inf`` -> [1.0, 2.5, None]: requests per second above 0, or ``inf`` (all at once)."""
    values: list[float | None] = []
    for word in _words(text, "--request-rate", "1,2,4,inf"):
        if word.lower() in INF_WORDS:
            values.append(None)
            continue
        try:
            rate = float(word)
        except ValueError:
            rate = math.nan
        if not (math.isfinite(rate) and rate > 0):
            raise SettingsError(f"--request-rate {text!r}: {word!r} is not a rate above 0 or inf",
                                hint="write --request-rate 1,2,4,inf (requests per second; inf sends all at once)")
        values.append(rate)
    return _distinct(values, "--request-rate", text)


def parse_slo(text: str) -> Slo:
    """``latency_p95_s=2.0`` -> Slo; the metric one of :data:`SLO_METRICS`, the bound above 0."""
    key, sep, value = text.partition("=")
    key = key.strip().rsplit(".", 1)[-1]  # seedtts.latency_p95_s is latency_p95_s
    try:
        bound = float(value)
    except ValueError:
        bound = math.nan
    if not sep or key not in SLO_METRICS or not (math.isfinite(bound) and bound > 0):
        raise SettingsError(f"cannot read --slo {text!r}", evidence={"metrics": ", ".join(SLO_METRICS)},
                            hint="write --slo latency_p95_s=2.0 (seconds, above 0)")
    return Slo(key, bound)


def load_points(concurrencies: Sequence[int], rates: Sequence[float | None]) -> list[LoadPoint]:
    """Every combination, lightest load first (fewer in flight, then slower arrivals; inf last)."""
    if not concurrencies and not rates:
        raise SettingsError("a sweep needs load points", hint="give --concurrency 1,2,4 and/or --request-rate 1,2,inf")
    cs: Sequence[int | None] = concurrencies or [None]
    rs: Sequence[float | None] = rates or [None]
    points = [LoadPoint(c, r) for c in cs for r in rs]
    return sorted(points, key=lambda p: (p.concurrency or 0, math.inf if p.rate is None else p.rate))


def _words(text: str, flag: str, example: str) -> list[str]:
    words = [w.strip() for w in str(text).split(",")]
    if not any(words) or not all(words):
        raise SettingsError(f"{flag} {text!r} names no value or an empty one", hint=f"write {flag} {example}")
    return words


def _distinct(values: list, flag: str, text: str) -> list:
    if len(set(values)) != len(values):
        raise SettingsError(f"{flag} {text!r} names a value twice", hint="name each load point once")
    return values

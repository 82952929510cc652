"""The history's typed records: what ``invoke history`` computes and what ``invoke publish`` and
the pull-request summary render. The one contract between the store/analysis side and the
readers; it serialises to JSON (``History.to_json``) so a site can be built from a saved history.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import asdict, dataclass, field
from typing import Any, Literal

FORMAT = 1
Direction = Literal["higher", "lower", "context"]
StepKind = Literal["worse", "better", "changed"]  # "changed": a context metric, no better side
# Where a series' commit order comes from: the checkout's first-parent line, the first-parent
# lines stored when its campaigns were indexed, or nowhere (then no change point is drawn).
OrderSource = Literal["checkout", "stored", "unknown"]
ORDER_UNKNOWN = ("the commits' order is unknown (their stored first-parent lines do not link them): no change point "
                 "is drawn; pass --checkout PATH (the measured repository), or `invoke history --rebuild` where "
                 "the campaigns' checkouts still exist")


@dataclass(frozen=True)
class Point:
    """One measured commit of one series: the campaign's runs of that metric and their mean with
    its interval (confidence level in ``History.confidence``)."""

    revision: str  # full commit id
    short: str  # short id as shown
    commit_time: str  # ISO 8601, the commit's committer time
    subject: str  # the commit's first line
    campaign: str  # campaign file, relative to the results root
    report: str | None  # the campaign's report.md, relative to the results root, if one exists
    values: tuple[float, ...]  # one per measured run
    mean: float
    low: float
    high: float
    environment: Mapping[str, str] = field(default_factory=dict)  # gpu model, driver, packages ...


@dataclass(frozen=True)
class ChangePoint:
    """A step in a series: between ``last_before`` and ``first_after`` (both measured), with the
    commits between them on the first-parent line that were not measured (``untested``)."""

    last_before: str  # revision
    first_after: str  # revision
    untested: tuple[str, ...]  # revisions strictly between, first-parent order
    before_mean: float
    after_mean: float
    step: float  # relative change after/before - 1
    step_low: float  # interval of the relative change
    step_high: float
    kind: StepKind
    environment_changed: Mapping[str, tuple[str, str]] = field(default_factory=dict)  # fact: (before, after)
    bisected: str | None = None  # the commit bisect named, once ``history --bisect`` ran

    @property
    def from_environment(self) -> bool:
        """The environment changed at this step: a new baseline, not (only) the code."""
        return bool(self.environment_changed)


@dataclass(frozen=True)
class Series:
    """One metric of one workload on one target, over commits in first-parent order."""

    workload: str
    metric: str
    target: str
    direction: Direction
    points: tuple[Point, ...]
    change_points: tuple[ChangePoint, ...] = ()
    order: OrderSource = "checkout"  # "unknown": points in commit-time order, no change points
    outputs_changed: tuple[str, ...] = ()  # quality series: commits whose outputs changed, sample by sample


@dataclass(frozen=True)
class History:
    """Every series a query selected."""

    series: tuple[Series, ...]
    confidence: float = 0.95
    detector: str = ""  # the change-point method and its parameters, as shown

    def to_json(self) -> dict[str, Any]:
        """A plain, versioned JSON form (``format``)."""
        return {"format": FORMAT, **asdict(self)}

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> History:
        """The inverse of :meth:`to_json`; a different ``format`` is a ValueError naming it."""
        if data.get("format") != FORMAT:
            raise ValueError(f"history format {data.get('format')!r}, this omnibench reads {FORMAT}")

        def point(p: Mapping[str, Any]) -> Point:
            return Point(**{**p, "values": tuple(p["values"]), "environment": dict(p["environment"])})

        def change(c: Mapping[str, Any]) -> ChangePoint:
            return ChangePoint(**{**c, "untested": tuple(c["untested"]),
                                  "environment_changed": {k: (v[0], v[1]) for k, v in c["environment_changed"].items()}})

        return cls(series=tuple(Series(**{**s, "points": tuple(point(p) for p in s["points"]),
                                          "change_points": tuple(change(c) for c in s["change_points"]),
                                          "outputs_changed": tuple(s.get("outputs_changed", ()))})
                                for s in data["series"]),
                   confidence=data["confidence"], detector=data["detector"])

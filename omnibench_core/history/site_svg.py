"""One series drawn as an inline SVG, server-side: no JavaScript, so the page draws offline from
disk in any browser and there is no bundled library to keep up to date. Each commit's mean is a
dot linked to its campaign's report, its interval a bar (and the band joins them), the runs'
values small dots, each change point a dashed line between the two measured commits it lies
between; hovering a dot shows its commit, numbers and environment (SVG ``<title>``)."""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from html import escape

from ..units import unit_of
from .series import ChangePoint, Point, Series

WIDTH, HEIGHT = 960, 360
LEFT, RIGHT, TOP, BOTTOM = 80, 70, 34, 70  # margins: y labels, the last commit label, change labels, commit labels
PAD = 24  # between the y axis and the first commit
KIND_COLOUR = {"worse": "#c62828", "better": "#2e7d32", "changed": "#6d6d6d"}
MAX_X_LABELS = 24  # past this many commits only every k-th is labelled


def num(value: float) -> str:
    """A number as the site shows it: 4 significant digits."""
    return f"{value:.4g}"


def _ticks(low: float, high: float, count: int = 5) -> list[float]:
    """Round tick values covering ``low..high`` (1, 2 or 5 times a power of ten apart)."""
    raw = (high - low) / max(count, 1)
    power = 10 ** math.floor(math.log10(raw))
    step = next(m * power for m in (1, 2, 5, 10) if m * power >= raw)
    first = math.ceil(low / step) * step
    return [first + i * step for i in range(int((high - first) / step) + 1)]


def _y_range(points: Sequence[Point]) -> tuple[float, float]:
    values = [v for p in points for v in (p.low, p.high, p.mean, *p.values) if math.isfinite(v)]
    low, high = (min(values), max(values)) if values else (0.0, 1.0)
    pad = (high - low) * 0.08 or abs(high) * 0.05 or 1.0  # a flat series still gets a visible axis
    return low - pad, high + pad


def tooltip(point: Point, confidence: float, facts: Sequence[str]) -> str:
    """What hovering a commit's dot says: commit, subject, mean with interval, runs, environment."""
    lines = [f"{point.short} {point.subject}", point.commit_time,
             f"mean {num(point.mean)} [{num(point.low)}, {num(point.high)}] ({confidence:.0%})",
             "runs: " + ", ".join(num(v) for v in point.values)]
    lines += [f"{k}: {point.environment[k]}" for k in facts if k in point.environment]
    return "\n".join(lines)


def varying_facts(points: Sequence[Point]) -> list[str]:
    """The environment facts whose value is not the same at every point."""
    keys = sorted({k for p in points for k in p.environment})
    return [k for k in keys if len({p.environment.get(k) for p in points}) > 1]


def tooltip_facts(points: Sequence[Point]) -> list[str]:
    """What a tooltip names: every fact when there are few, else those that vary (not every
    package version)."""
    keys = sorted({k for p in points for k in p.environment})
    return keys if len(keys) <= 8 else varying_facts(points)


def plot(series: Series, *, confidence: float, link: Callable[[Point], str | None]) -> str:
    """The SVG of ``series``; ``link(point)`` is the href of its report (None: not linked)."""
    points = series.points
    n = len(points)
    y_low, y_high = _y_range(points)
    inner_w, inner_h = WIDTH - LEFT - RIGHT, HEIGHT - TOP - BOTTOM

    def x(i: float) -> float:
        return LEFT + PAD + ((inner_w - PAD) / 2 if n == 1 else (inner_w - PAD) * i / (n - 1))

    def y(v: float) -> float:
        return TOP + inner_h * (1 - (v - y_low) / (y_high - y_low))

    out = [f'<svg class="series-plot" xmlns="http://www.w3.org/2000/svg" viewBox="0 0 {WIDTH} {HEIGHT}" '
           f'width="{WIDTH}" height="{HEIGHT}" role="img" data-points="{n}" '
           f'data-change-points="{len(series.change_points)}">',
           f"<title>{escape(series.metric)} ({escape(series.target)}), {escape(series.direction)} is better</title>"]
    for tick in _ticks(y_low, y_high):  # y axis: grid lines and labels
        out.append(f'<line class="grid" x1="{LEFT}" x2="{WIDTH - RIGHT}" y1="{y(tick):.1f}" y2="{y(tick):.1f}"/>'
                   f'<text class="ylabel" x="{LEFT - 6}" y="{y(tick) + 4:.1f}" text-anchor="end">{num(tick)}</text>')
    out.append(f'<line class="axis" x1="{LEFT}" x2="{LEFT}" y1="{TOP}" y2="{TOP + inner_h}"/>')
    # the unit, and that the axis is zoomed to the series (a step between commits must show)
    unit = unit_of(series.metric) + (" (axis not from zero)" if y_low > 0 else "")
    out.append(f'<text class="yunit" transform="translate(14,{TOP + inner_h / 2:.1f}) rotate(-90)" '
               f'text-anchor="middle">{escape(unit)}</text>')
    if n > 1:  # the band of the intervals, commit to commit
        upper = " ".join(f"{x(i):.1f},{y(p.high):.1f}" for i, p in enumerate(points))
        lower = " ".join(f"{x(i):.1f},{y(p.low):.1f}" for i, p in reversed(list(enumerate(points))))
        out.append(f'<polygon class="band" points="{upper} {lower}"/>')
        out.append('<polyline class="line" points="'
                   + " ".join(f"{x(i):.1f},{y(p.mean):.1f}" for i, p in enumerate(points)) + '"/>')
    out += _change_marks(series.change_points, {p.revision: i for i, p in enumerate(points)}, x, inner_h)
    every = max(1, math.ceil(n / MAX_X_LABELS))
    facts = tooltip_facts(points)
    for i, p in enumerate(points):
        cx = x(i)
        out.append(f'<line class="interval" x1="{cx:.1f}" x2="{cx:.1f}" y1="{y(p.low):.1f}" y2="{y(p.high):.1f}"/>')
        out += [f'<line class="cap" x1="{cx - 5:.1f}" x2="{cx + 5:.1f}" y1="{y(v):.1f}" y2="{y(v):.1f}"/>'
                for v in (p.low, p.high)]
        out += [f'<circle class="run" cx="{cx + 9:.1f}" cy="{y(v):.1f}" r="2"/>' for v in p.values if math.isfinite(v)]
        dot = (f'<circle class="point" cx="{cx:.1f}" cy="{y(p.mean):.1f}" r="5" data-revision="{escape(p.revision)}">'
               f"<title>{escape(tooltip(p, confidence, facts))}</title></circle>")
        href = link(p)
        out.append(f'<a class="point-link" href="{escape(href)}">{dot}</a>' if href else dot)
        if i % every == 0 or i == n - 1:
            out.append(f'<text class="xlabel" transform="translate({cx:.1f},{TOP + inner_h + 12}) rotate(40)">'
                       f"{escape(p.short)}</text>")
    out.append("</svg>")
    return "\n".join(out)


def _change_marks(changes: Sequence[ChangePoint], index: Mapping[str, int], x: Callable[[float], float],
                  inner_h: float) -> list[str]:
    """A dashed line midway between the two measured commits of each change point, labelled with
    its step; an environment step is labelled ``env`` too."""
    out = []
    for c in changes:
        if c.last_before not in index or c.first_after not in index:
            continue  # a change point of commits this series does not show
        mid = (x(index[c.last_before]) + x(index[c.first_after])) / 2
        colour = KIND_COLOUR.get(c.kind, KIND_COLOUR["changed"])
        label = f"{c.step:+.1%}" + (" env" if c.from_environment else "")
        out.append(f'<g class="change-point {escape(c.kind)}"><line x1="{mid:.1f}" x2="{mid:.1f}" y1="{TOP - 6}" '
                   f'y2="{TOP + inner_h}" stroke="{colour}"/><text x="{mid:.1f}" y="{TOP - 12}" text-anchor="middle" '
                   f'fill="{colour}">{escape(label)}</text><title>{escape(c.kind)}: {escape(label)} '
                   f"[{c.step_low:+.1%}, {c.step_high:+.1%}]</title></g>")
    return out

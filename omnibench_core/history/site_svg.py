"""One series drawn as an inline SVG, server-side: no JavaScript, so the page draws offline from
disk in any browser and there is no bundled library to keep up to date. Each commit's mean is a
dot linked to its campaign's report, its interval a bar (and the band joins them), the runs'
values small dots, each change point a dashed line between the two measured commits it lies
between; hovering a dot shows its commit, numbers and environment (SVG ``<title>``)."""

from __future__ import annotations

import math
from collections.abc import Callable, Collection, Mapping, Sequence
from html import escape

from ..sweep.curve import PointResult
from ..units import unit_of
from .series import ChangePoint, Point, Series

WIDTH, HEIGHT = 960, 360
LEFT, RIGHT, TOP, BOTTOM = 80, 70, 34, 70  # margins: y labels, the last commit label, change labels, commit labels
PAD = 24  # between the y axis and the first commit
KIND_COLOUR = {"worse": "#c62828", "better": "#2e7d32", "changed": "#6d6d6d"}
CURVE_COLOURS = ("#1565c0", "#ef6c00", "#2e7d32", "#6a1b9a", "#00838f", "#c62828")  # one a sweep's curve
VERDICT_COLOUR = {"worse": "#c62828", "better": "#2e7d32", "equivalent": "#1565c0", "inconclusive": "#6d6d6d"}
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


def sweep_plot(curves: Sequence[Sequence[PointResult]], *, knees: Collection[str], front: Collection[str],
               target: tuple[str, float] | None = None) -> str:
    """A sweep's SVG: mean latency against throughput, one line per curve (a request rate when both
    vary), each point's error bars one standard deviation over its runs each way (throughput and
    mean latency), p95 latency as a dashed line of triangles, each point labelled in words
    (``4 concurrent``), the knees (labels, from the sweep's record) ringed, points off the Pareto
    front hollow, the target a dotted line; both axes from zero."""
    drawn = [[r for r in c if r.throughput_qps is not None and r.latency_mean_s is not None] for c in curves]
    every = [r for c in drawn for r in c]
    x_high = max([(r.throughput_qps or 0.0) + (r.throughput_sd or 0.0) for r in every] or [1.0]) * 1.12 or 1.0
    y_values = [v for r in every for v in ((r.latency_mean_s or 0.0) + (r.latency_sd or 0.0), r.latency_p95_s or 0.0)]
    y_high = max([*y_values, target[1] if target else 0.0] or [1.0]) * 1.1 or 1.0
    inner_w, inner_h = WIDTH - LEFT - RIGHT, HEIGHT - TOP - BOTTOM

    def x(v: float) -> float:
        return LEFT + inner_w * v / x_high

    def y(v: float) -> float:
        return TOP + inner_h * (1 - v / y_high)

    out = [f'<svg class="sweep-plot" xmlns="http://www.w3.org/2000/svg" viewBox="0 0 {WIDTH} {HEIGHT}" '
           f'width="{WIDTH}" height="{HEIGHT}" role="img" data-points="{len(every)}" data-curves="{len(drawn)}">',
           "<title>latency against throughput</title>"]
    for tick in _ticks(0.0, y_high):
        out.append(f'<line class="grid" x1="{LEFT}" x2="{WIDTH - RIGHT}" y1="{y(tick):.1f}" y2="{y(tick):.1f}"/>'
                   f'<text class="ylabel" x="{LEFT - 6}" y="{y(tick) + 4:.1f}" text-anchor="end">{num(tick)}</text>')
    for tick in _ticks(0.0, x_high):
        out.append(f'<text class="xtick" x="{x(tick):.1f}" y="{TOP + inner_h + 16}" text-anchor="middle">{num(tick)}</text>')
    out += [f'<line class="axis" x1="{LEFT}" x2="{LEFT}" y1="{TOP}" y2="{TOP + inner_h}"/>',
            f'<line class="axis" x1="{LEFT}" x2="{WIDTH - RIGHT}" y1="{TOP + inner_h}" y2="{TOP + inner_h}"/>',
            f'<text class="yunit" transform="translate(14,{TOP + inner_h / 2:.1f}) rotate(-90)" '
            f'text-anchor="middle">latency (seconds)</text>',
            f'<text class="xunit" x="{LEFT + inner_w / 2:.1f}" y="{HEIGHT - 16}" text-anchor="middle">'
            "throughput (requests/s)</text>"]
    if target is not None:
        out.append(f'<g class="target"><line x1="{LEFT}" x2="{WIDTH - RIGHT}" y1="{y(target[1]):.1f}" '
                   f'y2="{y(target[1]):.1f}"/><text x="{LEFT + 6}" y="{y(target[1]) - 4:.1f}">'
                   f"target: {escape(target[0])}</text></g>")
    for i, curve in enumerate(drawn):
        colour = CURVE_COLOURS[i % len(CURVE_COLOURS)]
        out.append(f'<g class="curve" stroke="{colour}" fill="{colour}">')
        if len(curve) > 1:
            out.append('<polyline class="mean-line" points="' + " ".join(
                f"{x(r.throughput_qps or 0.0):.1f},{y(r.latency_mean_s or 0.0):.1f}" for r in curve) + '"/>')
        p95 = [r for r in curve if r.latency_p95_s is not None]
        if len(p95) > 1:
            out.append('<polyline class="p95-line" points="' + " ".join(
                f"{x(r.throughput_qps or 0.0):.1f},{y(r.latency_p95_s or 0.0):.1f}" for r in p95) + '"/>')
        out += [f'<path class="p95" d="M{x(r.throughput_qps or 0.0):.1f},{y(r.latency_p95_s or 0.0) - 5:.1f} l4,7 h-8 z">'
                f"<title>{escape(r.point.words)}: p95 latency {num(r.latency_p95_s or 0.0)} s</title></path>" for r in p95]
        for r in curve:
            out += _sweep_point(r, x, y, on_front=r.point.label in front, knee=r.point.label in knees)
        out.append("</g>")
    out.append(f'<text class="legend" x="{WIDTH - RIGHT}" y="{TOP - 14}" text-anchor="end">filled: on the Pareto front; '
               "hollow: dominated; ring: the knee; bars: ±1 sd over the runs; triangles: p95 latency</text>")
    out.append("</svg>")
    return "\n".join(out)


def _sweep_point(r: PointResult, x: Callable[[float], float], y: Callable[[float], float], *, on_front: bool,
                 knee: bool) -> list[str]:
    """One point: its error bars (where the runs' spread is known), its dot, its ring at the knee,
    its label in words and what hovering it says."""
    tx, lat = r.throughput_qps or 0.0, r.latency_mean_s or 0.0
    cx, cy = x(tx), y(lat)
    out = []
    if r.throughput_sd:
        out.append(f'<line class="xbar" x1="{x(tx - r.throughput_sd):.1f}" x2="{x(tx + r.throughput_sd):.1f}" '
                   f'y1="{cy:.1f}" y2="{cy:.1f}"/>')
    if r.latency_sd:
        out.append(f'<line class="ybar" x1="{cx:.1f}" x2="{cx:.1f}" y1="{y(lat - r.latency_sd):.1f}" '
                   f'y2="{y(lat + r.latency_sd):.1f}"/>')
        out += [f'<line class="cap" x1="{cx - 4:.1f}" x2="{cx + 4:.1f}" y1="{y(v):.1f}" y2="{y(v):.1f}"/>'
                for v in (lat - r.latency_sd, lat + r.latency_sd)]
    sd = lambda v: f" ± {num(v)}" if v else ""  # noqa: E731 (a one-word helper)
    tip = (f"{r.point.words} ({r.campaign}, {r.runs} runs)\nthroughput {num(tx)}{sd(r.throughput_sd)} req/s\n"
           f"mean latency {num(lat)}{sd(r.latency_sd)} s" + (f"\np95 latency {num(r.latency_p95_s)} s"
                                                             if r.latency_p95_s is not None else ""))
    fill = "" if on_front else ' fill="#fff"'
    out.append(f'<circle class="sweep-point{" front" if on_front else ""}" cx="{cx:.1f}" cy="{cy:.1f}" r="5"{fill} '
               f'data-label="{escape(r.point.label)}"><title>{escape(tip)}</title></circle>')
    if knee:
        out.append(f'<circle class="knee" cx="{cx:.1f}" cy="{cy:.1f}" r="11" fill="none" data-label="{escape(r.point.label)}"/>')
    out.append(f'<text class="point-words" x="{cx + 7:.1f}" y="{cy + 15:.1f}" stroke="none">{escape(r.point.words)}</text>')
    return out


def ab_plot(rows: Sequence[tuple[str, float, float, float, str]], *, relative: bool) -> str:
    """An A/B's verdicts as an SVG: per metric (``(metric, change, low, high, verdict)``, as the
    experiment's result holds them) B's change against A as a dot and its interval as a bar, 0 (no
    change) a line, coloured by the verdict; ``relative``: changes are fractions of A."""
    row_h, left, right = 26, 300, 60
    height = TOP + row_h * max(len(rows), 1) + 40
    ends = [v for _, c, lo, hi, _ in rows for v in (c, lo, hi) if math.isfinite(v)]
    reach = max([abs(v) for v in ends] or [0.01]) * 1.15 or 0.01

    def x(v: float) -> float:
        return left + (WIDTH - left - right) * (v + reach) / (2 * reach)

    def label(v: float) -> str:
        return f"{v:+.1%}" if relative else num(v)

    out = [f'<svg class="ab-plot" xmlns="http://www.w3.org/2000/svg" viewBox="0 0 {WIDTH} {height}" width="{WIDTH}" '
           f'height="{height}" role="img" data-rows="{len(rows)}">',
           "<title>B against A: each metric's change and its interval</title>",
           f'<line class="axis zero" x1="{x(0):.1f}" x2="{x(0):.1f}" y1="{TOP - 8}" y2="{height - 34}"/>']
    for tick in (-reach / 1.15, 0.0, reach / 1.15):
        out.append(f'<text class="xtick" x="{x(tick):.1f}" y="{height - 18}" text-anchor="middle">{label(tick)}</text>')
    out.append(f'<text class="xunit" x="{x(0):.1f}" y="{height - 4}" text-anchor="middle">'
               f"{'B - A, as a fraction of A' if relative else 'B - A'}</text>")
    for i, (metric, change, low, high, word) in enumerate(rows):
        cy = TOP + row_h * i + row_h / 2
        colour = VERDICT_COLOUR.get(word, KIND_COLOUR["changed"])
        out.append(f'<g class="verdict {escape(word)}" stroke="{colour}" fill="{colour}">'
                   f'<text class="metric" x="{left - 10}" y="{cy + 4:.1f}" text-anchor="end" stroke="none">'
                   f"{escape(metric)}</text>")
        if math.isfinite(low) and math.isfinite(high):
            out.append(f'<line class="interval" x1="{x(low):.1f}" x2="{x(high):.1f}" y1="{cy:.1f}" y2="{cy:.1f}"/>')
        if math.isfinite(change):
            out.append(f'<circle class="change" cx="{x(change):.1f}" cy="{cy:.1f}" r="5"><title>{escape(metric)}: '
                       f"{escape(word)}, {label(change)} [{label(low)}, {label(high)}]</title></circle>")
        out.append(f'<text class="word" x="{WIDTH - right + 8}" y="{cy + 4:.1f}" stroke="none">{escape(word)}</text>')
        out.append("</g>")
    out.append("</svg>")
    return "\n".join(out)

"""The sweep's plot: latency (mean and p95, seconds) against throughput (requests per second),
one line per curve and per sweep, each point labelled with its load in words (``4 concurrent``)
and its error bars one standard deviation over its runs, the knee ringed, points off
the Pareto front hollow, the target as a line. Both axes start at zero; 800 x 500 pixels.

matplotlib is the optional ``plots`` extra, as for reports (:mod:`..campaign.plots`)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from ..campaign.plots import _pyplot, _save
from .curve import PointResult, curves, knee, pareto
from .points import Slo

SIZE_IN, DPI = (8.0, 5.0), 100  # 800 x 500 pixels: reads on a laptop screen without zooming


@dataclass(frozen=True)
class Series:
    """One sweep on the plot: its name in the legend and its points."""

    name: str
    results: tuple[PointResult, ...]


def curve_plot(path: Path, title: str, series: Sequence[Series], slo: Slo | None = None) -> Path:
    """Draw the plot to ``path`` (a PNG)."""
    plt = _pyplot()
    fig, ax = plt.subplots(figsize=SIZE_IN)
    colors = iter(f"C{i}" for i in range(10))
    for s in series:
        front = {id(r) for r in pareto(s.results)}
        for curve in curves(s.results):
            drawn = [r for r in curve if r.throughput_qps is not None and r.latency_mean_s is not None]
            if not drawn:
                continue
            color = next(colors, "k")
            rate = curve[0].point.rate
            parts = [s.name] if len(series) > 1 else []  # one sweep: its name is in the title
            parts += [_rate_text(rate)] if len(curves(s.results)) > 1 else []
            name = ", ".join(parts)
            prefix = f"{name}: " if name else ""
            xs = [r.throughput_qps for r in drawn]
            ax.plot(xs, [r.latency_mean_s for r in drawn], "-", color=color, label=f"{prefix}mean latency")
            ax.scatter(xs, [r.latency_mean_s for r in drawn], s=40, zorder=3, color=color,
                       facecolors=[color if id(r) in front else "white" for r in drawn])
            # error bars: one standard deviation over the point's runs, each way it was measured
            ax.errorbar(xs, [r.latency_mean_s for r in drawn], xerr=[r.throughput_sd or 0.0 for r in drawn],
                        yerr=[r.latency_sd or 0.0 for r in drawn], fmt="none", ecolor=color, elinewidth=1,
                        capsize=3, alpha=0.8, zorder=2)
            p95 = [(r.throughput_qps, r.latency_p95_s) for r in drawn if r.latency_p95_s is not None]
            if p95:
                ax.plot(*zip(*p95, strict=True), "--", marker="^", color=color, alpha=0.7, label=f"{prefix}p95 latency")
            for r in drawn:
                ax.annotate(r.point.words, (r.throughput_qps, r.latency_mean_s), textcoords="offset points",
                            xytext=(5, -12), fontsize=8, color=color)
            k = knee(curve)
            if k is not None and k.throughput_qps is not None and k.latency_mean_s is not None:
                ax.scatter([k.throughput_qps], [k.latency_mean_s], s=260, facecolors="none", edgecolors=color,
                           linewidths=1.5, zorder=4, label=f"{prefix}knee at {k.point.words}")
    if slo is not None:
        ax.axhline(slo.bound, color="C3", linestyle=":", label=f"target: {slo.text()}")
    ax.set_xlim(left=0)
    ax.set_xlim(right=ax.get_xlim()[1] * 1.08)  # room for the last point's label
    ax.set_ylim(bottom=0)
    ax.set_xlabel("throughput (requests/s)")
    ax.set_ylabel("latency (s)")
    ax.set_title(title, fontsize=10)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=7, loc="upper left")
    ax.text(0.99, 0.01, "filled: on the Pareto front; hollow: dominated (another point has more throughput at "
            "less latency); bars: ±1 sd over the runs", transform=ax.transAxes, fontsize=7, ha="right", va="bottom", color="0.4")
    return _save(plt, fig, path, dpi=DPI)


def _rate_text(rate: float | None) -> str:
    return "all at once" if rate is None else f"{rate:g} req/s"

"""PNG plots with matplotlib, an optional extra (``pip install -e '.[plots]'``). Without it the
callers say how to get plots; nothing else depends on them."""

from __future__ import annotations

import math
from collections.abc import Sequence
from pathlib import Path

from ..units import unit_of

HOW_TO_GET = "plots need matplotlib: pip install -e '.[plots]' (or pip install matplotlib), then report again"


def available() -> bool:
    """Whether matplotlib can be imported."""
    try:
        import matplotlib  # noqa: F401
    except ImportError:
        return False
    return True


def _pyplot():
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def _save(plt, fig, path: Path, dpi: int = 90) -> Path:
    """Lay the figure out, write it as a PNG and free it."""
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=dpi)
    plt.close(fig)
    return path


def _plain_numbers(ax) -> None:
    """Tick labels as the values themselves: no offset (``+9.858e1``) and no scientific factor."""
    ax.ticklabel_format(axis="y", useOffset=False, style="plain")


def _better(direction: str) -> str:
    return {"higher": " (higher is better)", "lower": " (lower is better)"}.get(direction, "")


PLOT_SIZE_IN, PLOT_DPI = (8.0, 4.5), 90  # 720 x 405 pixels: reads on a laptop screen


def constant(values: Sequence[float]) -> bool:
    """Whether every value is the same: a plot of it says nothing the table does not."""
    return len(set(values)) <= 1


def _from_zero(ax, values: Sequence[float], unit: str) -> None:
    """The y axis from zero when every value is >= 0, so a change of 0.1 % looks like one; the
    label says when it cannot start there."""
    if values and min(values) >= 0:
        ax.set_ylim(bottom=0, top=max(values) * 1.1 or 1.0)
        ax.set_ylabel(unit, fontsize=8)
    else:
        ax.set_ylabel(f"{unit} (axis not from zero: values below it)", fontsize=8)


def metric_plot(path: Path, name: str, values: dict[str, float], mean: float, sd: float | None, direction: str) -> Path:
    """One metric's value per run, with its mean and a band of one sample sd; the axis in the
    metric's unit, from zero."""
    plt = _pyplot()
    fig, ax = plt.subplots(figsize=PLOT_SIZE_IN)
    runs = list(values)
    ax.plot(runs, [values[r] for r in runs], "o", color="C0", label="run")
    ax.axhline(mean, color="C1", label="mean")
    if sd:
        ax.axhspan(mean - sd, mean + sd, color="C1", alpha=0.2, label="± 1 sd")
    ax.set_title(f"{name}{_better(direction)}", fontsize=10)
    ax.set_xlabel("measured run", fontsize=8)
    _from_zero(ax, [*values.values(), mean + (sd or 0.0)], unit_of(name))
    ax.legend(fontsize=8)
    _plain_numbers(ax)
    return _save(plt, fig, path, dpi=PLOT_DPI)


CompareRow = tuple[str, list[float], list[float], str]  # metric, A's values, B's values, verdict
SIDES = ("A: base", "B: candidate")  # the x labels of every panel


def constant_rows(rows: Sequence[CompareRow]) -> list[str]:
    """The metrics with one value in every run of both sides (0 failed requests, 8 of 8 matched):
    a panel of them says nothing the table does not."""
    return [name for name, va, vb, _ in rows if constant([*va, *vb])]


def compare_figure(rows: Sequence[CompareRow], a: str, b: str):
    """The figure of :func:`compare_plot` (without the constant metrics), not yet saved."""
    plt = _pyplot()
    same = set(constant_rows(rows))
    shown = [r for r in rows if r[0] not in same]
    cols = min(4, max(1, len(shown)))
    nrows = math.ceil(max(1, len(shown)) / cols)
    fig, axes = plt.subplots(nrows, cols, figsize=(cols * 3.6, nrows * 3.0 + 0.6), squeeze=False)
    fig.suptitle(f"{SIDES[0]}: {a}\n{SIDES[1]}: {b}", fontsize=7)
    for ax, (name, va, vb, verdict) in zip(axes.flat, shown, strict=False):
        ax.plot([0] * len(va), va, "o", color="C0")
        ax.plot([1] * len(vb), vb, "o", color="C3")
        for x, vals, color in ((0, va, "C0"), (1, vb, "C3")):
            if vals:
                m = sum(vals) / len(vals)
                ax.plot([x - 0.2, x + 0.2], [m, m], color=color)
        ax.set_xticks([0, 1], list(SIDES), fontsize=6)
        ax.set_xlim(-0.5, 1.5)
        ax.set_title(f"{name}\n{verdict}", fontsize=8)
        ax.tick_params(axis="y", labelsize=7)
        _from_zero(ax, [*va, *vb], unit_of(name))
        _plain_numbers(ax)
    for ax in list(axes.flat)[len(shown):]:
        ax.axis("off")
    return fig


def compare_plot(path: Path, rows: Sequence[CompareRow], a: str, b: str) -> Path:
    """Each metric's runs of A (the base) and B (the candidate) side by side, with each side's
    mean; the title carries the verdict; each axis in the metric's unit, from zero. Metrics with
    one value throughout on both sides are left out."""
    return _save(_pyplot(), compare_figure(rows, a, b), path, dpi=PLOT_DPI)


def telemetry_plot(path: Path, csv_path: Path) -> Path:
    """GPU utilisation and power over a server's life, one line per GPU, from its telemetry CSV."""
    from ..telemetry.summary import read_samples

    rows = read_samples(csv_path)
    plt = _pyplot()
    fig, (util, power) = plt.subplots(2, 1, figsize=(6, 4), sharex=True)
    t0 = min((r["time_unix"] for r in rows), default=0.0)
    for gpu in sorted({r["gpu"] for r in rows}):
        mine = [r for r in rows if r["gpu"] == gpu]
        t = [r["time_unix"] - t0 for r in mine]
        util.plot(t, [r.get("gpu_util_pct") for r in mine], label=f"GPU {gpu}")
        power.plot(t, [r.get("power_w") for r in mine], label=f"GPU {gpu}")
    util.set_ylabel("utilisation %")
    power.set_ylabel("power W")
    power.set_xlabel("seconds since the server started")
    util.set_title(f"GPU telemetry: {csv_path.stem}", fontsize=9)
    util.legend(fontsize=7)
    return _save(plt, fig, path)


def distribution_plot(path: Path, name: str, per_run: dict[str, list[float]], direction: str) -> Path:
    """One per-request quantity's distribution in each run (a box of the quartiles, whiskers to
    the 5th and 95th percentiles, every value as a dot): first-audio latency, chunk gaps."""
    plt = _pyplot()
    runs = list(per_run)
    fig, ax = plt.subplots(figsize=(max(4.5, 1.1 * len(runs) + 2), 3))
    ax.boxplot([per_run[r] for r in runs], whis=(5, 95), showfliers=False)
    for i, run in enumerate(runs, start=1):
        values = per_run[run]
        spread = [i + 0.25 * ((k * 0.618) % 1 - 0.5) for k in range(len(values))]  # fixed jitter: same plot twice
        ax.plot(spread, values, ".", color="C0", alpha=0.35, markersize=3)
    ax.set_xticks(range(1, len(runs) + 1), [f"{r}\n(n={len(per_run[r])})" for r in runs], fontsize=7)
    ax.set_title(f"{name} per request, by run{_better(direction)}", fontsize=9)
    _from_zero(ax, [v for values in per_run.values() for v in values], unit_of(name))
    _plain_numbers(ax)
    return _save(plt, fig, path)

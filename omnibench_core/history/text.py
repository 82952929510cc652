"""``invoke history``'s printout: per series the points (commit, mean, interval) and each change
point in one line (see docs/history.md)."""

from __future__ import annotations

from ..tables import table
from .series import ORDER_UNKNOWN, ChangePoint, History, Series

ONE_POINT = "only one measured commit here: no change points can be found (measure more commits of the range)"


def _pct(x: float) -> str:
    return f"{x * 100:+.1f} %"


def change_line(c: ChangePoint) -> str:
    """``a1b2c3d..e4f5a6b (2 untested): +12.0 % [+8.1 %, +15.9 %] worse; environment: gpu driver 1 -> 2``."""
    span = f"{c.last_before[:7]}..{c.first_after[:7]}"
    untested = f" ({len(c.untested)} untested: {', '.join(u[:7] for u in c.untested)})" if c.untested else \
        " (adjacent: the step is at " + c.first_after[:7] + ")"
    env = "; environment changed: " + "; ".join(f"{k} {a or '(none)'} -> {b or '(none)'}"
                                                for k, (a, b) in c.environment_changed.items()) \
        if c.environment_changed else ""
    named = f"; bisected: {c.bisected[:7]}" if c.bisected else ""
    return (f"  change point {span}{untested}: {c.before_mean:.4g} -> {c.after_mean:.4g}, "
            f"{_pct(c.step)} [{_pct(c.step_low)}, {_pct(c.step_high)}] {c.kind}{env}{named}")


def series_text(s: Series, confidence: float) -> str:
    """One series: a header, its points as a table and its change-point lines."""
    rows = [(p.short, p.commit_time[:19], f"{p.mean:.4g}", f"[{p.low:.4g}, {p.high:.4g}]", len(p.values),
             p.subject[:40]) for p in s.points]
    lines = [f"{s.metric} ({s.workload}, target {s.target}, {s.direction} is better)" if s.direction != "context"
             else f"{s.metric} ({s.workload}, target {s.target}, context)",
             table(rows, ("commit", "committed", "mean", f"{confidence:.0%} interval", "runs", "subject"))]
    if len(s.points) < 2:
        lines.append(f"  {ONE_POINT}")
    elif s.order == "unknown":
        lines.append(f"  {ORDER_UNKNOWN}")
    elif not s.change_points:
        lines.append("  no change points")
    lines += [change_line(c) for c in s.change_points]
    stepped = {c.first_after[:7] for c in s.change_points}
    lines += [f"  outputs changed at {x}" + ("" if x[:7] in stepped else " (no change point here: the aggregate did not move)")
              for x in s.outputs_changed]
    return "\n".join(lines)


def history_text(h: History) -> str:
    """Every series, then the detector used."""
    if not h.series:
        return "no complete campaign selected (measure some: invoke measure / matrix)"
    return "\n\n".join([*(series_text(s, h.confidence) for s in h.series), f"change points: {h.detector}"])

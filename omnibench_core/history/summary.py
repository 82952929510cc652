"""A history range's pull-request summary (``invoke history --summary``), rendered by
:mod:`omnibench_core.campaign.pr_summary`."""

from __future__ import annotations

from ..campaign.pr_summary import Group, Row, Summary, split
from .series import ORDER_UNKNOWN, History


def from_history(h: History, source: str = "invoke history") -> Summary:
    """A history range's summary: each change point (worse first) with its commits and step; the
    series without one folded, with their latest mean."""
    rows: list[tuple[Row, Group]] = []
    for s in h.series:
        short = {p.revision: p.short for p in s.points}
        name = f"{s.metric} ({s.workload}, {s.target})"
        for c in s.change_points:
            detail = f"{short.get(c.last_before, c.last_before[:10])}..{short.get(c.first_after, c.first_after[:10])}"
            detail += f", {len(c.untested)} untested between" if c.untested else ""
            detail += f"; bisected: {c.bisected}" if c.bisected else ""
            detail += "".join(f"; {k}: {a} -> {b}" for k, (a, b) in c.environment_changed.items())
            verdict = c.kind + (" (environment)" if c.from_environment else "")
            rows.append((Row(name, s.direction, f"{c.step:+.1%}", f"[{c.step_low:+.1%}, {c.step_high:+.1%}]",
                             verdict, detail), "changed"))
        if s.order == "unknown" and len(s.points) > 1:
            rows.append((Row(name, s.direction, "-", "-", "order unknown", ORDER_UNKNOWN), "undecided"))
        elif not s.change_points:
            last = s.points[-1] if s.points else None
            rows.append((Row(name, s.direction, "-", f"[{last.low:.6g}, {last.high:.6g}]" if last else "-",
                             "no change point", f"latest {last.mean:.6g} at {last.short}; {len(s.points)} commits"
                             if last else "no commit measured"), "other"))
    changed, undecided, other = split(rows)
    commits = {p.revision for s in h.series for p in s.points}
    facts = (f"{len(h.series)} series over {len(commits)} measured commits; intervals at {h.confidence:.0%}",
             f"change points: {h.detector or 'not given'}")
    return Summary("omnibench history", facts, changed, other, source, undecided)

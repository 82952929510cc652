"""What a report and a comparison show of the runs' GPU telemetry (``telemetry.json``, made by the
run layer, read through :mod:`omnibench_core.store.telemetry_file`): each workload's energy per
request and per second of speech, averaged over the runs, and every warning that makes a run not
comparable."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from ..errors import RunFileError
from ..store import telemetry_file
from ..store.names import TELEMETRY_NAME
from ..store.telemetry_file import RunTelemetry
from ..tables import md_table, md_text


@dataclass(frozen=True)
class TelemetryView:
    """The runs' telemetry in a report: rows by workload, warnings by run, or why it did not apply."""

    applies: bool
    rows: tuple[tuple[str, float | None, float | None, float | None], ...] = ()  # workload, J, J/request, J/speech s
    warnings: tuple[str, ...] = ()
    reason: str = ""
    csvs: tuple[Path, ...] = ()  # the first run's sample files, for the plot


def _mean(values: Sequence[float | None]) -> float | None:
    numbers = [v for v in values if v is not None]
    return sum(numbers) / len(numbers) if numbers else None


def _rows(runs: Sequence[RunTelemetry]) -> tuple[tuple[str, float | None, float | None, float | None], ...]:
    """Each workload's energy figures, averaged over the runs that measured them."""
    rows = []
    for w in sorted({w for t in runs for w in t.workloads}):
        measured = [t.workloads[w] for t in runs if w in t.workloads]
        rows.append((w, _mean([e.energy_j for e in measured]), _mean([e.energy_per_request_j for e in measured]),
                     _mean([e.energy_per_speech_second_j for e in measured])))
    return tuple(rows)


def view(run_dirs: Sequence[Path]) -> TelemetryView:
    """The telemetry of ``run_dirs``: means of each workload's energy figures, every run's warnings.
    A run whose file cannot be read (malformed, or of a newer format) is named with the reason: a
    warning when other runs were read, the reason the telemetry does not apply when none was."""
    runs: list[tuple[Path, RunTelemetry]] = []
    unread: list[str] = []
    for d in run_dirs:
        if not telemetry_file.exists(d):
            continue
        try:
            runs.append((d, telemetry_file.read(d)))
        except RunFileError as exc:
            unread.append(f"{d.name}: its {TELEMETRY_NAME} was not read: {exc.message}")
    if not runs:
        return TelemetryView(False, reason="; ".join(unread) if unread else
                             f"the runs have no {TELEMETRY_NAME} (made before telemetry existed)")
    if not any(t.applies for _, t in runs):
        return TelemetryView(False, reason=runs[0][1].reason or "it did not apply")
    warnings = tuple(unread) + tuple(f"{d.name}: {w}" for d, t in runs for w in t.warnings)
    csvs = tuple(sorted((runs[0][0] / "telemetry").glob("*.csv")))
    return TelemetryView(True, _rows([t for _, t in runs]), warnings, csvs=csvs)


def markdown(v: TelemetryView) -> list[str]:
    """The report's "GPU telemetry" section."""
    md = ["", "## GPU telemetry", ""]
    if not v.applies:
        return md + [f"Did not apply: {md_text(v.reason)}."]
    md += md_table(("workload", "energy in the timed window (J)", "J per request", "J per second of speech"),
                   [(w, _fmt(e), _fmt(r), _fmt(s)) for w, e, r, s in v.rows])
    if v.warnings:
        md += ["", "**Not comparable as measured:**", ""] + [f"- {md_text(w)}" for w in v.warnings]
    return md


def _fmt(value: float | None) -> str:
    return "-" if value is None else f"{value:.4g}"

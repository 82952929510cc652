"""What a report and a comparison show of the runs' GPU telemetry (``telemetry.json``, written by
the run layer): each workload's energy per request and per second of speech, averaged over the
runs, and every warning that makes a run not comparable."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..jsonio import read_json
from ..store.names import TELEMETRY_NAME


@dataclass(frozen=True)
class TelemetryView:
    """The runs' telemetry in a report: rows by workload, warnings by run, or why it did not apply."""

    applies: bool
    rows: tuple[tuple[str, float | None, float | None, float | None], ...] = ()  # workload, J, J/request, J/speech s
    warnings: tuple[str, ...] = ()
    reason: str = ""
    csvs: tuple[Path, ...] = ()  # the first run's sample files, for the plot


def _mean(values: Sequence[Any]) -> float | None:
    numbers = [float(v) for v in values if isinstance(v, (int, float)) and not isinstance(v, bool)]
    return sum(numbers) / len(numbers) if numbers else None


def view(run_dirs: Sequence[Path]) -> TelemetryView:
    """The telemetry of ``run_dirs``: means of each workload's energy figures, every run's warnings."""
    docs: list[tuple[Path, dict[str, Any]]] = []
    for d in run_dirs:
        try:
            doc = read_json(d / TELEMETRY_NAME)
        except (OSError, ValueError):
            continue
        if isinstance(doc, dict):
            docs.append((d, doc))
    if not docs:
        return TelemetryView(False, reason=f"the runs have no {TELEMETRY_NAME} (made before telemetry existed)")
    if not any(doc.get("applies") for _, doc in docs):
        return TelemetryView(False, reason=str(docs[0][1].get("reason") or "it did not apply"))
    workloads = sorted({w for _, doc in docs for w in (doc.get("workloads") or {})})
    rows = tuple((w, *(_mean([(doc.get("workloads") or {}).get(w, {}).get(k) for _, doc in docs])
                       for k in ("energy_j", "energy_per_request_j", "energy_per_speech_second_j")))
                 for w in workloads)
    warnings = tuple(f"{d.name}: {w}" for d, doc in docs for w in (doc.get("warnings") or []))
    csvs = tuple(sorted((docs[0][0] / "telemetry").glob("*.csv")))
    return TelemetryView(True, rows, warnings, csvs=csvs)


def markdown(v: TelemetryView) -> list[str]:
    """The report's "GPU telemetry" section."""
    md = ["", "## GPU telemetry", ""]
    if not v.applies:
        return md + [f"Did not apply: {v.reason}."]
    md += ["| workload | energy in the timed window (J) | J per request | J per second of speech |", "|---|---|---|---|"]
    md += [f"| {w} | {_fmt(e)} | {_fmt(r)} | {_fmt(s)} |" for w, e, r, s in v.rows]
    if v.warnings:
        md += ["", "**Not comparable as measured:**", ""] + [f"- {w}" for w in v.warnings]
    return md


def _fmt(value: float | None) -> str:
    return "-" if value is None else f"{value:.4g}"

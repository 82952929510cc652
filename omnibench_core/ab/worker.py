"""One side's run of a duet round, in its own process: ``python -m omnibench_core.ab.worker
SPEC.json OUT.json``.

A process (not a thread) per side, because the run layer turns Ctrl-C and SIGTERM into a clean
stop only in a main thread. Before each timed window the worker says so on its standard output
(:data:`BARRIER`, the step's name) and waits for a line on its standard input: the driver
releases both sides together once both servers are READY. Its outcome goes to OUT.json.
"""

from __future__ import annotations

import sys
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .. import api
from ..errors import GateError, OmnibenchError, RunInterrupted, RunNotReady, StepFailed, Terminated
from ..jsonio import read_json, write_json
from ..records import PHASES, Phase
from ..settings import Settings

BARRIER = "@@omnibench-barrier "


@dataclass(frozen=True)
class Spec:
    """What one side's run needs, JSON-ready."""

    settings: Mapping[str, Any]  # flat, with the slot's port, GPUs and CPUs
    workloads: tuple[str, ...]
    options: tuple[str, ...]
    client: str | None
    phases: tuple[str, ...]

    def as_dict(self) -> dict[str, Any]:
        """For the spec file."""
        return {"settings": dict(self.settings), "workloads": list(self.workloads), "options": list(self.options),
                "client": self.client, "phases": list(self.phases)}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Spec:
        """Inverse of :meth:`as_dict`."""
        return cls(dict(data["settings"]), tuple(data["workloads"]), tuple(data["options"]), data.get("client"),
                   tuple(data["phases"]))


def wait_for_partner(step: str) -> None:
    """Say this side is READY for ``step`` and wait until the driver releases it."""
    print(f"{BARRIER}{step}", flush=True)
    sys.stdin.readline()  # a line, or end of input when the driver is gone: go on either way


def execute(spec: Spec) -> dict[str, Any]:
    """The run, and its outcome as a record (status, run folder, error, where it was moved)."""
    phases: tuple[Phase, ...] = tuple(p for p in PHASES if p in spec.phases)
    try:
        result = api.run(Settings.from_mapping(spec.settings), spec.workloads, options=spec.options,
                         client=spec.client, progress=lambda line: print(line, flush=True), phases=phases,
                         before_timed=wait_for_partner)
    except (RunInterrupted, KeyboardInterrupt, Terminated) as exc:
        return _failure("interrupted", exc)
    except (GateError, StepFailed) as exc:
        return _failure("not-ready" if isinstance(exc, RunNotReady) else "failed", exc)
    except OmnibenchError as exc:
        return _failure("error", exc)
    return {"status": result.status, "run_dir": str(result.run_dir), "error": "; ".join(
        f"{r.name}: {r.detail}" for r in result.broken_rules), "moved_to": ""}


def _failure(status: str, exc: BaseException) -> dict[str, Any]:
    evidence = getattr(exc, "evidence", {}) or {}
    return {"status": status, "run_dir": "", "error": getattr(exc, "message", "") or str(exc) or type(exc).__name__,
            "moved_to": str(evidence.get("run moved to", "")), "rendered": str(exc)}


def main(argv: list[str] | None = None) -> int:
    """``python -m omnibench_core.ab.worker SPEC.json OUT.json``."""
    args = list(sys.argv[1:] if argv is None else argv)
    if len(args) != 2:
        print("usage: python -m omnibench_core.ab.worker SPEC.json OUT.json", file=sys.stderr)
        return 2
    outcome = execute(Spec.from_dict(read_json(Path(args[0]))))
    write_json(Path(args[1]), outcome)
    return 130 if outcome["status"] == "interrupted" else 0


if __name__ == "__main__":
    sys.exit(main())

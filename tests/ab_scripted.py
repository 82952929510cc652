"""Scripted runs for `invoke ab`'s driver: each attempt writes a run folder as a real run leaves
it, without servers (tests/conftest.py's ``scripted`` fixture puts one in place of ``run_attempt``)."""

from __future__ import annotations

import json
import math
import random
from pathlib import Path

from omnibench_core import api
from omnibench_core.campaign.attempt import Ended
from omnibench_core.errors import RunInterrupted
from omnibench_core.statuses import AttemptStatus

LATENCY = "selftest.latency_mean_s"


class ScriptedRuns:
    """Stands in for a real run: each attempt writes a run folder whose metrics are B 30 % slower
    than A (a little noise), counts what ran, and can be told to be interrupted at one call."""

    def __init__(self, interrupt_at: int = 0):
        self.calls: list[str] = []
        self.interrupt_at = interrupt_at
        self.rng = random.Random(7)

    def __call__(self, settings, workloads, *, options, client, phases, progress, label, record):
        self.calls.append(label)
        record(Ended(AttemptStatus.RUNNING))
        if len(self.calls) == self.interrupt_at:
            record(Ended(AttemptStatus.INTERRUPTED, error="interrupted"))
            raise RunInterrupted("interrupted", hint="repeat the same command to resume")
        record(Ended(AttemptStatus.COMPLETE, 0.01, self.write(api.revision_dir(settings), label)))

    def write(self, folder: Path, label: str) -> str:
        """The next runN under ``folder``, as a run of ``label`` leaves it; its name."""
        run = folder / f"run{sum(1 for _ in folder.glob('run*')) if folder.exists() else 0}"
        run.mkdir(parents=True)
        slower = 1.3 if label.startswith("B") else 1.0
        metrics = {LATENCY: 0.1 * slower * math.exp(self.rng.gauss(0, 0.02)), "selftest.requests": 4}
        (run / "metrics.json").write_text(json.dumps({"metrics": metrics, "complete": True}))
        return run.name

"""The runbook's "Reference results": numbers from OTHER setups, shown apart from a campaign's
own, never compared with it."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Reference:
    """One row of the runbook's table."""

    workload: str
    source: str
    setup: str
    results: str


REFERENCES: tuple[Reference, ...] = (
    Reference("videoamme", "sglang-omni #2580, main 5ed8a8d",
              "One H200, concurrency 8, 50 questions, seed 0 (CI sends no seed), text accuracy only with no WER",
              "Accuracy 0.68, 0.33 req/s"),
    Reference("videoamme", "sglang-omni #2552, CI stage 10, 7 runs", "Two H100s, DP 2, compile off",
              "0.643 to 0.668 req/s, Accuracy 0.7 in every run, WER 0.004032 in 6 runs and 0.008065 in one "
              "excluded run (one word apart)"),
    Reference("seedtts", "sglang-omni #2532, main plus that PR before merge",
              "One H200, CI server parameters, concurrency 16, 1088 samples, MPS on",
              "14.22 req/s, WER corpus without samples above 50% 1.47%, SIM 49.78"),
)
NOTE = ("Other setups, not comparable with these runs: the runbook has no published numbers for one GPU at "
        "concurrency 16 with its commands.")


def for_workloads(workloads: tuple[str, ...] | list[str]) -> list[Reference]:
    """The reference rows of the given workloads."""
    return [r for r in REFERENCES if r.workload in workloads]

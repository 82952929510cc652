"""The names of the files omnibench keeps, each defined once, and the paths built from them.

A run directory (``<results>/<revision>/runN``) holds the manifest, the metrics (the runbook's
file), the telemetry summary and the checkout's commit and dirty state; a revision folder holds
its campaigns' files in ``campaigns/``; the results root holds the A/B records in ``ab/``.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

MANIFEST_NAME = "manifest.json"
METRICS_NAME = "metrics.json"  # the runbook's {"metrics", "rates", "complete"}: sglang-omni's scripts read it
TELEMETRY_NAME = "telemetry.json"
# per-request values (streaming first-audio latencies, chunk gaps) for the distribution plots; only
# when a workload gave some (not "samples.json": that is the Video-AMME data set's own file)
SAMPLES_NAME = "request_samples.json"
COMMIT_NAME = "commit.txt"
DIRTY_NAME = "dirty.txt"
CAMPAIGNS = "campaigns"  # in a revision folder
AB_FOLDER = "ab"  # in the results root
BISECTS = "bisects"  # in the results root: one file per `invoke bisect` measurement
RECORD_SUFFIX = ".json"  # a campaign file or an A/B record
LOCK_SUFFIX = ".lock"  # the lock beside a campaign file or A/B record

# Every file name of a run directory: the store's own scan test (tests/test_store.py) holds the
# rest of the code to naming them only through this module.
RUN_FILES = (MANIFEST_NAME, METRICS_NAME, TELEMETRY_NAME, SAMPLES_NAME, COMMIT_NAME, DIRTY_NAME)


def manifest_path(run_dir: Path) -> Path:
    """``<run>/manifest.json``."""
    return run_dir / MANIFEST_NAME


def metrics_path(run_dir: Path) -> Path:
    """``<run>/metrics.json``."""
    return run_dir / METRICS_NAME


def telemetry_path(run_dir: Path) -> Path:
    """``<run>/telemetry.json``."""
    return run_dir / TELEMETRY_NAME


def samples_path(run_dir: Path) -> Path:
    """``<run>/request_samples.json``."""
    return run_dir / SAMPLES_NAME


def run_manifests(revision_dir: Path) -> Iterator[Path]:
    """The manifest of every ``run*`` folder of a revision folder (moved-aside runs included)."""
    return revision_dir.glob(f"run*/{MANIFEST_NAME}")


def campaigns_dir(revision_dir: Path) -> Path:
    """``<revision>/campaigns``."""
    return revision_dir / CAMPAIGNS


def campaign_path(revision_dir: Path, name: str) -> Path:
    """``<revision>/campaigns/<name>.json``."""
    return campaigns_dir(revision_dir) / f"{name}{RECORD_SUFFIX}"


def campaign_files(revision_dir: Path) -> Iterator[Path]:
    """Every campaign file of a revision folder."""
    return campaigns_dir(revision_dir).glob(f"*{RECORD_SUFFIX}")


def experiment_path(results_root: Path, name: str) -> Path:
    """``<results>/ab/<name>.json``."""
    return results_root / AB_FOLDER / f"{name}{RECORD_SUFFIX}"


def lock_path(record_path: Path) -> Path:
    """The lock beside a campaign file or an A/B record: ``<name>.lock``."""
    return record_path.with_suffix(LOCK_SUFFIX)

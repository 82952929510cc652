"""The names of the files omnibench keeps, each defined once, and the paths built from them.

A run directory (``<results>/<revision>/runN``) holds the manifest, the metrics (the runbook's
file), the telemetry summary and the checkout's commit and dirty state; a revision folder holds
its campaigns' files in ``campaigns/``; the results root holds the A/B records in ``ab/``.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

from ..errors import BadName, OutsideRoot

MANIFEST_NAME = "manifest.json"
METRICS_NAME = "metrics.json"  # the runbook's {"metrics", "rates", "complete"}: sglang-omni's scripts read it
TELEMETRY_NAME = "telemetry.json"
# per-request values (streaming first-audio latencies, chunk gaps) for the distribution plots; only
# when a workload gave some (not "samples.json": that is the Video-AMME data set's own file)
SAMPLES_NAME = "request_samples.json"
# per-request values by request id of the metrics that are their mean: the A/B matches requests
# across its two sides (docs/verdicts.md, "A round's estimate")
REQUEST_VALUES_NAME = "request_values.json"
COMMIT_NAME = "commit.txt"
DIRTY_NAME = "dirty.txt"
CAMPAIGNS = "campaigns"  # in a revision folder
AB_FOLDER = "ab"  # in the results root
BISECTS = "bisects"  # in the results root: one file per `invoke bisect` measurement
RECORD_SUFFIX = ".json"  # a campaign file or an A/B record
LOCK_SUFFIX = ".lock"  # the lock beside a campaign file or A/B record

# Every file name of a run directory: the store's own scan test (tests/test_store.py) holds the
# rest of the code to naming them only through this module.
RUN_FILES = (MANIFEST_NAME, METRICS_NAME, TELEMETRY_NAME, SAMPLES_NAME, REQUEST_VALUES_NAME, COMMIT_NAME, DIRTY_NAME)


def manifest_path(run_dir: Path) -> Path:
    """``<run>/manifest.json``."""
    return run_dir / MANIFEST_NAME


def metrics_path(run_dir: Path) -> Path:
    """``<run>/metrics.json``."""
    return run_dir / METRICS_NAME


def telemetry_path(run_dir: Path) -> Path:
    """``<run>/telemetry.json``."""
    return run_dir / TELEMETRY_NAME


def request_values_path(run_dir: Path) -> Path:
    """``<run>/request_values.json``."""
    return run_dir / REQUEST_VALUES_NAME


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
    """``<revision>/campaigns/<name>.json`` (``name`` held to :func:`check_name`)."""
    check_name(name, "campaign name", given=False)  # also a name made from an identity
    return campaigns_dir(revision_dir) / f"{name}{RECORD_SUFFIX}"


def campaign_files(revision_dir: Path) -> Iterator[Path]:
    """Every campaign file of a revision folder."""
    return campaigns_dir(revision_dir).glob(f"*{RECORD_SUFFIX}")


def experiment_path(results_root: Path, name: str) -> Path:
    """``<results>/ab/<name>.json`` (``name`` held to :func:`check_name`)."""
    check_name(name, "experiment name", given=False)  # also a name made from an identity
    return results_root / AB_FOLDER / f"{name}{RECORD_SUFFIX}"


def lock_path(record_path: Path) -> Path:
    """The lock beside a campaign file or an A/B record: ``<name>.lock``."""
    return record_path.with_suffix(LOCK_SUFFIX)


# The one rule for every name a user or a node gives (a campaign's --name, an A/B experiment's,
# a run's, a revision folder's): one path component, so every path built from it stays in the
# folder it is built in. Checked at the front doors (flags) and again where a node's names arrive
# (the Ray receiver), and where a path is built from one (campaign_path, experiment_path).
_CONTROL = {chr(c) for c in range(32)} | {"\x7f"}


def name_problem(name: str, *, given: bool = True) -> str:
    """Why ``name`` cannot name a file or folder omnibench writes ("" when it can): empty, ``.``
    or ``..``, or holding ``/``, ``\\``, ``..`` or a control character (a newline, a tab...).
    ``given=False`` for a name omnibench made itself (:func:`.identity.file_name`, whose option
    values may hold ``a..b``, harmless inside one entry): ``..`` is then refused only whole."""
    if not isinstance(name, str) or not name:
        return "it is empty"
    if name in (".", ".."):
        return f"{name!r} names a folder itself, not an entry in it"
    if "/" in name or "\\" in name:
        return "it holds a path separator ('/' or '\\'): a name is one folder entry"
    if given and ".." in name:
        return "it holds '..'"
    bad = sorted({c for c in name if c in _CONTROL})
    if bad:
        return f"it holds a control character ({', '.join(repr(c) for c in bad)})"
    return ""


def check_name(name: str, what: str = "name", *, given: bool = True) -> str:
    """``name`` when :func:`name_problem` finds nothing; else a :class:`.errors.BadName` naming
    ``what`` (``campaign name``, ``run``...), the name and why."""
    problem = name_problem(name, given=given)
    if problem:
        raise BadName(f"{what} {name!r} refused: {problem}", evidence={"what": what, "given": repr(name)},
                      hint="give a plain name: letters, digits, '_', '-', '+' and single dots")
    return name


def under_root(root: Path, path: Path, what: str = "path") -> Path:
    """``path`` (relative to ``root``, or absolute) made absolute and normalised, when it lies
    under ``root``; else an :class:`.errors.OutsideRoot` naming both. Check every path built from
    a given name with this before anything is written there. Normalised by its text (``..``
    taken out), links not followed: a revision folder a user linked to another disk stays theirs."""
    base = Path(os.path.abspath(root))
    resolved = Path(os.path.normpath(base / path))
    if resolved != base and not resolved.is_relative_to(base):
        raise OutsideRoot(f"{what} {str(path)!r} lies outside {base}", evidence={"path": str(path), "resolved":
                          str(resolved), "root": str(base)}, hint="name something inside the results root")
    return resolved

"""The names of the files omnibench keeps, each defined once, and the paths built from them.

A run directory (``<results>/<revision>/runN``) holds the manifest, the metrics (the runbook's
file), the telemetry summary and the checkout's commit and dirty state; a revision folder holds
its campaigns' files in ``campaigns/``; the results root holds the A/B records in ``ab/``.
"""

from __future__ import annotations

import os
import unicodedata
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
# a sweep's, a run's, a folder omnibench makes at a path a user gives, a revision folder's): an
# allow-list, so a name is what a person would type and read back the same. Checked at the front
# doors (flags) and again where a node's names arrive (the Ray receiver), and where a path is
# built from one (campaign_path, experiment_path).
NAME_PUNCTUATION = "_-+.@="  # the ASCII punctuation a name may hold, besides letters and digits
_ASCII_OK = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789" + NAME_PUNCTUATION)
NAME_BYTES = 120  # a given name's UTF-8 bytes: with a point's label and ".json" it stays one file name (255)
# Suffixes of the files omnibench keeps beside a name (``foo.json``, ``foo.lock``): a name ending in
# one would meet another name's file (``foo.lock``'s report folder is ``foo``'s lock file).
KEPT_SUFFIXES = (RECORD_SUFFIX, LOCK_SUFFIX)
# Folders omnibench keeps beside the runs, campaigns and experiments a user names.
REPORTS = "reports"  # in a revision folder: reports of named runs (`invoke report --runs`)
COMPARISONS = "comparisons"  # in the results root
SWEEPS = "sweeps"  # in a revision folder
CAPABILITIES = "capabilities"  # in the results root
CI_FOLDER = "ci"  # in a revision folder: the model-CI stages' logs
KEPT_FOLDERS = (CAMPAIGNS, AB_FOLDER, BISECTS, REPORTS, COMPARISONS, SWEEPS, CAPABILITIES, CI_FOLDER)
_BIDI_CONTROLS = frozenset({"LRE", "RLE", "LRO", "RLO", "PDF", "LRI", "RLI", "FSI", "PDI"})


# Unicode gives control characters no name, only aliases; the ones a name is likeliest to catch.
_CONTROL_NAMES = {0x00: "NULL", 0x09: "CHARACTER TABULATION", 0x0A: "LINE FEED", 0x0B: "LINE TABULATION",
                  0x0C: "FORM FEED", 0x0D: "CARRIAGE RETURN", 0x1B: "ESCAPE", 0x7F: "DELETE", 0x85: "NEXT LINE",
                  0x9B: "CONTROL SEQUENCE INTRODUCER"}


def char_name(c: str) -> str:
    """``U+202E RIGHT-TO-LEFT OVERRIDE``: a character by code point and Unicode name (a control
    character by its alias: ``U+0085 NEXT LINE``)."""
    return f"U+{ord(c):04X} {unicodedata.name(c, '') or _CONTROL_NAMES.get(ord(c), '(a control character)')}"


def _char_problem(c: str) -> str:
    """Why one character cannot be in a name ("" when it can)."""
    if c in _ASCII_OK:
        return ""
    if c in "/\\":
        return "a path separator: a name is one folder entry"
    category = unicodedata.category(c)
    if c.isascii():
        if category == "Cc":
            return "a control character"
        if c == " ":
            return "a space: a shell splits the name there"
        return f"punctuation a name does not take (ASCII letters, digits and {' '.join(NAME_PUNCTUATION)} only)"
    if unicodedata.normalize("NFKC", c) != c:
        return f"a compatibility form of {unicodedata.normalize('NFKC', c)!r}: it looks like that, and is another name"
    if unicodedata.bidirectional(c) in _BIDI_CONTROLS or c in "\u200e\u200f\u061c":
        return "a bidi control: it reorders how the name is shown"
    if category == "Cc":
        return "a control character"
    if category == "Cf":
        return "a format character: invisible, so two names that look the same differ"
    if category[0] == "Z":
        return "a separator (a space or a line break)"
    if category[0] not in "LMN":
        return "neither a letter nor a digit"
    return ""


def name_problem(name: str, *, given: bool = True, kept: bool = True) -> str:
    """Why ``name`` cannot name a file or folder omnibench writes ("" when it can). A given name:
    ASCII letters, digits and ``_ - + . @ =`` (or NFKC-normal letters, marks and digits of other
    scripts, never a control, format, separator or bidi character: each refused by code point
    and name), not starting with ``-`` or ``.``, not ending with ``.``, without ``..``, no
    longer than :data:`NAME_BYTES`, not ending in a suffix of a file omnibench keeps beside a
    name (``.json``, ``.lock``) and not a folder omnibench keeps (``campaigns``, ``reports``...).
    ``given=False`` for a name omnibench made itself (:func:`.identity.file_name`, whose option
    values may hold ``a..b``, harmless inside one entry, and names already on disk): only one
    entry, without a path separator or control character. ``kept=False`` for a name outside the
    results' folders (a part of ``--out``, an export file's stem): the characters' rule alone, as
    nothing omnibench keeps lies beside it."""
    if not isinstance(name, str) or not name:
        return "it is empty"
    if name in (".", ".."):
        return f"{name!r} names a folder itself, not an entry in it"
    if not given:
        if "/" in name or "\\" in name:
            return "it holds a path separator ('/' or '\\'): a name is one folder entry"
        bad = sorted({c for c in name if unicodedata.category(c) == "Cc"})
        return f"it holds {', '.join(char_name(c) for c in bad)}: a control character" if bad else ""
    for at, c in enumerate(name, 1):
        why = _char_problem(c)
        if why:
            where = "starts with" if at == 1 else "ends with" if at == len(name) else "holds"
            return f"it {where} {char_name(c)}" + (f" (character {at})" if where == "holds" else "") + f", {why}"
    if unicodedata.normalize("NFKC", name) != name:
        return f"it is not in NFKC form: write it as {unicodedata.normalize('NFKC', name)!r}"
    if name[0] in "-.":
        return f"it starts with {name[0]!r}" + (": a program reads it as an option" if name[0] == "-" else
                                                 ": a hidden entry")
    if name.endswith("."):
        return "it ends with '.'"
    if ".." in name:
        return "it holds '..'"
    if len(name.encode()) > NAME_BYTES:
        return f"it is {len(name.encode())} bytes long: at most {NAME_BYTES}"
    if not kept:
        return ""
    lowered = name.lower()  # a file system that ignores case meets the other spelling too
    for suffix in KEPT_SUFFIXES:
        if lowered.endswith(suffix):
            return (f"it ends in {suffix!r}, the suffix of a file omnibench keeps beside a name: its files would "
                    f"meet those of {name[:-len(suffix)]!r}")
    if lowered in KEPT_FOLDERS:
        return f"{name!r} is a folder omnibench keeps beside the names it makes"
    return ""


def check_name(name: str, what: str = "name", *, given: bool = True) -> str:
    """``name`` when :func:`name_problem` finds nothing; else a :class:`.errors.BadName` naming
    ``what`` (``campaign name``, ``run``...), the name and why."""
    problem = name_problem(name, given=given)
    if problem:
        raise BadName(f"{what} {name!r} refused: {problem}", evidence={"what": what, "given": repr(name)},
                      hint=NAME_HINT)
    return name


NAME_HINT = (f"give a plain name: letters, digits and {' '.join(NAME_PUNCTUATION)}, starting with a letter or digit, "
             f"e.g. seedtts-c4_run+2")


# The kernel's bounds on a path (Linux's NAME_MAX and PATH_MAX): past them every call on the path
# fails with ENAMETOOLONG, which Path.exists()/is_dir() raise instead of answering.
PART_BYTES, PATH_BYTES = 255, 4095


def path_problem(path: str | os.PathLike[str]) -> str:
    """Why the kernel cannot take ``path`` at all ("" when it can): a NUL byte, a part over
    :data:`PART_BYTES` or the whole over :data:`PATH_BYTES` (``~`` expanded). Every path a user
    gives (``--results``, ``--checkout``, ``--out``, an export, a campaign file, ``data_dir``) is
    held to it before it is looked at, so a long one is one refusal, not an OSError traceback."""
    text = os.path.expanduser(os.fspath(path))
    if "\0" in text:
        return "it holds a NUL byte"
    raw = os.fsencode(text)
    if len(raw) > PATH_BYTES:
        return f"it is {len(raw):,} bytes long, over the {PATH_BYTES:,} a path may be"
    long_part = next((part for part in raw.split(b"/") if len(part) > PART_BYTES), None)
    if long_part is not None:
        return (f"its part {os.fsdecode(long_part)[:40]!r}... is {len(long_part):,} bytes long, over the "
                f"{PART_BYTES} a file name may be")
    return ""


def new_path_problem(path: str) -> str:
    """Why a path a user gives for a folder omnibench makes (``standin --out``, ``publish --out``)
    cannot be made ("" when it can): each part of it that does not exist yet is a name omnibench
    makes, held to :func:`name_problem`; the parts that exist are the user's own."""
    if not path:
        return "it is empty"
    problem = path_problem(path)
    if problem:
        return problem
    parts = Path(path).parts
    for i, part in enumerate(parts):
        if part in ("/", ".", "..") or Path(*parts[:i + 1]).exists():
            continue
        problem = name_problem(part, kept=False)
        if problem:
            return f"its part {part!r}: {problem}"
    return ""


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

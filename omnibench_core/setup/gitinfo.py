"""Commit and dirty state of a git work tree, for ``commit.txt`` and ``dirty.txt``."""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path

from ..defaults import GIT_OUTPUT_BYTES, GIT_S
from ..errors import SettingsError
from ..process.capture import capture


def git_revision(path: Path, git: str = "git", deadline_s: float = GIT_S) -> tuple[str, str] | None:
    """``(HEAD commit, git status --porcelain)`` of the work tree at ``path``; None if not one
    (or git did not answer within ``deadline_s``: each call is stopped there, with what it started)."""
    head = capture([git, "-C", str(path), "rev-parse", "HEAD"], deadline_s, max_bytes=GIT_OUTPUT_BYTES)
    if not head.ok:
        return None
    status = capture([git, "-C", str(path), "status", "--porcelain"], deadline_s, max_bytes=GIT_OUTPUT_BYTES)
    if not status.ok:
        return None
    return head.stdout.strip(), status.stdout


OPTION_LIKE = "starts with '-', which git would read as an option"


def refuse_option_like(revisions: Iterable[str], flag: str) -> None:
    """A user-given revision that starts with ``-`` would reach git as an option
    (``--output=FILE..HEAD`` made git create a file): refused, naming ``flag``. Every git call
    also puts ``--end-of-options`` (or ``--``) before revisions."""
    for rev in revisions:
        if rev.startswith("-"):
            raise SettingsError(f"{flag}: {rev!r} {OPTION_LIKE}",
                                evidence={"flag": flag, "given": rev}, hint="name a commit, tag or branch")

"""Commit and dirty state of a git work tree, for ``commit.txt`` and ``dirty.txt``."""

from __future__ import annotations

import subprocess
from collections.abc import Iterable
from pathlib import Path

from ..errors import SettingsError


def git_revision(path: Path, git: str = "git") -> tuple[str, str] | None:
    """``(HEAD commit, git status --porcelain)`` of the work tree at ``path``; None if not one."""
    try:
        head = subprocess.run([git, "-C", str(path), "rev-parse", "HEAD"], capture_output=True, text=True,
                              timeout=30, check=False)
        if head.returncode != 0:
            return None
        status = subprocess.run([git, "-C", str(path), "status", "--porcelain"], capture_output=True, text=True,
                                timeout=60, check=False)
    except (OSError, subprocess.TimeoutExpired):
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

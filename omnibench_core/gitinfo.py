"""Commit and dirty state of a git work tree, for ``commit.txt`` and ``dirty.txt``."""

from __future__ import annotations

import subprocess
from pathlib import Path


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

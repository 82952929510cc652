"""REV_OK's view of the checkout's files: which packages its ``HEAD`` holds, and whether a
package's files on disk are ``HEAD``'s (tracked, same content) or not (untracked, changed,
deleted).

Content is compared by blob id: ``git hash-object`` of the file on disk against ``git ls-tree
HEAD``'s, so an index flag (``--assume-unchanged``, ``--skip-worktree``) that hides an edit from
``git diff`` and ``git status`` does not hide it here.
"""

from __future__ import annotations

import os
import subprocess
from collections.abc import Sequence
from dataclasses import dataclass
from enum import Enum

GIT_TIMEOUT_S = 120.0
SKIPPED_DIRS = frozenset({"__pycache__"})  # what python writes beside the code, never imported as code
IMPORTABLE = (".py",)  # an untracked file of these kinds in a package can be imported


class FileState(str, Enum):
    """How a file under a package differs from ``HEAD``."""

    UNTRACKED = "untracked"
    CHANGED = "changed from HEAD"
    DELETED = "deleted since HEAD"


@dataclass(frozen=True)
class Difference:
    """One file of a package that is not ``HEAD``'s: its path relative to the checkout root."""

    path: str
    state: FileState


class GitFailed(Exception):
    """A git command that REV_OK needs did not answer."""


class CheckoutFiles:
    """The checkout at ``root``, asked through ``git`` (a path or a name on PATH)."""

    def __init__(self, root: str, git: str = "git"):
        self.root, self.git = os.path.realpath(root), git

    def _git(self, *args: str, stdin: str | None = None) -> str:
        try:
            done = subprocess.run([self.git, "-C", self.root, *args], input=stdin, capture_output=True, text=True,
                                  errors="surrogateescape", timeout=GIT_TIMEOUT_S, check=False)
        except (OSError, subprocess.TimeoutExpired) as exc:
            raise GitFailed(f"git {' '.join(args[:2])}: {exc}") from exc
        if done.returncode != 0:
            raise GitFailed(f"git {' '.join(args[:2])} exited {done.returncode}: {done.stderr.strip()[-300:]}")
        return done.stdout

    def head(self) -> str:
        """The commit ``HEAD`` names."""
        return self._git("rev-parse", "HEAD").strip()

    def has_package(self, name: str) -> bool:
        """Whether ``HEAD`` holds a top-level package or module ``name`` (a folder ``name/`` or a
        file ``name.py`` at the root)."""
        listed = self._git("ls-tree", "--name-only", "HEAD", "--", name, f"{name}.py").split("\n")
        return any(line in (name, f"{name}.py") for line in listed)

    def relative(self, path: str) -> str | None:
        """``path`` relative to the checkout root, links resolved (None when it lies outside)."""
        real = os.path.realpath(path)
        if real != self.root and not real.startswith(self.root + os.sep):
            return None
        return os.path.relpath(real, self.root)

    def _head_blobs(self, folder: str) -> dict[str, str]:
        out: dict[str, str] = {}
        for line in self._git("ls-tree", "-r", "-z", "HEAD", "--", folder).split("\0"):
            if line:
                meta, path = line.split("\t", 1)
                mode, kind, blob = meta.split()
                if kind == "blob":
                    out[path] = blob
        return out

    def _disk_files(self, folder: str) -> list[str]:
        top = os.path.join(self.root, folder)
        if os.path.isfile(top):
            return [folder]
        found: list[str] = []
        for here, dirs, files in os.walk(top):
            dirs[:] = sorted(d for d in dirs if d not in SKIPPED_DIRS)
            found.extend(os.path.relpath(os.path.join(here, f), self.root) for f in sorted(files))
        return found

    def differences(self, folder: str) -> list[Difference]:
        """Every file under ``folder`` (relative to the root; a package folder or a module file)
        that is not ``HEAD``'s: tracked files whose content differs or that are gone, and
        untracked files python could import."""
        head = self._head_blobs(folder)
        disk = self._disk_files(folder)
        out = [Difference(p, FileState.UNTRACKED) for p in disk if p not in head and p.endswith(IMPORTABLE)]
        tracked = [p for p in disk if p in head and not os.path.islink(os.path.join(self.root, p))]
        if tracked:
            blobs = self._git("hash-object", "--stdin-paths", stdin="".join(f"{p}\n" for p in tracked)).split()
            out.extend(Difference(p, FileState.CHANGED) for p, blob in zip(tracked, blobs, strict=True) if head[p] != blob)
        on_disk = set(disk)
        out.extend(Difference(p, FileState.DELETED) for p in head if p not in on_disk)
        return sorted(out, key=lambda d: d.path)

    def state_of(self, path: str) -> FileState | None:
        """How one file (relative to the root) differs from ``HEAD`` (None: it is ``HEAD``'s)."""
        found = [d for d in self.differences(path) if d.path == path]
        if found:
            return found[0].state
        return None if self._head_blobs(path) else FileState.UNTRACKED


def not_allowed(differences: Sequence[Difference], allowed_dirty: frozenset[str]) -> list[Difference]:
    """The differences the caller did not allow (``allowed_dirty``: paths relative to the root)."""
    return [d for d in differences if d.path not in allowed_dirty]

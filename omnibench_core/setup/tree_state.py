"""The measured tree's state, beyond its commit: what ``git diff HEAD`` changes and which untracked
files lie under the packages the server and clients import.

A commit made mid-campaign moves the revision folder and stops the campaign; an uncommitted edit
did not (a campaign counted a clean run and an edited one together). So the state is part of the
revision: a dirty tree's runs go to ``<commit>-dirty-<digest>``, and an edit between runs moves
that folder as a commit does, stopping a campaign, an A/B or a sweep with the files named.
"""

from __future__ import annotations

import hashlib
import os
import re
import subprocess
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

GIT_TIMEOUT_S = 60.0
DIGEST_CHARS = 8  # in a folder name: enough to tell a handful of edits of one commit apart
MAX_LISTED = 20  # files named in a message; the record keeps them all
_SUFFIX = re.compile(rf"-dirty-[0-9a-f]{{{DIGEST_CHARS}}}$")


def dirty_base(folder: str) -> str:
    """A revision folder's name without a dirty tree's suffix (its commit's folder)."""
    return _SUFFIX.sub("", folder)


@dataclass(frozen=True)
class TreeState:
    """A work tree's state: ``digest`` of its uncommitted changes ("" when clean) and the changed
    or untracked ``files`` (paths relative to the tree)."""

    digest: str = ""
    files: tuple[str, ...] = ()

    @property
    def dirty(self) -> bool:
        """Whether anything differs from HEAD."""
        return bool(self.digest)

    def folder_suffix(self) -> str:
        """What a dirty tree adds to its revision folder's name ("" when clean)."""
        return f"-dirty-{self.digest[:DIGEST_CHARS]}" if self.dirty else ""

    def listed(self) -> str:
        """The files for a message, at most :data:`MAX_LISTED` of them."""
        return listed(self.files)

    def details(self) -> dict[str, str]:
        """What a run's record keeps of a dirty tree (nothing for a clean one)."""
        return {"dirty_digest": self.digest, "dirty_files": "\n".join(self.files)} if self.dirty else {}


def listed(files: Sequence[str]) -> str:
    """``files`` for a message, at most :data:`MAX_LISTED` of them."""
    more = len(files) - MAX_LISTED
    return ", ".join(files[:MAX_LISTED]) + (f" and {more} more" if more > 0 else "")


def _git(git: str, root: Path, *args: str) -> bytes | None:
    try:
        done = subprocess.run([git, "-C", str(root), *args], capture_output=True, timeout=GIT_TIMEOUT_S, check=False)
    except (OSError, subprocess.TimeoutExpired):
        return None
    return done.stdout if done.returncode == 0 else None


def tree_state(root: Path, packages: Sequence[str], git: str = "git") -> TreeState | None:
    """The state of the work tree at ``root``: ``git diff HEAD`` (every tracked file) and the
    untracked, not ignored files under ``packages`` (folders relative to ``root``; a build copy
    or a stray module there is imported as the package's code). None when ``root`` is no work
    tree or git cannot answer. A clean tree costs one git call: an empty status (tracked changes
    and untracked files alike) means an empty diff and no untracked file under ``packages``."""
    status = _git(git, root, "status", "--porcelain", "--untracked-files=normal", "-z")
    if status is None:
        return None
    if not status:
        return TreeState()
    diff = _git(git, root, "diff", "--no-ext-diff", "--binary", "HEAD", "--")
    names = _git(git, root, "diff", "--no-ext-diff", "--name-only", "-z", "HEAD", "--")
    untracked = _git(git, root, "ls-files", "--others", "--exclude-standard", "-z", "--", *packages) \
        if packages else b""
    if diff is None or names is None or untracked is None:
        return None
    extra = sorted(p for p in untracked.decode("utf-8", "replace").split("\0") if p)
    if not diff and not extra:
        return TreeState()
    h = hashlib.sha256(diff)
    for path in extra:
        h.update(b"\0untracked\0" + path.encode() + _content_digest(root / path, git))
    changed = [p for p in names.decode("utf-8", "replace").split("\0") if p]
    return TreeState(h.hexdigest(), tuple(sorted({*changed, *extra})))


DERIVED = (".pyc", ".pyo")  # written by imports, from the sources beside them: never a difference of their own


def _content_digest(path: Path, git: str) -> bytes:
    """An untracked entry's content: a file's bytes (a link to a file, its target's); a nested
    repository (git lists it as one entry, ``pkg/sub/``, its files unnamed) by its commit and its
    files; a link to a folder, or a broken one, by its target's name (one that leads back into the
    tree must not be walked)."""
    if path.is_symlink() and not path.is_file():
        return hashlib.sha256(b"\0link\0" + os.fsencode(os.readlink(path))).digest()
    if path.is_dir() and not path.is_symlink() and (path / ".git").exists():
        return _nested_digest(path, git)
    try:
        return hashlib.sha256(path.read_bytes()).digest()
    except OSError:
        return b"\0unreadable"


def _nested_digest(repo: Path, git: str) -> bytes:
    """A nested repository's commit (none when it has none yet) and the content of every file it
    tracks, stages or holds untracked by its own ignore rules, compiled Python left out: an edit, a
    commit or a new module inside it moves the digest, an import does not."""
    head = _git(git, repo, "rev-parse", "--verify", "-q", "HEAD") or b"\0no commit"
    listed = _git(git, repo, "ls-files", "--cached", "--others", "--exclude-standard", "-z")
    h = hashlib.sha256(b"\0nested\0" + head)
    if listed is None:
        h.update(b"\0unlisted")
        return h.digest()
    for name in sorted({n for n in listed.decode("utf-8", "replace").split("\0") if n}):
        if name.endswith(DERIVED) or "__pycache__" in Path(name).parts:
            continue
        h.update(b"\0" + name.encode() + _content_digest(repo / name, git))
    return h.digest()

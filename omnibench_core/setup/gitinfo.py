"""Commit and dirty state of a git work tree, for ``commit.txt`` and ``dirty.txt``."""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path

from ..defaults import GIT_OUTPUT_BYTES, GIT_S
from ..errors import SettingsError
from ..process.capture import Ending, capture


def git_revision(path: Path, git: str = "git", deadline_s: float = GIT_S) -> tuple[str, str] | None:
    """``(HEAD commit, git status --porcelain)`` (untracked files shown) of the work tree at ``path``; None if not one
    (or git did not answer within ``deadline_s``: each call is stopped there, with what it started)."""
    found = git_revision_or_why(path, git, deadline_s)
    return None if isinstance(found, str) else found


def git_revision_or_why(path: Path, git: str = "git", deadline_s: float = GIT_S) -> tuple[str, str] | str:
    """:func:`git_revision`, or why not: "" when git said ``path`` is no work tree, else what went
    wrong with git itself (it did not start, or did not answer by its deadline)."""
    # untracked files listed whatever status.showUntrackedFiles says: an empty status means a clean
    # tree (tree_state's callers skip its diff then)
    for argv in ([git, "-C", str(path), "rev-parse", "HEAD"],
                 [git, "-C", str(path), "status", "--porcelain", "--untracked-files=normal"]):
        done = capture(argv, deadline_s, max_bytes=GIT_OUTPUT_BYTES)
        if not done.ok:
            return "" if done.ending is Ending.EXITED else done.why(deadline_s, GIT_OUTPUT_BYTES)
        if argv[-1] == "HEAD":
            head = done.stdout.strip()
    return head, done.stdout


OPTION_LIKE = "starts with '-', which git would read as an option"


def refuse_option_like(revisions: Iterable[str], flag: str) -> None:
    """A user-given revision that starts with ``-`` would reach git as an option
    (``--output=FILE..HEAD`` made git create a file): refused, naming ``flag``. Every git call
    also puts ``--end-of-options`` (or ``--``) before revisions."""
    for rev in revisions:
        if rev.startswith("-"):
            raise SettingsError(f"{flag}: {rev!r} {OPTION_LIKE}",
                                evidence={"flag": flag, "given": rev}, hint="name a commit, tag or branch")

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
    """:func:`git_revision`, or why not: "" when git said ``path`` is no work tree (or its branch has
    no commit yet), else what went wrong with git itself (it did not start, or did not answer by its
    deadline)."""
    # One git call, not two (`rev-parse HEAD`, then `status --porcelain`): a revision is checked
    # before, at the start of and after every run, some 7,000 times a suite run (issue 40). Version 2
    # with --branch carries the commit; its entries are written back as version 1, dirty.txt's
    # format. Untracked files listed whatever status.showUntrackedFiles says: an empty status means
    # a clean tree (tree_state's callers skip its diff then); no ahead/behind count (a walk of the
    # history, and nothing recorded here needs it).
    argv = [git, "-C", str(path), "status", "--porcelain=v2", "--branch", "--no-ahead-behind",
            "--untracked-files=normal"]
    done = capture(argv, deadline_s, max_bytes=GIT_OUTPUT_BYTES)
    if not done.ok:
        return "" if done.ending is Ending.EXITED else done.why(deadline_s, GIT_OUTPUT_BYTES)
    return porcelain_v1(done.stdout) or ""


def _v1_path(path: str) -> str:
    # Version 2 quotes a path only for the characters core.quotePath names (the quotes are then
    # its own); version 1 also puts one with a space in quotes, unescaped (git's quote.c,
    # QUOTE_PATH_QUOTE_SP), so that "old -> new" cannot be misread.
    return f'"{path}"' if " " in path and not path.startswith('"') else path


def porcelain_v1(v2: str) -> tuple[str, str] | None:
    """``(HEAD commit, the entries as `git status --porcelain` prints them)`` from what
    ``git status --porcelain=v2 --branch`` printed (without ``-z``); None when the branch has no
    commit yet (``rev-parse HEAD`` fails there too) or a line is none git writes."""
    head, entries = None, []
    for line in v2.split("\n"):
        if not line:
            continue
        if line.startswith("# "):
            if line.startswith("# branch.oid "):
                oid = line.removeprefix("# branch.oid ")
                head = None if oid == "(initial)" else oid
            continue
        kind, _, rest = line.partition(" ")
        fields = {"1": 8, "2": 9, "u": 10}.get(kind)
        if fields is not None:  # changed, renamed or copied, unmerged: XY, then fields before the path
            parts = rest.split(" ", fields - 1)
            if len(parts) != fields:
                return None
            xy, path = parts[0].replace(".", " "), parts[-1]
            if kind == "2":  # "path<TAB>original path"; a path holding a tab is quoted, \t
                path, tab, origin = path.partition("\t")
                if not tab:
                    return None
                path = f"{_v1_path(origin)} -> {_v1_path(path)}"
            else:
                path = _v1_path(path)
            entries.append(f"{xy} {path}\n")
        elif kind in ("?", "!"):
            entries.append(f"{kind * 2} {_v1_path(rest)}\n")
        else:
            return None
    return (head, "".join(entries)) if head else None


OPTION_LIKE = "starts with '-', which git would read as an option"


def refuse_option_like(revisions: Iterable[str], flag: str) -> None:
    """A user-given revision that starts with ``-`` would reach git as an option
    (``--output=FILE..HEAD`` made git create a file): refused, naming ``flag``. Every git call
    also puts ``--end-of-options`` (or ``--``) before revisions."""
    for rev in revisions:
        if rev.startswith("-"):
            raise SettingsError(f"{flag}: {rev!r} {OPTION_LIKE}",
                                evidence={"flag": flag, "given": rev}, hint="name a commit, tag or branch")

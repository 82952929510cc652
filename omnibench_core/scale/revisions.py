"""Revisions of a checkout: from ``A,B,C`` or ``A..B``, a git worktree per revision, and a venv
per revision that is reused from another revision when ``omni_ci_deps_hash`` is equal (the
VENV_OK rule: source-only changes need no rebuild) and built with the checkout's
``prepare_omni_venv.sh`` otherwise.

A reused venv is a real copy in the revision's own ``OMNI_CI_HOME`` (never the other revision's
link), relocated and proven to import the revision's own code (:mod:`.venv_reuse`); REV_OK checks
it again in every run.
"""

from __future__ import annotations

import fcntl
import os
import subprocess
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from ..errors import OmnibenchError, SettingsError
from ..setup.checkout import build_venv, check_venv, deps_hash
from ..setup.gitinfo import refuse_option_like
from . import venv_reuse

WORKTREES = ".worktrees"  # under the results root: <results>/.worktrees/<sha>


def _git(git: str, root: Path, *args: str) -> str:
    try:
        done = subprocess.run([git, "-C", str(root), *args], capture_output=True, text=True, timeout=600, check=False)
    except FileNotFoundError as exc:
        raise OmnibenchError(f"{git} was not found", hint="install git") from exc
    if done.returncode != 0:
        raise OmnibenchError(f"git {' '.join(args)} failed in {root}", evidence={"output": (done.stdout + done.stderr).strip()},
                             hint="check the revisions exist in the checkout (git fetch)")
    return done.stdout.strip()


def split_spec(spec: str) -> tuple[list[str], bool]:
    """``A,B,C`` -> ``(["A", "B", "C"], False)``, ``A..B`` -> ``(["A", "B"], True)``; a spec
    that names no revision (``""``, ``,,``) or one starting with ``-`` raises SettingsError."""
    spec = spec.strip()
    if ".." in spec and "," not in spec:
        parts, is_range = [p.strip() for p in spec.split("..", 1)], True  # an empty end is HEAD, as in git
    else:
        parts, is_range = [r.strip() for r in spec.split(",") if r.strip()], False
    if not parts:
        raise SettingsError("no revision given", hint="pass --revisions A,B,C or A..B")
    refuse_option_like(parts, "--revisions")
    return parts, is_range


def resolve(checkout: Path, spec: str, git: str = "git") -> list[str]:
    """Full commits, oldest first for a range: ``A,B,C`` (as given) or ``A..B`` (``git rev-list
    --reverse --ancestry-path A..B``: A's descendants up to B, A itself not included, as git means
    it; ``A^..B`` includes A)."""
    parts, is_range = split_spec(spec)
    if is_range:
        a, b = parts
        commits = _git(git, checkout, "rev-list", "--reverse", "--ancestry-path", "--end-of-options", f"{a}..{b}").split()
        if not commits:
            raise SettingsError(f"{spec} names no commit", hint="is A an ancestor of B?")
        return commits
    out = [commit_of(checkout, r, git) for r in parts]
    if len(set(out)) != len(out):
        raise SettingsError(f"--revisions names a commit twice: {spec}")
    return out


def commit_of(checkout: Path, revision: str, git: str = "git") -> str:
    """The full commit ``revision`` names (``rev-parse --verify``; ``--end-of-options`` keeps a
    revision from being read as an option)."""
    return _git(git, checkout, "rev-parse", "--verify", "--end-of-options", f"{revision}^{{commit}}")


def commits_between(checkout: Path, good: str, bad: str, git: str = "git") -> list[str]:
    """``good``, then every commit after it up to ``bad`` (first-parent order, oldest first)."""
    refuse_option_like([good, bad], "--good/--bad")
    g, b = commit_of(checkout, good, git), commit_of(checkout, bad, git)
    rest = _git(git, checkout, "rev-list", "--reverse", "--first-parent", "--ancestry-path", "--end-of-options",
                f"{g}..{b}").split()
    if not rest:
        raise SettingsError(f"no commit between {good} and {bad}", hint="--good must be an ancestor of --bad")
    return [g, *rest]


@contextmanager
def locked(folder: Path) -> Iterator[None]:
    """One worktree or venv change at a time per folder (campaigns of one host start together)."""
    folder.mkdir(parents=True, exist_ok=True)
    with open(folder / ".lock", "a") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        yield


@dataclass(frozen=True)
class Prepared:
    """A revision ready to run: its worktree, venv, dependency hash and where the venv came from."""

    worktree: Path
    venv: Path
    deps_hash: str
    venv_from: str  # "built", "kept" or the worktree it was copied from


def worktree(checkout: Path, revision: str, root: Path, git: str = "git") -> Path:
    """``root/<revision>``: a detached ``git worktree`` of ``checkout`` at ``revision`` (kept if there)."""
    path = root / revision
    with locked(root):
        if not (path / ".git").exists():
            _git(git, checkout, "worktree", "prune")
            _git(git, checkout, "worktree", "add", "--detach", "--force", "--", str(path), revision)
    return path


def _home_of(venvs: Path, deps: str, revision: str, tree: Path) -> Path | None:
    """The ``OMNI_CI_HOME`` that holds ``tree``'s own venv: the hash's home if this tree built it,
    else the revision's own home of a relocated copy (None when it has neither)."""
    built = venvs / deps
    if (built / "built-in").is_file() and (built / "built-in").read_text().strip() == str(tree):
        return built
    own = venvs / f"{deps}-{revision[:12]}"
    return own if (own / "for-worktree").is_file() else None


def prepare(checkout: Path, revision: str, root: Path, *, venv_name: str = "omni", git: str = "git",
            bash: str = "bash", progress: Callable[[str], None] = print) -> Prepared:
    """The revision's worktree under ``root`` and its own venv, VENV_OK checked.

    A venv is built once per dependency hash, with the checkout's ``prepare_omni_venv.sh`` and
    ``OMNI_CI_HOME=root/venvs/<hash>`` (its ``built-in`` names the worktree that built it). Another
    revision of that hash gets its own home, ``root/venvs/<hash>-<commit>``, holding a real copy
    relocated to its worktree and proven (:mod:`.venv_reuse`), its ``<tree>/omni`` linked there as
    upstream's script links it; a copy that cannot be proven is removed and the venv built afresh.
    A venv found in the worktree is kept as it is: REV_OK, in every run, stops one that is not the
    worktree's own (remove ``<tree>/omni`` and the next command prepares it again).
    """
    tree = worktree(checkout, revision, root, git)
    h = deps_hash(tree, bash)
    venvs = root / "venvs"
    venv = tree / venv_name
    commit = commit_of(tree, "HEAD", git)
    with locked(venvs):
        if venv.exists() or venv.is_symlink():
            # Kept as it is (never overwritten): VENV_OK here, and REV_OK in every run stops one
            # that serves another tree's code, naming both.
            home = _home_of(venvs, h, revision, tree) or Path(os.path.realpath(venv)).parent
            check_venv(tree, home, bash)
            return Prepared(tree, venv, h, "kept")
        source_file = venvs / h / "built-in"
        source = Path(source_file.read_text().strip()) if source_file.is_file() else None
        if source is not None and source != tree and (source / venv_name / "bin" / "python").exists():
            home = venvs / f"{h}-{revision[:12]}"
            progress(f"{revision[:7]}: reusing the venv of {source.name[:7]} (same omni_ci_deps_hash {h[:12]}): "
                     f"a relocated copy in {home}")
            try:
                venv_reuse.copy_venv(source, venvs / h, tree, home, venv_name, commit, git=git)
                (home / "for-worktree").write_text(f"{tree}\n")
                check_venv(tree, home, bash)
                return Prepared(tree, venv, h, str(source))
            except venv_reuse.NotRelocated as exc:
                progress(f"{revision[:7]}: the copy was not proven its own ({exc.message}); building afresh")
        own_home = venvs / h if source is None or source == tree else venvs / f"{h}-{revision[:12]}"
        progress(f"{revision[:7]}: building its venv with prepare_omni_venv.sh (omni_ci_deps_hash {h[:12]}"
                 f"{' is new' if source is None else ''})")
        build_venv(tree, own_home, bash=bash, log=venvs / f"{own_home.name}.log", extra_args=(venv_name,))
        check_venv(tree, own_home, bash)
        if own_home == venvs / h:
            source_file.write_text(f"{tree}\n")
        else:
            (own_home / "for-worktree").write_text(f"{tree}\n")
        return Prepared(tree, venv, h, "built")

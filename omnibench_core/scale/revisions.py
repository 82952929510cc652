"""Revisions of a checkout: from ``A,B,C`` or ``A..B``, a git worktree per revision, and a venv
per revision that is reused from another revision when ``omni_ci_deps_hash`` is equal (the
VENV_OK rule: source-only changes need no rebuild) and built with the checkout's
``prepare_omni_venv.sh`` otherwise.

A reused venv is copied, not linked, and the copy's absolute paths to the other worktree
(scripts' ``#!`` lines, ``.pth`` files, editable-install finders) are rewritten: an editable
install of revision A must not serve revision B's measurement.
"""

from __future__ import annotations

import fcntl
import shutil
import subprocess
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from ..errors import OmnibenchError, SettingsError
from ..gitinfo import refuse_option_like
from ..setup.checkout import build_venv, check_venv, deps_hash

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


def _relocate(venv: Path, old_root: Path, new_root: Path) -> None:
    """Rewrite ``old_root`` to ``new_root`` in the venv's small text files that hold absolute paths."""
    old, new = str(old_root), str(new_root)
    candidates = [*venv.glob("bin/*"), venv / "pyvenv.cfg", *venv.glob("lib/python*/site-packages/*.pth"),
                  *venv.glob("lib/python*/site-packages/__editable__*"), *venv.glob("lib/python*/site-packages/*.egg-link"),
                  *venv.glob("lib/python*/site-packages/*.dist-info/direct_url.json")]
    for path in candidates:
        if path.is_symlink() or not path.is_file() or path.stat().st_size > 1 << 20:
            continue
        try:
            text = path.read_text()
        except (UnicodeDecodeError, OSError):
            continue
        if old in text:
            path.write_text(text.replace(old, new))


def prepare(checkout: Path, revision: str, root: Path, *, venv_name: str = "omni", git: str = "git",
            bash: str = "bash", progress: Callable[[str], None] = print) -> Prepared:
    """The revision's worktree under ``root`` and its venv, VENV_OK checked.

    Venvs are kept by dependency hash in ``root/venvs/<hash>`` (that hash's ``OMNI_CI_HOME``,
    with ``.deps-hash`` and the worktree whose venv was built); a worktree whose hash has a venv
    gets a relocated copy, else its own build with the checkout's ``prepare_omni_venv.sh``.
    """
    tree = worktree(checkout, revision, root, git)
    h = deps_hash(tree, bash)
    home = root / "venvs" / h
    venv = tree / venv_name
    with locked(root / "venvs"):
        if venv.exists():
            check_venv(tree, home, bash)
            return Prepared(tree, venv, h, "kept")
        source_file = home / "built-in"
        source = Path(source_file.read_text().strip()) if source_file.is_file() else None
        if source is not None and (source / venv_name / "bin" / "python").exists():
            progress(f"{revision[:7]}: reusing the venv of {source.name[:7]} (same omni_ci_deps_hash {h[:12]})")
            shutil.copytree(source / venv_name, venv, symlinks=True)
            _relocate(venv, source, tree)
            check_venv(tree, home, bash)
            return Prepared(tree, venv, h, str(source))
        progress(f"{revision[:7]}: building its venv with prepare_omni_venv.sh (omni_ci_deps_hash {h[:12]} is new)")
        build_venv(tree, home, bash=bash, log=root / "venvs" / f"{h}.log", extra_args=(venv_name,))
        check_venv(tree, home, bash)
        source_file.write_text(f"{tree}\n")
        return Prepared(tree, venv, h, "built")

"""REV_OK: the server omnibench started and the clients' python run the revision's own code:
every package of the checkout they import resolves to a file of the revision's worktree that is
``HEAD``'s, and ``HEAD`` is the commit asked for.

A venv reused from another revision, an editable install whose ``.pth``/finder names another
tree, a ``.pth`` that puts another copy first, a ``build/lib`` copy or an edit inside the worktree
serve other code with nothing in the logs to say so. The gate asks each python that runs the
checkout's code (:mod:`.rev_probe`: the same interpreter, import options, environment, folder and
``sys.path[0]``) where it imports each package from:

- *the server's launch*: the console script omnibench started (``omni/bin/sgl-omni``), run as
  the kernel runs it: the interpreter and options of its ``#!`` line (or pip's ``/bin/sh``
  ``exec`` form), ``sys.path[0]`` its folder, with the server process's environment and folder;
- *the server process*: ``/proc/<pid>/cmdline``, ``cwd`` and ``environ`` of the process that
  serves (it may have exec'd itself into another program after the launch resolved its code);
- *the client*: the target's python with a client command's options, ``-m``/``-c``/script, env
  and folder (its ``-m`` module is asked too when it is one of the checkout's);
- *a CI stage* (``nox -s ci_stages``): the checkout venv's python running the stage's pytest.

The packages: the target's own (``sglang_omni``, ``sglang_omni_standin`` in the stand-in) and
:data:`CHECKOUT_PACKAGES` (``sglang_omni_router``, ``benchmarks``: every client and scorer), each
where the commit holds it (a package the commit lacks is skipped). The target's package must be
importable; another one a python cannot import at all runs no code there and passes. What one
resolves to must lie in the worktree, be tracked, and every file of its package folder must be
``HEAD``'s (:mod:`.rev_files`), but those the caller allows (``allowed_dirty``: a dirty
checkout's recorded files).
"""

from __future__ import annotations

import os
import subprocess
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from ..defaults import CHECKOUT_PACKAGES
from ..errors import WrongRevision
from ..statuses import GateStatus
from .gates import GateRecord
from .rev_files import CheckoutFiles, Difference, FileState, GitFailed, not_allowed
from .rev_probe import (
    PROBE_TIMEOUT_S,
    Found,
    Launch,
    command_launch,
    parse_options,
    path0,
    process_launch,
    resolve_module,
    resolve_modules,
    script_command,
    script_interpreter,
    script_launch,
)

__all__ = ["GATE", "PROBE_TIMEOUT_S", "CHECKOUT_PACKAGES", "Found", "Launch", "check_rev_ok", "command_launch",
           "git_repo_of", "not_applicable", "parse_options", "path0", "process_launch", "resolve_module",
           "resolve_modules", "script_command", "script_interpreter", "script_launch"]

GATE = "REV_OK"
# The checkout's packages a run imports besides the target's own: upstream's router (a console
# script of its pyproject.toml) and benchmarks/ (every client and scorer: `python -m benchmarks.eval...`).

Resolver = Callable[[Launch, Sequence[str]], dict[str, Found]]
RepoOf = Callable[[str], tuple[str, str] | None]


@dataclass(frozen=True)
class Problem:
    """Why one package of one launch is not the revision's code, in words, and the file it names."""

    why: str
    file: str
    state: str  # "cannot import", "outside the worktree", or a FileState's value


def git_repo_of(path: str, git: str = "git") -> tuple[str, str] | None:
    """The work tree holding ``path`` and its ``HEAD`` (None outside any git work tree)."""
    folder = path if os.path.isdir(path) else os.path.dirname(path)
    try:
        done = subprocess.run([git, "-C", folder, "rev-parse", "--show-toplevel", "HEAD"], capture_output=True,
                              text=True, timeout=60, check=False)
    except (OSError, subprocess.TimeoutExpired):
        return None
    lines = done.stdout.split()
    return (lines[0], lines[1]) if done.returncode == 0 and len(lines) == 2 else None


def _package_folder(files: CheckoutFiles, name: str, found: Found) -> list[str]:
    """The folders (relative to the root) whose files are the package's code: its ``__init__``'s
    folder, a module's file, or a namespace package's portions inside the worktree."""
    top = name.split(".")[0]
    if found.origin:
        rel = files.relative(found.origin)
        if rel is None:
            return []
        return [top] if rel.split(os.sep)[0] == top else [rel]
    return [r for r in (files.relative(p) for p in found.locations) if r is not None]


def _judge(files: CheckoutFiles, name: str, found: Found, allowed_dirty: frozenset[str],
           seen: dict[str, list[Difference]]) -> Problem | None:
    """What keeps ``name`` as ``found`` from being the revision's code (None: nothing)."""
    if found.origin:
        rel = files.relative(found.origin)
        if rel is None:
            return Problem(f"it is imported from {found.origin}, outside the worktree", found.origin,
                           "outside the worktree")
        state = files.state_of(rel)
        if state is not None and rel not in allowed_dirty:
            return Problem(f"it is imported from {rel}, which is {state.value}", found.origin, state.value)
    elif found.locations:
        inside = [p for p in found.locations if files.relative(p) is not None]
        if not inside:  # a namespace package with no portion in the worktree
            return Problem(f"it is imported from {', '.join(found.locations)}, outside the worktree",
                           found.locations[0], "outside the worktree")
    for folder in _package_folder(files, name, found):
        if folder not in seen:
            seen[folder] = not_allowed(files.differences(folder), allowed_dirty)
        if seen[folder]:
            first = seen[folder][0]
            more = f" (and {len(seen[folder]) - 1} more)" if len(seen[folder]) > 1 else ""
            return Problem(f"its file {first.path} is {first.state.value}{more}", os.path.join(files.root, first.path),
                           first.state.value)
    return None


def check_rev_ok(launches: Sequence[Launch], package: str, worktree: str, commit: str, *,
                 also: Sequence[str] = CHECKOUT_PACKAGES, allowed_dirty: frozenset[str] = frozenset(),
                 resolve: Resolver = resolve_modules, repo: RepoOf | None = None, git: str = "git") -> GateRecord:
    """REV_OK over ``launches``: ``worktree``'s ``HEAD`` is ``commit``, and each launch imports
    ``package`` (required; "" for none) and each of ``also`` the commit holds from tracked files of
    ``worktree`` that are ``HEAD``'s, but the paths in ``allowed_dirty`` (relative to the root).
    Raises :class:`WrongRevision` at the first that does not, naming the launch, the package, the
    file and why."""
    files = CheckoutFiles(worktree, git)
    repo = repo or (lambda path: git_repo_of(path, git))
    try:
        head = files.head()
        wanted = [p for p in dict.fromkeys((package, *also)) if p and files.has_package(p)]
    except GitFailed as exc:
        raise WrongRevision(f"REV_OK cannot read the worktree {worktree}: {exc}",
                            evidence={"asked worktree": worktree, "asked commit": commit},
                            hint="check that the worktree exists and is a git work tree") from exc
    if head != commit:
        raise WrongRevision(f"REV_OK: the worktree {worktree} is at {head[:12]}, not at the asked commit {commit[:12]}",
                            evidence={"asked worktree": worktree, "asked commit": commit, "its commit": head},
                            hint="the checkout moved under the run: check out the asked commit, or measure the new one")
    skipped = [p for p in dict.fromkeys((package, *also)) if p and p not in wanted]
    evidence = {"package": package, "packages": ", ".join(wanted) or "(none)", "worktree": worktree, "commit": commit,
                "not in this commit": ", ".join(skipped) or "(none)"}
    if allowed_dirty:
        evidence["allowed dirty"] = ", ".join(sorted(allowed_dirty))
    done: set[tuple[object, ...]] = set()
    seen: dict[str, list[Difference]] = {}
    for launch in launches:
        if launch.key in done:
            continue
        done.add(launch.key)
        names = list(wanted)
        if launch.module and launch.module.split(".")[0] in wanted and launch.module not in names:
            names.append(launch.module)
        found = resolve(launch, names)
        for name in names:
            where = found.get(name, Found())
            if not where.importable:
                if name == package or name == launch.module:
                    raise _refused(launch, name, where, Problem(f"the {launch.role} cannot import {name}", "",
                                                                "cannot import"), worktree, commit, repo)
                evidence[f"{launch.role}: {name}"] = "not importable here"
                continue
            try:
                problem = _judge(files, name, where, allowed_dirty, seen)
            except GitFailed as exc:
                problem = Problem(f"git could not tell whether it is HEAD's: {exc}", where.origin, "unknown")
            if problem is not None:
                raise _refused(launch, name, where, problem, worktree, commit, repo)
            module = where.origin or ", ".join(where.locations)
            evidence[f"{launch.role}: {'module' if name == package else name}"] = module
        evidence[f"{launch.role}: interpreter"] = launch.command
        evidence[f"{launch.role}: commit"] = head
    return GateRecord(GATE, GateStatus.PASSED, evidence=evidence)


def not_applicable(reason: str) -> GateRecord:
    """REV_OK where nothing the run starts imports the system under test, with why."""
    return GateRecord(GATE, GateStatus.NOT_APPLICABLE, evidence={"reason": reason})


_HINTS = {
    "outside the worktree": "the venv serves another tree's code (a reused venv, an editable install or a .pth that "
                            "names another tree, a copy installed into site-packages): rebuild it in this worktree "
                            "with `OMNI_CI_HOME=... bash .github/scripts/prepare_omni_venv.sh omni` (or remove the "
                            "worktree's venv and let omnibench prepare it again), and remove any .pth or PYTHONPATH "
                            "entry that puts another copy first; then repeat the run",
    FileState.UNTRACKED.value: "a file git does not track is imported (a build/lib copy, a stray module): remove it "
                               "(`git clean -n` lists the untracked files), or commit it, then repeat the run",
    FileState.CHANGED.value: "the file differs from the commit: commit the change and measure that commit, restore it "
                             "(`git checkout -- FILE`), or measure the dirty checkout as such (its recorded files are "
                             "allowed), then repeat the run",
    FileState.DELETED.value: "a file of the commit is gone from the worktree: restore it (`git checkout -- FILE`), "
                             "then repeat the run",
    "cannot import": "the python cannot import the package, so it does not run this worktree's code: rebuild the "
                     "venv with `OMNI_CI_HOME=... bash .github/scripts/prepare_omni_venv.sh omni`, then repeat the run",
}


def _refused(launch: Launch, name: str, where: Found, problem: Problem, worktree: str, commit: str,
             repo: RepoOf) -> WrongRevision:
    evidence = {"role": launch.role, "package": name, "file": problem.file or "(none)", "why": problem.state,
                "asked worktree": worktree, "asked commit": commit, "interpreter": launch.command,
                "sys.path[0]": launch.path0 or "(none)", "cwd": launch.cwd,
                "imported from": where.origin or ", ".join(where.locations) or f"nowhere: {name} cannot be imported"}
    message = f"REV_OK: the {launch.role} does not run {worktree}'s {name} at {commit[:12]}: {problem.why}"
    if problem.state == "outside the worktree":
        found = repo(problem.file)
        if found:
            evidence["its work tree"], evidence["its commit"] = found
            message = (f"REV_OK: the {launch.role} imports {name} from {found[0]} at {found[1][:12]}, not from the "
                       f"asked worktree {worktree} at {commit[:12]}")
        else:
            evidence["its work tree"] = "none: not in a git work tree"
    hint = _HINTS.get(problem.state, "repeat the run once the worktree is the commit's")
    return WrongRevision(message, evidence=evidence, hint=hint.replace("FILE", problem.file or "FILE"))

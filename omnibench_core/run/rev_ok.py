"""REV_OK: the server omnibench started and the client's python import the system under test
from the revision's own worktree, at the commit asked for.

A venv reused from another revision, or an editable install whose ``.pth``/finder names another
tree, serves that tree's code with nothing in the logs to say so. The gate asks each python that
runs the checkout's code where it imports the target's package from (``TargetFacts.package``:
``sglang_omni`` upstream, ``sglang_omni_standin`` in the stand-in), then asks git which work
tree and commit hold that file:

- *the server's launch*: the console script omnibench started (``omni/bin/sgl-omni``), run as
  the kernel runs it: the interpreter of its ``#!`` line (or of pip's ``/bin/sh`` ``exec`` form),
  ``sys.path[0]`` its folder, with the server process's environment and working folder;
- *the server process*: ``/proc/<pid>/cmdline``, ``cwd`` and ``environ`` of the process that
  serves (it may have exec'd itself into another program after the launch resolved its code);
- *the client*: the target's python with a client command's ``-m``/``-c``/script, env and folder.

Each probe is a fresh interpreter of the same path, environment, folder and ``sys.path[0]``:
imports resolve as they do in the process, and ``importlib.util.find_spec`` runs no package code.
Probes are injectable (``resolve``, ``repo``) for tests; the defaults are real subprocesses.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import tempfile
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from ..errors import WrongRevision
from ..statuses import GateStatus
from .gates import GateRecord

GATE = "REV_OK"
PROBE_TIMEOUT_S = 60.0
# pip's (distlib's) form for a #! line too long for the kernel: `'''exec' "PYTHON" "$0" "$@"`
_SH_EXEC = re.compile(r"""^'''exec' "([^"]+)" "\$0" "\$@"$""", re.M)
# The probe: sys.path[0] as the process had it, then where the package would be imported from.
_PROBE = """\
import importlib.util, json, os, sys
here = os.path.dirname(os.path.abspath(__file__))
if sys.path and os.path.abspath(sys.path[0] or ".") == here:
    del sys.path[0]
if sys.argv[1]:
    sys.path.insert(0, sys.argv[1])
spec = importlib.util.find_spec(sys.argv[2])
places = list(spec.submodule_search_locations or []) if spec else []
print(json.dumps({"origin": (spec.origin if spec and spec.origin not in (None, "namespace") else "") or
                  (places[0] if places else ""), "executable": sys.executable, "prefix": sys.prefix}))
"""


@dataclass(frozen=True)
class Launch:
    """How one python resolves imports: its interpreter path (unresolved: a venv is found through
    it), ``sys.path[0]`` ("" for none), environment and working folder, and which role it plays."""

    role: str
    interpreter: str
    path0: str
    cwd: str
    env: Mapping[str, str] = field(default_factory=dict, compare=False)

    @property
    def key(self) -> tuple[str, str, str]:
        """What decides the import, for probing each distinct python once."""
        return self.interpreter, self.path0, self.cwd


@dataclass(frozen=True)
class Origin:
    """Where a launch imports the package from: the file, and the work tree and commit holding it."""

    launch: Launch
    module: str  # "" when the package cannot be imported
    tree: str = ""  # "" when the file is in no git work tree
    head: str = ""


Resolver = Callable[[Launch, str], str]
RepoOf = Callable[[str], tuple[str, str] | None]


def script_interpreter(script: Path) -> str:
    """The python a console script runs on: its ``#!`` interpreter, or the python of pip's
    ``/bin/sh`` ``exec`` form; "" for a script that names none (a shell launcher, a binary)."""
    try:
        with open(script, "rb") as handle:
            head = handle.read(4096).decode("utf-8", "replace")
    except OSError:
        return ""
    if not head.startswith("#!"):
        return ""
    first = head.splitlines()[0][2:].strip()
    if first.split(" ")[0] in ("/bin/sh", "/usr/bin/sh", "/bin/bash"):
        found = _SH_EXEC.search(head)
        return found.group(1) if found else ""
    parts = first.split()
    if parts and os.path.basename(parts[0]) == "env" and len(parts) > 1:
        return parts[1]  # `#!/usr/bin/env python3`: found on PATH
    return parts[0] if parts and "python" in os.path.basename(parts[0]) else ""


def path0(args: Sequence[str], cwd: str, env: Mapping[str, str]) -> str:
    """``sys.path[0]`` of ``python ARGS`` started in ``cwd``, as CPython sets it: the script's
    (resolved) folder, the working folder for ``-m``, ``-c`` or no script, nothing with ``-I``,
    ``-P`` or ``PYTHONSAFEPATH``."""
    safe = bool(env.get("PYTHONSAFEPATH"))
    i = 0
    while i < len(args) and args[i].startswith("-") and args[i] != "-":
        arg = args[i]
        if arg.startswith("--"):
            i += 2 if arg == "--check-hash-based-pycs" else 1
            continue
        flags = arg[1:]
        for j, ch in enumerate(flags):
            if ch in "mc":  # the rest is the module or the command
                return "" if safe else cwd
            if ch in "IP":
                safe = True
            if ch in "WX":  # the rest, or the next argument, is its value
                i += j == len(flags) - 1
                break
        i += 1
    if safe:
        return ""
    if i < len(args) and args[i] != "-":
        return os.path.dirname(os.path.realpath(os.path.join(cwd, args[i])))
    return cwd


def _which(program: str, env: Mapping[str, str], cwd: str) -> str:
    if "/" in program:
        return os.path.join(cwd, program)
    return shutil.which(program, path=env.get("PATH", os.defpath)) or program


def script_launch(argv: Sequence[str], env: Mapping[str, str], cwd: str) -> Launch | None:
    """The launch of a console script ``argv[0]`` (None when it is no python script)."""
    if not argv:
        return None
    script = _which(argv[0], env, cwd)
    interpreter = script_interpreter(Path(script))
    if not interpreter:
        return None
    return Launch("server launch", _which(interpreter, env, cwd), os.path.dirname(os.path.realpath(script)), cwd, env)


def command_launch(role: str, argv: Sequence[str], env: Mapping[str, str], cwd: str) -> Launch:
    """The launch of ``argv`` = ``[python, *args]``."""
    return Launch(role, _which(argv[0], env, cwd), path0(argv[1:], cwd, env), cwd, env)


def _read(path: Path) -> bytes:
    with open(path, "rb") as handle:
        return handle.read()


def process_launch(pid: int, proc: Path = Path("/proc")) -> Launch | None:
    """The launch of a running process from ``/proc/<pid>`` (None when it cannot be read)."""
    base = proc / str(pid)
    try:
        argv = [a.decode("utf-8", "surrogateescape") for a in _read(base / "cmdline").split(b"\0") if a]
        cwd = os.readlink(base / "cwd")
        env = dict(item.decode("utf-8", "surrogateescape").split("=", 1)
                   for item in _read(base / "environ").split(b"\0") if b"=" in item)
    except OSError:
        return None
    return command_launch("server process", argv, env, cwd) if argv else None


def resolve_module(launch: Launch, package: str, timeout_s: float = PROBE_TIMEOUT_S) -> str:
    """Where ``launch`` imports ``package`` from ("" when it cannot): a fresh interpreter of the
    same path, environment and folder, with the same ``sys.path[0]``."""
    with tempfile.TemporaryDirectory(prefix="omnibench-rev-ok-") as folder:
        probe = Path(folder) / "rev_ok_probe.py"
        probe.write_text(_PROBE)
        try:
            done = subprocess.run([launch.interpreter, str(probe), launch.path0, package], env=dict(launch.env),
                                  cwd=launch.cwd or None, capture_output=True, text=True, timeout=timeout_s, check=False)
        except (OSError, subprocess.TimeoutExpired):
            return ""
    try:
        return str(json.loads(done.stdout.strip().splitlines()[-1])["origin"]) if done.returncode == 0 else ""
    except (ValueError, IndexError, KeyError, TypeError):
        return ""


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


def _same(a: str, b: str) -> bool:
    return bool(a) and bool(b) and os.path.realpath(a) == os.path.realpath(b)


def check_rev_ok(launches: Sequence[Launch], package: str, worktree: str, commit: str, *, resolve: Resolver = resolve_module,
                 repo: RepoOf = git_repo_of) -> GateRecord:
    """REV_OK over ``launches``: each imports ``package`` from a file inside ``worktree``, whose
    ``HEAD`` is ``commit``. Raises :class:`WrongRevision` naming both trees (or that the package
    cannot be imported) at the first that does not."""
    evidence = {"package": package, "worktree": worktree, "commit": commit}
    seen: set[tuple[str, str, str]] = set()
    for launch in launches:
        if launch.key in seen:
            continue
        seen.add(launch.key)
        module = resolve(launch, package)
        found = repo(module) if module else None
        origin = Origin(launch, module, *(found or ("", "")))
        if not module or not _same(origin.tree, worktree) or origin.head != commit:
            raise _mismatch(origin, package, worktree, commit)
        evidence[f"{launch.role}: interpreter"] = launch.interpreter
        evidence[f"{launch.role}: module"] = module
        evidence[f"{launch.role}: commit"] = origin.head
    return GateRecord(GATE, GateStatus.PASSED, evidence=evidence)


def not_applicable(reason: str) -> GateRecord:
    """REV_OK where nothing the run starts imports the system under test, with why."""
    return GateRecord(GATE, GateStatus.NOT_APPLICABLE, evidence={"reason": reason})


def _mismatch(origin: Origin, package: str, worktree: str, commit: str) -> WrongRevision:
    role, launch = origin.launch.role, origin.launch
    evidence = {"role": role, "asked worktree": worktree, "asked commit": commit, "interpreter": launch.interpreter,
                "sys.path[0]": launch.path0 or "(none)", "cwd": launch.cwd,
                "imported from": origin.module or f"nowhere: {package} cannot be imported"}
    if not origin.module:
        message = f"REV_OK: the {role} ({launch.interpreter}) cannot import {package}, so it does not run {worktree}'s code"
    elif not origin.tree:
        evidence["its work tree"] = "none: not in a git work tree"
        message = f"REV_OK: the {role} imports {package} from {origin.module}, outside the asked worktree {worktree}"
    else:
        evidence["its work tree"], evidence["its commit"] = origin.tree, origin.head
        where = origin.tree if not _same(origin.tree, worktree) else f"{origin.tree} at {origin.head[:12]}"
        message = (f"REV_OK: the {role} imports {package} from {where}, not from the asked worktree {worktree} "
                   f"at {commit[:12]}")
    return WrongRevision(message, evidence=evidence,
                         hint="the venv serves another revision's code: rebuild it in that worktree with "
                              "`OMNI_CI_HOME=... bash .github/scripts/prepare_omni_venv.sh omni` (or remove the "
                              "worktree's venv and let omnibench prepare it again), then repeat the run")

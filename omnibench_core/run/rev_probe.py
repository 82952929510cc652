"""REV_OK's probe: how a python that runs the checkout's code resolves its imports, and where it
finds the checkout's packages.

A *launch* is what decides an import: the interpreter path (unresolved: a venv is found through
it), the interpreter's own options that change ``sys.path`` (``-E``, ``-s``, ``-S``, ``-I``,
``-P``, from a console script's ``#!`` line or the process's command line), ``sys.path[0]``, the
environment and the working folder. The probe is a fresh interpreter of the same path, options,
environment and folder, with the same ``sys.path[0]``: imports resolve as they do in the process.
It runs no package code: the top-level name goes through ``importlib.util.find_spec`` (the
process's finders, an editable install's too) and each dotted part through
``importlib.machinery.PathFinder`` over its parent's search locations, without importing the parent.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import tempfile
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from ..process.capture import capture

PROBE_TIMEOUT_S = 60.0
# The interpreter options that change where imports come from: -E (no PYTHON* variables), -s (no
# user site), -S (no site at all: no site-packages, no .pth), -I (-E, -s and -P), -P (no sys.path[0]).
IMPORT_FLAGS = "EsSIP"
# pip's (distlib's) form for a #! line too long for the kernel: `'''exec' "PYTHON" "$0" "$@"`
_SH_EXEC = re.compile(r"""^'''exec' "([^"]+)" "\$0" "\$@"$""", re.M)
# The probe: sys.path[0] as the process had it, then where each name would be imported from.
_PROBE = """\
import importlib.machinery, importlib.util, json, os, sys, types
here = os.path.dirname(os.path.abspath(__file__))
if sys.path and os.path.abspath(sys.path[0] or ".") == here:
    del sys.path[0]
if sys.argv[1]:
    sys.path.insert(0, sys.argv[1])
out = {}
for name in sys.argv[2:]:
    parts = name.split(".")
    try:
        spec = importlib.util.find_spec(parts[0])
        for i in range(1, len(parts)):
            places = list(spec.submodule_search_locations or []) if spec is not None else []
            if not places:
                spec = None
                break
            parent = ".".join(parts[:i])
            if parent not in sys.modules:  # a stand-in parent (its code never runs): a namespace child asks for it
                stub = types.ModuleType(parent)
                stub.__path__, stub.__spec__ = places, spec
                sys.modules[parent] = stub
            spec = importlib.machinery.PathFinder.find_spec(".".join(parts[:i + 1]), places)
    except Exception as exc:
        out[name] = {"origin": "", "locations": [], "error": repr(exc)}
        continue
    origin = spec.origin if spec is not None and spec.has_location else ""
    out[name] = {"origin": origin or "", "locations": list(spec.submodule_search_locations or []) if spec else []}
print(json.dumps({"modules": out, "executable": sys.executable}))
"""


@dataclass(frozen=True)
class Launch:
    """How one python resolves imports: its interpreter path (unresolved: a venv is found through
    it), its import options (``-I``, ``-s``...), ``sys.path[0]`` ("" for none), environment and
    working folder, which role it plays, and the module it runs with ``-m`` ("" for none)."""

    role: str
    interpreter: str
    path0: str
    cwd: str
    env: Mapping[str, str] = field(default_factory=dict, compare=False)
    flags: tuple[str, ...] = ()
    module: str = ""

    @property
    def key(self) -> tuple[str, tuple[str, ...], str, str, str]:
        """What decides the import, for probing each distinct python once."""
        return self.interpreter, self.flags, self.path0, self.cwd, self.module

    @property
    def command(self) -> str:
        """The interpreter with its import options, as the evidence names it."""
        return " ".join((self.interpreter, *self.flags))


@dataclass(frozen=True)
class Found:
    """Where a launch imports one name from: the module's file ("" for a namespace package or a
    name it cannot import), and a package's search locations."""

    origin: str = ""
    locations: tuple[str, ...] = ()

    @property
    def importable(self) -> bool:
        """Whether the launch imports the name at all."""
        return bool(self.origin or self.locations)


@dataclass(frozen=True)
class Options:
    """What CPython makes of the options before the script: the import flags, whether
    ``sys.path[0]`` is left out (``-I``, ``-P``), the ``-m`` module, and where the script is
    (``-m``/``-c``/none: -1)."""

    flags: tuple[str, ...]
    safe: bool
    module: str
    script: int


def parse_options(args: Sequence[str]) -> Options:
    """The interpreter options of ``python ARGS`` (``args`` without the interpreter)."""
    letters: list[str] = []
    module, script = "", -1
    i = 0
    while i < len(args) and args[i].startswith("-") and args[i] != "-":
        arg = args[i]
        if arg.startswith("--"):
            i += 2 if arg == "--check-hash-based-pycs" else 1
            continue
        flags = arg[1:]
        stop = False
        for j, ch in enumerate(flags):
            if ch in "mc":  # the rest (or the next argument) is the module or the command
                rest = flags[j + 1:] or (args[i + 1] if i + 1 < len(args) else "")
                module = rest if ch == "m" else ""
                stop = True
                break
            if ch in IMPORT_FLAGS and ch not in letters:
                letters.append(ch)
            if ch in "WX":  # the rest, or the next argument, is its value
                i += j == len(flags) - 1
                break
        if stop:
            break
        i += 1
    else:
        script = i if i < len(args) and args[i] != "-" else -1
    return Options(tuple(f"-{ch}" for ch in letters), bool({"I", "P"} & set(letters)), module, script)


def honours_env(flags: Sequence[str]) -> bool:
    """Whether an interpreter with ``flags`` reads ``PYTHON*`` variables (not with -E or -I)."""
    return not {"-E", "-I"} & set(flags)


def path0(args: Sequence[str], cwd: str, env: Mapping[str, str]) -> str:
    """``sys.path[0]`` of ``python ARGS`` started in ``cwd``, as CPython sets it: the script's
    (resolved) folder, the working folder for ``-m``, ``-c`` or no script, nothing with ``-I``,
    ``-P`` or ``PYTHONSAFEPATH`` (unless ``-E`` hides it)."""
    opts = parse_options(args)
    if opts.safe or (honours_env(opts.flags) and env.get("PYTHONSAFEPATH")):
        return ""
    if opts.script >= 0:
        return os.path.dirname(os.path.realpath(os.path.join(cwd, args[opts.script])))
    return cwd


def script_command(script: Path) -> list[str]:
    """What the kernel runs for a console script: the ``#!`` interpreter and its options (or the
    python of pip's ``/bin/sh`` ``exec`` form); [] for a script that names no python."""
    try:
        with open(script, "rb") as handle:
            head = handle.read(4096).decode("utf-8", "replace")
    except OSError:
        return []
    if not head.startswith("#!"):
        return []
    parts = head.splitlines()[0][2:].split()
    if parts and parts[0] in ("/bin/sh", "/usr/bin/sh", "/bin/bash"):
        found = _SH_EXEC.search(head)
        return [found.group(1)] if found else []
    if parts and os.path.basename(parts[0]) == "env":  # `#!/usr/bin/env [-S] python3 -s`: found on PATH
        parts = parts[1:]
        while parts and parts[0].startswith("-"):  # env's own options (-S splits the rest of the line)
            parts = parts[1:]
    return parts if parts and "python" in os.path.basename(parts[0]) else []


def script_interpreter(script: Path) -> str:
    """The python a console script runs on ("" for a script that names none)."""
    command = script_command(script)
    return command[0] if command else ""


def _which(program: str, env: Mapping[str, str], cwd: str) -> str:
    if "/" in program:
        return os.path.join(cwd, program)
    return shutil.which(program, path=env.get("PATH", os.defpath)) or program


def script_launch(argv: Sequence[str], env: Mapping[str, str], cwd: str) -> Launch | None:
    """The launch of a console script ``argv[0]`` (None when it is no python script): its ``#!``
    interpreter with that line's options, ``sys.path[0]`` the script's folder unless they say not."""
    if not argv:
        return None
    script = _which(argv[0], env, cwd)
    command = script_command(Path(script))
    if not command:
        return None
    opts = parse_options(command[1:])
    safe = opts.safe or (honours_env(opts.flags) and bool(env.get("PYTHONSAFEPATH")))
    return Launch("server launch", _which(command[0], env, cwd), "" if safe else os.path.dirname(os.path.realpath(script)),
                  cwd, env, opts.flags)


def command_launch(role: str, argv: Sequence[str], env: Mapping[str, str], cwd: str) -> Launch:
    """The launch of ``argv`` = ``[python, *args]``."""
    opts = parse_options(argv[1:])
    return Launch(role, _which(argv[0], env, cwd), path0(argv[1:], cwd, env), cwd, env, opts.flags, opts.module)


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


def resolve_modules(launch: Launch, names: Sequence[str], timeout_s: float = PROBE_TIMEOUT_S) -> dict[str, Found]:
    """Where ``launch`` imports each of ``names`` from (a name it cannot import: an empty
    :class:`Found`): a fresh interpreter of the same path, options, environment and folder."""
    with tempfile.TemporaryDirectory(prefix="omnibench-rev-ok-") as folder:
        probe = Path(folder) / "rev_ok_probe.py"
        probe.write_text(_PROBE)
        # bounded as every probe is: one deadline, capped output, nothing it started left running
        # (a .pth or sitecustomize of the venv runs in it)
        done = capture([launch.interpreter, *launch.flags, str(probe), launch.path0, *names], timeout_s,
                       env=launch.env, cwd=launch.cwd or None)
    if not done.ok:
        return {}
    try:
        modules = json.loads(done.stdout.strip().splitlines()[-1])["modules"]
        return {name: Found(str(m["origin"]), tuple(str(p) for p in m["locations"])) for name, m in modules.items()}
    except (ValueError, IndexError, KeyError, TypeError):
        return {}


def resolve_module(launch: Launch, package: str, timeout_s: float = PROBE_TIMEOUT_S) -> str:
    """Where ``launch`` imports ``package`` from: its file, or its first search location ("" when
    it cannot)."""
    found = resolve_modules(launch, [package], timeout_s).get(package, Found())
    return found.origin or (found.locations[0] if found.locations else "")

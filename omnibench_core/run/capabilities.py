"""The capability probe: before a run starts anything, ask the checkout what it supports, and refuse
what the planned steps need that its era lacks.

sglang-omni changes its clients and functions over time: checkouts before about 2026-08 have no
``--reference-audio-field`` in the seed-tts client (argparse exits 2 on it: upstream
``sgl-project/sglang-omni`` ``benchmarks/eval/benchmark_omni_seedtts.py`` at 12f259e44889 has none,
``stevejake007/sglang-omni`` at 8a6fc24123ce has it); older ``run_videoamme_eval`` has no
``compute_wer``, older ``compute_text_audio_consistency_from_records`` no ``asr_router_port``; CI
configs from before MiniCPM-o (``tests/test_model/omni_ci_config.py``, whose
``select_omni_ci_preset`` reads ``OMNI_CI_MODEL``) ignore the variable. A campaign across such
commits would fail mid-run or blame the wrong commit.

What the plan needs is read from its own steps, so no plugin declares it twice: a step run by the
checkout's python as ``-m benchmarks....`` (or as ``-c`` code that parses arguments) needs every
``--flag`` it passes in that client's ``--help``; ``-c`` code needs each keyword it passes to a
function it imports from the checkout in that function's signature. The answers are cached per
commit (:mod:`omnibench_core.store.capabilities_file`), so a matrix probes each commit once.
"""

from __future__ import annotations

import ast
import hashlib
import json
import os
import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from ..errors import ProbeFailed, UnsupportedOption
from ..process.capture import Ending, capture
from ..process.processes import build_env
from ..records import Command, Step, TargetEnv
from ..store import capabilities_file
from ..store.capabilities_file import VAR_KEYWORD, Capabilities

CHECKOUT_PACKAGES = ("benchmarks",)  # the checkout's own packages whose interfaces change by era
CI_CONFIG = "tests/test_model/omni_ci_config.py"
PROBE_TIMEOUT_S = 300.0  # importing an upstream client can import torch: minutes on a cold disk
_FLAG = re.compile(r"(?<![\w-])(--[A-Za-z0-9][\w.-]*)")
_QUOTED = re.compile(r"""["']([a-z0-9][a-z0-9_.-]*)["']""")

# Run in the checkout's python: each "a.b.c.f" imported from its longest importable module, then
# its parameter names ("**" for **kwargs); None and the error for what cannot be imported.
SIGNATURES = """\
import importlib, inspect, json, sys
out, errors = {}, {}
for key in json.loads(sys.argv[1]):
    parts = key.split(".")
    for cut in range(len(parts) - 1, 0, -1):
        try:
            obj = importlib.import_module(".".join(parts[:cut]))
        except ModuleNotFoundError:
            continue
        except Exception as exc:
            errors[key] = f"{type(exc).__name__}: {exc}"
            break
        try:
            for part in parts[cut:]:
                obj = getattr(obj, part)
            params = inspect.signature(obj).parameters.values()
            out[key] = ["**" if p.kind is p.VAR_KEYWORD else p.name for p in params]
        except Exception as exc:
            errors[key] = f"{type(exc).__name__}: {exc}"
        break
    else:
        errors[key] = "no module of it can be imported"
    out.setdefault(key, None)
print(json.dumps({"signatures": out, "errors": errors}))
"""


@dataclass(frozen=True)
class Need:
    """One thing a planned step needs of the checkout: a ``flag`` of a client, or a ``keyword`` of
    a function (``of`` names the client or the function)."""

    workload: str
    step: str
    kind: str  # "flag" or "keyword"
    of: str
    name: str


@dataclass(frozen=True)
class Client:
    """A client of the checkout as a step runs it: its cache key and the argv that prints its help."""

    key: str
    help_argv: tuple[str, ...]


Runner = Callable[[Sequence[str], Mapping[str, str], str | None, float], tuple[int, str]]
FAILED_CODES = {Ending.DEADLINE: 124, Ending.TOO_MUCH: 125, Ending.NOT_STARTED: 127}
TAIL_LINES, TAIL_CHARS = 5, 600  # how much of a failed probe's output its one-line reason keeps


def tail(text: str) -> str:
    """The last lines of ``text`` on one line, cut to :data:`TAIL_CHARS` (a 20 MB line stays a line)."""
    joined = " | ".join(line.strip()[-TAIL_CHARS:] for line in text.strip().splitlines()[-TAIL_LINES:])
    return joined if len(joined) <= TAIL_CHARS else "..." + joined[-TAIL_CHARS:]


def run_probe(argv: Sequence[str], env: Mapping[str, str], cwd: str | None, timeout_s: float) -> tuple[int, str]:
    """Run one probe command within ``timeout_s`` in all (:func:`~omnibench_core.process.capture.capture`:
    output capped, decoded with replacement, nothing it started left running). ``(0, stdout then
    stderr)`` when it exited 0; else a non-zero code (its own, or 124 past the deadline, 125 for too
    much output, 127 when it could not start) and one line saying why, with its output's tail."""
    got = capture(argv, timeout_s, env=env, cwd=cwd)
    if got.ok:
        return 0, got.stdout + got.stderr
    code = got.returncode if got.returncode is not None else FAILED_CODES.get(got.ending, 1)
    said = tail(got.stdout + "\n" + got.stderr)
    return code or 1, got.why(timeout_s) + (f": {said}" if said else "")


def _ours(dotted: str) -> bool:
    return dotted.split(".")[0] in CHECKOUT_PACKAGES


def _flags(args: Iterable[str]) -> list[str]:
    return [a.split("=", 1)[0] for a in args if a.startswith("--") and len(a) > 2]


def _calls(code: str) -> tuple[dict[str, set[str]], bool]:
    """The checkout functions ``code`` calls with the keywords it passes, and whether it parses
    command-line arguments (so ``--help`` prints its flags)."""
    try:
        tree = ast.parse(code)
    except SyntaxError:
        return {}, False
    bound: dict[str, str] = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            for alias in node.names:
                bound[alias.asname or alias.name] = f"{node.module}.{alias.name}"
        elif isinstance(node, ast.Import):
            for alias in node.names:
                bound[alias.asname or alias.name.split(".")[0]] = alias.name if alias.asname else alias.name.split(".")[0]

    def dotted(expr: ast.expr) -> str | None:
        if isinstance(expr, ast.Name):
            return bound.get(expr.id)
        if isinstance(expr, ast.Attribute):
            base = dotted(expr.value)
            return f"{base}.{expr.attr}" if base else None
        return None

    calls: dict[str, set[str]] = {}
    parses = False
    for node in ast.walk(tree):
        if not isinstance(node, ast.Call):
            continue
        if isinstance(node.func, ast.Attribute) and node.func.attr == "parse_args":
            parses = True
        name = dotted(node.func)
        if name and _ours(name):
            calls.setdefault(name, set()).update(k.arg for k in node.keywords if k.arg)
    return calls, parses


def needs_of(steps: Mapping[str, Sequence[Step]], target: TargetEnv) -> tuple[list[Need], dict[str, Client]]:
    """What the planned ``steps`` (by workload) need of the checkout, and the clients to ask."""
    needs: list[Need] = []
    clients: dict[str, Client] = {}
    for workload, planned in steps.items():
        for step in planned:
            if not isinstance(step.run, Command):
                continue
            argv = step.run.argv
            if len(argv) < 3 or argv[0] != target.python:
                continue
            client: Client | None = None
            if argv[1] == "-m" and _ours(argv[2]):
                client = Client(f"-m {argv[2]}", (argv[0], "-m", argv[2], "--help"))
            elif argv[1] == "-c":
                calls, parses = _calls(argv[2])
                for function, keywords in sorted(calls.items()):
                    needs += [Need(workload, step.name, "keyword", function, k) for k in sorted(keywords)]
                if parses and calls:
                    digest = hashlib.sha256(argv[2].encode()).hexdigest()[:12]
                    client = Client(f"-c {min(calls)} ({digest})", (argv[0], "-c", argv[2], "--help"))
            if client is not None:
                clients[client.key] = client
                needs += [Need(workload, step.name, "flag", client.key, f) for f in dict.fromkeys(_flags(argv[3:]))]
    return needs, clients


def ci_models(checkout: Path) -> tuple[str, ...]:
    """The model names the checkout's CI config knows, when that config reads ``OMNI_CI_MODEL``;
    empty when it does not (CI from before MiniCPM-o runs Qwen3-Omni whatever the variable says)."""
    try:
        text = (checkout / CI_CONFIG).read_text(errors="replace")
    except OSError:
        return ()
    if "OMNI_CI_MODEL" not in text:
        return ()
    return tuple(sorted({m for m in _QUOTED.findall(text) if m in ("minicpmo", "qwen3-omni", "qwen3_omni")}))


def help_flags(text: str) -> tuple[str, ...]:
    """The option strings an argparse ``--help`` offers: those of its usage block and of each
    option line's invocation (aliases included), never a flag its help prose only mentions."""
    usage, _, rest = text.partition("\n\n")
    found = _FLAG.findall(usage) if usage.lstrip().startswith("usage:") else []
    for line in (rest if found else text).splitlines():
        if line.lstrip().startswith("-"):
            found += _FLAG.findall(re.split(r"\s{2,}", line.strip(), maxsplit=1)[0])
    return tuple(dict.fromkeys(found))


def probe(target: TargetEnv, clients: Mapping[str, Client], functions: Iterable[str], *,
          runner: Runner = run_probe, timeout_s: float = PROBE_TIMEOUT_S) -> Capabilities:
    """Ask the checkout, as omnibench will run it (its python, its environment, its folder as
    the working directory): each client's ``--help`` and each function's signature."""
    env = build_env(os.environ, target.env, target.unset)
    flags: dict[str, tuple[str, ...] | None] = {}
    errors: dict[str, str] = {}
    failed: set[str] = set()
    for key, client in clients.items():
        code, out = runner(client.help_argv, env, target.cwd, timeout_s)
        if code == 0:
            flags[key] = help_flags(out)
        else:
            flags[key] = None
            errors[key] = f"--help failed: {tail(out)}"
            failed.add(key)
    signatures: dict[str, tuple[str, ...] | None] = {}
    wanted = sorted(set(functions))
    if wanted:
        code, out = runner((target.python, "-c", SIGNATURES, json.dumps(wanted)), env, target.cwd, timeout_s)
        try:
            answer = json.loads(out.strip().splitlines()[-1]) if code == 0 else None
        except (ValueError, IndexError):
            answer = None
        if not isinstance(answer, dict):
            signatures = {f: None for f in wanted}
            errors.update({f: f"the signature probe failed: {tail(out)}" for f in wanted})
            failed.update(wanted)
        else:
            signatures = {f: None if answer["signatures"].get(f) is None else tuple(answer["signatures"][f])
                          for f in wanted}
            errors.update({str(k): tail(str(v)) for k, v in answer.get("errors", {}).items()})
    checkout = Path(target.cwd) if target.cwd else None
    return Capabilities(target.revision, flags, signatures, ci_models(checkout) if checkout else (), errors,
                        frozenset(failed))


def capabilities(target: TargetEnv, clients: Mapping[str, Client], functions: Iterable[str], results_root: Path,
                 *, runner: Runner = run_probe, progress: Callable[[str], None] = print) -> Capabilities:
    """The checkout's answers: from the cache for a clean commit whose python was asked all of
    these before, else probed; for a clean commit, the answers (never the failed probes) cached."""
    functions = set(functions)
    cacheable = not target.dirty.strip() and target.revision not in ("", "unknown")
    cached = capabilities_file.load(results_root, target.revision, target.python) if cacheable else None
    if cached is not None and cached.covers(set(clients), functions):
        return cached
    progress(f"asking the checkout at {target.revision[:12]} what it supports (its clients' --help, "
             "the signatures omnibench calls)")
    found = probe(target, clients, functions, runner=runner)
    if cached is not None:
        found = cached.merged(found)
    answers = found.answered()
    if cacheable and (answers.client_flags or answers.signatures):
        capabilities_file.save(results_root, answers, target.python)
    return found


def missing(needs: Sequence[Need], found: Capabilities) -> list[tuple[Need, str]]:
    """Each need the checkout does not meet, with why."""
    out = []
    for need in needs:
        if need.kind == "flag":
            flags = found.client_flags.get(need.of)
            if flags is None:
                out.append((need, f"its client `{need.of}` did not print its --help "
                                  f"({found.errors.get(need.of, 'no answer')})"))
            elif need.name not in flags:
                out.append((need, f"its client `{need.of}` has no {need.name} (argparse would exit 2)"))
        else:
            params = found.signatures.get(need.of)
            if params is None:
                out.append((need, f"{need.of} cannot be imported ({found.errors.get(need.of, 'no answer')})"))
            elif need.name not in params and VAR_KEYWORD not in params:
                out.append((need, f"{need.of}({', '.join(params)}) takes no {need.name} (a TypeError)"))
    return out


def unsupported_error(gaps: Sequence[tuple[Need, str]], commit: str) -> UnsupportedOption:
    """The typed refusal: the first missing option on its line, every gap as evidence."""
    first, why = gaps[0]
    option = first.name if first.kind == "flag" else f"{first.of.rsplit('.', 1)[-1]}({first.name}=...)"
    return UnsupportedOption(
        f"the checkout at {commit[:12]} does not support {option} ({first.workload}.{first.step}): "
        "not measurable with these options",
        option=option, commit=commit,
        evidence={f"{n.workload}.{n.step} {n.name}": w for n, w in gaps},
        hint=f"its era predates {option}: measure a later commit, or run omnibench's own client on it "
             f"(--opt {first.workload}.client=native); in a matrix, bisect or history such a commit is skipped")


def probe_failed_error(gaps: Sequence[tuple[Need, str]], commit: str, python: str) -> ProbeFailed:
    """The refusal when the checkout could not be asked (a probe failed): no fact of its era, so
    nothing is cached and the hint says how to make the probe answer, not that the era is old."""
    first, why = gaps[0]
    return ProbeFailed(
        f"the checkout at {commit[:12]} did not answer omnibench's capability probe: {why}",
        evidence={"commit": commit, **{f"{n.workload}.{n.step} {n.name}": w for n, w in gaps}},
        hint=f"run `{python} {first.of.split(' (')[0]}{' --help' if first.kind == 'flag' else ''}` in the checkout "
             "by hand and mend what stops it (its venv, an import); nothing was cached: the next command asks again")


def check_plan(steps: Mapping[str, Sequence[Step]], target: TargetEnv, results_root: Path, *,
               runner: Runner = run_probe, progress: Callable[[str], None] = print) -> Capabilities | None:
    """Raise :class:`UnsupportedOption` when the checkout lacks something the planned steps need;
    the answers (None when the plan needs nothing of the checkout)."""
    needs, clients = needs_of(steps, target)
    if not needs and not clients:
        return None
    found = capabilities(target, clients, {n.of for n in needs if n.kind == "keyword"}, results_root,
                         runner=runner, progress=progress)
    gaps = missing(needs, found)
    unanswered = [(n, w) for n, w in gaps if n.of in found.failed]
    if unanswered:
        raise probe_failed_error(unanswered, target.revision, target.python)
    if gaps:
        raise unsupported_error(gaps, target.revision)
    return found

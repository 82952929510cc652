"""The recorded upstream contracts (``tests/fixtures/upstream/*.json``) and the checks tests hold
omnibench's command builders, native clients and stand-in to.

Each fixture holds facts read from one upstream file (repository, path, commit, the date read):
flag names, types, defaults and choices, JSON keys written, signatures called. Facts, never code.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

FIXTURES = Path(__file__).resolve().parent / "fixtures" / "upstream"


def load(name: str) -> dict[str, Any]:
    """One fixture by file stem (``sgl-omni-serve``, ``benchmark_omni_seedtts``, ...)."""
    return json.loads((FIXTURES / f"{name}.json").read_text())


@dataclass(frozen=True)
class Flag:
    """One recorded flag: its value type (``bool`` for a switch), default and choices."""

    name: str
    type: str
    default: Any
    choices: tuple[str, ...] | None
    switch: bool


def flags(contract: dict[str, Any]) -> dict[str, Flag]:
    """A program's flags by every spelling (aliases too)."""
    out: dict[str, Flag] = {}
    for f in contract["flags"]:
        flag = Flag(f["name"], f["type"], f.get("default"), tuple(f["choices"]) if "choices" in f else None,
                    f.get("action") == "store_true")
        for name in (f["name"], *f.get("aliases", ())):
            out[name] = flag
    return out


def _fits(value: str, kind: str) -> bool:
    if kind == "int":
        return value.lstrip("-").isdigit()
    if kind == "float":
        try:
            float(value)
        except ValueError:
            return False
        return True
    return True


def argv_problems(argv: list[str] | tuple[str, ...], contract: dict[str, Any]) -> list[str]:
    """Every flag in ``argv`` the recorded program lacks, or whose value is of the wrong type or choice.

    ``argv`` holds only the program's own flags (no interpreter, no module). Dotted stage flags are
    judged by the contract's ``dotted_flags`` record when it has one.
    """
    known = flags(contract)
    dotted = contract.get("dotted_flags")
    problems: list[str] = []
    i = 0
    while i < len(argv):
        word = argv[i]
        name, eq, inline = word.partition("=")
        if not name.startswith("--"):
            problems.append(f"{word!r}: not a flag")
            i += 1
            continue
        if name in known:
            flag = known[name]
            if flag.switch:
                i += 1
                continue
            value = inline if eq else (argv[i + 1] if i + 1 < len(argv) else None)
            i += 1 if eq else 2
            if value is None:
                problems.append(f"{name}: no value")
            elif not _fits(value, flag.type):
                problems.append(f"{name} {value!r}: upstream types it {flag.type}")
            elif flag.choices and value not in flag.choices:
                problems.append(f"{name} {value!r}: upstream's choices are {list(flag.choices)}")
            continue
        if dotted and "." in name:
            value = inline if eq else (argv[i + 1] if i + 1 < len(argv) else None)
            i += 1 if eq else 2
            problem = dotted_problem(name[2:], value, dotted)
            if problem:
                problems.append(problem)
            continue
        problems.append(f"{name}: upstream has no such flag")
        i += 1
    return problems


def dotted_problem(key: str, value: str | None, record: dict[str, Any]) -> str | None:
    """Why the recorded ``sgl-omni serve`` refuses ``--key value``, from the record alone."""
    if value is None:
        return f"--{key}: missing value"
    stage, _, rest = key.partition(".")
    if stage not in record["stages"]:
        return f"--{key}: no stage {stage!r}"
    field, _, sub = rest.partition(".")
    kind = None
    if field == "engine":
        if stage not in record["engine_stages"] or not sub:
            return f"--{key}: engine.* only on {record['engine_stages']}, and one key below it"
        kind = record["engine_keys_declared"].get(sub)
    elif field == "factory":
        if not sub:
            return f"--{key}: a settings group"
        kind = record["factory_keys_declared"].get(sub)
    elif field in record["stage_fields"] and not sub:
        kind = record["stage_fields"][field].split("|")[0]
    elif field not in ("env", "comm"):
        return f"--{key}: stage {stage!r} has no {field!r}"
    if kind in ("int", "float") and not _fits(value, kind):
        return f"--{key} {value!r}: upstream types it {kind}"
    return None


def provenance(contract: dict[str, Any]) -> list[tuple[str, str, str]]:
    """(repository, path, commit) of every upstream file a fixture names."""
    out = []
    for entry in (contract, *contract.get("also_read", ()), *contract.get("scripts", ()),
                  *contract.get("functions", ())):
        if "repository" in entry:
            out.append((entry["repository"], entry["path"], entry["commit"]))
    for value in contract.values():
        if isinstance(value, dict) and "repository" in value:
            out.append((value["repository"], value["path"], value["commit"]))
    return out

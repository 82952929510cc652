"""Ask a checkout what its ``sgl-omni serve`` takes: its ``serve --help``, run with the checkout's
own venv and environment (bounded by the capability probe's :func:`~omnibench_core.run.capabilities.run_probe`),
cached per commit (:mod:`omnibench_core.store.serve_help_file`). Which era those flags are is the
target's to say (``builtin/serve_flags.py``); this module only asks and remembers.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping, Sequence
from pathlib import Path

from ..errors import ProbeFailed
from ..process.processes import build_env
from ..store import serve_help_file
from ..store.serve_help_file import ServeHelp
from .capabilities import PROBE_TIMEOUT_S, Runner, run_probe, tail

# typer's help is drawn for a terminal's width: a wide one keeps each option on its line, plain
_HELP_ENV = {"COLUMNS": "400", "NO_COLOR": "1", "TERM": "dumb"}
_OPTION = re.compile(r"(?<![\w-])(--[A-Za-z][\w.-]*)")


def option_strings(text: str) -> tuple[str, ...]:
    """Every ``--option`` a help text names (typer's boxes or argparse's lines alike), in order, once."""
    return tuple(dict.fromkeys(m.rstrip(".") for m in _OPTION.findall(text)))


def serve_help(serve: str, *, commit: str, dirty: str, env: Mapping[str, str], unset: Sequence[str] = (),
               cwd: str | None, results_root: Path | None, runner: Runner = run_probe,
               timeout_s: float = PROBE_TIMEOUT_S, memo: dict[str, ServeHelp] | None = None) -> ServeHelp:
    """The option strings ``<serve> serve --help`` prints for the checkout at ``commit``: from
    ``memo`` or the cache for a clean commit, else asked (and, when it answered, cached). An
    :class:`~omnibench_core.errors.ProbeFailed` naming the program, the commit and why (the output's
    tail) when it did not."""
    cacheable = not dirty.strip() and commit not in ("", "unknown")
    key = f"{serve}@{commit}"
    if cacheable and memo is not None and key in memo:
        return memo[key]
    cached = serve_help_file.load(results_root, commit) if cacheable and results_root is not None else None
    if cached is not None and cached.program == serve:
        found = cached
    else:
        code, out = runner((serve, "serve", "--help"), build_env(os.environ, {**env, **_HELP_ENV}, tuple(unset)),
                           cwd, timeout_s)
        if code != 0:  # not a fact of its era: nothing cached, asked again next time
            raise ProbeFailed(f"the checkout at {commit[:12]} did not say which flags its sgl-omni serve takes: "
                              f"{tail(out)}", evidence={"program": serve, "commit": commit},
                              hint=f"run `{serve} serve --help` in the checkout and mend what stops it; nothing was "
                                   "cached: the next command asks again")
        found = ServeHelp(commit, serve, option_strings(out))
        if cacheable and results_root is not None and results_root.is_dir():
            serve_help_file.save(results_root, found)
    if cacheable and memo is not None:
        memo[key] = found
    return found

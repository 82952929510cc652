"""A self-test workload for plugin authors and for omnibench's own tests.

``selftest`` runs the whole machinery for real on any machine: a server process on loopback
that opens its port only after a loading delay, a client program that sends requests to it, a
scoring server shared by the score phase, and a collector with coverage rules. Its options make
the server die during startup, never become healthy, or the client run long, so every gate
can be exercised::

    invoke run --workload selftest --opt selftest.delay=2 --opt selftest.requests=50

Its server and client are the programs of :mod:`omnibench_core.builtin.selftest_programs` (the
standard library only, so they start cheaply); run ``python -m
omnibench_core.builtin.selftest_programs serve --help`` for the server's own flags.
"""

from __future__ import annotations

import sys
from collections.abc import Mapping
from dataclasses import replace
from pathlib import Path

from ..hooks.specs import hookimpl
from ..jsonio import read_json, write_json
from ..records import Collected, Command, Option, RuleResult, RunContext, Scorer, ServeSpec, Step, StepContext, Workload
from ..records.options import defaults, format_value

NAME = "selftest"
# The server and client programs, by module name: imported by the processes that run them, never here
# (loading the plugins in every omnibench process would import http.server for nothing).
PROGRAMS = "omnibench_core.builtin.selftest_programs"
OPTIONS = (
    Option("delay", float, 0.3, "seconds the server 'loads' with its port closed", min=0),
    Option("requests", int, 8, "requests the client sends", min=1),
    Option("client_seconds", float, 0.0, "extra seconds the client runs (to test interrupts)", min=0),
    Option("die", bool, False, "the server exits with an error during startup"),
    Option("never_healthy", bool, False, "the server answers /health with 503 unhealthy forever"),
    Option("children", int, 1, "helper processes the server spawns into its group", min=0),
    Option("fail_once", str, "", "a path: the first client to find it missing creates it and fails (a retried run)"),
    Option("hold", str, "", "a path: the client ends only once it exists (a test holds a run open until it says)"),
    Option("serve_with_target", bool, False, "start the server with the target's own serve command (model path "
           "'selftest'), so the revision under test is what serves (a stand-in checkout's sgl-omni)"),
)
DEFAULT_OPTIONS = defaults(OPTIONS)


# -- the plugin ------------------------------------------------------------------------------
def _server_spec(ctx: RunContext, label: str) -> ServeSpec:
    o = ctx.options
    if o.get("serve_with_target"):
        # The target builds the argv (`sgl-omni serve --model-path selftest ... --port P`); the
        # checkout's command must start this module's server with these flags.
        return ServeSpec(label=label, model_path=NAME, args=("--delay", format_value(o["delay"])))
    argv = [sys.executable, "-m", PROGRAMS, "serve", "--port", str(ctx.port),
            "--delay", format_value(o["delay"]), "--children", format_value(o["children"])]
    if o["die"]:
        argv.append("--die")
    if o["never_healthy"]:
        argv.append("--never-healthy")
    if ctx.settings.local_delay_ms:  # the planted regression of the local target, as its server does
        argv += ["--delay-ms", f"{ctx.settings.local_delay_ms:g}"]
    return ServeSpec(label=label, argv=tuple(argv))


def plan(ctx: RunContext) -> list[Step]:
    """The client step on a fresh self-test server."""
    out = ctx.workload_dir / "client.json"
    argv = [sys.executable, "-m", PROGRAMS, "client", "--url", ctx.endpoint.base_url,
            "--requests", format_value(ctx.options["requests"]), "--sleep", format_value(ctx.options["client_seconds"]),
            "--out", str(out)]
    if ctx.options["fail_once"]:
        argv += ["--fail-once", str(ctx.options["fail_once"])]
    if ctx.options["hold"]:
        argv += ["--hold", str(ctx.options["hold"])]
    return [Step("client", Command(tuple(argv)), server=_server_spec(ctx, ctx.workload),
                 outputs=(f"{ctx.workload}/client.json",))]


def _check_echoes(ctx: StepContext) -> None:
    import requests  # as in client(): the server's start does without it

    rows = read_json(ctx.workload_dir / "client.json")["per_request"]
    results = []
    with requests.Session() as session:
        for row in rows:
            reply = session.post(ctx.endpoint.url("/v1/check"), json={"text": row["text"], "echo": row["echo"]}, timeout=30)
            reply.raise_for_status()
            results.append({"id": row["id"], "ok": bool(reply.json()["ok"])})
    ctx.progress(f"checked {len(results)} echoes")
    write_json(ctx.workload_dir / "score.json", {"evaluated": len(results),
                                                 "matched": sum(r["ok"] for r in results), "per_sample": results})


def score_plan(ctx: RunContext) -> list[Step]:
    """The echo-check scorer: one shared scoring server checks every echo of the workload."""
    # The scoring server ignores the workload's failure options: it is another server.
    spec = _server_spec(replace(ctx, options={**DEFAULT_OPTIONS, "children": 0}), "echo-scorer")
    return [Step("echo-check", _check_echoes, phase="score", server=spec, outputs=(f"{ctx.workload}/score.json",))]


def collect(run_dir: Path, options: Mapping[str, object], scored: bool = True) -> Collected:
    """Metrics and coverage rules of the self-test (``scored`` False: its echo check was skipped,
    so no ``matched`` and no rule on it)."""
    wdir = run_dir / NAME
    rows = read_json(wdir / "client.json")["per_request"]
    ok = [r for r in rows if r["is_success"]]
    expected = options["requests"]
    metrics = {
        f"{NAME}.requests": len(rows),
        f"{NAME}.failed": len(rows) - len(ok),
        f"{NAME}.latency_mean_s": sum(r["latency_s"] for r in ok) / len(ok) if ok else None,
    }
    rules = [
        RuleResult("all requests sent", len(rows) == expected, f"{len(rows)} of {expected}"),
        RuleResult("0 failed requests", len(ok) == len(rows), f"{len(rows) - len(ok)} failed"),
        RuleResult("unique ids", len({r["id"] for r in rows}) == len(rows)),
    ]
    if scored:
        score = read_json(wdir / "score.json")
        metrics[f"{NAME}.matched"] = score["matched"]
        rules.append(RuleResult("every echo scored and matched", score["evaluated"] == score["matched"] == expected,
                                f"{score['matched']} matched of {score['evaluated']} evaluated"))
    # the latency is the mean over the requests that succeeded: each one's own, by id, for the A/B
    by_request = {f"{NAME}.latency_mean_s": {str(r["id"]): r["latency_s"] for r in ok}} if ok else {}
    return Collected(metrics, frozenset(), tuple(rules), by_request=by_request)


def collect_unscored(run_dir: Path, options: Mapping[str, object]) -> Collected:
    """:func:`collect` of a run whose echo check (its score phase) was skipped."""
    return collect(run_dir, options, scored=False)


@hookimpl
def omnibench_workloads() -> list[Workload]:
    """The self-test workload."""
    return [Workload(NAME, "harness self-test: a loopback echo server, client, shared scoring server",
                     plan, collect, scorers=("echo-check",), options=OPTIONS, collect_unscored=collect_unscored,
                     quality_metrics=(f"{NAME}.matched",),
                     metrics=tuple(f"{NAME}.{m}" for m in ("requests", "failed", "latency_mean_s", "matched")))]


@hookimpl
def omnibench_scorers() -> list[Scorer]:
    """The echo-check scorer used by the self-test."""
    return [Scorer("echo-check", "checks each echo on a shared scoring server (self-test)", score_plan)]


if __name__ == "__main__":
    # `python -m omnibench_core.builtin.selftest serve|client`: the programs' old address, which stand-in
    # checkouts made before they moved still start
    from .selftest_programs import main

    sys.exit(main())

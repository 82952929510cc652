"""A self-test workload for plugin authors and for omnibench's own tests.

``selftest`` runs the whole machinery for real on any machine: a server process on loopback
that opens its port only after a loading delay, a client program that sends requests to it, a
scoring server shared by the score phase, and a collector with coverage rules. Its options make
the server die during startup, never become healthy, or the client run long, so every gate
can be exercised::

    invoke run --workload selftest --opt selftest.delay=2 --opt selftest.requests=50

Run ``python -m omnibench_core.builtin.selftest serve --help`` for the server's own flags.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from collections.abc import Mapping
from dataclasses import replace
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

from ..hooks.specs import hookimpl
from ..jsonio import read_json, write_json
from ..records import Collected, Command, Option, RuleResult, RunContext, Scorer, ServeSpec, Step, StepContext, Workload
from ..settings.option_schema import defaults, format_value

NAME = "selftest"
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


# -- the server ------------------------------------------------------------------------------
class _Handler(BaseHTTPRequestHandler):
    healthy = True
    echo_delay_s = 0.0  # added latency per echo (the local target's local_delay_ms)

    def log_message(self, fmt: str, *args: object) -> None:  # keep the log readable
        sys.stdout.write(f"{self.address_string()} {fmt % args}\n")
        sys.stdout.flush()

    def _reply(self, code: int, payload: object) -> None:
        body = json.dumps(payload).encode()
        self.send_response(code)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def do_GET(self) -> None:
        if self.path == "/health":
            if self.healthy:
                self._reply(200, {"status": "healthy"})
            else:
                self._reply(503, {"status": "unhealthy"})
        else:
            self._reply(404, {"detail": f"no route {self.path}"})

    def do_POST(self) -> None:
        length = int(self.headers.get("Content-Length") or 0)
        try:
            data = json.loads(self.rfile.read(length) or b"{}")
        except ValueError:
            self._reply(400, {"detail": "body is not JSON"})
            return
        if self.path == "/v1/echo":
            time.sleep(self.echo_delay_s)
            text = str(data.get("text", ""))
            self._reply(200, {"text": text, "length": len(text)})
        elif self.path == "/v1/check":
            self._reply(200, {"ok": data.get("text") == data.get("echo")})
        else:
            self._reply(404, {"detail": f"no route {self.path}"})


def serve(argv: list[str] | None = None) -> int:
    """The test server: port closed while 'loading', then ``/health``, ``/v1/echo``, ``/v1/check``."""
    parser = argparse.ArgumentParser(prog="python -m omnibench_core.builtin.selftest serve")
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--delay", type=float, default=0.3)
    parser.add_argument("--die", action="store_true", help="exit with code 3 after the delay")
    parser.add_argument("--never-healthy", action="store_true")
    parser.add_argument("--children", type=int, default=0, help="sleeping helpers in the same group")
    parser.add_argument("--delay-ms", type=float, default=0.0, help="added latency per echo request")
    parser.add_argument("--ready-file", help="write the wall-clock time the port opened here (benchmarks)")
    args = parser.parse_args(argv)
    # What the runner applied, so tests and users can check it in the server's log.
    env = {k: os.environ.get(k, "") for k in ("CUDA_VISIBLE_DEVICES", "SGLANG_OMNI_STRICT_PORT", "HF_HUB_OFFLINE")}
    print(f"env {json.dumps(env)} cpus {sorted(os.sched_getaffinity(0))} cwd {os.getcwd()}", flush=True)
    print(f"loading for {args.delay} s", flush=True)
    helpers = [subprocess.Popen([sys.executable, "-c", "import time; time.sleep(3600)"]) for _ in range(args.children)]
    time.sleep(args.delay)
    if args.die:
        print("fatal: simulated startup failure", flush=True)
        return 3
    _Handler.healthy = not args.never_healthy
    _Handler.echo_delay_s = args.delay_ms / 1000
    server = ThreadingHTTPServer((args.host, args.port), _Handler)
    if args.ready_file:
        Path(args.ready_file).write_text(repr(time.time()))
    print(f"serving on {args.host}:{args.port} (helpers: {[h.pid for h in helpers]})", flush=True)
    server.serve_forever()
    return 0


# -- the client ------------------------------------------------------------------------------
def client(argv: list[str] | None = None) -> int:
    """Send ``--requests`` echo requests and write ``client.json``."""
    parser = argparse.ArgumentParser(prog="python -m omnibench_core.builtin.selftest client")
    parser.add_argument("--url", required=True)
    parser.add_argument("--requests", type=int, default=8)
    parser.add_argument("--sleep", type=float, default=0.0)
    parser.add_argument("--out", required=True)
    parser.add_argument("--fail-once", default="", help="fail if this file is missing, creating it")
    parser.add_argument("--hold", default="", help="end only once this file exists")
    args = parser.parse_args(argv)
    if args.fail_once and not Path(args.fail_once).exists():
        Path(args.fail_once).write_text("failed once\n")
        print(f"simulated client failure (once: {args.fail_once} now exists)", flush=True)
        return 1
    import requests  # here, not at the top: the server needs none, and its start is most of a selftest run

    rows = []
    with requests.Session() as session:
        for i in range(args.requests):
            text = f"sample {i}"
            t0 = time.perf_counter()
            try:
                reply = session.post(f"{args.url}/v1/echo", json={"text": text}, timeout=30)
                reply.raise_for_status()
                rows.append({"id": i, "text": text, "echo": reply.json()["text"], "is_success": True,
                             "latency_s": time.perf_counter() - t0, "error": ""})
            except requests.RequestException as exc:
                rows.append({"id": i, "text": text, "echo": None, "is_success": False,
                             "latency_s": time.perf_counter() - t0, "error": str(exc)})
            print(f"request {i + 1}/{args.requests}", flush=True)
    time.sleep(args.sleep)
    while args.hold and not Path(args.hold).exists():  # an event the test makes, not a time it guesses
        time.sleep(0.02)
    write_json(args.out, {"per_request": rows})
    return 0


# -- the plugin ------------------------------------------------------------------------------
def _server_spec(ctx: RunContext, label: str) -> ServeSpec:
    o = ctx.options
    if o.get("serve_with_target"):
        # The target builds the argv (`sgl-omni serve --model-path selftest ... --port P`); the
        # checkout's command must start this module's server with these flags.
        return ServeSpec(label=label, model_path=NAME, args=("--delay", format_value(o["delay"])))
    argv = [sys.executable, "-m", "omnibench_core.builtin.selftest", "serve", "--port", str(ctx.port),
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
    argv = [sys.executable, "-m", "omnibench_core.builtin.selftest", "client", "--url", ctx.endpoint.base_url,
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
    return Collected(metrics, frozenset(), tuple(rules))


def collect_unscored(run_dir: Path, options: Mapping[str, object]) -> Collected:
    """:func:`collect` of a run whose echo check (its score phase) was skipped."""
    return collect(run_dir, options, scored=False)


@hookimpl
def omnibench_workloads() -> list[Workload]:
    """The self-test workload."""
    return [Workload(NAME, "harness self-test: a loopback echo server, client, shared scoring server",
                     plan, collect, scorers=("echo-check",), options=OPTIONS, collect_unscored=collect_unscored,
                     quality_metrics=(f"{NAME}.matched",))]


@hookimpl
def omnibench_scorers() -> list[Scorer]:
    """The echo-check scorer used by the self-test."""
    return [Scorer("echo-check", "checks each echo on a shared scoring server (self-test)", score_plan)]


def main(argv: list[str] | None = None) -> int:
    """``python -m omnibench_core.builtin.selftest serve|client ...``."""
    args = list(sys.argv[1:] if argv is None else argv)
    commands = {"serve": serve, "client": client}
    if not args or args[0] not in commands:
        print(f"usage: python -m omnibench_core.builtin.selftest {{{','.join(commands)}}} ...", file=sys.stderr)
        return 2
    return commands[args[0]](args[1:])


if __name__ == "__main__":
    sys.exit(main())

"""The self-test workload's two programs: its server and its client
(``python -m omnibench_core.builtin.selftest_programs serve|client ...``).

The standard library only: a process start is most of a self-test run's cost, and a suite or a
matrix starts these by the thousand. Without the plugin's imports (pluggy, the records, the
option schema) a server starts for about half the CPU time (0.04 against 0.08 s on a 2-core
host, 2026-12-05), and a client without ``requests`` saves about 0.1 s more.
"""

from __future__ import annotations

import argparse
import http.client
import json
import os
import subprocess
import sys
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from urllib.parse import urlsplit

from ..jsonio import write_json

REQUEST_TIMEOUT_S = 30.0  # one echo request: the client records a failure past it and goes on


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
    parser = argparse.ArgumentParser(prog="python -m omnibench_core.builtin.selftest_programs serve")
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
class EchoError(Exception):
    """An echo request that got no usable answer (no connection, a timeout, an HTTP error, a body
    that is not the echo)."""


class _Connection:
    """One kept-alive HTTP connection to the server, made again after a failure (a server that
    closed it, a timeout)."""

    def __init__(self, url: str):
        parts = urlsplit(url)
        if parts.scheme != "http" or not parts.hostname:
            raise SystemExit(f"--url {url!r}: not an http://HOST:PORT address")
        self.host, self.port, self.prefix = parts.hostname, parts.port or 80, parts.path.rstrip("/")
        self._conn: http.client.HTTPConnection | None = None

    def post_json(self, path: str, payload: object) -> dict[str, object]:
        """POST ``payload`` as JSON to ``path``; the JSON object answered, else :class:`EchoError`."""
        body = json.dumps(payload).encode()
        try:
            if self._conn is None:
                self._conn = http.client.HTTPConnection(self.host, self.port, timeout=REQUEST_TIMEOUT_S)
            self._conn.request("POST", self.prefix + path, body, {"Content-Type": "application/json"})
            reply = self._conn.getresponse()
            data = reply.read()
        except (OSError, http.client.HTTPException) as exc:
            self.close()
            raise EchoError(f"{type(exc).__name__}: {exc}") from exc
        if reply.status >= 400:
            raise EchoError(f"HTTP {reply.status} {reply.reason} for {path}: {data[:200]!r}")
        try:
            answer = json.loads(data)
        except ValueError as exc:
            raise EchoError(f"the answer to {path} is not JSON: {data[:200]!r}") from exc
        if not isinstance(answer, dict):
            raise EchoError(f"the answer to {path} is not a JSON object: {data[:200]!r}")
        return answer

    def close(self) -> None:
        if self._conn is not None:
            self._conn.close()
            self._conn = None


def client(argv: list[str] | None = None) -> int:
    """Send ``--requests`` echo requests and write ``client.json``."""
    parser = argparse.ArgumentParser(prog="python -m omnibench_core.builtin.selftest_programs client")
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
    rows = []
    conn = _Connection(args.url)
    try:
        for i in range(args.requests):
            text = f"sample {i}"
            t0 = time.perf_counter()
            try:
                answer = conn.post_json("/v1/echo", {"text": text})
                if "text" not in answer:
                    raise EchoError(f"the echo of {text!r} has no 'text': {answer!r}"[:300])
                echo = answer["text"]
                rows.append({"id": i, "text": text, "echo": echo, "is_success": True,
                             "latency_s": time.perf_counter() - t0, "error": ""})
            except EchoError as exc:
                rows.append({"id": i, "text": text, "echo": None, "is_success": False,
                             "latency_s": time.perf_counter() - t0, "error": str(exc)})
            print(f"request {i + 1}/{args.requests}", flush=True)
    finally:
        conn.close()
    time.sleep(args.sleep)
    while args.hold and not Path(args.hold).exists():  # an event the test makes, not a time it guesses
        time.sleep(0.02)
    write_json(args.out, {"per_request": rows})
    return 0


def main(argv: list[str] | None = None) -> int:
    """``python -m omnibench_core.builtin.selftest_programs serve|client ...``."""
    args = list(sys.argv[1:] if argv is None else argv)
    commands = {"serve": serve, "client": client}
    if not args or args[0] not in commands:
        print(f"usage: python -m omnibench_core.builtin.selftest_programs {{{','.join(commands)}}} ...",
              file=sys.stderr)
        return 2
    return commands[args[0]](args[1:])


if __name__ == "__main__":
    sys.exit(main())

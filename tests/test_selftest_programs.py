"""The self-test's programs (omnibench_core/builtin/selftest_programs.py): the client records each
failed request with its reason and goes on, against real servers on loopback; the programs' old
address still runs them (stand-in checkouts made before they moved start it)."""

from __future__ import annotations

import json
import subprocess
import sys
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest
from run_helpers import REPO, free_port

PROGRAMS = "omnibench_core.builtin.selftest_programs"


@pytest.fixture
def failing_server() -> Iterator[str]:
    """A server on loopback whose echo answers 500, then a body that is not JSON, then no 'text'."""
    answers = iter([(500, b'{"detail": "boom"}'), (200, b"not json"), (200, b'{"other": 1}')])

    class Handler(BaseHTTPRequestHandler):
        def log_message(self, *args):  # quiet
            pass

        def do_POST(self):
            self.rfile.read(int(self.headers["Content-Length"]))
            code, body = next(answers)
            self.send_response(code)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()
    server.server_close()


def _client(url: str, out: Path, requests: int) -> list[dict]:
    done = subprocess.run([sys.executable, "-m", PROGRAMS, "client", "--url", url, "--requests", str(requests),
                           "--out", str(out)], cwd=REPO, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stdout + done.stderr
    return json.loads(out.read_text())["per_request"]


def test_the_client_records_each_bad_answer_with_its_reason_and_goes_on(failing_server, tmp_path):
    rows = _client(failing_server, tmp_path / "client.json", 3)
    assert [r["is_success"] for r in rows] == [False, False, False] and [r["id"] for r in rows] == [0, 1, 2]
    assert "HTTP 500" in rows[0]["error"] and "boom" in rows[0]["error"]
    assert "not JSON" in rows[1]["error"] and "has no 'text'" in rows[2]["error"]


def test_the_client_records_a_refused_connection_for_every_request(tmp_path):
    rows = _client(f"http://127.0.0.1:{free_port()}", tmp_path / "client.json", 2)  # nothing listens there
    assert [r["is_success"] for r in rows] == [False, False]
    assert all("ConnectionRefusedError" in r["error"] for r in rows), rows


def test_the_client_echoes_through_the_server(tmp_path):
    port = free_port()
    server = subprocess.Popen([sys.executable, "-m", PROGRAMS, "serve", "--port", str(port), "--delay", "0"],
                              cwd=REPO, stdout=subprocess.PIPE, text=True)
    try:
        assert server.stdout is not None
        for line in server.stdout:  # an event: the line it prints once the port is open
            if line.startswith("serving on "):
                break
        rows = _client(f"http://127.0.0.1:{port}", tmp_path / "client.json", 3)
        assert [(r["is_success"], r["echo"]) for r in rows] == [(True, f"sample {i}") for i in range(3)]
    finally:
        server.terminate()
        server.wait()


@pytest.mark.parametrize("module", [PROGRAMS, "omnibench_core.builtin.selftest"])
def test_both_addresses_run_the_programs(module):
    done = subprocess.run([sys.executable, "-m", module, "serve", "--help"], cwd=REPO, capture_output=True, text=True,
                          timeout=600)
    assert done.returncode == 0 and "--delay-ms" in done.stdout, done.stderr
    bad = subprocess.run([sys.executable, "-m", module, "nonsense"], cwd=REPO, capture_output=True, text=True,
                         timeout=600)
    assert bad.returncode == 2 and "{serve,client}" in bad.stderr

"""Helpers for the process tests: small real programs, and looking for what is left of them in /proc."""

from __future__ import annotations

import os
import sys
import time
from collections.abc import Callable
from pathlib import Path

from omnibench_core.process.ports import listener_inodes
from omnibench_core.process.processes import group_members
from omnibench_core.process.proctree import alive, environ_has_token, snapshot

PY = sys.executable

# The /health handler both programs below serve (200 with "healthy"; no access log).
HANDLER = r'''
import http.server
class Health(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        body = b'{"status": "healthy"}'
        self.send_response(200)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args):
        pass
'''

# A server: a child that calls setsid and sleeps, a double-forked daemon (its parent exits, so
# it is reparented to the nearest subreaper), and /health on argv[1]. With "stubborn" as argv[2]
# everything ignores SIGTERM (and says so in the log when it gets one).
SERVER = HANDLER + r'''
import http.server, json, os, signal, subprocess, sys, time
port, stubborn = int(sys.argv[1]), len(sys.argv) > 2 and sys.argv[2] == "stubborn"
IGNORE = "import signal; signal.signal(signal.SIGTERM, lambda s, f: print('got SIGTERM, ignoring', flush=True)); " if stubborn else ""
if stubborn:
    signal.signal(signal.SIGTERM, lambda s, f: print("got SIGTERM, ignoring", flush=True))
escapee = subprocess.Popen([sys.executable, "-c", IGNORE + "import os, time; os.setsid(); time.sleep(600)"])
r, w = os.pipe()
middle = os.fork()
if middle == 0:
    if os.fork() == 0:
        os.setsid()
        os.write(w, str(os.getpid()).encode())
        time.sleep(600)
    os._exit(0)
os.waitpid(middle, 0)
daemon = int(os.read(r, 64))
while os.getsid(escapee.pid) != escapee.pid:  # "ready" only once the escapee has its own session
    time.sleep(0.01)

server = http.server.HTTPServer(("127.0.0.1", port), Health)
print("ready " + json.dumps({"escapee": escapee.pid, "daemon": daemon}), flush=True)
server.serve_forever()
'''

# A /health server and nothing else (a foreign listener, or one started by a descendant).
HEALTH = HANDLER + r'''
import sys
server = http.server.HTTPServer(("127.0.0.1", int(sys.argv[1])), Health)
print("listening", flush=True)
server.serve_forever()
'''


# How long a wait on an event may take before the test calls it hung: minutes, never a budget a
# busy host can exceed (the README's test command ran at load 5-16 on two cores; issue 31).
# OMNIBENCH_TEST_HUNG_S lowers it when looking for which tests hang (docs/development.md).
HUNG_S = float(os.environ.get("OMNIBENCH_TEST_HUNG_S", "600"))


def wait_for(check: Callable[[], object], what: str = "") -> object:
    """Poll ``check`` (an event: a file, a line, a socket, a process gone) until it returns
    something true; fail with ``what`` only after :data:`HUNG_S`, when it is hung, not slow."""
    deadline = time.monotonic() + HUNG_S
    while True:
        value = check()
        if value:
            return value
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.02)


def log_line(path: Path, prefix: str) -> str:
    """The first line of the log at ``path`` starting with ``prefix`` (waits for it)."""
    def find() -> str:
        text = path.read_text() if path.exists() else ""
        return next((line for line in text.splitlines() if line.startswith(prefix)), "")
    return str(wait_for(find, what=f"{prefix!r} in {path}"))


def listening(port: int) -> bool:
    """Whether a socket listens on ``port``: what a server left behind would do. Not whether the
    port can be bound: a client's connection from that ephemeral port (another test's, on a
    busy machine) blocks a bind, and a test asserting "nothing left" must not fail on it."""
    return bool(listener_inodes(port))


def token_carriers(token: str) -> set[int]:
    """Live processes whose environment carries ``token`` (a process scan of /proc)."""
    return {pid for pid in snapshot() if pid != os.getpid() and environ_has_token(pid, token)}


def leftovers(*, pids: set[int], pgid: int | None, token: str, port: int | None) -> list[str]:
    """What is left of a program: by pid, by group, by token scan, by port. [] when nothing."""
    left = [f"pid {p}" for p in sorted(pids) if alive(p)]
    if pgid is not None:
        left += [f"group member {p}" for p in group_members(pgid)]
    left += [f"token carrier {p}" for p in sorted(token_carriers(token))]
    if port is not None and listening(port):
        left.append(f"port {port} listened on")
    return left

"""The served model's identity, read from a real server on loopback."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest
from run_helpers import free_port

from omnibench_core.run.served_model import MAX_BYTES, read_served

REPLIES: dict[str, tuple[int, bytes]] = {
    "/ok/v1/models": (200, json.dumps({"object": "list", "data": [{"id": "minicpmo", "object": "model"}]}).encode()),
    "/missing/v1/models": (404, b"not found"),
    "/html/v1/models": (200, b"<html>hello</html>"),
    "/nodata/v1/models": (200, b'{"object": "list"}'),
    "/empty/v1/models": (200, b'{"data": []}'),
    "/huge/v1/models": (200, b'{"data": [' + b" " * (MAX_BYTES + 10) + b"]}"),
    "/deep/v1/models": (200, b"[" * 30_000 + b"]" * 30_000),  # under MAX_BYTES, too deep for json
}


class _Handler(BaseHTTPRequestHandler):
    def do_GET(self) -> None:  # noqa: N802 (http.server's name)
        code, body = REPLIES.get(self.path, (404, b""))
        self.send_response(code)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture(scope="module")
def server() -> Iterator[str]:
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), _Handler)
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{httpd.server_address[1]}"
    finally:
        httpd.shutdown()
        httpd.server_close()


def test_the_ids_a_server_lists_are_read(server):
    assert read_served(f"{server}/ok/v1/models") == {"ids": ["minicpmo"]}


@pytest.mark.parametrize("where, words", [
    ("missing", "HTTP 404"), ("html", "not JSON"), ("nodata", "no 'data' list"), ("empty", "lists no model id"),
    ("huge", f"over {MAX_BYTES} bytes"), ("deep", "not JSON"),
])
def test_a_reply_that_is_no_model_list_is_named_never_raised(server, where, words):
    got = read_served(f"{server}/{where}/v1/models")
    assert list(got) == ["unavailable"] and words in got["unavailable"], got


def test_no_server_at_all_is_named():
    got = read_served(f"http://127.0.0.1:{free_port()}/v1/models", timeout_s=5)
    assert "ConnectionRefusedError" in got["unavailable"] or "URLError" in got["unavailable"], got


# -- the target's own packages, listed by its python --------------------------------------------------
def test_the_target_pythons_packages_are_listed_or_why_not_said(tmp_path):
    import sys

    from omnibench_core.run.environment import target_packages

    listed = target_packages(sys.executable)
    assert isinstance(listed, dict) and listed["numpy"] and "aiohttp" in listed
    assert target_packages(str(tmp_path / "no-python")).startswith("unavailable: ")
    liar = tmp_path / "liar"
    liar.write_text("#!/bin/sh\necho 'not json'\n")
    liar.chmod(0o755)
    assert target_packages(str(liar)) == f"unavailable: {liar} printed no package list"
    failing = tmp_path / "failing"
    failing.write_text("#!/bin/sh\necho 'ModuleNotFoundError: importlib' >&2\nexit 1\n")
    failing.chmod(0o755)
    assert "exited 1" in target_packages(str(failing)) and "ModuleNotFoundError" in target_packages(str(failing))


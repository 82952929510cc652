"""The served model's identity, read from a real server on loopback."""

from __future__ import annotations

import json
import sys
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest
from run_helpers import free_port

from omnibench_core.run.http_get import MAX_REDIRECTS
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


GOOD = REPLIES["/ok/v1/models"][1]
TRICKLE_GAP_S = 0.05  # far shorter than any deadline below: only an overall deadline ends the call


class _Handler(BaseHTTPRequestHandler):
    def do_GET(self) -> None:  # noqa: N802 (http.server's name)
        if self.path.startswith("/trickle"):  # a model list padded to 2000 bytes, one byte at a time (100 s)
            body = GOOD + b" " * (2000 - len(GOOD))
            self.send_response(200)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            for i in range(len(body)):
                self.wfile.write(body[i:i + 1])
                self.wfile.flush()
                time.sleep(TRICKLE_GAP_S)
            return
        if self.path.startswith("/hop/"):  # /hop/N/v1/models: a redirect to N-1 after a pause, 0 answers
            hops = int(self.path.split("/")[2])
            if hops:
                time.sleep(0.4)
                self.send_response(302)
                self.send_header("Location", f"/hop/{hops - 1}/v1/models")
                self.send_header("Content-Length", "0")
                self.end_headers()
                return
            code, body = 200, GOOD
        elif self.path.startswith("/loop/"):  # redirects to itself for ever, at once
            self.send_response(307)
            self.send_header("Location", self.path)
            self.send_header("Content-Length", "0")
            self.end_headers()
            return
        else:
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


@pytest.mark.slow  # 2.5 to 8 s in the fast tier (issue 40: that tier within a minute)
def test_one_deadline_holds_the_whole_call_a_trickle_or_slow_redirects_included(server):
    """Issue 46: a READY server that sends its model list a byte every 50 ms (each read is quick,
    the whole takes 100 s) or redirects five times with a pause under the deadline each: the call
    ends at its one deadline, redirects included, and says so. With a deadline per read (urlopen's)
    both answered, after 100 s and 2 s."""
    got = read_served(f"{server}/trickle/v1/models", timeout_s=1)
    assert list(got) == ["unavailable"] and "within 1 s" in got["unavailable"], got
    got = read_served(f"{server}/hop/5/v1/models", timeout_s=1)
    assert list(got) == ["unavailable"] and "within 1 s" in got["unavailable"], got
    # the same redirects, given the time, are followed; a loop of redirects is cut at MAX_REDIRECTS
    assert read_served(f"{server}/hop/2/v1/models", timeout_s=30) == {"ids": ["minicpmo"]}
    got = read_served(f"{server}/loop/v1/models", timeout_s=30)
    assert f"more than {MAX_REDIRECTS} redirects" in got["unavailable"], got


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



def test_a_venvs_packages_are_listed_once_until_something_is_installed_there(tmp_path):
    """A campaign's runs each recorded the venv's packages by starting its interpreter (0.11 CPU-s a
    run); now once a process, and again when the venv's site-packages changes (an install)."""
    from omnibench_core.run.environment import target_packages

    site = tmp_path / "venv" / "lib" / "python3.11" / "site-packages"
    site.mkdir(parents=True)
    calls = tmp_path / "calls"
    python = tmp_path / "venv" / "bin" / "python"
    python.parent.mkdir()
    # the venv's interpreter, as far as listing goes: each call counted, one pair per dist-info folder
    python.write_text(f"#!{sys.executable}\nimport json, os\nopen({str(calls)!r}, 'a').write('x')\n"
                      f"print(json.dumps([[n.split('-')[0], '1'] for n in sorted(os.listdir({str(site)!r}))]))\n")
    python.chmod(0o755)
    assert target_packages(str(python)) == {} and target_packages(str(python)) == {}
    assert calls.read_text().count("x") == 1  # listed once
    (site / "torch-2.11.0.dist-info").mkdir()  # an install: the folder changes
    assert target_packages(str(python)) == {"torch": "1"}
    assert calls.read_text().count("x") == 2


def test_the_package_listing_reads_the_headers_importlib_reads(tmp_path):
    """The listing's own header read (no email parser) gives what ``metadata['Name']`` and ``version``
    give: for a METADATA whose long description says another name, an egg's PKG-INFO, an egg-info
    file, headers in another case, and a distribution with no name."""
    import subprocess

    from omnibench_core.run.environment import LIST_DISTRIBUTIONS

    site = tmp_path / "site"
    files = {
        "alpha-1.0.dist-info/METADATA": "Metadata-Version: 2.1\nName: Alpha_Pkg\nVersion: 1.0\nSummary: a\n\n"
                                        "Name: not-this\nVersion: 9\n",
        "beta-2.egg-info/PKG-INFO": "Metadata-Version: 1.1\nname: beta\nVERSION: 2.0rc1\n",
        "gamma-3.egg-info": "Metadata-Version: 1.0\nName: gamma\nVersion: 3\n",
        "nameless-4.dist-info/METADATA": "Metadata-Version: 2.1\nVersion: 4\n",
    }
    for path, text in files.items():
        (site / path).parent.mkdir(parents=True, exist_ok=True)
        (site / path).write_text(text)
    where = f"m.distributions(path=[{str(site)!r}])"
    by_email = ("import importlib.metadata as m, json; print(json.dumps(sorted({(d.metadata['Name'] or '?'): "
                "d.version for d in WHERE}.items())))").replace("WHERE", where)
    ours = LIST_DISTRIBUTIONS.replace("m.distributions()", where)
    assert ours != LIST_DISTRIBUTIONS  # the listing still asks importlib for the distributions
    lists = [json.loads(subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                                       check=True).stdout) for code in (by_email, ours)]
    assert lists[0] == lists[1] == [["?", "4"], ["Alpha_Pkg", "1.0"], ["beta", "2.0rc1"], ["gamma", "3"]]

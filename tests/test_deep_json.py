"""One JSON depth limit in the store's reader (issue 31, item 6): a real 200,000-level JSON file
on disk, where a campaign file, an A/B record, a manifest or metrics file goes, raised
RecursionError; `history --rebuild` aborted whole. Now every reader gets a typed error naming the
file (jsonio.JsonTooDeep, a RunFileError), the rebuild names and skips it, and the commands end
in one `error:` line of that kind, exit 1, no traceback."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from run_helpers import REPO

from omnibench_core import api
from omnibench_core.errors import JsonTooBig, JsonTooDeep, RunFileError
from omnibench_core.jsonio import MAX_BYTES, MAX_DEPTH, loads, nesting, read_json
from omnibench_core.settings import Settings
from omnibench_core.store import manifest as manifest_file
from omnibench_core.store import metrics as metrics_file

LEVELS = 200_000


def _deep(path: Path) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("[" * LEVELS + "]" * LEVELS)
    return path


def _invoke(results: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "invoke", *args], cwd=REPO, capture_output=True, text=True,
                          timeout=300, env={**os.environ, "INVOKE_OMNIBENCH_RESULTS": str(results)})


def _refused_naming(done: subprocess.CompletedProcess[str], path: Path) -> None:
    assert done.returncode == 1 and "Traceback" not in done.stderr and "RecursionError" not in done.stderr, done.stderr
    assert done.stderr.startswith("error: ") and f"{path} nests JSON {LEVELS} levels deep" in done.stderr, done.stderr


def test_the_reader_names_a_too_deep_file_and_reads_everything_else(tmp_path):
    deep = _deep(tmp_path / "deep.json")
    with pytest.raises(JsonTooDeep) as caught:
        read_json(deep)
    assert isinstance(caught.value, RunFileError) and isinstance(caught.value, ValueError)
    assert caught.value.evidence == {"file": str(deep), "depth": LEVELS, "limit": MAX_DEPTH}
    assert "\n" not in str(caught.value)  # one line where a reader quotes it
    # the limit itself is read; brackets inside strings are no nesting
    at_limit = "[" * MAX_DEPTH + "]" * MAX_DEPTH
    assert nesting(at_limit) == MAX_DEPTH and loads(at_limit, "x") is not None
    assert loads(json.dumps({"s": "[" * 10_000 + '\\"{'}), "x")["s"].startswith("[[")
    # the store's run readers make it their own typed error, naming the file
    run = tmp_path / "run0"
    _deep(run / "manifest.json")
    with pytest.raises(RunFileError, match="manifest"):
        manifest_file.read(run)
    _deep(run / "metrics.json")
    with pytest.raises(RunFileError, match="nests JSON"):
        metrics_file.read(run)


def test_the_reader_refuses_a_file_past_its_size_bound_or_not_regular_naming_it(tmp_path):
    # issue 46, second round: `report --name big.json` read a 3 GB file whole (47 s, 3 GB of
    # memory) before finding it was no JSON; a FIFO would wait for a writer for ever
    big = tmp_path / "big.json"
    with open(big, "wb") as handle:
        handle.truncate(MAX_BYTES + 1)  # sparse: no disk, and no JSON either
    with pytest.raises(JsonTooBig, match=f"{big} is {MAX_BYTES + 1:,} bytes, over the {MAX_BYTES:,}") as caught:
        read_json(big)
    assert isinstance(caught.value, RunFileError) and isinstance(caught.value, ValueError)
    fifo = tmp_path / "fifo.json"
    os.mkfifo(fifo)
    with pytest.raises(JsonTooBig, match="not a regular file"):
        read_json(fifo)  # opened without blocking: no writer is waited for
    with pytest.raises(FileNotFoundError):
        read_json(tmp_path / "none.json")  # as open() raises: readers that expect it still get it
    with pytest.raises(IsADirectoryError):
        read_json(tmp_path)
    at_bound = tmp_path / "ok.json"
    at_bound.write_text("[" + " " * (MAX_BYTES - 2) + "]")
    assert read_json(at_bound) == []
    # through the real command: one `error:` line naming the file, exit 1
    done = _invoke(tmp_path / "results", "report", "--name", str(big))
    assert done.returncode == 1 and "Traceback" not in done.stderr, done.stderr
    assert done.stderr.startswith("error: ") and f"{big} is {MAX_BYTES + 1:,} bytes" in done.stderr, done.stderr


@pytest.mark.slow  # four commands
def test_rebuild_skips_and_names_a_deep_file_and_report_compare_resume_and_ab_refuse_it(tmp_path):
    results = tmp_path / "results"
    revision = api.revision_dir(Settings.of(target="local", results=str(results)))
    campaign = _deep(revision / "campaigns" / "deep.json")
    record = _deep(results / "ab" / "deep.json")
    checkout = tmp_path / "checkout"
    checkout.mkdir()
    subprocess.run(["git", "-C", str(checkout), "init", "-q"], check=True)
    subprocess.run(["git", "-C", str(checkout), "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-q",
                    "--allow-empty", "-m", "one"], check=True)
    rebuilt = _invoke(results, "history", "--rebuild", "--checkout", str(checkout))
    assert rebuilt.returncode == 0 and "Traceback" not in rebuilt.stderr, rebuilt.stderr
    out = rebuilt.stdout
    assert f"skipped ab/deep.json: cannot read the A/B record {record}" in out
    assert f"skipped {campaign.relative_to(results)}: cannot read the campaign file {campaign}" in out
    _refused_naming(_invoke(results, "report", "--name", str(campaign)), campaign)
    _refused_naming(_invoke(results, "compare", "-a", str(campaign), "-b", str(campaign)), campaign)
    _refused_naming(_invoke(results, "measure", "-w", "selftest", "--target", "local", "-n", "deep"), campaign)
    _refused_naming(_invoke(results, "ab", "-w", "selftest", "--aa", "--target", "local", "--name", "deep"), record)
    assert sorted(p.name for p in revision.iterdir()) == ["campaigns"]  # no run was started

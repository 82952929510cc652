"""The history store under concurrency and hostile users, on the user's path: `invoke standin`
makes 4 commits, `invoke matrix` measures the first 3 (each campaign indexed as it completes),
and the results root gets 10 more campaign files (copies of commit 1's revision folder, as a
root restored from a backup holds) so that a rebuild has work to do.

A rebuild is held mid-way by a `git` first on its PATH that stops at its 5th `git show` (the
commit facts of the 5th campaign it reads) until the test lets it go: the moments "while a
rebuild runs" are then certain, not a race the test hopes to win. Meanwhile a second rebuild
waits, readers (`invoke history`, `invoke publish`) see the old store whole, and a real campaign
completes and is in the rebuilt store. Then everything at once with no gate, and the hostile
cases: a 0-byte database, a deleted one under a completing campaign, a folder in its place, a
results root on a read-only mount, a full disk."""

from __future__ import annotations

import json
import os
import shutil
import sqlite3
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import pytest
from run_helpers import REPO, free_port
from scale_helpers import invoke_standin, path_without_nvidia_smi
from store_helpers import WRITER

from omnibench_core.history.series import History
from omnibench_core.history.store import DB_NAME, SCHEMA_VERSION

METRIC = "selftest.latency_mean_s"
SELFTEST = ("--workload", "selftest", "--opt", "selftest.serve_with_target=true", "--opt", "selftest.requests=2")
SLOTS = ("--runs", "2", "--slots", "0,1", "--slot-per", "gpu", "--slot-cpus", "shared")
# 13 campaigns to rebuild: 23 (20 copies) proved nothing more, and every rebuild of every test here
# reads them all (issue 40)
COPIES = 10
GATE_AT = 5  # the rebuild stops at its 5th `git show`: a third of the way through


@dataclass(frozen=True)
class Measured:
    """The module fixture's stand-in checkout and results root."""

    root: Path
    commits: tuple[str, ...]  # oldest first; the first 3 are measured
    results: Path
    path: str  # PATH: the stand-in's fake GPUs, no real nvidia-smi


def _run(results: Path, *args: str, path: str, timeout: float = 300) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "invoke", *args], cwd=REPO, capture_output=True, text=True,
                          timeout=timeout, env={**os.environ, "INVOKE_OMNIBENCH_RESULTS": str(results), "PATH": path})


def _start(results: Path, *args: str, path: str) -> subprocess.Popen:
    """`invoke ARGS` started, as the `invoke` fixture runs it, without waiting for it."""
    return subprocess.Popen([sys.executable, "-m", "invoke", *args], cwd=REPO, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True,
                            env={**os.environ, "INVOKE_OMNIBENCH_RESULTS": str(results), "PATH": path})


def _ok(done: subprocess.CompletedProcess) -> subprocess.CompletedProcess:
    assert done.returncode == 0, done.stdout[-4000:] + done.stderr[-3000:]
    assert "Traceback" not in done.stderr
    return done


def _finished(p: subprocess.Popen, timeout: float = 300) -> tuple[str, str]:
    out, err = p.communicate(timeout=timeout)
    assert p.returncode == 0 and "Traceback" not in err, out[-4000:] + err[-3000:]
    return out, err


@pytest.fixture(scope="module")
def measured(tmp_path_factory) -> Measured:
    tmp = tmp_path_factory.mktemp("rebuild")
    made = invoke_standin(tmp / "co", "--commits", "4", "--regress-at", "4", "--fake-gpus", str(tmp / "fakegpu"))
    assert made.fake_gpus is not None
    path, results, c = path_without_nvidia_smi(made.fake_gpus), tmp / "results", made.commits
    _ok(_run(results, "matrix", "--target", "sglang-omni", "--checkout", str(made.root), *SELFTEST, *SLOTS,
             "--revisions", ",".join(c[:3]), "--port", str(free_port()), path=path))
    first = results / c[0][:7]
    assert (first / "campaigns").is_dir(), sorted(p.name for p in results.iterdir())
    for i in range(COPIES):
        shutil.copytree(first, results / f"{first.name}-copy{i:02d}", symlinks=True)
    return Measured(made.root, made.commits, results, path)


def _results(measured: Measured, tmp_path: Path, *, without_commit_3: bool = False, store: bool = True) -> Path:
    """A copy of the fixture's results root with a fresh store (none without ``store``).
    ``without_commit_3``: the store was made while commit 3's folder was away (then restored from
    a backup): the old store has commits 1 and 2, a rebuild's has 1, 2 and 3."""
    results = tmp_path / "results"
    shutil.copytree(measured.results, results, symlinks=True, ignore=shutil.ignore_patterns(f"{DB_NAME}*", ".history*"))
    away = results / measured.commits[2][:7]
    if without_commit_3:
        away.rename(tmp_path / "away")
    if store:
        _ok(_run(results, "history", "--rebuild", path=measured.path))
    if without_commit_3:
        (tmp_path / "away").rename(away)
    return results


def _gated_path(measured: Measured, folder: Path) -> tuple[str, Path, Path]:
    """PATH with a `git` that, while ``folder/gate`` exists, stops at its GATE_AT-th `show` (and
    makes ``folder/reached``); every other call is the real git's."""
    folder.mkdir()
    gate, reached = folder / "gate", folder / "reached"
    gate.touch()
    real = shutil.which("git", path=measured.path)
    script = folder / "git"
    script.write_text(f"""#!/bin/bash
if [ "$3" = "show" ]; then
  n=$(( $(cat "{folder}/count" 2>/dev/null || echo 0) + 1 )); echo "$n" > "{folder}/count"
  if [ "$n" -ge {GATE_AT} ] && [ -e "{gate}" ]; then
    touch "{reached}"
    while [ -e "{gate}" ]; do sleep 0.05; done
  fi
fi
exec "{real}" "$@"
""")
    script.chmod(0o755)
    return f"{folder}{os.pathsep}{measured.path}", gate, reached


def _wait_for(what: str, done, process: subprocess.Popen, timeout: float = 600) -> None:
    """Wait until ``done()``; the process ending first (or the time running out) fails the test."""
    deadline = time.monotonic() + timeout
    while not done():
        if process.poll() is not None:
            out, err = process.communicate()
            pytest.fail(f"ended before {what}: {out[-3000:]} {err[-3000:]}")
        assert time.monotonic() < deadline, f"no {what} in {timeout} s"
        time.sleep(0.05)


def _line_with(process: subprocess.Popen, text: str) -> str:
    """Read ``process``' output until a line holds ``text`` (the line); its end fails the test."""
    assert process.stdout is not None
    for line in process.stdout:
        if text in line:
            return line
    pytest.fail(f"no line with {text!r}: it ended with {process.wait()}: {process.stderr.read() if process.stderr else ''}")


def _measure_head(invoke, measured: Measured) -> subprocess.CompletedProcess:
    """`invoke measure` of the stand-in's HEAD, commit 4 (its campaign indexes itself as it completes)."""
    return _ok(invoke("measure", "--target", "sglang-omni", "--checkout", str(measured.root), *SELFTEST, "--runs", "2",
                      "--port", str(free_port()), env={"PATH": measured.path}, timeout=600))


def _check_store(results: Path) -> list[str]:
    """PRAGMA integrity_check is ok, every campaign file is indexed exactly once, nothing of a
    rebuild is left beside it; the files indexed."""
    files = sorted(str(p.relative_to(results)) for p in results.glob("*/campaigns/*.json"))
    with sqlite3.connect(results / DB_NAME) as db:
        assert db.execute("PRAGMA integrity_check").fetchall() == [("ok",)]
        rows = [r[0] for r in db.execute("SELECT file FROM campaigns ORDER BY file")]
        runs = db.execute("SELECT count(*) FROM runs WHERE metric = ?", (METRIC,)).fetchone()[0]
    assert rows == files
    assert runs == 2 * len(files)  # 2 measured runs a campaign, none twice
    assert not list(results.glob(f".{DB_NAME}.*"))
    return rows


def _commits_seen(saved: Path) -> list[str]:
    (series,) = History.from_json(json.loads(saved.read_text())).series
    return [p.revision for p in series.points]


@pytest.mark.slow
def test_a_second_rebuild_waits_for_the_first_naming_it_and_the_store_holds_every_campaign_once(measured, tmp_path):
    results = _results(measured, tmp_path)
    gated, gate, reached = _gated_path(measured, tmp_path / "gitgate")
    first = _start(results, "history", "--rebuild", path=gated)
    try:
        _wait_for("the first rebuild at its gate", reached.exists, first)
        second = _start(results, "history", "--rebuild", path=measured.path)
        waiting = _line_with(second, "waiting for another rebuild of the history database")
        assert f"pid {first.pid} on " in waiting  # the holder, named
        assert first.poll() is None
    finally:
        gate.unlink()
    out1, _ = _finished(first)
    out2, _ = _finished(second)
    total = COPIES + 3
    assert f"rebuilt the history database: {total} campaigns, 0 bisects" in out1
    assert f"rebuilt the history database: {total} campaigns, 0 bisects" in out2
    assert len(_check_store(results)) == total


@pytest.mark.slow
def test_readers_during_a_rebuild_see_the_old_store_whole_and_after_it_the_new_one(measured, tmp_path, invoke):
    c = measured.commits
    results = _results(measured, tmp_path, without_commit_3=True)
    env = {"PATH": measured.path}
    query = ("--checkout", str(measured.root), "--metric", METRIC)
    gated, gate, reached = _gated_path(measured, tmp_path / "gitgate")
    rebuild = _start(results, "history", "--rebuild", path=gated)
    try:
        _wait_for("the rebuild at its gate", reached.exists, rebuild)
        during = _ok(invoke("history", *query, "--json", str(tmp_path / "during.json"), env=env))
        published = _ok(invoke("publish", "--out", str(tmp_path / "site"), *query, env=env))
        assert rebuild.poll() is None  # both read while it ran
    finally:
        gate.unlink()
    out, _ = _finished(rebuild)
    assert _commits_seen(tmp_path / "during.json") == list(c[:2]), during.stdout  # the old store, every point
    assert _commits_seen(tmp_path / "site" / "history.json") == list(c[:2]), published.stdout
    after = _ok(invoke("history", *query, "--json", str(tmp_path / "after.json"), env=env))
    assert _commits_seen(tmp_path / "after.json") == list(c[:3]), after.stdout
    assert f"rebuilt the history database: {COPIES + 3} campaigns" in out
    _check_store(results)


@pytest.mark.slow
def test_a_campaign_that_completes_during_a_rebuild_is_in_the_rebuilt_store(measured, tmp_path, invoke):
    """The campaign indexes itself into the old store (still in place); the rebuild lists the
    source files again before its swap, sees the new campaign file and reads it."""
    c = measured.commits
    results = _results(measured, tmp_path)
    gated, gate, reached = _gated_path(measured, tmp_path / "gitgate")
    rebuild = _start(results, "history", "--rebuild", path=gated)
    try:
        _wait_for("the rebuild at its gate", reached.exists, rebuild)
        measure = _measure_head(invoke, measured)
        assert "not in the history database" not in measure.stdout
        assert rebuild.poll() is None
    finally:
        gate.unlink()
    out, _ = _finished(rebuild)
    assert f"rebuilt the history database: {COPIES + 4} campaigns, 0 bisects (1 source file completed or changed " \
           "while it ran: read again before the swap)" in out
    rows = _check_store(results)
    assert any(row.startswith(f"{c[3][:7]}/") for row in rows), rows
    done = _ok(invoke("history", "--checkout", str(measured.root), "--metric", METRIC, "--json",
                      str(tmp_path / "h.json"), env={"PATH": measured.path}))
    assert _commits_seen(tmp_path / "h.json") == list(c), done.stdout


@pytest.mark.slow
def test_two_rebuilds_a_writer_and_a_reader_at_once_leave_a_sound_store(measured, tmp_path):
    """No gate: two `invoke history --rebuild`, a process indexing every campaign again and again
    (campaigns completing, as matrix slots' do) and `invoke history` readers, all at once."""
    results = _results(measured, tmp_path, store=False)  # no store at all: the first of them makes it
    rebuilds = [_start(results, "history", "--rebuild", path=measured.path) for _ in range(2)]
    writer = subprocess.Popen([sys.executable, "-c", WRITER, str(results), "2"], cwd=REPO, stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True)
    readers = [_start(results, "history", "--checkout", str(measured.root), "--metric", METRIC, path=measured.path)
               for _ in range(2)]
    for p in [*rebuilds, *readers]:
        out, _ = _finished(p)
        assert METRIC in out
    w_out, w_err = writer.communicate(timeout=600)
    assert writer.returncode == 0, w_err[-3000:]
    assert len(_check_store(results)) == COPIES + 3


@pytest.mark.slow
def test_a_rebuild_killed_mid_way_leaves_the_old_store_and_the_next_one_cleans_up(measured, tmp_path, invoke):
    results = _results(measured, tmp_path)
    before = _check_store(results)
    gated, gate, reached = _gated_path(measured, tmp_path / "gitgate")
    rebuild = _start(results, "history", "--rebuild", path=gated)
    try:
        _wait_for("the rebuild at its gate", reached.exists, rebuild)
        assert list(results.glob(f".{DB_NAME}.*.partial"))  # its new database, beside the old one
        rebuild.kill()  # SIGKILL: no cleanup of its own; the kernel drops its locks
        rebuild.communicate(timeout=600)
    finally:
        gate.unlink()
    env = {"PATH": measured.path}
    done = _ok(invoke("history", "--checkout", str(measured.root), "--metric", METRIC, "--json",
                      str(tmp_path / "h.json"), env=env))
    assert _commits_seen(tmp_path / "h.json") == list(measured.commits[:3]), done.stdout
    with sqlite3.connect(results / DB_NAME) as db:
        assert [r[0] for r in db.execute("SELECT file FROM campaigns ORDER BY file")] == before
    again = _ok(invoke("history", "--rebuild", env=env))
    assert "waiting for another rebuild" not in again.stdout
    assert _check_store(results) == before  # and the killed one's partial file is gone


# -- hostile users --------------------------------------------------------------------------------

@pytest.mark.slow
def test_a_0_byte_database_is_made_again_from_the_run_directories(measured, tmp_path, invoke):
    results = _results(measured, tmp_path)
    (results / DB_NAME).write_bytes(b"")  # cut short by a full disk, or `: > history.sqlite`
    for suffix in ("-wal", "-shm"):
        Path(f"{results / DB_NAME}{suffix}").unlink(missing_ok=True)
    done = _ok(invoke("history", "--checkout", str(measured.root), "--metric", METRIC, "--json",
                      str(tmp_path / "h.json"), env={"PATH": measured.path}))
    assert _commits_seen(tmp_path / "h.json") == list(measured.commits[:3]), done.stdout
    assert len(_check_store(results)) == COPIES + 3


@pytest.mark.slow
def test_a_campaign_completing_after_the_database_was_deleted_gets_every_campaign_in(measured, tmp_path, invoke):
    """Not a store of that one campaign, which a query would then take for the whole history."""
    results = _results(measured, tmp_path, store=False)
    _measure_head(invoke, measured)
    assert len(_check_store(results)) == COPIES + 4


@pytest.mark.slow
def test_a_folder_where_the_database_goes_is_a_typed_error_and_never_removed(measured, tmp_path, invoke):
    results = _results(measured, tmp_path, store=False)
    (results / DB_NAME).mkdir()
    (results / DB_NAME / "keep.txt").write_text("mine")
    for args in (("history", "--rebuild"), ("history",)):
        done = invoke(*args, env={"PATH": measured.path})
        assert done.returncode == 1 and "Traceback" not in done.stderr, done.stderr
        assert f"{results / DB_NAME} is a folder, not the history database" in done.stderr
        assert "move it aside" in done.stderr
    assert (results / DB_NAME / "keep.txt").read_text() == "mine"
    (results / DB_NAME / "keep.txt").rename(tmp_path / "keep.txt")
    (results / DB_NAME).rmdir()
    (results / ".history.lock").unlink(missing_ok=True)
    (results / ".history.lock").mkdir()  # the lock's name taken by a folder
    done = invoke("history", env={"PATH": measured.path})
    assert done.returncode == 1 and "Traceback" not in done.stderr, done.stderr
    assert f"opening the history database's lock {results / '.history.lock'}" in done.stderr


@pytest.mark.slow
def test_rebuild_replaces_a_corrupt_or_newer_database(measured, tmp_path, invoke):
    results = _results(measured, tmp_path)
    with sqlite3.connect(results / DB_NAME) as db:
        db.execute(f"PRAGMA user_version = {SCHEMA_VERSION + 1}")
    refused = invoke("history", env={"PATH": measured.path})
    assert refused.returncode == 1 and "written by a newer omnibench" in refused.stderr
    _ok(invoke("history", "--rebuild", env={"PATH": measured.path}))
    assert len(_check_store(results)) == COPIES + 3
    (results / DB_NAME).write_bytes(b"not a database " * 500)
    refused = invoke("history", env={"PATH": measured.path})
    assert refused.returncode == 1 and "cannot be read (is it corrupt?)" in refused.stderr
    assert "invoke history --rebuild" in refused.stderr
    _ok(invoke("history", "--rebuild", env={"PATH": measured.path}))
    assert len(_check_store(results)) == COPIES + 3


@pytest.fixture
def read_only(tmp_path):
    """Bind-mount a folder read-only over itself (a results root on a read-only mount: an archive,
    a colleague's share); unmounted after the test."""
    mounted: list[Path] = []

    def mount(folder: Path) -> None:
        subprocess.run(["mount", "--bind", str(folder), str(folder)], check=True)
        mounted.append(folder)
        subprocess.run(["mount", "-o", "remount,ro,bind", str(folder)], check=True)

    yield mount
    for folder in reversed(mounted):
        subprocess.run(["umount", str(folder)], check=True)


@pytest.mark.slow
def test_a_read_only_results_root_is_read_and_cannot_be_rebuilt(measured, tmp_path, invoke, read_only):
    c = measured.commits
    results = _results(measured, tmp_path)
    query = ("--checkout", str(measured.root), "--metric", METRIC)
    empty = tmp_path / "empty-results"
    empty.mkdir()
    shutil.copytree(results / c[0][:7], empty / c[0][:7], symlinks=True)  # campaigns, and no store
    read_only(results)
    read_only(empty)
    env = {"PATH": measured.path}
    done = _ok(invoke("history", *query, "--json", str(tmp_path / "h.json"), env=env))
    assert _commits_seen(tmp_path / "h.json") == list(c[:3]), done.stdout
    _ok(invoke("publish", "--out", str(tmp_path / "site"), *query, env=env))
    assert _commits_seen(tmp_path / "site" / "history.json") == list(c[:3])
    refused = invoke("history", "--rebuild", env=env)
    assert refused.returncode == 1 and "Traceback" not in refused.stderr, refused.stderr
    assert f"the results root {results} is not writable by this process" in refused.stderr
    assert "--results COPY" in refused.stderr
    refused = invoke("history", "--results", str(empty), *query, env=env)
    assert refused.returncode == 1 and "Traceback" not in refused.stderr, refused.stderr
    assert f"there is no history database at {empty / DB_NAME}" in refused.stderr
    assert "is not writable by this process" in refused.stderr


@pytest.fixture
def small_disk(tmp_path):
    """A real 4 MiB tmpfs at ``tmp_path/small`` (a disk that fills up); unmounted after the test."""
    disk = tmp_path / "small"
    disk.mkdir()
    subprocess.run(["mount", "-t", "tmpfs", "-o", "size=4m", "tmpfs", str(disk)], check=True)
    yield disk
    subprocess.run(["umount", str(disk)], check=True)


@pytest.mark.slow
def test_a_full_disk_keeps_the_old_store_and_says_the_disk_is_full(measured, tmp_path, invoke, small_disk):
    results = small_disk / "results"
    first = measured.commits[0][:7]
    shutil.copytree(measured.results / first, results / first, symlinks=True)
    env = {"PATH": measured.path}
    query = ("--results", str(results), "--checkout", str(measured.root), "--metric", METRIC)
    _ok(invoke("history", *query, "--rebuild", env=env))
    before = (results / DB_NAME).read_bytes()
    with open(small_disk / "filler", "wb", buffering=0) as filler:  # every block taken
        with pytest.raises(OSError):
            while True:
                filler.write(b"\0" * 65536)
                filler.flush()
    for args in (("--rebuild",), ()):
        refused = invoke("history", *query, *args, env=env)
        assert refused.returncode == 1 and "Traceback" not in refused.stderr, refused.stderr
        assert "is full" in refused.stderr and "free some space" in refused.stderr, refused.stderr
        assert "corrupt" not in refused.stderr
    assert (results / DB_NAME).read_bytes() == before and not list(results.glob(f".{DB_NAME}.*"))
    (small_disk / "filler").unlink()
    done = _ok(invoke("history", *query, "--json", str(tmp_path / "h.json"), env=env))
    assert _commits_seen(tmp_path / "h.json") == [measured.commits[0]], done.stdout

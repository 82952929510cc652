"""Faults in the campaign layer, each reproduced for real and its outcome asserted: kill -9 and
Ctrl-C during deferred scoring, signals while a report is written (strace delivers them at the
rename), two measures of one campaign at once, a read-only bind mount, a full tmpfs, no inodes,
chattr +i, campaign files edited by hand, NaN and text metrics, SIGTERM of a matrix, a hung
nvidia-smi under gpu_free_timeout_s. Every command is the real `invoke ...` a user types."""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from proc_helpers import leftovers, wait_for
from run_helpers import REPO, free_port
from scale_helpers import make_revisions_checkout, server_pids

from omnibench_core.campaign import campaign_file
from omnibench_core.process.ports import port_in_use
from omnibench_core.process.proctree import cmdline, snapshot
from omnibench_core.run import ownership
from omnibench_core.store import manifest as manifest_file

FIXTURES = Path(__file__).parent / "fixtures"
SELFTEST = ("measure", "-w", "selftest", "--runs", "2")
# where the server is not the point (the made campaigns and the commands that resume them, the port
# clash): no helper processes, no loading time, two requests (issue 40)
LEAN = (*SELFTEST, "-o", "selftest.children=0", "-o", "selftest.delay=0", "-o", "selftest.requests=2")
# one sample: the story is the runs and their scoring phases, not the speech (issue 40)
SEEDTTS = ("measure", "-w", "seedtts", "--runs", "2", "-o", "seedtts.max_samples=1")


def _env(results: Path, **extra: str) -> dict[str, str]:
    return {**os.environ, "INVOKE_OMNIBENCH_RESULTS": str(results), **extra}


def _argv(*args: str) -> list[str]:
    return [sys.executable, "-m", "invoke", *args]


def _invoke(results: Path, *args: str, timeout: float = 600, **env: str) -> subprocess.CompletedProcess:
    return subprocess.run(_argv(*args), cwd=REPO, env=_env(results, **env), capture_output=True, text=True,
                          timeout=timeout)


def _sha(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def _no_traceback(done: subprocess.CompletedProcess) -> None:
    assert "Traceback" not in done.stdout + done.stderr, done.stdout + done.stderr


def _empty_files(root: Path) -> set[Path]:
    return {p for p in root.rglob("*") if p.is_file() and not p.is_symlink() and p.stat().st_size == 0}


def _servers_gone(revision: Path, port: int) -> None:
    for run in manifest_file.run_dirs(revision):
        for s in manifest_file.read(run).servers:
            if s.pid is not None:
                wait_for(lambda s=s: not leftovers(pids={s.pid}, pgid=s.pgid, token=s.tree_token, port=None),
                         what=f"server {s.label} of {run.name} gone")
    wait_for(lambda: not port_in_use(port), what=f"port {port} free")


def _campaign_file(revision: Path) -> Path:
    (path,) = (revision / "campaigns").glob("*.json")
    return path


# -- a selftest campaign to break, made once ---------------------------------------------------
@pytest.fixture(scope="module")
def made(tmp_path_factory) -> Path:
    """Results with two complete selftest campaigns, base and cand (`invoke measure --name`)."""
    results = tmp_path_factory.mktemp("made")
    for name in ("base", "cand"):
        done = _invoke(results, *LEAN, "--name", name, "-p", str(free_port()))
        assert done.returncode == 0, done.stdout + done.stderr
    return results


@pytest.fixture
def results(made, tmp_path) -> Path:
    """A copy of the made results, for one test to break."""
    out = tmp_path / "results"
    shutil.copytree(made, out, symlinks=True)
    return out


def _revision(results: Path) -> Path:
    (revision,) = results.glob("local-*")
    return revision


def _report_gone(results: Path) -> None:
    """base's report.md removed: the next `report --name base` must write (report-2), where a look
    at a whole, unchanged report writes nothing (issue 46)."""
    (_revision(results) / "campaigns" / "base" / "report.md").unlink()


# -- 1. deferred scoring cut short ---------------------------------------------------------------
@pytest.mark.slow
def test_deferred_scoring_cut_short_keeps_the_generated_runs(tmp_path):
    """kill -9 during deferred scoring, the same command (Ctrl-C during its scoring), then
    --scoring per-run: the three generated runs are scored, never generated again."""
    results, port = tmp_path / "r", free_port()
    argv = _argv(*SEEDTTS, "-p", str(port))

    def until_scoring(sig: int) -> subprocess.CompletedProcess:
        proc = subprocess.Popen(argv, cwd=REPO, env=_env(results), stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                text=True)
        seen = []
        assert proc.stdout is not None
        for line in proc.stdout:
            seen.append(line)
            if "scoring 3 generated runs together" in line and "seedtts.transcribe: running" in line:
                proc.send_signal(sig)
                break
        rest, _ = proc.communicate(timeout=600)
        return subprocess.CompletedProcess(argv, proc.returncode, "".join(seen) + rest, "")

    killed = until_scoring(signal.SIGKILL)
    assert killed.returncode == -signal.SIGKILL, killed.stdout
    revision = _revision(results)
    _servers_gone(revision, port)
    runs = ("run0", "run1", "run2")
    generated = {r: _sha(revision / r / "seedtts" / "speed_results.json") for r in runs}
    assert all(manifest_file.read(revision / r).status == "running" for r in runs)

    again = until_scoring(signal.SIGINT)  # the same command: it only scores; Ctrl-C during that
    assert again.returncode == 130, again.stdout
    assert "it is generated again and only scored" in again.stdout
    assert "seedtts.generate: running" not in again.stdout
    assert all(manifest_file.read(revision / r).status == "generated" for r in runs)
    _servers_gone(revision, port)

    switched = subprocess.run([*argv, "--scoring", "per-run"], cwd=REPO, env=_env(results), capture_output=True,
                              text=True, timeout=600)
    assert switched.returncode == 0, switched.stdout + switched.stderr
    assert "runs left generated by deferred scoring are scored first" in switched.stdout
    assert "seedtts.generate: running" not in switched.stdout
    assert sorted(p.name for p in revision.glob("run*")) == list(runs)  # nothing moved aside, nothing new
    assert {r: _sha(revision / r / "seedtts" / "speed_results.json") for r in runs} == generated
    c = campaign_file.load(_campaign_file(revision))
    assert c.status == "complete" and [a.run for a in c.measured()] == ["run1", "run2"]
    assert [len([a for a in c.attempts if a.slot == s]) for s in range(3)] == [1, 1, 1]  # nothing counted twice
    _servers_gone(revision, port)


# -- 2. signals while the report is written ------------------------------------------------------
STRACE = shutil.which("strace")


@pytest.mark.slow
@pytest.mark.skipif(STRACE is None, reason="strace (to deliver the signal at the report's rename) is not installed")
@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM, signal.SIGKILL], ids=["SIGINT", "SIGTERM", "kill-9"])
def test_a_signal_while_the_report_is_written_leaves_nothing_half_written(results, sig):
    """strace injects the signal as report-2.md's temporary file is renamed onto it, before its JSON:
    a real signal at the worst moment. The next report replaces the partial one."""
    folder = _revision(results) / "campaigns" / "base"
    _report_gone(results)
    before = _empty_files(results)
    tmp_name = str(folder / ".report-2.md.partial")
    done = subprocess.run([STRACE, "-f", "-qq", "-o", "/dev/null", "-e", "trace=rename,renameat,renameat2",
                           "-e", f"inject=rename,renameat,renameat2:signal={sig.name}", "-P", tmp_name,
                           *_argv("report", "--name", "base")], cwd=REPO, env=_env(results),
                          capture_output=True, text=True, timeout=300)
    if "ptrace" in done.stderr and "Operation not permitted" in done.stderr:
        pytest.skip(f"ptrace is not permitted here: {done.stderr.strip()}")
    if sig == signal.SIGKILL:  # killed as the rename began: only the temporary file is there
        assert done.returncode == -signal.SIGKILL, done.stderr
        assert not (folder / "report-2.md").exists() and Path(tmp_name).stat().st_size > 0
    else:  # the rename done, then the signal: report-2.md whole, its JSON not yet written
        assert done.returncode == 130, done.stdout + done.stderr
        assert f"interrupted by {'SIGTERM' if sig == signal.SIGTERM else 'Ctrl-C (SIGINT)'}" in done.stderr
        _no_traceback(done)
        assert (folder / "report-2.md").stat().st_size > 0 and not list(folder.glob(".*partial*"))
    assert not (folder / "report-2.json").exists() and _empty_files(results) == before
    again = _invoke(results, "report", "--name", "base")
    assert again.returncode == 0, again.stdout + again.stderr
    assert "an unfinished report under this name" in again.stdout and "report-2.md" in again.stdout
    assert json.loads((folder / "report-2.json").read_text())["runs"] == ["run1", "run2"]
    assert not (folder / "report-3.md").exists() and not list(folder.glob(".*partial*"))


# -- 3. the campaign lock ------------------------------------------------------------------------
@pytest.mark.slow
def test_a_second_measure_of_a_campaign_is_refused_and_a_dead_holders_lock_taken_over(tmp_path):
    results, port = tmp_path / "r", free_port()
    release = tmp_path / "release"
    # The first holds the lock until the test releases it (an event, never a time the second
    # command must start within: on a busy host it started after the first had finished).
    slow = ("-o", f"selftest.hold={release}")
    first = subprocess.Popen(_argv(*SELFTEST, *slow, "-p", str(port)), cwd=REPO, env=_env(results),
                             stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        def client_running():
            for manifest in results.glob("*/run0/manifest.json"):
                steps = json.loads(manifest.read_text())["steps"]
                if any(s["step"] == "selftest.client" and s["status"] == "running" for s in steps):
                    return True
            return False

        wait_for(client_running, what="the first measure's run0 client")
        second = _invoke(results, *SELFTEST, *slow, "-p", str(free_port()))
        assert second.returncode == 1, second.stdout + second.stderr
        assert "is being measured by another omnibench process" in second.stderr
        assert f"pid {first.pid} on " in second.stderr and "since" in second.stderr
        _no_traceback(second)
    finally:
        first.kill()  # kill -9: the lock's holder is dead now
        first.wait()
    revision = _revision(results)
    _servers_gone(revision, port)
    assert not list(revision.glob("run1*"))  # the refused command measured nothing
    release.write_text("go\n")  # the third's clients end at once
    third = _invoke(results, *SELFTEST, *slow, "-p", str(free_port()))
    assert third.returncode == 0, third.stdout + third.stderr
    c = campaign_file.load(_campaign_file(revision))
    assert [a.run for a in c.measured()] == ["run1", "run2"] and c.status == "complete"
    assert [a.status for a in c.attempts if a.slot == 0] == ["interrupted", "complete"]  # no dangling "running"
    assert sorted(p.name for p in revision.glob("run*")) == ["run0", "run0-incomplete", "run1", "run2"]


@pytest.mark.slow
def test_a_port_another_process_holds_stops_the_campaign_saying_why_and_spends_no_retry(tmp_path):
    import socket

    results, port = tmp_path / "r", free_port()
    argv = (*LEAN, "--retries", "0", "-p", str(port))
    with socket.socket() as squatter:  # a foreign listener on the campaign's port
        squatter.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        squatter.bind(("127.0.0.1", port))
        squatter.listen()
        done = _invoke(results, *argv, timeout=600)
    assert done.returncode == 1 and f"port {port}" in done.stderr, done.stdout + done.stderr
    _no_traceback(done)
    revision = _revision(results)
    c = campaign_file.load(_campaign_file(revision))
    assert c.status == "stopped" and f"port {port}" in c.reason  # the file says why it stopped
    (attempt,) = c.attempts
    assert (attempt.slot, attempt.status, attempt.server_starts) == (0, "not-ready", 0)
    assert f"port {port}" in attempt.error and not list(revision.glob("run*"))
    # the port free again, the same command measures; the clash spent no retry (--retries 0)
    again = _invoke(results, *argv)
    assert again.returncode == 0, again.stdout + again.stderr
    c = campaign_file.load(_campaign_file(revision))
    assert c.status == "complete" and [a.status for a in c.attempts] == ["not-ready", "complete", "complete", "complete"]
    assert [a.run for a in c.measured()] == ["run1", "run2"] and c.server_starts == 3 + 1
    _servers_gone(revision, port)


# -- 4. storage: read-only, full, no inodes, immutable ------------------------------------------
@pytest.fixture
def mounts(tmp_path):
    """Real mounts (a tmpfs with options, a read-only bind mount); skipped where mounting is refused."""
    done: list[Path] = []

    def mount(*argv: str) -> None:
        got = subprocess.run(["mount", *argv], capture_output=True, text=True)
        if got.returncode != 0:
            pytest.skip(f"cannot mount here: {got.stderr.strip()}")
        done.append(Path(argv[-1]))

    yield mount
    for where in reversed(done):
        subprocess.run(["umount", "-l", str(where)], check=False)


def _storage_refused(results: Path, expect: str, commands=("measure", "report", "compare")) -> None:
    """measure (the same command, resumed), report and compare each end with the typed StorageError."""
    before = _empty_files(results)
    argv = {"measure": (*LEAN, "--name", "base", "-p", str(free_port())), "report": ("report", "--name", "base"),
            "compare": ("compare", "base", "cand")}
    for args in (argv[c] for c in commands):
        done = _invoke(results, *args)
        assert done.returncode == 1, f"{args}: {done.stdout + done.stderr}"
        assert "cannot write the results" in done.stderr and expect in done.stderr, f"{args}: {done.stderr}"
        assert "what to do:" in done.stderr
        _no_traceback(done)
        assert _empty_files(results) == before, f"{args} left empty files"
        assert not list(results.rglob(".*partial*"))


@pytest.mark.slow
def test_a_read_only_results_root_is_a_storage_error(made, tmp_path, mounts):
    ro = tmp_path / "ro"
    ro.mkdir()
    src = tmp_path / "src"
    shutil.copytree(made, src, symlinks=True)
    _report_gone(src)
    mounts("--bind", str(src), str(ro))
    mounts("-o", "remount,ro,bind", str(ro))
    _storage_refused(ro, "EROFS")


def _fill(folder: Path) -> None:
    with open(folder / "filler", "wb", buffering=0) as f:
        try:
            while True:
                f.write(b"\1" * 4096)
        except OSError:
            pass


def _use_inodes(folder: Path) -> None:
    try:
        for i in range(100000):
            (folder / f"i{i}").write_text("x")
    except OSError:
        pass


@pytest.mark.slow
@pytest.mark.parametrize("fault", [_fill, _use_inodes], ids=["disk-full", "no-inodes"])
def test_a_full_disk_or_no_inodes_is_a_storage_error(made, tmp_path, mounts, fault):
    fs = tmp_path / "fs"
    fs.mkdir()
    mounts("-t", "tmpfs", "-o", "size=4m,nr_inodes=2000", "tmpfs", str(fs))
    shutil.copytree(made, fs / "results", symlinks=True)
    _report_gone(fs / "results")
    fault(fs)
    _storage_refused(fs / "results", "ENOSPC")


@pytest.mark.slow
def test_immutable_campaigns_folder_is_a_storage_error(results):
    """campaigns/ and all in it made immutable (chattr -R +i): measure and report, which write
    there, are refused; compare writes elsewhere (comparisons/)."""
    campaigns = _revision(results) / "campaigns"
    _report_gone(results)
    if subprocess.run(["chattr", "-R", "+i", str(campaigns)], capture_output=True).returncode != 0:
        pytest.skip("this file system refuses chattr +i")
    try:
        _storage_refused(results, "EPERM", ("measure", "report"))
    finally:
        subprocess.run(["chattr", "-R", "-i", str(campaigns)], check=False)


# -- 5. campaign files edited by hand ----------------------------------------------------------
def _edit_slot(which: int, **changes):
    def edit(data):
        attempt = next(a for a in data["attempts"] if a["slot"] == which)
        attempt.update(changes)
    return edit


def _set(key, value):
    def edit(data):
        data[key] = value
    return edit


@pytest.mark.slow
@pytest.mark.parametrize("edit,field,words", [
    (_edit_slot(2, run="run1"), "attempts[2].run", "a run of another slot"),  # two measured runs naming run1
    (_edit_slot(1, run="run0"), "attempts[1].run", "the warm-up's run"),  # a measured run naming the warm-up
    (_edit_slot(1, slot="1"), "attempts[1].slot", "must be a whole number"),
    (_edit_slot(1, seconds="abc"), "attempts[1].seconds", "must be a finite number"),
    (_edit_slot(0, status="done"), "attempts[0].status", "must be one of"),
    (_set("format", 2), "format", "this omnibench reads format 1"),
    (_set("format", None), "format", "this omnibench reads format 1"),
], ids=["two-run1", "measured-run0", "slot-string", "seconds-abc", "status-word", "format-2", "format-missing"])
def test_a_campaign_file_edited_by_hand_is_refused_naming_file_and_field(results, edit, field, words):
    path = _revision(results) / "campaigns" / "base.json"
    data = json.loads(path.read_text())
    edit(data)
    path.write_text(json.dumps(data))
    runs = sorted(p.name for p in _revision(results).glob("run*"))
    for args in (("report", "--name", "base"), (*LEAN, "--name", "base", "-p", str(free_port()))):
        done = _invoke(results, *args)
        assert done.returncode == 1, done.stdout + done.stderr
        assert str(path) in done.stderr and f"field: {field}" in done.stderr and words in done.stderr, done.stderr
        _no_traceback(done)
    assert sorted(p.name for p in _revision(results).glob("run*")) == runs  # nothing measured again


def test_a_campaign_file_written_by_main_still_loads_and_reports(results):
    """tests/fixtures/campaign-format1-f844481.json was written by `invoke measure` at f844481."""
    old = json.loads((FIXTURES / "campaign-format1-f844481.json").read_text())
    path = _revision(results) / "campaigns" / "old.json"
    path.write_text(json.dumps({**old, "name": "old"}))
    done = _invoke(results, "report", "--name", "old")
    assert done.returncode == 0, done.stdout + done.stderr
    assert "runs run1, run2" in done.stdout


# -- 6. metrics that are not finite numbers ------------------------------------------------------
@pytest.mark.slow
def test_nan_and_text_metrics_are_named_and_listed_not_comparable(results):
    revision = _revision(results)
    cand = campaign_file.load(revision / "campaigns" / "cand.json")
    first, second = (revision / a.run / "metrics.json" for a in cand.measured())
    for path, key, value in ((first, "selftest.latency_mean_s", "NaN"), (second, "selftest.failed", '"fast"')):
        text = path.read_text()
        data = json.loads(text)
        old = json.dumps(data["metrics"][key])
        path.write_text(text.replace(f'"{key}": {old}', f'"{key}": {value}', 1))
    runs = [a.run for a in cand.measured()]
    reported = _invoke(results, "report", "--name", "cand")
    assert reported.returncode == 0, reported.stdout + reported.stderr
    assert f"non-finite metric selftest.latency_mean_s in {runs[0]}" in reported.stdout
    assert f"metric selftest.failed in {runs[1]} is not a number ('fast')" in reported.stdout
    compared = _invoke(results, "compare", "base", "cand")
    assert compared.returncode == 0, compared.stdout + compared.stderr
    _no_traceback(compared)
    rows = {line.split()[0]: line for line in compared.stdout.splitlines() if line.startswith("selftest.")}
    assert "not comparable" in rows["selftest.latency_mean_s"] and "not comparable" in rows["selftest.failed"]
    assert "note: selftest.failed is not comparable: B: metric selftest.failed" in compared.stdout
    doc = json.loads(next((results / "comparisons").glob("*/compare.json")).read_text())
    assert {m["name"]: m["verdict"] for m in doc["metrics"]}["selftest.failed"] == "not comparable"
    gate = _invoke(results, "compare", "base", "cand", "--fail-on", "worse")  # a CI gate cannot pass it unseen
    assert gate.returncode == 1 and "selftest.failed: not comparable" in gate.stderr, gate.stdout + gate.stderr


# -- 7. SIGTERM of a matrix ----------------------------------------------------------------------
@pytest.mark.slow
def test_sigterm_of_a_matrix_while_two_slots_run_is_an_interrupt(tmp_path):
    from gpu_helpers import write_fake_nvidia_smi

    commits = make_revisions_checkout(tmp_path / "co", [20, 20])
    fake = write_fake_nvidia_smi(tmp_path / "fakebin", [0])
    argv = _argv("matrix", "--workload", "selftest", "--target", "sglang-omni", "--checkout", str(tmp_path / "co"),
                 "--revisions", ",".join(commits), "--slots", "0,1", "--slot-per", "gpu", "--slot-cpus", "shared",
                 "--runs", "2", "--port", str(free_port()), "-o", "selftest.serve_with_target=true",
                 "-o", "selftest.delay=0.05", "-o", "selftest.children=0", "-o", "selftest.client_seconds=30")
    proc = subprocess.Popen(argv, cwd=REPO, env=_env(tmp_path / "results", INVOKE_OMNIBENCH_NVIDIA_SMI=str(fake)),
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    clients: set[str] = set()
    assert proc.stdout is not None
    for line in proc.stdout:
        if "selftest.client: running" in line and line.startswith("[slot "):
            clients.add(line.split("]")[0])
            if len(clients) == 2:
                proc.send_signal(signal.SIGTERM)
                break
    out, err = proc.communicate(timeout=600)
    assert proc.returncode == 130, out + err
    assert "interrupted by SIGTERM" in out + err and "the same command continues it" in err  # no --resume needed
    assert "Traceback" not in out + err
    wait_for(lambda: not server_pids(tmp_path), what="every selftest server of the matrix gone")


# -- 8. a hung nvidia-smi is bounded by gpu_free_timeout_s ------------------------------------------
HUNG_SMI = textwrap.dedent(f"""\
    #!{sys.executable}
    import time
    time.sleep(600)
    """)


@pytest.mark.slow
def test_a_hung_nvidia_smi_is_bounded_by_the_configured_time_everywhere(tmp_path):
    """Every nvidia-smi call (the environment's, GPU_FREE's and the stray scan's after each stop)
    hangs; each is killed after gpu_free_timeout_s (2 s, raised to the 5 s a call is always given),
    never after the 30 s default."""
    co = tmp_path / "co"
    make_revisions_checkout(co, [0])
    subprocess.run(["sh", str(co / ".github" / "scripts" / "prepare_omni_venv.sh")], check=True, capture_output=True,
                   env={**os.environ, "OMNI_CI_HOME": str(tmp_path / "ci")})
    smi = tmp_path / "bin" / "nvidia-smi"
    smi.parent.mkdir()
    smi.write_text(HUNG_SMI)
    smi.chmod(0o755)
    results = tmp_path / "results"
    done = _invoke(results, "run", "-w", "selftest", "--target", "sglang-omni", "--checkout", str(co),
                   "-p", str(free_port()), "-o", "selftest.serve_with_target=true", "-o", "selftest.children=0",
                   "-o", "selftest.delay=0.05", "-o", "selftest.requests=2",
                   INVOKE_OMNIBENCH_NVIDIA_SMI=str(smi), INVOKE_OMNIBENCH_GPU_FREE_TIMEOUT_S="2")
    assert done.returncode == 1, done.stdout + done.stderr
    assert "hung until the GPU_FREE deadline" in done.stderr
    (run,) = results.glob("*/run0-incomplete")
    servers = manifest_file.read(run).servers
    notes = [n for s in servers for n in (s.strays or {}).get("notes", [])]
    assert notes and all("did not answer in 5 s" in n for n in notes), servers  # the stray scan's bound
    assert not [p for p in snapshot() if str(smi) in cmdline(p)]  # every hung call was killed


@pytest.mark.slow
def test_a_commit_in_the_checkout_during_a_campaign_stops_it_and_going_back_finishes_it(tmp_path):
    """The checkout gets a new commit while `invoke measure` runs: the campaign stops before it
    measures the new code (it used to measure on forever, its runs landing in the new revision's
    folder where it never found them); back on its commit, the same command finishes it."""
    co, first, env, flags = _standin_checkout(tmp_path)
    results = tmp_path / "results"
    argv = _argv("measure", "-w", "selftest", "--runs", "3", "--name", "moving", *flags, *STANDIN_SELFTEST)
    old = results / first[:7]
    out, err, new = _commit_when(argv, env, co, lambda: (old / "run1").exists())  # runs 2 and 3 to go
    assert f"the target's revision moved from {first[:7]} to {new}" in err and "Traceback" not in err, err
    assert f"go back to {first[:7]}" in err
    campaign = campaign_file.load(old / "campaigns" / "moving.json")
    assert campaign.status.value == "stopped" and len(campaign.attempts) <= 4  # stopped, not looping
    assert not list((results / new).glob("run*")) or len(list((results / new).glob("run*"))) == 1

    # back on the campaign's commit, the same command finishes it with the runs it had
    subprocess.run(["git", "-C", str(co), "checkout", "-q", first], check=True)
    done = subprocess.run(argv, cwd=REPO, env=env, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    campaign = campaign_file.load(old / "campaigns" / "moving.json")
    assert campaign.status.value == "complete" and len(campaign.measured()) == 3
    assert all(a.run and (old / a.run).is_dir() for a in campaign.attempts if a.status.value == "complete")


@pytest.mark.slow
def test_a_commit_in_the_checkout_during_an_ab_experiment_stops_it(tmp_path):
    """The same for `invoke ab` (sides at the checkout's HEAD): its rounds after the commit would
    measure other code than those before, so it stops, naming both revisions."""
    co, first, env, flags = _standin_checkout(tmp_path)
    results = tmp_path / "results"
    argv = _argv("ab", "-w", "selftest", "--aa", "--rounds", "3", "--design", "sequential", *flags, *STANDIN_SELFTEST)
    out, err, new = _commit_when(argv, env, co, lambda: (results / first[:7] / "run1").exists())
    assert f"side A's revision moved from {first[:7]} to {new}" in err or \
        f"side B's revision moved from {first[:7]} to {new}" in err, out[-3000:] + err[-3000:]
    assert "Traceback" not in err
    (path,) = results.glob("ab/*.json")
    experiment = json.loads(path.read_text())
    assert experiment["status"] == "stopped" and {a["revision"] for a in experiment["attempts"]} == {first[:7]}


def _edit(co: Path) -> None:
    """An uncommitted edit of a tracked file of the checkout (what its commit serves)."""
    with (co / "standin.json").open("a") as fh:
        fh.write("\n")


@pytest.mark.slow
def test_an_uncommitted_edit_during_a_campaign_stops_it_naming_the_file_and_undoing_it_finishes_it(tmp_path):
    """Issue 42: an edit that is not committed moved nothing, and a campaign counted a clean run1 and an
    edited run3 together. The tree's state is part of the revision: the edit stops the campaign, naming
    the file; with the file put back, the same command finishes it."""
    co, first, env, flags = _standin_checkout(tmp_path)
    results = tmp_path / "results"
    argv = _argv("measure", "-w", "selftest", "--runs", "3", "--name", "edited", *flags, *STANDIN_SELFTEST)
    old = results / first[:7]
    out, err, _ = _commit_when(argv, env, co, lambda: (old / "run1").exists(), act=lambda: _edit(co))
    assert "the checkout's uncommitted files changed while campaign 'edited' measured" in err, err
    assert f"({first[:7]} -> {first[:7]}-dirty-" in err and ": standin.json" in err and "Traceback" not in err
    campaign = campaign_file.load(old / "campaigns" / "edited.json")
    assert campaign.status.value == "stopped" and len(campaign.measured()) < 3

    subprocess.run(["git", "-C", str(co), "checkout", "--", "standin.json"], check=True)  # put back: finishes
    done = subprocess.run(argv, cwd=REPO, env=env, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    campaign = campaign_file.load(old / "campaigns" / "edited.json")
    assert campaign.status.value == "complete" and len(campaign.measured()) == 3
    assert not list(results.glob(f"{first[:7]}-dirty-*/run*"))  # no run of the edited tree counted or kept


@pytest.mark.slow
def test_a_dirty_checkout_is_refused_by_ab_and_an_edit_during_it_stops_it(tmp_path):
    """Issue 42: `invoke ab` on a dirty checkout is refused before anything starts (naming the file and
    --allow-dirty); begun clean, an uncommitted edit between its rounds stops it, naming the file."""
    co, first, env, flags = _standin_checkout(tmp_path)
    results = tmp_path / "results"
    argv = _argv("ab", "-w", "selftest", "--aa", "--rounds", "3", "--design", "sequential", *flags, *STANDIN_SELFTEST)
    _edit(co)
    refused = subprocess.run(argv, cwd=REPO, env=env, capture_output=True, text=True, timeout=600)
    assert refused.returncode == 1 and f"the checkout {co} has uncommitted changes" in refused.stderr, refused.stderr
    assert "standin.json" in refused.stderr and "--allow-dirty" in refused.stderr and not results.exists()
    subprocess.run(["git", "-C", str(co), "checkout", "--", "standin.json"], check=True)
    out, err, _ = _commit_when(argv, env, co, lambda: (results / first[:7] / "run1").exists(), act=lambda: _edit(co))
    assert "checkout changed its uncommitted files while the experiment measured" in err, out[-3000:] + err[-3000:]
    assert ": standin.json" in err and "Traceback" not in err
    (path,) = results.glob("ab/*.json")
    experiment = json.loads(path.read_text())
    assert experiment["status"] == "stopped" and {a["revision"] for a in experiment["attempts"]} == {first[:7]}


# selftest.delay: each server loads 1.5 s, so the runs after the one the tests wait for (during
# which they commit) take seconds each: a commit is made long before the last run starts
STANDIN_SELFTEST = ("-o", "selftest.serve_with_target=true", "-o", "selftest.children=0", "-o", "selftest.requests=2",
                    "-o", "selftest.delay=1.5")


def _standin_checkout(tmp_path: Path) -> tuple[Path, str, dict[str, str], tuple[str, ...]]:
    """A stand-in checkout of one commit with its venv, a fake nvidia-smi with free GPUs, and the
    environment and flags that measure it (results under tmp_path)."""
    from gpu_helpers import write_fake_nvidia_smi

    co = tmp_path / "co"
    (first,) = make_revisions_checkout(co, [0])
    subprocess.run(["sh", str(co / ".github" / "scripts" / "prepare_omni_venv.sh")], check=True, capture_output=True,
                   env={**os.environ, "OMNI_CI_HOME": str(tmp_path / "ci")})
    smi = write_fake_nvidia_smi(tmp_path / "bin", [10])
    env = _env(tmp_path / "results", INVOKE_OMNIBENCH_NVIDIA_SMI=str(smi))
    return co, first, env, ("--target", "sglang-omni", "--checkout", str(co), "--port", str(free_port()))


def _commit_when(argv: list[str], env: dict[str, str], co: Path, ready, act=None) -> tuple[str, str, str]:
    """Start ``argv``; when ``ready()`` holds, commit in ``co`` (or call ``act()``: an uncommitted
    edit); wait for the command to fail. Returns its output and the commit's short name."""
    proc = subprocess.Popen(argv, cwd=REPO, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        wait_for(lambda: ready() or proc.poll() is not None, what="the measuring to be under way")
        assert proc.poll() is None, "the command ended before the measuring was under way: " + proc.communicate()[1]
        if act is not None:
            act()
        else:
            subprocess.run(["git", "-C", str(co), "commit", "-q", "--allow-empty", "-m", "moved on"], check=True)
        out, err = proc.communicate(timeout=600)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 1, out[-3000:] + err[-3000:]
    new = subprocess.run(["git", "-C", str(co), "rev-parse", "--short=7", "HEAD"], capture_output=True, text=True,
                         check=True).stdout.strip()
    return out, err, new


def test_a_sweep_point_measured_after_the_revision_moved_is_refused(tmp_path):
    """What a sweep asks of each point's campaign (measure(..., expect=...)): the revision folder
    it began on; the target's revision now being another, the point is refused before anything
    runs, the error naming both and how to go on."""
    from omnibench_core.campaign.execute import RevisionMoved, asked_from, measure
    from omnibench_core.settings import Settings

    settings = Settings.from_mapping({"results": str(tmp_path / "results")})
    asked = asked_from(settings, ["selftest"], [], None, 2, 0, "deferred")
    began = tmp_path / "results" / "local-0000000"
    with pytest.raises(RevisionMoved) as err:
        measure(settings, asked, name="p", progress=lambda line: None,
                expect=(began, "sweep 'sweep-selftest'", began / "sweeps" / "sweep-selftest"))
    assert "moved from local-0000000 to local-" in err.value.message and "while sweep 'sweep-selftest'" in err.value.message
    assert "go back to 0000000" in err.value.hint
    assert not (tmp_path / "results").exists() or not list((tmp_path / "results").rglob("campaigns"))


@pytest.mark.slow
def test_a_measure_refused_before_any_run_says_why_in_its_campaign_and_report_and_the_same_command_resumes(
        invoke, tmp_path):
    """A port another omnibench run holds refuses the measure before run0. Its campaign file stays
    (stopped, saying why: the same command resumes it, as after a foreign listener on the port);
    `invoke report --name base` names the campaign and why it has no runs, where it said only
    "runs: none" (issue 46's new-user trial); the same command, the port free, measures it."""
    port = free_port()
    command = ("measure", "-w", "selftest", "-o", "selftest.requests=4", "--runs", "2", "--name", "base", "-p", str(port))
    with ownership.port_lock(port):  # another omnibench run holds it
        refused = invoke(*command)
    assert refused.returncode == 1 and f"port {port} is held by another omnibench run" in refused.stderr, refused.stderr
    (made,) = (tmp_path / "results").glob("*/campaigns/*.json")
    stopped = campaign_file.load(made)
    assert made.name == "base.json" and stopped.status == "stopped" and f"port {port}" in stopped.reason
    report = invoke("report", "--name", "base")
    assert report.returncode == 1 and "has 0 complete measured run(s)" in report.stderr, report.stderr
    assert f"port {port} is held by another omnibench run" in report.stderr and "resumes the campaign" in report.stderr
    done = invoke(*command)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    assert campaign_file.load(made).status == "complete"

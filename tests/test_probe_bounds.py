"""Issue 42 item 4: the capability probe is bounded. One overall deadline, output capped, bytes
decoded with replacement, every process it started ended (a child left holding its output too),
and only answers cached: a failed probe says why and is asked again next time. Real programs
throughout: the checkout's "python" is a script that misbehaves as a hostile checkout's would."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from omnibench_core.builtin.targets import SGLANG_OMNI_FACTS
from omnibench_core.errors import ProbeFailed, UnsupportedOption
from omnibench_core.process.capture import MAX_OUTPUT_BYTES, Ending, capture
from omnibench_core.process.proctree import TOKEN_VAR, Tree, alive, snapshot
from omnibench_core.records import TargetEnv
from omnibench_core.run import capabilities as caps
from omnibench_core.store import capabilities_file

COMMIT = "ab12" * 10


def _program(tmp_path: Path, body: str) -> str:
    """A python program at ``tmp_path/prog.py`` run by this interpreter; its argv."""
    path = tmp_path / "prog.py"
    path.write_text(body)
    return str(path)


def test_a_hung_program_is_stopped_at_the_one_deadline_and_leaves_no_process(tmp_path):
    pidfile = tmp_path / "pid"
    prog = _program(tmp_path, f"import os, time\nopen({str(pidfile)!r}, 'w').write(str(os.getpid()))\n"
                              "while True:\n    print('--flag', flush=True)\n    time.sleep(0.01)\n")
    got = capture([sys.executable, prog], 1.0)
    assert got.ending is Ending.DEADLINE and got.returncode is None and "--flag" in got.stdout
    assert not alive(int(pidfile.read_text()))
    code, why = caps.run_probe([sys.executable, prog], {}, None, 1.0)
    assert code == 124 and why.startswith("no answer within 1 s (stopped)") and "\n" not in why


def test_a_child_left_holding_the_output_is_stopped_once_the_program_exited(tmp_path):
    pidfile = tmp_path / "child"
    prog = _program(tmp_path, "import subprocess, sys\n"
                              f"child = subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(600)'])\n"
                              f"open({str(pidfile)!r}, 'w').write(str(child.pid))\nprint('usage: c [--x X]')\n")
    # a deadline the test would wait out if the lingering child held the call up
    got = capture([sys.executable, prog], 600.0)
    child = int(pidfile.read_text())
    assert got.ending is Ending.EXITED and got.returncode == 0 and "--x" in got.stdout
    assert child in got.leftovers and not alive(child)


def test_a_child_that_left_the_group_is_found_by_its_token_and_stopped(tmp_path):
    pidfile = tmp_path / "child"
    prog = _program(tmp_path, "import subprocess, sys\n"
                              "child = subprocess.Popen(['setsid', sys.executable, '-c', 'import time; time.sleep(600)'])\n"
                              f"open({str(pidfile)!r}, 'w').write(str(child.pid))\n")
    got = capture([sys.executable, prog], 600.0)
    child = int(pidfile.read_text())
    assert got.ending is Ending.EXITED and not alive(child)


def _plant_process(proc: Path, pid: int, environ: bytes, state: str = "S", start: int | None = None) -> None:
    """A process in a planted /proc: its stat (own group and session; ``start``, field 22, where
    given) and its environment as read."""
    (proc / str(pid)).mkdir(parents=True, exist_ok=True)
    tail = "" if start is None else " 0" * 12 + f" {start}"  # fields 10 to 21, then 22
    (proc / str(pid) / "stat").write_text(f"{pid} (python3) {state} 1 {pid} {pid} 0 -1 0{tail} 0 0")
    (proc / str(pid) / "environ").write_bytes(environ)


def test_a_member_whose_environment_reads_empty_is_asked_again_and_kept_while_it_exits(tmp_path):
    """The race behind a flaky capture (2026-12-06, a whole-suite run): a process's environment
    reads empty while it execs or exits. Not knowing is not "no": an empty read is asked again (not
    cached as a stranger), and a member found once stays one while it exits, until it is a zombie."""
    proc, token = tmp_path / "proc", "capture-abc"
    tree, known = Tree(token=token), {}
    _plant_process(proc, 4242, b"")  # mid-exec: nothing to read yet
    assert tree.members(proc, cache=known) == set() and 4242 not in known
    _plant_process(proc, 4242, f"PATH=/bin\0{TOKEN_VAR}={token}\0".encode())
    assert tree.members(proc, cache=known) == {4242}
    _plant_process(proc, 4242, b"")  # exiting: memory released, not yet a zombie
    assert tree.members(proc, cache=known) == {4242}
    _plant_process(proc, 4242, b"", state="Z")
    assert tree.members(proc, cache=known) == set()
    _plant_process(proc, 77, b"PATH=/bin\0")  # a stranger is known as one
    assert tree.members(proc, cache=known) == set() and known[77] is False


def test_a_process_older_than_the_program_is_not_read_for_its_token_and_a_newer_one_is(tmp_path):
    """A scan ends every git call; reading every process's environment was most of its cost. A
    process that started before the program's first one cannot carry the program's new token: its
    environment is not read (a planted token there is not believed). One started with or after it,
    or whose start the stat does not give, is read as before."""
    proc, token = tmp_path / "proc", "capture-abc"
    carries = f"PATH=/bin\0{TOKEN_VAR}={token}\0".encode()
    _plant_process(proc, 10, carries, start=499)  # older than the program: not read
    _plant_process(proc, 11, carries, start=500)  # the same tick as the program's first process
    _plant_process(proc, 12, carries, start=9000)  # started after it
    _plant_process(proc, 13, carries)  # no start in its stat: read
    assert snapshot(proc)[10].start == 499 and snapshot(proc)[13].start == 0
    known: dict[int, bool] = {}
    assert Tree(token=token, born=500).members(proc, cache=known) == {11, 12, 13} and 10 not in known
    assert Tree(token=token).members(proc) == {10, 11, 12, 13}  # born unknown: every environment read


def test_megabytes_are_cut_at_the_cap_and_stop_the_program(tmp_path):
    prog = _program(tmp_path, "import sys\nsys.stdout.write('x' * 24_000_000)\nsys.stderr.write('y' * 20_000_000)\n")
    got = capture([sys.executable, prog], 600.0)
    assert got.ending is Ending.TOO_MUCH and len(got.stdout) + len(got.stderr) <= MAX_OUTPUT_BYTES
    code, why = caps.run_probe([sys.executable, prog], {}, None, 600.0)
    assert code == 125 and why.startswith(f"printed more than {MAX_OUTPUT_BYTES:,} bytes") and len(why) < 1000


def test_output_that_is_not_utf8_is_an_answer_not_an_exception(tmp_path):
    prog = _program(tmp_path, "import os\nos.write(1, b'usage: c [--ok X] \\xff\\xfe\\n')\nos.write(2, b'\\xc3(')\n")
    code, out = caps.run_probe([sys.executable, prog], {}, None, 600.0)
    assert code == 0 and caps.help_flags(out) == ("--ok",) and "\ufffd" in out


def test_a_program_that_cannot_start_says_so(tmp_path):
    code, why = caps.run_probe([str(tmp_path / "no-such-python")], {}, None, 600.0)
    assert code == 127 and why.startswith("could not start")


# -- through the probe's user: check_plan with the checkout's own (misbehaving) python ---------------------
def _checkout(tmp_path: Path, script: str) -> TargetEnv:
    python = tmp_path / "omni" / "bin" / "python"
    python.parent.mkdir(parents=True, exist_ok=True)
    python.write_text("#!/bin/sh\n" + script)
    python.chmod(0o755)
    return TargetEnv("sglang-omni", str(python), lambda spec, port: [], facts=SGLANG_OMNI_FACTS, cwd=str(tmp_path),
                     revision=COMMIT, details={"checkout": str(tmp_path)})


KEY = "-m benchmarks.eval.c"


def _ask(target: TargetEnv, results: Path, flag: str = "--x") -> caps.Capabilities:
    """check_plan's path for one client: asked (or read from the cache), then refused or not."""
    client = caps.Client(KEY, (target.python, "-m", "benchmarks.eval.c", "--help"))
    needs = [caps.Need("w", "generate", "flag", KEY, flag)]
    found = caps.capabilities(target, {KEY: client}, (), results, progress=lambda line: None)
    gaps = caps.missing(needs, found)
    unanswered = [(n, w) for n, w in gaps if n.of in found.failed]
    if unanswered:
        raise caps.probe_failed_error(unanswered, target.revision, target.python)
    if gaps:
        raise caps.unsupported_error(gaps, target.revision)
    return found


def test_a_failed_probe_is_not_cached_says_why_and_is_asked_again(tmp_path):
    results = tmp_path / "results"
    broken = _checkout(tmp_path, "printf 'Traceback\\nImportError: libcuda.so.1\\n' >&2\nexit 1\n")
    with pytest.raises(ProbeFailed) as err:
        _ask(broken, results)
    assert not isinstance(err.value, UnsupportedOption)  # not a fact of the era: a matrix marks it failed
    assert "ImportError: libcuda.so.1" in str(err.value) and "era predates" not in err.value.hint
    assert "nothing was cached" in err.value.hint and f"{broken.python} -m benchmarks.eval.c --help" in err.value.hint
    assert not list((results / capabilities_file.CAPABILITIES).glob("*.json"))
    mended = _checkout(tmp_path, "echo 'usage: c [--x X]'\n")  # the venv mended: asked again, answered, cached
    assert _ask(mended, results).client_flags[KEY] == ("--x",)
    cached = capabilities_file.load(results, COMMIT, mended.python)
    assert cached is not None and cached.client_flags[KEY] == ("--x",) and not cached.failed
    with pytest.raises(UnsupportedOption):  # an answer that lacks the flag is a fact of the era
        _ask(mended, results, flag="--y")


def test_answers_are_cached_per_interpreter(tmp_path):
    results = tmp_path / "results"
    target = _checkout(tmp_path, "echo 'usage: c [--x X]'\n")
    _ask(target, results)
    assert capabilities_file.load(results, COMMIT, target.python) is not None
    assert capabilities_file.load(results, COMMIT, "/another/venv/bin/python") is None
    saved = json.loads(capabilities_file.path_for(results, COMMIT, target.python).read_text())
    assert saved["client_flags"] == {KEY: ["--x"]}


@pytest.mark.slow  # 2.5 to 8 s in the fast tier (issue 40: that tier within a minute)
def test_a_git_that_hangs_is_stopped_at_its_deadline_with_the_child_it_started(tmp_path, monkeypatch):
    """Second hostile round (issue 46): omnibench's own git calls (a checkout's HEAD and status,
    history's log, a campaign's commit facts and first parents) were subprocess.run with a
    timeout per call (30 to 120 s, `history --checkout` ran past 120 s) that left the hung
    git's children running. Now each goes through capture: one deadline, nothing left."""
    from omnibench_core.errors import OmnibenchError
    from omnibench_core.history import query
    from omnibench_core.history import store as history_store
    from omnibench_core.setup.gitinfo import git_revision

    pidfile = tmp_path / "child.pid"
    fake_git = tmp_path / "git"  # a git whose child (a hook, say) hangs and holds the output
    fake_git.write_text(f"#!/bin/sh\nsleep 100000 &\necho $! > {pidfile}\nwait\n")
    fake_git.chmod(0o755)
    assert git_revision(tmp_path, str(fake_git), deadline_s=1.0) is None
    assert not alive(int(pidfile.read_text()))
    pidfile.unlink()
    # why, for the checkout check: git's own failure is said as such (it read "is not a git work
    # tree", blaming the checkout), and a folder git refuses is still "not a work tree" ("")
    from omnibench_core.setup.gitinfo import git_revision_or_why

    assert git_revision_or_why(tmp_path, str(fake_git), deadline_s=1.0) == "no answer within 1 s (stopped)"
    pidfile.unlink()
    assert git_revision_or_why(tmp_path, str(tmp_path / "no-git")).startswith("could not start")
    assert git_revision_or_why(tmp_path / "nowhere") == ""
    with pytest.raises(OmnibenchError, match=r"cannot run git in .*: no answer within 1 s \(stopped\)"):
        query.first_parent_line(tmp_path, "HEAD", str(fake_git), deadline_s=1.0)
    assert not alive(int(pidfile.read_text()))
    pidfile.unlink()
    monkeypatch.setattr(history_store, "GIT_S", 1.0)  # the store's deadline, for this test only
    assert history_store.commit_facts(tmp_path, "HEAD", str(fake_git)) == ("", "", "")
    assert not alive(int(pidfile.read_text()))


def test_a_checkout_that_is_no_work_tree_and_a_git_that_fails_are_told_apart(tmp_path):
    """`invoke run -t sglang-omni`: a folder git says is no work tree names the checkout; a git
    that cannot run (or hangs) names git and the setting that points at it, not the checkout."""
    import os
    import subprocess
    import sys

    from run_helpers import REPO

    co = tmp_path / "co"
    for name in ("python", "sgl-omni"):
        tool = co / "omni" / "bin" / name
        tool.parent.mkdir(parents=True, exist_ok=True)
        tool.write_text("#!/bin/sh\nexit 0\n")
        tool.chmod(0o755)
    argv = [sys.executable, "-m", "invoke", "run", "-w", "selftest", "--target", "sglang-omni", "--checkout", str(co)]
    env = {**os.environ, "INVOKE_OMNIBENCH_RESULTS": str(tmp_path / "r"), "GIT_CEILING_DIRECTORIES": str(tmp_path)}
    plain = subprocess.run(argv, cwd=REPO, capture_output=True, text=True, timeout=600, env=env)
    assert plain.returncode == 1 and f"error: {co} is not a git work tree" in plain.stderr, plain.stderr
    broken = subprocess.run(argv, cwd=REPO, capture_output=True, text=True, timeout=600,
                            env={**env, "INVOKE_OMNIBENCH_GIT": str(tmp_path / "no-git")})
    assert broken.returncode == 1, broken.stderr
    assert f"error: cannot read the commit of {co}: {tmp_path / 'no-git'} could not start" in broken.stderr
    assert "omnibench.git" in broken.stderr and "not a git work tree" not in broken.stderr

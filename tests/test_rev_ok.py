"""REV_OK's pieces: the python a console script runs (both of pip's forms), sys.path[0] as CPython
sets it, a real process read from /proc, a real interpreter probed, and the gate's verdicts with
injected probes (a mismatch names both trees)."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from omnibench_core.errors import WrongRevision
from omnibench_core.run import rev_ok
from omnibench_core.standin.venv import console_script_text, shebang


def test_a_console_scripts_python_in_both_of_pips_forms(tmp_path):
    short, long = Path("/srv/omni_ci/omni/bin/python"), Path("/" + "x" * 130 + "/omni/bin/python")
    assert shebang(short) == f"#!{short}\n" and shebang(long).startswith("#!/bin/sh\n")
    for python in (short, long):
        script = tmp_path / "sgl-omni"
        script.write_text(console_script_text(python, "sglang_omni.cli:app"))
        assert rev_ok.script_interpreter(script) == str(python)
    script.write_text('#!/bin/sh\nexec "$(dirname "$0")/python" -m x "$@"\n')  # a launcher that names no python
    assert rev_ok.script_interpreter(script) == ""
    assert rev_ok.script_interpreter(tmp_path / "missing") == ""


def test_sys_path0_as_cpython_sets_it(tmp_path):
    (tmp_path / "bin").mkdir()
    (tmp_path / "real.py").write_text("")
    (tmp_path / "bin" / "link.py").symlink_to(tmp_path / "real.py")
    cwd = str(tmp_path / "bin")
    assert rev_ok.path0(["-m", "x"], cwd, {}) == cwd
    assert rev_ok.path0(["-u", "-X", "dev", "-c", "pass"], cwd, {}) == cwd
    assert rev_ok.path0(["link.py", "serve"], cwd, {}) == str(tmp_path)  # a script's resolved folder
    assert rev_ok.path0(["-Im", "x"], cwd, {}) == ""
    assert rev_ok.path0(["-m", "x"], cwd, {"PYTHONSAFEPATH": "1"}) == ""


def test_a_real_process_is_read_from_proc_and_its_interpreter_probed(tmp_path):
    pkg = tmp_path / "tree" / "mypkg"
    pkg.mkdir(parents=True)
    (pkg / "__init__.py").write_text("")
    ready = tmp_path / "ready"
    env = {**os.environ, "PYTHONPATH": str(tmp_path / "tree"), "MARK": "1"}
    code = f"import pathlib, time; pathlib.Path({str(ready)!r}).write_text('up'); time.sleep(60)"
    proc = subprocess.Popen([sys.executable, "-c", code], cwd=tmp_path, env=env)
    try:
        while not ready.exists():  # waits on the file the process writes
            assert proc.poll() is None
            time.sleep(0.01)
        launch = rev_ok.process_launch(proc.pid)
        assert launch is not None
        assert launch.interpreter == sys.executable and launch.cwd == str(tmp_path) and launch.env["MARK"] == "1"
        assert rev_ok.resolve_module(launch, "mypkg") == str(pkg / "__init__.py")
        assert rev_ok.resolve_module(launch, "no_such_pkg") == ""
    finally:
        proc.kill()
        proc.wait()
    assert rev_ok.process_launch(proc.pid) is None  # gone: nothing to read


def _launch(role: str = "server launch") -> rev_ok.Launch:
    return rev_ok.Launch(role, "/venv/bin/python", "/venv/bin", "/trees/b")


def test_the_gate_passes_its_own_tree_and_names_both_trees_otherwise(tmp_path):
    a, b = tmp_path / "a", tmp_path / "b"
    a.mkdir()
    b.mkdir()
    trees = {str(a / "pkg" / "__init__.py"): (str(a), "c" * 40), str(b / "pkg" / "__init__.py"): (str(b), "d" * 40)}
    calls: list[str] = []

    def resolve(launch: rev_ok.Launch, package: str) -> str:
        calls.append(launch.role)
        return str((a if launch.role == "server process" else b) / package / "__init__.py")

    ok = rev_ok.check_rev_ok([_launch(), _launch()], "pkg", str(b), "d" * 40, resolve=resolve, repo=trees.get)
    assert ok.status == "passed" and ok.evidence["server launch: module"] == str(b / "pkg" / "__init__.py")
    assert calls == ["server launch"]  # the same python, folder and sys.path[0]: probed once
    with pytest.raises(WrongRevision) as caught:
        rev_ok.check_rev_ok([_launch(), rev_ok.Launch("server process", "/venv/bin/python", "", "/trees/b")], "pkg",
                            str(b), "d" * 40, resolve=resolve, repo=trees.get)
    assert caught.value.gate == "REV_OK"
    assert str(a) in caught.value.message and str(b) in caught.value.message
    assert caught.value.evidence["its work tree"] == str(a) and caught.value.evidence["asked worktree"] == str(b)
    with pytest.raises(WrongRevision, match="at cccccccccccc"):  # its own tree, another commit
        rev_ok.check_rev_ok([_launch()], "pkg", str(b), "c" * 40, resolve=resolve, repo=trees.get)
    with pytest.raises(WrongRevision, match="cannot import pkg"):
        rev_ok.check_rev_ok([_launch()], "pkg", str(b), "d" * 40, resolve=lambda launch, p: "", repo=trees.get)
    with pytest.raises(WrongRevision, match="outside the asked worktree"):
        rev_ok.check_rev_ok([_launch()], "pkg", str(b), "d" * 40, resolve=resolve, repo=lambda p: None)

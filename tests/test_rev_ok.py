"""REV_OK's pieces and its verdicts on a real stand-in checkout: the python a console script runs
(both of pip's forms, its #! options), sys.path[0] and the import options as CPython takes them, a
real process read from /proc, and the gate stopping another revision's copy put first by a .pth,
an untracked build/lib copy, an edited or added file, while honouring -I/-s as the interpreter does."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest
from upstream_contracts import load

from omnibench_core.errors import WrongRevision
from omnibench_core.run import rev_ok
from omnibench_core.settings import Settings
from omnibench_core.standin.repo import StandinSpec, make_standin
from omnibench_core.standin.venv import COSYVOICE_PTH, IMAGE_PTH, console_script_text, shebang

PKG = "sglang_omni_standin"


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
    script.write_text("#!/srv/omni/bin/python -sE\nimport x\n")  # the #! line's options go with the interpreter
    assert rev_ok.script_command(script) == ["/srv/omni/bin/python", "-sE"]
    script.write_text("#!/usr/bin/env -S python3 -I\nimport x\n")
    assert rev_ok.script_command(script) == ["python3", "-I"]
    launch = rev_ok.script_launch([str(script)], {"PATH": os.path.dirname(sys.executable)}, str(tmp_path))
    assert launch is not None and launch.flags == ("-I",) and launch.path0 == ""  # -I: no script folder


def test_sys_path0_and_the_import_options_as_cpython_takes_them(tmp_path):
    (tmp_path / "bin").mkdir()
    (tmp_path / "real.py").write_text("")
    (tmp_path / "bin" / "link.py").symlink_to(tmp_path / "real.py")
    cwd = str(tmp_path / "bin")
    assert rev_ok.path0(["-m", "x"], cwd, {}) == cwd
    assert rev_ok.path0(["-u", "-X", "dev", "-c", "pass"], cwd, {}) == cwd
    assert rev_ok.path0(["link.py", "serve"], cwd, {}) == str(tmp_path)  # a script's resolved folder
    assert rev_ok.path0(["-Im", "x"], cwd, {}) == ""
    assert rev_ok.path0(["-m", "x"], cwd, {"PYTHONSAFEPATH": "1"}) == ""
    assert rev_ok.path0(["-E", "-m", "x"], cwd, {"PYTHONSAFEPATH": "1"}) == cwd  # -E: the variable is not read
    opts = rev_ok.parse_options(["-u", "-sE", "-X", "dev", "-m", "benchmarks.eval.x", "-I"])
    assert opts.flags == ("-s", "-E") and opts.module == "benchmarks.eval.x" and opts.script == -1
    assert rev_ok.parse_options(["-Smpytest", "t.py"]).module == "pytest"
    launch = rev_ok.command_launch("client", [sys.executable, "-s", "-m", "benchmarks.eval.x"], {}, cwd)
    assert launch.flags == ("-s",) and launch.module == "benchmarks.eval.x"


def test_a_real_process_is_read_from_proc_and_its_interpreter_probed(tmp_path):
    pkg = tmp_path / "tree" / "mypkg"
    (pkg / "sub").mkdir(parents=True)
    (pkg / "__init__.py").write_text("raise SystemExit('the probe ran package code')\n")
    (pkg / "sub" / "mod.py").write_text("")
    (tmp_path / "tree" / "nspkg").mkdir()
    ready = tmp_path / "ready"
    env = {**os.environ, "PYTHONPATH": str(tmp_path / "tree"), "MARK": "1"}
    code = f"import pathlib, time; pathlib.Path({str(ready)!r}).write_text('up'); time.sleep(60)"
    proc = subprocess.Popen([sys.executable, "-s", "-c", code], cwd=tmp_path, env=env)
    try:
        while not ready.exists():  # waits on the file the process writes
            assert proc.poll() is None
            time.sleep(0.01)
        launch = rev_ok.process_launch(proc.pid)
        assert launch is not None
        assert launch.interpreter == sys.executable and launch.cwd == str(tmp_path) and launch.env["MARK"] == "1"
        assert launch.flags == ("-s",)
        found = rev_ok.resolve_modules(launch, ["mypkg", "mypkg.sub.mod", "nspkg", "no_such_pkg"])
        assert found["mypkg"].origin == str(pkg / "__init__.py")  # and its code did not run
        assert found["mypkg.sub.mod"].origin == str(pkg / "sub" / "mod.py")
        assert found["nspkg"] == rev_ok.Found("", (str(tmp_path / "tree" / "nspkg"),))  # a namespace package
        assert not found["no_such_pkg"].importable
    finally:
        proc.kill()
        proc.wait()
    assert rev_ok.process_launch(proc.pid) is None  # gone: nothing to read


# -- the gate on the stand-in ------------------------------------------------------------------
@pytest.fixture(scope="module")
def made(tmp_path_factory):
    """A two-commit stand-in (its venv in upstream's newest layout) and a worktree of commit 1."""
    made = make_standin(tmp_path_factory.mktemp("revok") / "co", StandinSpec(commits=2))
    old = made.root.parent / "old"
    subprocess.run(["git", "-C", str(made.root), "worktree", "add", "-q", "--detach", str(old), made.commits[0]],
                   check=True)
    return made


@pytest.fixture
def standin(made):
    """The stand-in, put back as its commit made it after the test."""
    yield made
    subprocess.run(["git", "-C", str(made.root), "checkout", "-q", "--", "."], check=True)
    subprocess.run(["git", "-C", str(made.root), "clean", "-qfdx", "-e", ".standin", "-e", "omni"], check=True)
    for pth in _site(made).glob("0*.pth"):
        pth.unlink()
    shutil.rmtree(made.root.parent / "user", ignore_errors=True)


def _site(made) -> Path:
    (site,) = (made.root / "omni").resolve().glob("lib/python*/site-packages")
    return site


def _server(made, env: dict[str, str] | None = None) -> rev_ok.Launch:
    launch = rev_ok.script_launch([str(made.root / "omni" / "bin" / "sgl-omni")], {**os.environ, **(env or {})},
                                  str(made.root))
    assert launch is not None
    return launch


def _client(made, env: dict[str, str] | None = None, *flags: str) -> rev_ok.Launch:
    argv = [str(made.root / "omni" / "bin" / "python"), *flags, "-m", "benchmarks.eval.benchmark_omni_seedtts"]
    return rev_ok.command_launch("client", argv, {**os.environ, **(env or {})}, str(made.root))


def _gate(made, *launches: rev_ok.Launch, **kw) -> rev_ok.GateRecord:
    return rev_ok.check_rev_ok(launches, PKG, str(made.root), made.commits[-1], **kw)


def _refused(made, *launches: rev_ok.Launch, **kw) -> WrongRevision:
    with pytest.raises(WrongRevision) as caught:
        _gate(made, *launches, **kw)
    assert caught.value.gate == "REV_OK" and caught.value.hint
    return caught.value


def test_the_standins_venv_follows_upstreams_newest_layout(standin):
    (upstream,) = [s for s in load("ci-scripts")["scripts"] if s["path"].endswith("prepare_omni_venv.sh")]
    assert upstream["venv"]["system_site_packages"] and upstream["later"]["pth_files"] == [IMAGE_PTH, COSYVOICE_PTH]
    venv = (standin.root / "omni").resolve()
    assert "include-system-site-packages = true" in (venv / "pyvenv.cfg").read_text()
    site = _site(standin)
    assert (site / IMAGE_PTH).read_text().startswith("import site; site.addsitedir(")
    assert [Path(p) for p in (site / COSYVOICE_PTH).read_text().split()] == [
        venv / "src" / "CosyVoice", venv / "src" / "CosyVoice" / "third_party" / "Matcha-TTS"]
    done = subprocess.run([str(venv / "bin" / "python"), "-c", "import sys; print('\\n'.join(sys.path))"],
                          capture_output=True, text=True, check=True)
    paths = done.stdout.split()
    assert str(standin.root) in paths and str(venv / "src" / "CosyVoice") in paths  # both .pth files took effect
    assert paths.index(str(standin.root)) < paths.index(str(venv / "src" / "CosyVoice"))


def test_the_gate_passes_the_commits_own_files_for_every_package_it_holds(standin):
    ok = _gate(standin, _server(standin), _client(standin))
    assert ok.status == "passed" and ok.evidence["commit"] == standin.commits[-1]
    assert ok.evidence["server launch: module"] == str(standin.root / PKG / "__init__.py")
    assert ok.evidence["client: benchmarks"] == str(standin.root / "benchmarks" / "__init__.py")
    assert ok.evidence["client: benchmarks.eval.benchmark_omni_seedtts"] == str(
        standin.root / "benchmarks" / "eval" / "benchmark_omni_seedtts.py")
    assert ok.evidence["not in this commit"] == "sglang_omni_router"  # the stand-in has no such package: skipped
    with pytest.raises(WrongRevision, match="not at the asked commit"):  # the worktree at another commit
        rev_ok.check_rev_ok([_server(standin)], PKG, str(standin.root), standin.commits[0])


def test_a_pth_that_puts_another_revisions_copy_first_is_stopped(standin):
    old = standin.root.parent / "old"
    (_site(standin) / "00-shadow.pth").write_text(f"{old}\n")  # sorted before the editable install's
    err = _refused(standin, _server(standin))
    assert err.evidence["its work tree"] == str(old) and err.evidence["its commit"] == standin.commits[0]
    assert err.evidence["package"] == PKG and err.evidence["why"] == "outside the worktree"
    assert str(old) in err.message and standin.commits[0][:12] in err.message
    # a client started in the checkout (`python -m ...`) has the checkout as sys.path[0], before any .pth
    assert _gate(standin, _client(standin)).evidence["client: module"] == str(standin.root / PKG / "__init__.py")
    elsewhere = rev_ok.command_launch("client", [str(standin.root / "omni" / "bin" / "python"), "-m", "x"],
                                      dict(os.environ), str(standin.root.parent))
    assert _refused(standin, elsewhere).evidence["role"] == "client"  # started elsewhere, the .pth wins
    (_site(standin) / "00-shadow.pth").unlink()
    assert _gate(standin, _server(standin), _client(standin)).status == "passed"


def test_an_untracked_copy_inside_the_worktree_is_stopped(standin):
    build = standin.root / "build" / "lib"
    shutil.copytree(standin.root / PKG, build / PKG)  # what a non-editable build leaves in the tree
    (_site(standin) / "00-build.pth").write_text(f"{build}\n")
    err = _refused(standin, _server(standin))
    assert err.evidence["why"] == "untracked" and err.evidence["file"] == str(build / PKG / "__init__.py")
    assert "git clean" in err.hint
    (_site(standin) / "00-build.pth").unlink()
    assert _gate(standin, _server(standin)).status == "passed"
    (standin.root / PKG / "extra.py").write_text("")  # an untracked module inside the package
    err = _refused(standin, _server(standin))
    assert err.evidence["why"] == "untracked" and err.evidence["file"] == str(standin.root / PKG / "extra.py")


def test_an_edit_after_the_commit_is_stopped_unless_allowed(standin):
    cli = standin.root / PKG / "cli.py"
    cli.write_text(cli.read_text() + "\n# edited\n")
    err = _refused(standin, _server(standin))
    assert err.evidence["why"] == "changed from HEAD" and err.evidence["file"] == str(cli)
    assert f"{PKG}/cli.py" in err.message
    # an index flag that hides the edit from `git diff` does not hide it from the blob comparison
    subprocess.run(["git", "-C", str(standin.root), "update-index", "--assume-unchanged", f"{PKG}/cli.py"], check=True)
    try:
        assert subprocess.run(["git", "-C", str(standin.root), "diff", "--quiet"]).returncode == 0
        _refused(standin, _server(standin))
    finally:
        subprocess.run(["git", "-C", str(standin.root), "update-index", "--no-assume-unchanged", f"{PKG}/cli.py"],
                       check=True)
    ok = _gate(standin, _server(standin), allowed_dirty=frozenset({f"{PKG}/cli.py"}))
    assert ok.status == "passed" and ok.evidence["allowed dirty"] == f"{PKG}/cli.py"
    client = standin.root / "benchmarks" / "eval" / "benchmark_omni_seedtts.py"  # a client's own file
    client.write_text(client.read_text() + "\n# edited\n")
    err = _refused(standin, _client(standin), allowed_dirty=frozenset({f"{PKG}/cli.py"}))
    assert err.evidence["package"] == "benchmarks" and err.evidence["file"] == str(client)


def _user_site(made, env: dict[str, str]) -> Path:
    python = str(made.root / "omni" / "bin" / "python")
    done = subprocess.run([python, "-c", "import site; print(site.getusersitepackages())"],
                          env={**os.environ, **env}, capture_output=True, text=True, check=True)
    return Path(done.stdout.strip())


def _serve_script(made, flags: str) -> Path:
    script = made.root.parent / "user" / "sgl-omni"
    script.parent.mkdir(parents=True, exist_ok=True)
    text = (made.root / "omni" / "bin" / "sgl-omni").read_text().split("\n", 1)[1]
    script.write_text(f"#!{made.root / 'omni' / 'bin' / 'python'} {flags}".rstrip() + "\n" + text)
    script.chmod(0o755)
    return script


def test_the_probe_honours_the_interpreters_flags(standin):
    """A user-site shadow (the venv has system site packages, so python reads the user site) that
    `-s` on the #! line ignores passes; without `-s` it is stopped. A PYTHONPATH shadow that
    `-I` ignores passes; `-s` does not ignore it, so it is stopped."""
    old = standin.root.parent / "old"
    user = {"PYTHONUSERBASE": str(standin.root.parent / "user" / "base")}
    site = _user_site(standin, user)
    site.mkdir(parents=True)
    # the user site comes after the venv's own site-packages, so its shadow puts itself first, as a .pth may
    (site / "shadow.pth").write_text(f"import sys; sys.path.insert(0, {str(old)!r})\n")
    for flags, stopped in (("-s", False), ("", True)):
        launch = rev_ok.script_launch([str(_serve_script(standin, flags))], {**os.environ, **user}, str(standin.root))
        assert launch is not None and launch.flags == ((flags,) if flags else ())
        if stopped:
            assert _refused(standin, launch).evidence["its work tree"] == str(old)
        else:
            assert _gate(standin, launch).status == "passed"
    (site / "shadow.pth").unlink()
    path = {**os.environ, "PYTHONPATH": str(old)}
    for flags, stopped in (("-I", False), ("-s", True), ("-sE", False)):
        launch = rev_ok.script_launch([str(_serve_script(standin, flags))], path, str(standin.root))
        assert launch is not None
        if stopped:
            assert _refused(standin, launch).evidence["its work tree"] == str(old)
        else:
            assert _gate(standin, launch).status == "passed"


def test_each_ci_stage_is_checked_before_it_runs(standin, tmp_path):
    """`nox -s ci_stages` (CiRun) asks the stage's python, with CI's environment (PYTHONPATH the
    checkout), before each stage: an edit of a client's file stops the stage before it starts."""
    from omnibench_core.ci import CiRun, stages

    settings = Settings.of(checkout=str(standin.root), results=str(tmp_path / "results"),
                           omni_ci_home=str(tmp_path / "omni_ci"))
    run = CiRun(settings, progress=lambda line: None)
    stage = stages()[0]
    argv = [str(run.python), "-m", "pytest", stage.test_file]
    ok = run.check_rev_ok(argv)
    assert ok.evidence["ci stage: module"] == str(standin.root / PKG / "__init__.py")
    assert ok.evidence["ci stage: benchmarks"] == str(standin.root / "benchmarks" / "__init__.py")
    scorer = standin.root / "benchmarks" / "tasks" / "asr.py"
    scorer.write_text(scorer.read_text() + "\n# edited\n")
    with pytest.raises(WrongRevision) as caught:
        run.run_stage(stage)
    assert caught.value.evidence["role"] == "ci stage" and caught.value.evidence["file"] == str(scorer)
    assert not (run.out_dir / f"{stage.name}.log").exists()  # stopped before the stage started
    run.allowed_dirty = frozenset({"benchmarks/tasks/asr.py"})  # a recorded dirty file is allowed
    assert run.check_rev_ok(argv).evidence["allowed dirty"] == "benchmarks/tasks/asr.py"

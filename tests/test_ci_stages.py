"""`nox -s ci_stages` for real, against a checkout-like tree with real pytest stage files."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from checkout_helpers import make_fake_checkout
from run_helpers import REPO
from upstream_contracts import load

from omnibench_core.ci import ATTEMPT_ENV, CiRun, parse_accuracy, prepare_env, stages, taskset_cpu_list
from omnibench_core.errors import PluginError
from omnibench_core.hooks.specs import hookimpl
from omnibench_core.records import CiStage
from omnibench_core.registry import manager as plugin_manager
from omnibench_core.settings import Settings
from omnibench_plugins.ci_stages.hooks import STAGES

BEHAVIOUR = {"mmmu_ci": "print('Accuracy: 0.7123')", "mmmu_talker_ci": "assert False, 'talker broke'",
             "mmsu_ci": "print('Overall accuracy: 55.5%')"}
HANGS = {"mmsu_talker_ci": "time.sleep(3600)"}  # a stage only its timeout ends
# No stage but a hanging one may meet its timeout, however busy the machine: pytest's start alone
# took over 4 s under load. The timeout is asserted on a stage that cannot finish in time.
GENEROUS_S = "600"
WATCHED = ("OMNI_CI_MODEL", "SGLANG_OMNI_TORCH_COMPILE_DEFAULT", "CUDA_VISIBLE_DEVICES", "HF_HUB_OFFLINE",
           "OMNI_CI_CPUSET", "OMNI_CI_HOME", "PYTHONPATH", "PYTORCH_ALLOC_CONF", "NCCL_NVLS_ENABLE",
           "TORCHINDUCTOR_CACHE_DIR", "FLASHINFER_WORKSPACE_BASE", "FLASHINFER_JIT_DEBUG", "SGLANG_OMNI_ROUTER_BIN",
           "SGLANG_OMNI_STRICT_PORT", "VIRTUAL_ENV")


def make_ci_checkout(root: Path, behaviour: dict[str, str] | None = None) -> Path:
    """A checkout with the ten stage files; ``behaviour`` (default BEHAVIOUR) is each stage's body."""
    behaviour = BEHAVIOUR if behaviour is None else behaviour
    checkout = make_fake_checkout(root)
    tests = checkout / "tests" / "test_model"
    tests.mkdir(parents=True)
    for name, _ in STAGES:
        (tests / f"test_qwen3_omni_{name}.py").write_text(textwrap.dedent(f"""\
            import json, os, pathlib, time
            ROOT = pathlib.Path(__file__).resolve().parents[2]

            def test_{name}():
                with open(ROOT / "order.log", "a") as f:
                    f.write("{name}\\n")
                seen = {{k: os.environ.get(k) for k in {WATCHED!r}}}
                (ROOT / "seen").mkdir(exist_ok=True)
                (ROOT / "seen" / "{name}.json").write_text(json.dumps(seen))
                {behaviour.get(name, "pass")}
            """))
    scripts = checkout / ".github" / "scripts"
    scripts.mkdir(parents=True)
    router = checkout / "router-bin"
    (scripts / "prepare_rust_router.sh").write_text(textwrap.dedent(f"""\
        echo "router $*" >> "{checkout}/calls.log"
        echo "compiling router..." >&2
        if [ -n "$FAKE_ROUTER_FAIL" ]; then exit 3; fi
        printf '#!/bin/sh\\n' > "{router}"; chmod +x "{router}"
        echo "{router}"
        """))
    (scripts / "delete_gpu_process.sh").write_text(
        f'echo "cleanup $* CUDA_VISIBLE_DEVICES=$CUDA_VISIBLE_DEVICES" >> "{checkout}/calls.log"\n')
    return checkout


def nox_ci(tmp_path: Path, checkout: Path, *selector: str, extra_env: dict[str, str] | None = None,
           posargs: tuple[str, ...] = ("--timeout-s", GENEROUS_S)) -> subprocess.CompletedProcess:
    env = {**os.environ, "INVOKE_OMNIBENCH_CHECKOUT": str(checkout), "INVOKE_OMNIBENCH_RESULTS": str(tmp_path / "results"),
           "INVOKE_OMNIBENCH_OMNI_CI_HOME": str(tmp_path / "omni_ci"), "SGLANG_OMNI_STRICT_PORT": "1",
           **(extra_env or {})}
    return subprocess.run([sys.executable, "-m", "nox", "-f", str(REPO / "noxfile.py"), "-s", *(selector or ("ci_stages",)),
                           "--", *posargs], cwd=REPO, env=env, capture_output=True, text=True, timeout=1200)


@pytest.mark.slow
def test_all_stages_run_in_order_with_ci_environment_logs_and_summary(tmp_path):
    checkout = make_ci_checkout(tmp_path / "sglang-omni")
    done = nox_ci(tmp_path, checkout)
    assert done.returncode == 1, done.stdout + done.stderr  # a stage fails; the rest still ran
    names = [name for name, _ in STAGES]
    assert (checkout / "order.log").read_text().split() == names
    (out,) = (tmp_path / "results").glob("*/ci/run0")
    codes = {name: int((out / f"{name}.rc").read_text()) for name in names}
    assert codes["mmmu_talker_ci"] == 1
    assert all(code == 0 for name, code in codes.items() if name != "mmmu_talker_ci"), codes
    assert "talker broke" in (out / "mmmu_talker_ci.log").read_text()
    summary = json.loads((out / "summary.json").read_text())
    by_stage = {s["stage"]: s for s in summary["stages"]}
    assert list(by_stage) == names
    assert by_stage["mmmu_ci"]["accuracy"] == pytest.approx(0.7123)
    assert by_stage["mmsu_ci"]["accuracy"] == pytest.approx(0.555)
    assert not any(s["timed_out"] for s in summary["stages"])
    assert (out / "commit.txt").read_text().strip() == summary["commit"]
    # what each stage saw: the runbook's prepare block, the router from the script, no shell block
    seen = json.loads((checkout / "seen" / "tts_ci.json").read_text())
    router = str(checkout / "router-bin")
    assert seen == {
        "OMNI_CI_MODEL": "minicpmo", "SGLANG_OMNI_TORCH_COMPILE_DEFAULT": "0", "CUDA_VISIBLE_DEVICES": "0,1",
        "HF_HUB_OFFLINE": "1", "OMNI_CI_CPUSET": seen["OMNI_CI_CPUSET"], "OMNI_CI_HOME": str(tmp_path / "omni_ci"),
        "PYTHONPATH": str(checkout), "PYTORCH_ALLOC_CONF": "expandable_segments:True", "NCCL_NVLS_ENABLE": "0",
        "TORCHINDUCTOR_CACHE_DIR": f"{tmp_path / 'omni_ci'}/.torchinductor",
        "FLASHINFER_WORKSPACE_BASE": os.path.expanduser("~"), "FLASHINFER_JIT_DEBUG": "0",
        "SGLANG_OMNI_ROUTER_BIN": router, "SGLANG_OMNI_STRICT_PORT": None,
        "VIRTUAL_ENV": str(checkout / "omni")}
    assert seen["OMNI_CI_CPUSET"] == taskset_cpu_list(os.sched_getaffinity(0))  # as `taskset -pc $$` reads it back
    calls = (checkout / "calls.log").read_text().splitlines()
    assert calls[0] == "router build" and calls.count("router build") == 1  # once per nox invocation
    assert calls[1:] == ["cleanup --kill-orphans CUDA_VISIBLE_DEVICES=0,1"] * len(names)
    # the summary table at the end
    table = done.stdout.split("stage ")[-1]
    assert "videoamme_talker_tp2_ci" in table and "0.7123" in table


@pytest.mark.slow
def test_a_hanging_stage_ends_at_its_timeout_and_the_next_stage_runs(tmp_path):
    # the stage sleeps an hour: it cannot end before the timeout, however busy the machine; the
    # timeout also bounds the next (quick) stage, so it is long enough for a python start on a
    # machine with many times more work than cores (2 s failed there, at a load of 12 on 2 cores; a
    # pytest start alone took over 4 s). 30 s is seven times that; 60 s made this the suite's one
    # test over a minute that does nothing but wait (issue 40)
    checkout = make_ci_checkout(tmp_path / "sglang-omni", {**BEHAVIOUR, **HANGS})
    done = nox_ci(tmp_path, checkout, "ci_stages(stage='mmsu_talker_ci')", "ci_stages(stage='videomme_ci')",
                  posargs=("--timeout-s", "30"))
    assert done.returncode == 1, done.stdout + done.stderr
    (out,) = (tmp_path / "results").glob("*/ci/run*")
    assert int((out / "mmsu_talker_ci.rc").read_text()) == 124
    assert "timed out after 30 s" in (out / "mmsu_talker_ci.log").read_text()
    by_stage = {s["stage"]: s for s in json.loads((out / "summary.json").read_text())["stages"]}
    assert by_stage["mmsu_talker_ci"]["timed_out"] is True
    assert by_stage["videomme_ci"]["exit_code"] == 0 and not by_stage["videomme_ci"]["timed_out"]


@pytest.mark.slow
def test_one_stage_with_retries(tmp_path):
    checkout = make_ci_checkout(tmp_path / "sglang-omni")
    done = nox_ci(tmp_path, checkout, "ci_stages(stage='mmmu_talker_ci')",
                  posargs=("--attempts", "2", "--retry-delay-s", "0", "--out", str(tmp_path / "ci-out")))
    assert done.returncode == 1
    assert (checkout / "order.log").read_text().split() == ["mmmu_talker_ci", "mmmu_talker_ci"]
    log = (tmp_path / "ci-out" / "mmmu_talker_ci.log").read_text()
    assert "attempt 1/2" in log and "attempt 2/2" in log
    summary = json.loads((tmp_path / "ci-out" / "summary.json").read_text())
    assert [(s["stage"], s["attempts"], s["exit_code"]) for s in summary["stages"]] == [("mmmu_talker_ci", 2, 1)]
    cleanups = [c for c in (checkout / "calls.log").read_text().splitlines() if c.startswith("cleanup")]
    assert len(cleanups) == 2  # before the retry, and after the stage


# In-process (no nox): one stage of the stand-in's CI stages, retried as upstream's run_flaky_pytest.sh.
RECORD_ATTEMPT = ("open(ROOT / 'attempts.log', 'a').write(str(os.environ.get('OMNI_CI_ATTEMPT')) + '\\n'); "
                  "assert os.environ.get('OMNI_CI_ATTEMPT') == '2', 'passes on its second attempt only'")


def _one_stage_run(tmp_path: Path, body: str, cleanup_exit: int = 0):
    """A CiRun on a fresh stand-in checkout whose ``mmmu_talker_ci`` runs ``body`` and whose GPU
    clean-up logs its call and exits ``cleanup_exit``; returns the run, the stage and the checkout."""
    checkout = make_ci_checkout(tmp_path / "sglang-omni", {"mmmu_talker_ci": body})
    (checkout / ".github" / "scripts" / "delete_gpu_process.sh").write_text(
        f'echo "cleanup $*" >> "{checkout}/calls.log"\nexit {cleanup_exit}\n')
    settings = Settings.of(checkout=str(checkout), results=str(tmp_path / "results"),
                           omni_ci_home=str(tmp_path / "omni_ci"))
    run = CiRun(settings, out_dir=tmp_path / "ci-out", progress=lambda line: None)
    stage = next(s for s in stages() if s.name == "mmmu_talker_ci")
    return run, stage, checkout


@pytest.mark.slow  # 2.5 to 8 s in the fast tier (issue 40: that tier within a minute)
def test_each_attempt_sees_its_number_in_omni_ci_attempt(tmp_path):
    """As upstream's wrapper: attempt n runs with OMNI_CI_ATTEMPT=n. The stage passes only when it
    reads 2, so without the variable all three attempts would fail."""
    first = next(s for s in load("ci-scripts")["scripts"] if s["path"].endswith("run_flaky_pytest.sh"))[
        "attempt_numbers_from"]
    body = RECORD_ATTEMPT.replace("OMNI_CI_ATTEMPT", ATTEMPT_ENV).replace("'2'", repr(str(first + 1)))
    run, stage, checkout = _one_stage_run(tmp_path, body)
    result = run.run_stage(stage, attempts=3, retry_delay_s=0)
    assert (checkout / "attempts.log").read_text().split() == [str(first), str(first + 1)]
    assert (result.exit_code, result.attempts, result.retries_stopped) == (0, 2, "")
    assert result.cleanup_exit_codes == [0, 0]  # before the retry, and after the stage


def test_a_failed_cleanup_before_a_retry_stops_the_retries(tmp_path):
    """As upstream's wrapper: a clean-up that fails before a retry ends the stage with the failed
    attempt's exit code (1 from pytest, not the clean-up's 7); no attempt runs on dirty GPUs."""
    run, stage, checkout = _one_stage_run(tmp_path, "assert False, 'broke'", cleanup_exit=7)
    result = run.run_stage(stage, attempts=3, retry_delay_s=0)
    assert (checkout / "order.log").read_text().split() == ["mmmu_talker_ci"]  # one attempt of three
    assert (result.exit_code, result.attempts) == (1, 1)
    assert "exited 7 before attempt 2/3" in result.retries_stopped
    assert result.cleanup_exit_codes == [7, 7]  # the one before the retry, and the runbook's after the stage
    summary = json.loads((run.out_dir / "summary.json").read_text())["stages"][0]
    assert summary["retries_stopped"] == result.retries_stopped
    assert "not retried with dirty GPU state" in (run.out_dir / "mmmu_talker_ci.log").read_text()


@pytest.mark.slow
def test_ci_ready_fails_without_a_router(tmp_path):
    checkout = make_ci_checkout(tmp_path / "sglang-omni")
    done = nox_ci(tmp_path, checkout, "ci_stages(stage='tts_ci')", extra_env={"FAKE_ROUTER_FAIL": "1"})
    assert done.returncode == 1
    assert "prepare_rust_router.sh build exited with 3" in done.stderr + done.stdout
    assert "compiling router" in done.stderr + done.stdout
    assert not (checkout / "order.log").exists()


@pytest.mark.slow
def test_no_checkout_is_said_once_in_a_few_lines(tmp_path):
    done = nox_ci(tmp_path, tmp_path / "no-checkout")
    out = done.stdout + done.stderr
    assert done.returncode != 0
    assert out.count("aborted: no sglang-omni checkout at") == 1  # the error once; the nine others skip
    assert out.count("skipped: not run: no sglang-omni checkout") == 9
    assert out.count("what to do:") == 1 and "Merging config sources" not in out  # no Invoke debug output
    assert len(out.splitlines()) < 60


@pytest.mark.slow
def test_a_checkout_python_without_pytest_is_said_once_before_the_router_is_built(tmp_path):
    """Issue 46: on the stand-in, whose venv is omnibench's python, every one of the ten stages
    failed with `No module named pytest`. Now CI_READY asks once and says what to install."""
    checkout = make_ci_checkout(tmp_path / "sglang-omni")
    python = checkout / "omni" / "bin" / "python"
    python.unlink()  # a python that sees no site-packages: no pytest
    python.write_text(f"#!/bin/sh\nexec {sys.executable} -I -S \"$@\"\n")
    python.chmod(0o755)
    done = nox_ci(tmp_path, checkout)
    out = done.stdout + done.stderr
    assert done.returncode != 0
    assert out.count(f"aborted: the checkout's python {python} cannot import pytest") == 1, out
    assert "No module named 'pytest'" in out and "-m pip install pytest" in out and "docs/gpu-host.md" in out
    assert out.count("skipped: not run: the checkout's python") == 9
    assert not (checkout / "order.log").exists() and not (checkout / "calls.log").exists()  # no stage, no router


@pytest.mark.slow
def test_ci_ready_refuses_an_existing_output_dir(tmp_path):
    checkout = make_ci_checkout(tmp_path / "sglang-omni")
    (tmp_path / "taken").mkdir()
    done = nox_ci(tmp_path, checkout, "ci_stages(stage='tts_ci')", posargs=("--out", str(tmp_path / "taken")))
    assert done.returncode == 1 and "exists already" in done.stderr + done.stdout


def test_parse_accuracy_takes_the_last_line():
    assert parse_accuracy("Accuracy: 0.5\nmore\nOverall accuracy: 61.25%\n") == (pytest.approx(0.6125),
                                                                                 "Overall accuracy: 61.25%")
    assert parse_accuracy("no numbers here") == (None, "")


def test_third_party_plugins_add_and_replace_stages():
    class Extra:
        @hookimpl
        def omnibench_ci_stages(self):
            return [CiStage("mmmu_ci", "my MMMU", "tests/mine.py", order=3, replaces=True),
                    CiStage("audio_extra", "an extra stage", "tests/extra.py", order=9.5)]

    _, registry = plugin_manager.load([("extra", Extra())])
    stages = registry.ordered_ci_stages()
    assert [s.name for s in stages][-2:] == ["audio_extra", "videoamme_talker_tp2_ci"]
    assert next(s for s in stages if s.name == "mmmu_ci").test_file == "tests/mine.py"
    assert registry.ci_stages["mmmu_ci"].provider.plugin == "extra"

    class Clash:
        @hookimpl
        def omnibench_ci_stages(self):
            return [CiStage("tts_ci", "again", "tests/x.py", order=2)]

    with pytest.raises(PluginError, match="two plugins register a ci-stage named 'tts_ci'"):
        plugin_manager.load([("clash", Clash())])


# The readback check of sglang-omni's .github/scripts/pin_to_ci_cpuset.sh (sgl-project/sglang-omni at
# eecae7691446d1c0a8424dcf3d91056b65b6fab7), restated: pin to OMNI_CI_CPUSET, read the mask back with
# `taskset -pc $$`, compare the two as strings, exit 2 when they differ.
PIN_CHECK = """taskset -pc "$OMNI_CI_CPUSET" $$ > /dev/null || exit 2
[ "$(taskset -pc $$ | awk '{print $NF}')" = "$OMNI_CI_CPUSET" ] || exit 2"""


@pytest.mark.parametrize(("cpus", "printed"), [({0}, "0"), ({0, 1}, "0,1"), ({0, 1, 2}, "0-2"), ({3, 4}, "3,4"),
                                               ({0, 1, 2, 3, 8, 9, 11}, "0-3,8,9,11"), ({2, 3, 4, 8}, "2-4,8")])
def test_omni_ci_cpuset_is_written_as_taskset_prints_it(tmp_path, cpus, printed):
    """Two adjacent CPUs are listed (util-linux prints `0,1`), three or more make a range (`0-2`)."""
    env = prepare_env(Settings(), tmp_path, tmp_path / "omni", base={}, cpus=cpus)
    assert env["OMNI_CI_CPUSET"] == printed == taskset_cpu_list(sorted(cpus, reverse=True))


def _subsets(cpus: list[int]) -> list[list[int]]:
    """Each shape this machine can pin to: one CPU, two adjacent ones, three or more in a row."""
    return [cpus[:n] for n in (1, 2, 3) if len(cpus) >= n and cpus[n - 1] - cpus[0] == n - 1]


@pytest.mark.skipif(not hasattr(os, "sched_getaffinity"), reason="CPU affinity is Linux's")
def test_upstream_pin_check_accepts_omnibench_cpuset_and_refuses_a_range_of_two(tmp_path):
    """The real `taskset` reads back what omnibench writes, for every shape this machine has
    (at least one and two CPUs on the test machine); `0-1` for two CPUs fails the check."""
    mine = sorted(os.sched_getaffinity(0))
    shapes = _subsets(mine)
    assert len(shapes) >= 2, f"this test needs two adjacent CPUs, the process has {mine}"
    for subset in shapes:
        cpuset = taskset_cpu_list(subset)
        done = subprocess.run(["bash", "-c", PIN_CHECK], env={**os.environ, "OMNI_CI_CPUSET": cpuset})
        assert done.returncode == 0, f"pin check refused OMNI_CI_CPUSET={cpuset!r}"
    two = f"{shapes[1][0]}-{shapes[1][1]}"  # the old spelling of two adjacent CPUs
    done = subprocess.run(["bash", "-c", PIN_CHECK], env={**os.environ, "OMNI_CI_CPUSET": two})
    assert done.returncode == 2

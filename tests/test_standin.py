"""The stand-in sglang-omni checkout: the `sglang-omni` target end to end on CPU, its CI stages
through nox, the set-up tasks and doctor against it, and its history of commits."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest
from proc_helpers import listening
from run_helpers import REPO, free_port
from scale_helpers import MadeStandin, invoke_standin
from test_ci_stages import nox_ci

from omnibench_core.standin import write_fake_nvidia_smi
from omnibench_core.store import manifest as manifest_file
from omnibench_core.store import metrics as metrics_file
from omnibench_plugins.ci_stages.hooks import STAGES

TESTS = Path(__file__).resolve().parent
RUNBOOK_KEYS = 30  # the runbook's metrics: 28 named fields, audio.files and audio.empty_or_nan
READY_KEYS = 2  # and omnibench's videoamme.server_ready_s and seedtts.server_ready_s (issue 33)


@pytest.fixture(scope="session")
def standin(tmp_path_factory) -> MadeStandin:
    """A clean stand-in with two commits and its fake nvidia-smi, made once per session by `invoke standin`."""
    base = tmp_path_factory.mktemp("standin")
    return invoke_standin(base / "sglang-omni", "--commits", "2", "--fake-gpus", str(base / "fakegpu"))


@pytest.fixture(scope="session")
def fake_gpu(standin) -> Path:
    """The folder of the stand-in's fake nvidia-smi: memory in use while a stand-in server lives."""
    assert standin.fake_gpus is not None
    return standin.fake_gpus


def _invoke_run(results: Path, standin: MadeStandin, fake_gpu: Path, *args: str) -> subprocess.CompletedProcess:
    argv = [sys.executable, "-m", "invoke", "run", "--target", "sglang-omni", "--checkout", str(standin.root),
            "--port", str(free_port()), *args]
    env = {**os.environ, "INVOKE_OMNIBENCH_RESULTS": str(results), "PATH": f"{fake_gpu}{os.pathsep}{os.environ['PATH']}"}
    return subprocess.run(argv, cwd=REPO, env=env, capture_output=True, text=True, timeout=900)


@pytest.fixture(scope="session")
def standin_run(tmp_path_factory, standin, fake_gpu):
    """The runbook's One run on the sglang-omni target with the stand-in's own clients."""
    results = tmp_path_factory.mktemp("standin-run")
    # Fewer samples than the sets hold keep it quick; every path and file is the same (two a workload:
    # a mean and a spread; 4 and 8 proved nothing more, issue 40).
    done = _invoke_run(results, standin, fake_gpu, "--workload", "videoamme", "--workload", "seedtts",
                       "--opt", "videoamme.max_samples=2", "--opt", "seedtts.max_samples=2")
    return done, results


@pytest.mark.slow
def test_one_run_through_the_checkouts_own_clients(standin_run, standin, fake_gpu):
    done, results = standin_run
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    assert "RUN_COMPLETE" in done.stdout
    (run,) = results.glob(f"{standin.head[:7]}/run0")
    metrics = metrics_file.read(run)
    assert metrics.complete is True and len(metrics.metrics) == RUNBOOK_KEYS + READY_KEYS
    manifest = manifest_file.read(run)
    servers = {s.label: s for s in manifest.servers}
    assert list(servers) == ["videoamme", "seedtts", "asr"]
    # the ASR server is the checkout's sgl-omni serve with the ASR model name
    asr_argv = servers["asr"].argv
    assert asr_argv[0] == str(standin.venv / "bin" / "sgl-omni") and asr_argv[1] == "serve"
    assert asr_argv[asr_argv.index("--model-name") + 1] == "Qwen/Qwen3-ASR-1.7B"
    steps = {s.step: s for s in manifest.steps}
    modes = {name: next(a for a in steps[name].command if a.endswith("-only"))
             for name in ("seedtts.generate", "seedtts.transcribe", "seedtts.similarity", "seedtts.utmos")}
    assert modes == {"seedtts.generate": "--generate-only", "seedtts.transcribe": "--transcribe-only",
                     "seedtts.similarity": "--similarity-only", "seedtts.utmos": "--utmos-only"}
    assert "sglang-omni stand-in" in json.loads((run / "seedtts" / "speed_results.json").read_text())["config"]["client"]
    gates = [g for g in manifest.gates if g["gate"] == "GPU_FREE"]
    assert [g["status"] for g in gates] == ["passed"] * 3
    # REV_OK: the clients, then each server, import the stand-in's package from this checkout at its commit
    rev = [g for g in manifest.gates if g["gate"] == "REV_OK"]
    assert [(g["context"], g["status"]) for g in rev] == [("clients", "passed"), ("videoamme", "passed"),
                                                          ("seedtts", "passed"), ("asr", "passed")]
    assert all(g["evidence"]["commit"] == standin.head and g["evidence"]["package"] == "sglang_omni_standin" for g in rev)
    assert rev[1]["evidence"]["server launch: module"] == str(standin.root / "sglang_omni_standin" / "__init__.py")
    assert (fake_gpu / "calls.log").read_text().count("--query-gpu=memory.used") >= 3
    # the fingerprint: the checkout venv's own packages, listed by its python
    assert "numpy" in manifest.environment["target_packages"]


@pytest.mark.slow
def test_runbooks_collection_script_agrees_on_the_standin_run(standin_run, tmp_path):
    _, results = standin_run
    (run,) = results.glob("*/run0")
    copy = Path(shutil.copytree(run, tmp_path / "run0"))
    samples = json.loads((run / "seedtts" / "dataset.json").read_text())["samples"]
    questions = json.loads((run / "videoamme" / "dataset.json").read_text())["samples"]
    script = (TESTS / "runbook_collect.py").read_text().replace("1088", str(samples)).replace("== 10", f"== {questions}")
    (tmp_path / "collect.py").write_text(script)
    done = subprocess.run([sys.executable, str(tmp_path / "collect.py"), str(copy)], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines()[-1] == "RUN_COMPLETE"
    theirs, ours = (json.loads((d / "metrics.json").read_text()) for d in (copy, run))
    runbooks = {k: v for k, v in ours["metrics"].items() if not k.endswith(".server_ready_s")}  # ours beside them
    assert len(runbooks) == len(ours["metrics"]) - READY_KEYS
    assert theirs["metrics"] == runbooks and theirs["rates"] == ours["rates"]


@pytest.mark.slow
def test_native_client_on_the_standin(tmp_path, standin, fake_gpu):
    done = _invoke_run(tmp_path / "results", standin, fake_gpu, "--workload", "seedtts", "--workload", "videoamme",
                       "--client", "native", "--opt", "seedtts.max_samples=2", "--opt", "videoamme.max_samples=2")
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    (run,) = (tmp_path / "results").glob("*/run0")
    speed = json.loads((run / "seedtts" / "speed_results.json").read_text())
    assert speed["config"]["client"] == "omnibench-native" and speed["summary"]["completed_requests"] == 2
    assert json.loads((run / "seedtts" / "dataset.json").read_text())["samples"] == 2  # staged by stage_hf.py
    # Video-AMME: the checkout's loader stages the questions; the checkout's request text is sent and recorded
    video = json.loads((run / "videoamme" / "videoamme_results.json").read_text())
    assert video["config"]["client"] == "omnibench-native" and video["summary"]["total_samples"] == 2
    assert video["config"]["request_text_source"] == "benchmarks/tasks/video_understanding.py"
    manifest = manifest_file.read(run)
    argv = next(s for s in manifest.steps if s.step == "videoamme.generate").command
    assert argv[argv.index("--request-text-source") + 1] == "benchmarks/tasks/video_understanding.py"
    assert argv[argv.index("--request-text-sha256") + 1] == video["config"]["request_text_sha256"]
    assert metrics_file.read(run).complete is True


def _get(url: str) -> dict:
    with urllib.request.urlopen(url, timeout=600) as reply:
        return json.loads(reply.read())


def _memory(fake_gpu: Path) -> int:
    return int(subprocess.run([str(fake_gpu / "nvidia-smi"), "-i", "0", "--query-gpu=memory.used",
                               "--format=csv,noheader,nounits"], capture_output=True, text=True, check=True).stdout)


@pytest.mark.slow
def test_sgl_omni_serve_honours_port_name_and_strict_port(standin, fake_gpu):
    port = free_port()
    serve = [str(standin.venv / "bin" / "sgl-omni"), "serve", "--model-path", "Qwen/Qwen3-ASR-1.7B",
             "--model-name", "asr-name", "--thinker.engine.mem_fraction_static", "0.55", "--port", str(port)]
    proc = subprocess.Popen(serve, cwd=standin.root, start_new_session=True, stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True, env={**os.environ, "SGLANG_OMNI_STRICT_PORT": "1"})
    try:
        deadline = time.monotonic() + 600
        while True:
            assert proc.poll() is None, proc.stdout.read()
            try:
                models = _get(f"http://127.0.0.1:{port}/v1/models")
                break
            except OSError:
                assert time.monotonic() < deadline
                time.sleep(0.1)
        assert models["data"][0]["id"] == "asr-name"
        assert _memory(fake_gpu) > 1024  # the fake GPU is busy while the server lives
        clash = subprocess.run(serve, cwd=standin.root, capture_output=True, text=True, timeout=600,
                               env={**os.environ, "SGLANG_OMNI_STRICT_PORT": "1"})
        assert clash.returncode == 1 and f"Port {port} is already in use" in clash.stderr
        bogus = subprocess.run([*serve, "--bogus"], capture_output=True, text=True)
        assert bogus.returncode == 2 and "Missing value for argument: --bogus" in bogus.stderr
        delay = subprocess.run([*serve, "--delay", "1"], capture_output=True, text=True)  # the selftest model's flag only
        assert delay.returncode == 2 and "sglang-omni has no such flag" in delay.stderr
    finally:
        os.killpg(proc.pid, signal.SIGTERM)
        proc.wait(600)
    assert _memory(fake_gpu) < 1024  # and free once it stopped


def test_the_selftest_model_is_the_selftest_server_with_its_loading_delay(standin, fake_gpu):
    # what the selftest workload asks with selftest.serve_with_target=true
    port = free_port()
    proc = subprocess.Popen([str(standin.venv / "bin" / "sgl-omni"), "serve", "--model-path", "selftest", "--model-name",
                             "selftest", "--delay", "0.2", "--port", str(port)], cwd=standin.root, start_new_session=True,
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        deadline = time.monotonic() + 600
        while True:
            assert proc.poll() is None, proc.stdout.read()
            try:
                assert _get(f"http://127.0.0.1:{port}/health") == {"status": "healthy"}
                break
            except OSError:
                assert time.monotonic() < deadline
                time.sleep(0.1)
        request = urllib.request.Request(f"http://127.0.0.1:{port}/v1/echo", data=json.dumps({"text": "hi"}).encode(),
                                         headers={"Content-Type": "application/json"})
        with urllib.request.urlopen(request, timeout=600) as reply:
            assert json.loads(reply.read())["text"] == "hi"
        assert _memory(fake_gpu) > 1024  # a server of the stand-in: its fake GPU is busy
    finally:
        os.killpg(proc.pid, signal.SIGTERM)
        proc.wait(600)
    assert "loading for 0.2 s" in proc.stdout.read()


@pytest.mark.slow
def test_history_carries_a_planted_regression(invoke, tmp_path):
    made = invoke_standin(tmp_path / "co", "--commits", "3", "--regress-at", "2", "--delay-ms", "40",
                          "--fail-stage", "mmsu_ci", "--quality-flip", "0.3")
    shown = [json.loads(subprocess.run(["git", "-C", str(made.root), "show", f"{sha}:standin.json"], capture_output=True,
                                       text=True, check=True).stdout) for sha in made.commits]
    assert [s["delay_ms"] for s in shown] == [0, 40, 40]
    assert [s["ci_thresholds"] for s in shown] == [{}, {"mmsu_ci": 1.01}, {"mmsu_ci": 1.01}]
    assert [s.get("quality_flip") for s in shown] == [None, 0.3, 0.3]  # the planted quality change (issue 44)
    log = subprocess.run(["git", "-C", str(made.root), "log", "--format=%s"], capture_output=True, text=True).stdout
    assert "planted regression" in log.splitlines()[0] and "no regression" in log.splitlines()[-1]
    assert subprocess.run(["git", "-C", str(made.root), "status", "--porcelain"], capture_output=True,
                          text=True).stdout == ""  # the venv and state are ignored: a clean checkout
    # the launcher passes the delay on as the local server's --delay-ms (when it has one)
    probe = [str(made.venv / "bin" / "python"), "-c", "from sglang_omni_standin import cli; import argparse; "
             "a, e = cli.parse(['serve', '--model-path', 'm', '--port', '1']); print(cli.serve_argv(a, e, 1, 40.0)[-2:])"]
    assert subprocess.run(probe, capture_output=True, text=True, check=True).stdout.strip() == "['--delay-ms', '40']"
    # and the planted quality change as its --quality-flip (none without one)
    probe[-1] = probe[-1].replace("40.0)[-2:]", "0, 0.3)[-2:]")
    assert subprocess.run(probe, capture_output=True, text=True, check=True).stdout.strip() == "['--quality-flip', '0.3']"
    probe[-1] = probe[-1].replace("0, 0.3)[-2:]", "0)[-2:]")
    assert "--quality-flip" not in subprocess.run(probe, capture_output=True, text=True, check=True).stdout
    for bad in ("1.5", "-0.1", "x"):  # a share of samples, refused in one line before anything is made
        refused = invoke("standin", "--out", str(tmp_path / "bad"), "--quality-flip", bad)
        assert refused.returncode != 0 and "--quality-flip" in refused.stderr and "Traceback" not in refused.stderr
        assert not (tmp_path / "bad").exists()
    again = invoke("standin", "--out", str(made.root))
    assert again.returncode == 1 and "not empty" in again.stderr and "Traceback" not in again.stderr


@pytest.mark.slow
def test_startup_s_holds_the_gpu_with_the_port_closed_as_a_gpu_host_loads_weights(tmp_path):
    """`invoke standin --startup-s S`: every commit's server loads S seconds, its GPU held, its port closed."""
    fake = tmp_path / "fakegpu"
    made = invoke_standin(tmp_path / "co", "--commits", "2", "--startup-s", "3600", "--fake-gpus", str(fake))
    shown = json.loads(subprocess.run(["git", "-C", str(made.root), "show", f"{made.commits[0]}:standin.json"],
                                      capture_output=True, text=True, check=True).stdout)
    assert shown["startup_s"] == 3600
    port = free_port()
    proc = subprocess.Popen([str(made.venv / "bin" / "sgl-omni"), "serve", "--model-path", "openbmb/MiniCPM-o-4_5",
                             "--port", str(port)], cwd=made.root, start_new_session=True, stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True)
    try:
        seen = ""
        while "loading the model for 3600 s" not in seen:  # an event: the line, however late it comes
            line = proc.stdout.readline()
            assert line, seen
            seen += line
        assert _memory(fake) > 1024 and not listening(port)  # an hour of loading: the port cannot be open yet
    finally:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(600)
    # a hand-edited standin.json: one line naming the field, never time.sleep's traceback
    for key, value in (("startup_s", -5), ("startup_s", "soon"), ("startup_s", float("nan")), ("quality_flip", 1.5)):
        (made.root / "standin.json").write_text(json.dumps({**shown, key: value}))
        refused = subprocess.run([str(made.venv / "bin" / "sgl-omni"), "serve", "--model-path", "openbmb/MiniCPM-o-4_5",
                                  "--port", str(free_port())], cwd=made.root, capture_output=True, text=True)
        assert refused.returncode == 2 and f"standin.json's {key} is" in refused.stderr, refused.stderr
        assert "Traceback" not in refused.stderr
    # issue 46: a standin.json that is no settings object killed the server with a traceback
    for text, words in (("{not json", "is not JSON"), ("[" * 10_000 + "]" * 10_000, "nests JSON deeper than Python parses"),
                        ("[1, 2]", "holds a JSON list, not an object of settings")):
        (made.root / "standin.json").write_text(text)
        refused = subprocess.run([str(made.venv / "bin" / "sgl-omni"), "serve", "--model-path", "openbmb/MiniCPM-o-4_5",
                                  "--port", str(free_port())], cwd=made.root, capture_output=True, text=True)
        assert refused.returncode == 2 and "Traceback" not in refused.stderr, refused.stderr
        assert refused.stderr.count("\n") == 1 and words in refused.stderr and "standin.json" in refused.stderr
    bad = subprocess.run([sys.executable, "-m", "invoke", "standin", "--out", str(tmp_path / "bad"), "--startup-s", "-1"],
                         cwd=REPO, capture_output=True, text=True)
    assert bad.returncode != 0 and "--startup-s" in bad.stderr and "Traceback" not in bad.stderr
    # issue 46: --out at an existing file ended in NotADirectoryError
    (tmp_path / "a-file").write_text("mine\n")
    bad = subprocess.run([sys.executable, "-m", "invoke", "standin", "--out", str(tmp_path / "a-file")],
                         cwd=REPO, capture_output=True, text=True)
    assert bad.returncode == 1 and "Traceback" not in bad.stderr and "NotADirectoryError" not in bad.stderr, bad.stderr
    assert f"--out {tmp_path / 'a-file'} is a file, not a folder" in bad.stderr
    assert (tmp_path / "a-file").read_text() == "mine\n"
    # second hostile round: --commits 10**9 made commits for as long as it was let run, and
    # --startup-s 1e308 made every server sleep for ever: both refused in one line, nothing made
    for flags, why in ((("--startup-s", "1e308"), "must each be at most a day"),
                       (("--commits", str(10 ** 9)), "--commits must be from 1 to 1000")):
        bad = subprocess.run([sys.executable, "-m", "invoke", "standin", "--out", str(tmp_path / "big"), *flags],
                             cwd=REPO, capture_output=True, text=True, timeout=600)
        assert bad.returncode == 1 and why in bad.stderr and "Traceback" not in bad.stderr, bad.stderr
        assert not (tmp_path / "big").exists()


@pytest.mark.slow
def test_the_planted_latency_reaches_every_request(tmp_path):
    made = invoke_standin(tmp_path / "co", "--commits", "2", "--regress-at", "2", "--delay-ms", "400")
    port = free_port()
    proc = subprocess.Popen([str(made.venv / "bin" / "sgl-omni"), "serve", "--model-path", "openbmb/MiniCPM-o-4_5",
                             "--model-name", "minicpmo", "--port", str(port)], cwd=made.root, start_new_session=True,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 600
        while True:
            try:
                _get(f"http://127.0.0.1:{port}/health")
                break
            except OSError:
                assert proc.poll() is None and time.monotonic() < deadline
                time.sleep(0.1)
        body = json.dumps({"model": "minicpmo", "messages": [{"role": "user", "content": "Hello."}]}).encode()
        t0 = time.monotonic()
        request = urllib.request.Request(f"http://127.0.0.1:{port}/v1/chat/completions", data=body,
                                         headers={"Content-Type": "application/json"})
        with urllib.request.urlopen(request, timeout=600) as reply:
            assert reply.status == 200
        assert time.monotonic() - t0 >= 0.4  # HEAD carries the planted 400 ms
    finally:
        os.killpg(proc.pid, signal.SIGTERM)
        proc.wait(600)


@pytest.fixture(scope="module")
def small_standin(tmp_path_factory) -> MadeStandin:
    """A stand-in whose CI stage mmmu_ci cannot pass (its own, since setup.venv rebuilds the venv)."""
    return invoke_standin(tmp_path_factory.mktemp("small") / "sglang-omni", "--fail-stage", "mmmu_ci")


# The stand-in's venv sees omnibench's test environment through its system site: each stage's pytest
# loaded every plugin there (hypothesis's alone cost a second a stage) though its stage file uses none,
# as upstream's CI venv has none of them (issue 40).
NO_PLUGINS = {"PYTEST_DISABLE_PLUGIN_AUTOLOAD": "1"}


@pytest.mark.slow
def test_ci_stages_all_pass_on_the_standin(tmp_path, standin):
    done = nox_ci(tmp_path, standin.root, posargs=("--timeout-s", "300"), extra_env=NO_PLUGINS)
    assert done.returncode == 0, done.stdout[-4000:] + done.stderr[-4000:]
    (out,) = (tmp_path / "results").glob("*/ci/run0")
    summary = {s["stage"]: s for s in json.loads((out / "summary.json").read_text())["stages"]}
    assert list(summary) == [name for name, _ in STAGES]
    assert all(s["exit_code"] == 0 for s in summary.values())
    accuracies = {name: s["accuracy"] for name, s in summary.items() if s["accuracy"] is not None}
    assert set(accuracies) == set(summary) - {"thinker_length", "tts_ci"}  # as the runbook says


@pytest.mark.slow
def test_a_planted_failing_stage_is_reported_with_its_exit_code(tmp_path, small_standin):
    done = nox_ci(tmp_path, small_standin.root, "ci_stages(stage='mmmu_ci')", posargs=("--timeout-s", "300"),
                  extra_env=NO_PLUGINS)
    assert done.returncode == 1
    assert "stage mmmu_ci failed with exit code 1" in done.stdout + done.stderr
    (out,) = (tmp_path / "results").glob("*/ci/run0")
    assert (out / "mmmu_ci.rc").read_text().strip() == "1"
    assert "Accuracy: 1.0000" in (out / "mmmu_ci.log").read_text()  # it answered; the pass mark is unreachable


@pytest.mark.slow
def test_setup_venv_and_doctor_against_the_standin(invoke, tmp_path, small_standin):
    fake = tmp_path / "fakegpu"
    write_fake_nvidia_smi(fake, small_standin.root)
    env = {"INVOKE_OMNIBENCH_CHECKOUT": str(small_standin.root), "INVOKE_OMNIBENCH_OMNI_CI_HOME": str(tmp_path / "ci"),
           "INVOKE_OMNIBENCH_BENCH_DIR": str(tmp_path / "bench"), "INVOKE_OMNIBENCH_NVIDIA_SMI": str(fake / "nvidia-smi"),
           "INVOKE_OMNIBENCH_PORT": str(free_port()), "INVOKE_OMNIBENCH_TARGET": "sglang-omni"}
    before = invoke("doctor", env=env)  # the venv invoke standin built has its own stamp
    rows = {line.split("  ")[0]: line for line in before.stdout.splitlines()}
    assert " OK " in rows["venv hash (VENV_OK)"] and "stand-in's own stamp" in rows["venv hash (VENV_OK)"], before.stdout
    built = invoke("setup.venv", env=env)
    assert built.returncode == 0, built.stdout + built.stderr
    assert built.stdout.splitlines()[-1].startswith("VENV_OK ")
    assert "Fresh environment ready" in (tmp_path / "bench" / "logs" / "prepare_omni_venv.log").read_text()
    after = invoke("doctor", env=env)
    rows = {line.split("  ")[0]: line for line in after.stdout.splitlines()}
    for name in ("checkout and commit", "venv hash (VENV_OK)", "GPU memory free"):
        assert " OK " in rows[name] + " ", after.stdout
    assert "own stamp" not in rows["venv hash (VENV_OK)"]  # now CI's, in OMNI_CI_HOME
    assert after.returncode == 0, after.stdout + after.stderr
    assert (small_standin.venv / "bin" / "sgl-omni").exists()  # rebuilt by prepare_omni_venv.sh

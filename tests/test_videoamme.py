"""Video-AMME: the runbook's whole "One run" on the local target, checked by the runbook's own
collection script; failures counted; the sglang-omni commands; the local server's video input."""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
import requests
from checkout_helpers import make_fake_checkout
from run_helpers import free_port

from omnibench_core.builtin.targets import prepare_local, prepare_sglang_omni
from omnibench_core.process.processes import start_group
from omnibench_core.records import Command, Endpoint, RunContext
from omnibench_core.run.gates import wait_ready
from omnibench_core.settings import RunSettings, Settings
from omnibench_core.standin import make_standin
from omnibench_plugins.videoamme import hooks as videoamme
from omnibench_plugins.videoamme.answers import choices_of, fallback_rng, parse_multi_choice_response
from omnibench_plugins.videoamme.data import ensure_local_set, load_samples
from omnibench_plugins.videoamme.prompt import OWN_COPY, read_request_text

TESTS = Path(__file__).resolve().parent
# sglang-omni's Video-AMME request text (benchmarks/tasks/video_understanding.py), as read from its source.
SGLANG_TEXT = "Use the video and the audio question to answer. Return the final answer as Answer: $LETTER."
@pytest.fixture(scope="module")
def server(tmp_path_factory, data_cache):
    port = free_port()
    log = tmp_path_factory.mktemp("vserver") / "server.log"
    proc = start_group([sys.executable, "-m", "omnibench_core.local", "serve", "--model-name", "minicpmo", "--port",
                        str(port), "--thinker.factory.max_seq_len", "32768",
                        # the data cache (shared by test workers) and the tests' own temporary files
                        "--allowed-local-media-path", str(data_cache),
                        "--allowed-local-media-path", str(tmp_path_factory.getbasetemp())],
                       log_path=log, env=dict(os.environ))
    wait_ready(proc, f"http://127.0.0.1:{port}/health", timeout_s=600)
    yield port
    proc.stop(10)


def _ask(port, **fields):
    body = {"model": "minicpmo", "messages": [{"role": "user", "content": "Answer: $LETTER"}], "max_tokens": 64,
            "temperature": 0, **fields}
    return requests.post(f"http://127.0.0.1:{port}/v1/chat/completions", json=body, timeout=600)


@pytest.mark.slow
def test_local_server_video_inputs(server, data_cache, tmp_path):
    folder = ensure_local_set(data_cache / "videoamme-local-v1")
    sample = load_samples(folder, 1)[0]
    good = _ask(server, videos=[sample.video], audios=[sample.audio], video_fps=2, video_max_frames=4,
                video_max_pixels=20000)
    assert good.status_code == 200, good.text
    assert good.json()["choices"][0]["message"]["content"].rstrip()[-9:-1] == "Answer: "
    assert good.json()["usage"]["prompt_tokens"] > 4 * 64  # video frames and question audio count
    garbage = tmp_path / "broken.mp4"
    garbage.write_bytes(b"\x00\x00\x00\x18ftypmp42 not really a video")
    cases = [
        ({"videos": [str(tmp_path / "missing.mp4")], "audios": [sample.audio]}, "not an allowed local media file"),
        ({"videos": [str(garbage)], "audios": [sample.audio]}, "video"),
        ({"videos": [sample.video], "audios": [str(tmp_path / "missing.wav")]}, "not an allowed local media file"),
        ({"videos": [sample.video], "audios": [sample.video]}, "not a WAV file"),
        ({"videos": [sample.video], "video_fps": "fast"}, "'video_fps' must be a number"),
        ({"videos": "one.mp4"}, "'videos' must be a list"),
    ]
    for fields, detail in cases:
        reply = _ask(server, **fields)
        assert reply.status_code == 400 and detail in reply.json()["detail"], (fields, reply.text)
    assert requests.get(f"http://127.0.0.1:{server}/health", timeout=600).status_code == 200


@pytest.mark.slow
def test_answers_depend_on_the_request(server, data_cache):
    folder = ensure_local_set(data_cache / "videoamme-local-v1")
    colors = set()
    for sample in load_samples(folder, 6):
        text = _ask(server, videos=[sample.video], audios=[sample.audio]).json()["choices"][0]["message"]["content"]
        colors.add(text.split("mostly ")[1].split(".")[0])
    assert len(colors) == 6  # six different videos, six different colours seen


@pytest.mark.slow
def test_a_missing_video_is_a_counted_failure(server, data_cache, tmp_path):
    source = ensure_local_set(data_cache / "videoamme-local-v1")
    folder = Path(shutil.copytree(source, tmp_path / "set"))
    second = load_samples(folder, 2)[1]  # not the first: the warmup replays the first, and its failure stops the client
    Path(second.video).unlink()
    out = tmp_path / "out"
    done = subprocess.run([sys.executable, "-m", "omnibench_plugins.videoamme.client", "--data", str(folder),
                           "--port", str(server), "--max-samples", "3", "--enable-audio", "--output-dir", str(out)],
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    doc = json.loads((out / "videoamme_results.json").read_text())
    assert doc["summary"]["failed"] == 1 and doc["summary"]["total_samples"] == 3
    failed = next(r for r in doc["per_sample"] if not r["is_success"])
    assert failed["sample_id"] == second.sample_id and "not an allowed local media file" in failed["error"]
    assert failed["is_correct"] is False  # failures count as wrong
    assert doc["summary"]["accuracy"] == round(doc["summary"]["correct"] / 3, 4)  # as sglang-omni rounds it
    assert len(list((out / "audio").glob("*.wav"))) == 2


@pytest.mark.parametrize(("text", "letter"), [
    ("The video is mostly red. Answer: B", "B"), ("Answer: (C)", "C"), ("I think it is D", "D"),
])
def test_parse_letter(text, letter):
    """A letter the reply names is read, not guessed (tests/test_native_clients.py has every rule)."""
    letters, index2ans = choices_of(["red", "green", "blue", "yellow"])
    assert parse_multi_choice_response(text, letters, index2ans, fallback_rng()) == (letter, False)


RUNBOOK_SERVER = ("sgl-omni serve --model-path openbmb/MiniCPM-o-4_5 --model-name minicpmo "
                  "--thinker.engine.mem_fraction_static 0.55 --talker.engine.mem_fraction_static 0.15 "
                  "--thinker.factory.max_seq_len 32768 --port 8000")
RUNBOOK_FLAGS = ("--model minicpmo --port 8000 --repo-id zhaochenyang20/Video_AMME_ci --max-samples 10 "
                 "--video-fps 2 --video-max-frames 128 --video-max-pixels 401408 --max-tokens 256 --temperature 0 "
                 "--timeout-s 500 --max-concurrency 16 --enable-audio --output-dir $OUT/videoamme")


def test_sglang_omni_commands_are_the_runbooks(tmp_path):
    env = prepare_sglang_omni(Settings.of(checkout=str(make_fake_checkout(tmp_path / "co"))))
    run_dir = tmp_path / "run0"
    ctx = RunContext(run_dir, "videoamme", Endpoint(8000), dict(videoamme.DEFAULTS), env, RunSettings())
    steps = {s.name: s for s in videoamme.plan(ctx)}
    generate, wer = steps["generate"].run, steps["wer"].run
    assert isinstance(generate, Command) and generate.argv[:2] == (env.python, "-c")
    assert "m.run_videoamme_eval(cfg, compute_wer=False)" in generate.argv[2]
    assert " ".join(generate.argv[3:]).replace(str(run_dir), "$OUT") == RUNBOOK_FLAGS
    assert Path(generate.argv[-1]).is_absolute()  # sglang-omni stores wav_path relative to its cwd
    assert env.cwd == str(tmp_path / "co")  # run from the checkout root
    assert wer.argv[:2] == (env.python, "-c") and wer.argv[3:] == (str(run_dir / "videoamme"), "8000")
    assert ('compute_text_audio_consistency_from_records(records, "en", "cuda:0", asr_router_port=int(sys.argv[2]), '
            'asr_concurrency=4)') in wer.argv[2]
    assert "sgl-omni " + " ".join(env.serve_argv(steps["generate"].server, 8000)[1:]) == RUNBOOK_SERVER
    assert steps["wer"].server.label == "asr" and steps["wer"].phase == "score"


def sglang_request(sample, *, model="minicpmo", prompt=SGLANG_TEXT, max_tokens=256, temperature=0.0, video_fps=2.0,
                   video_max_frames=128, video_min_pixels=None, video_max_pixels=401408, video_total_pixels=None,
                   enable_audio=True):
    """A scripted copy of sglang-omni's Video-AMME request builder (make_video_send_fn with the
    fixed prompt and audio input), written from its facts: the runbook's flags as defaults."""
    payload = {"model": model, "messages": [{"role": "user", "content": prompt}],
               "modalities": ["text", "audio"] if enable_audio else ["text"], "max_tokens": max_tokens,
               "temperature": temperature, "stream": False, "videos": [sample.video], "audios": [sample.audio]}
    if enable_audio:
        payload["audio"] = {"format": "wav"}
    for key, value in (("video_fps", video_fps), ("video_max_frames", video_max_frames),
                       ("video_min_pixels", video_min_pixels), ("video_max_pixels", video_max_pixels),
                       ("video_total_pixels", video_total_pixels)):
        if value is not None:
            payload[key] = value
    return payload


# A recording proxy (a real process on loopback): each POST body is appended to argv[3] as one JSON
# line, then forwarded to the server at argv[2], whose reply goes back unchanged.
PROXY = r"""
import http.server, json, sys, urllib.request
port, upstream, record = int(sys.argv[1]), sys.argv[2], sys.argv[3]
class Proxy(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        self.forward(None)
    def do_POST(self):
        body = self.rfile.read(int(self.headers["Content-Length"]))
        with open(record, "a") as f:
            f.write(json.dumps(json.loads(body)) + "\n")
        self.forward(body)
    def forward(self, body):
        request = urllib.request.Request(upstream + self.path, data=body, headers={"Content-Type": "application/json"})
        try:
            reply = urllib.request.urlopen(request, timeout=600)
            status, data = reply.status, reply.read()
        except urllib.error.HTTPError as exc:
            status, data = exc.code, exc.read()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)
    def log_message(self, *args):
        pass
http.server.ThreadingHTTPServer(("127.0.0.1", port), Proxy).serve_forever()
"""


@pytest.fixture
def recorded(server, tmp_path):
    """A recording proxy in front of the local server: its port and the file of recorded bodies."""
    port, record = free_port(), tmp_path / "bodies.jsonl"
    proc = start_group([sys.executable, "-c", PROXY, str(port), f"http://127.0.0.1:{server}", str(record)],
                       log_path=tmp_path / "proxy.log", env=dict(os.environ))
    wait_ready(proc, f"http://127.0.0.1:{port}/health", timeout_s=600)
    yield port, record
    proc.stop(10)


def _bodies(record: Path) -> dict[str, dict]:
    return {json.loads(line)["videos"][0]: json.loads(line) for line in record.read_text().splitlines()}


@pytest.mark.slow
@pytest.mark.parametrize("opts", [{}, {"video_min_pixels": 3136, "video_total_pixels": 2000000, "temperature": 0.5}])
def test_native_request_bodies_are_sglang_omnis_field_by_field(recorded, data_cache, tmp_path, opts):
    port, record = recorded
    folder = ensure_local_set(data_cache / "videoamme-local-v1")
    options = {**videoamme.DEFAULTS, "max_samples": 2, "data_dir": str(folder), **opts}
    ctx = RunContext(tmp_path / "run0", "videoamme", Endpoint(port), options, prepare_local(Settings.of()), RunSettings())
    generate = next(s for s in videoamme.plan(ctx) if s.name == "generate").run  # the plan's own argv
    done = subprocess.run(generate.argv, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr
    native = _bodies(record)
    record.unlink()
    samples = load_samples(folder, 2)
    theirs = {s.video: sglang_request(s, **opts) for s in samples}
    with ThreadPoolExecutor(len(theirs)) as pool:  # sent to the same server at once, as both clients do
        codes = pool.map(lambda body: requests.post(f"http://127.0.0.1:{port}/v1/chat/completions", json=body,
                                                    timeout=600).status_code, theirs.values())
    assert list(codes) == [200] * len(theirs)
    assert _bodies(record) == theirs  # what the scripted copy sent is what it built
    assert set(native) == set(theirs)
    for video, body in native.items():
        for key in sorted(set(body) | set(theirs[video])):
            assert body.get(key, "<absent>") == theirs[video].get(key, "<absent>"), key
    results = json.loads((tmp_path / "run0" / "videoamme" / "videoamme_results.json").read_text())
    assert results["config"]["request_text_source"] == OWN_COPY  # the local target has no checkout
    assert results["config"]["request_text_sha256"] == hashlib.sha256(SGLANG_TEXT.encode()).hexdigest()


def test_the_request_text_is_read_from_the_checkout_and_falls_back_to_omnibenchs_copy(tmp_path):
    standin = make_standin(tmp_path / "standin")  # the checkout `invoke standin` makes
    found = read_request_text(standin.root)
    assert (found.text, found.source) == (SGLANG_TEXT, "benchmarks/tasks/video_understanding.py")
    other = tmp_path / "other"
    (other / "benchmarks" / "tasks").mkdir(parents=True)
    defined = other / "benchmarks" / "tasks" / "video_understanding.py"
    defined.write_text('import os\nVIDEOAMME_REQUEST_TEXT = (\n    "Look. "\n    "Answer: $LETTER."\n)\n'
                       'os.system("touch ran")\n')
    assert read_request_text(other).text == "Look. Answer: $LETTER."  # another version's text, read not run
    assert not (other / "ran").exists() and not Path("ran").exists()
    defined.write_text("VIDEOAMME_REQUEST_TEXT = make_text()\n")
    for checkout, why in ((other, "defines no literal VIDEOAMME_REQUEST_TEXT"), (tmp_path / "nothing", "not readable"),
                          (None, "")):
        found = read_request_text(checkout)
        assert (found.text, found.source) == (SGLANG_TEXT, OWN_COPY) and why in found.why
        assert found.recorded_source == (f"{OWN_COPY}: {found.why}" if why else OWN_COPY)
    ctx = RunContext(tmp_path / "run0", "videoamme", Endpoint(8000), {**videoamme.DEFAULTS, "client": "native"},
                     prepare_sglang_omni(Settings.of(checkout=str(standin.root))), RunSettings())
    steps = {s.name: s for s in videoamme.plan(ctx)}
    assert list(steps) == ["stage-data", "dataset", "generate", "wer"]
    argv = steps["generate"].run.argv
    source, digest = argv[argv.index("--request-text-source") + 1], argv[argv.index("--request-text-sha256") + 1]
    assert (source, digest) == ("benchmarks/tasks/video_understanding.py", hashlib.sha256(SGLANG_TEXT.encode()).hexdigest())


def test_a_request_text_changed_on_its_way_is_refused(tmp_path):
    done = subprocess.run([sys.executable, "-m", "omnibench_plugins.videoamme.client", "--data", str(tmp_path),
                           "--output-dir", str(tmp_path / "out"), "--request-text", "Other words.",
                           "--request-text-sha256", hashlib.sha256(SGLANG_TEXT.encode()).hexdigest()],
                          capture_output=True, text=True, timeout=600)
    assert done.returncode == 2 and "pass the text unchanged" in done.stderr and "Traceback" not in done.stderr


@pytest.mark.slow
def test_the_docs_streamed_videoamme_command_runs_as_written_and_times_the_text(tmp_path):
    """docs/workloads.md's token-timing command, word for word (a port added, as for every run the
    suite starts): the run completes with time to first token and time per output token."""
    (line,) = [x for x in (TESTS.parent / "docs" / "workloads.md").read_text().splitlines()
               if x.startswith("invoke run") and "videoamme.stream=true" in x]
    results = tmp_path / "results"
    done = subprocess.run([sys.executable, "-m", *line.split(), "--port", str(free_port())], cwd=TESTS.parent,
                          capture_output=True, text=True, timeout=900,
                          env={**os.environ, "INVOKE_OMNIBENCH_RESULTS": str(results)})
    assert done.returncode == 0 and "RUN_COMPLETE" in done.stdout, done.stdout[-3000:] + done.stderr[-3000:]
    (metrics,) = results.glob("*/run0/metrics.json")
    values = json.loads(metrics.read_text())
    values = values.get("metrics", values)
    for name in ("videoamme.ttft_mean_s", "videoamme.ttft_p50_s", "videoamme.tpot_mean_s", "videoamme.itl_mean_s"):
        assert isinstance(values.get(name), float) and values[name] > 0, (name, sorted(values))
    from omnibench_core import api
    api.check_decide(["videoamme"], list(values))  # each one a name ab --decide accepts up front (declared)

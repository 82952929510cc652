"""The seed-tts workload: a full local run, WER controls, failures, coverage, sglang-omni argv."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import soundfile as sf
from checkout_helpers import make_fake_checkout
from run_helpers import free_port, invoke_run_into

from omnibench_core.builtin.targets import prepare_local, prepare_sglang_omni
from omnibench_core.process.processes import start_group
from omnibench_core.records import Command, Endpoint, RunContext
from omnibench_core.run.gates import wait_ready
from omnibench_core.scoring import asr_wer
from omnibench_core.scoring.asr_wer import WerJob
from omnibench_core.scoring.audio_check import run_audio_summary
from omnibench_core.settings import RunSettings, Settings
from omnibench_core.store import manifest as manifest_file
from omnibench_core.store import metrics as metrics_file
from omnibench_plugins.seedtts import hooks as seedtts
from omnibench_plugins.seedtts import metrics as collecting
from omnibench_plugins.seedtts.data import TARGET_SENTENCES, ensure_local_set, load_meta

RUNBOOK_SEEDTTS_KEYS = {
    "seedtts.failed", "seedtts.sim", "seedtts.sim_skipped", "seedtts.utmos", "seedtts.utmos_skipped",
    "seedtts.completion_tokens_sum", "seedtts.throughput_qps", "seedtts.latency_mean_s", "seedtts.latency_p95_s",
    "seedtts.rtf_mean", "seedtts.audio_duration_mean_s", "seedtts.audio_throughput_s_per_s",
    "seedtts.wer.wer_corpus", "seedtts.wer.wer_below_50_corpus", "seedtts.wer.n_above_50_pct_wer",
    "seedtts.wer.skipped",
}


@pytest.fixture(scope="module")
def full_run(tmp_path_factory):
    """`invoke run --workload videoamme --workload seedtts` on the local target: the runbook's One run,
    made once for this module (its seed-tts half is checked here, its Video-AMME half below)."""
    results = tmp_path_factory.mktemp("one-run")
    return invoke_run_into(results, "videoamme", "seedtts"), results


@pytest.mark.slow
def test_each_long_step_of_the_one_run_says_how_far_it_is(full_run):
    """Issue 17: the Video-AMME generate step printed nothing for 39 s. Each long step now prints its
    count as it starts and as it goes (a heartbeat repeats the last line after 10 s of silence:
    tests/test_progress.py)."""
    done, _ = full_run
    out = done.stdout
    for line in ("videoamme.dataset: ", "videoamme.generate: questions 0/10", "videoamme.generate: questions 10/10",
                 "seedtts.dataset: ", "seedtts.generate: requests 0/30", "seedtts.generate: requests 30/30",
                 "videoamme.wer: transcribed 0/10", "videoamme.wer: transcribed 10/10",
                 "seedtts.transcribe: transcribed 30/30", "seedtts.similarity: similarity scored 30/30",
                 "seedtts.utmos: utmos scored 30/30"):
        assert line in out, f"no {line!r} in the output of invoke run"


@pytest.mark.slow
def test_full_local_run_is_complete_with_the_runbooks_metric_names(full_run):
    done, results = full_run
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr
    (run,) = results.glob("*/run0")
    metrics = metrics_file.read(run)
    assert metrics.complete is True and metrics.broken_rules == ()
    # the runbook's keys, and the percentiles beside them that the request count supports (the rest are thin)
    percentiles = {f"seedtts.latency_p{q}_s" for q in (50, 90, 99)} - set(metrics.thin_percentiles)
    assert {k for k in metrics.metrics if not k.startswith("videoamme.")} == \
        RUNBOOK_SEEDTTS_KEYS | {"audio.files", "audio.empty_or_nan", "seedtts.server_ready_s"} | percentiles
    assert "seedtts.latency_p50_s" in percentiles and "seedtts.latency_p99_s" in metrics.thin_percentiles
    # every metric of the real run is one --decide accepts up front (each workload declares its names;
    # a misspelt one is refused: issue 46), streaming's too
    from omnibench_core import api
    api.check_decide(["videoamme", "seedtts"], [*metrics.metrics, *metrics.thin_percentiles])
    streamed = collecting.collect(run / "seedtts", stream=True).metrics
    api.check_decide(["seedtts"], list(streamed))
    samples = run / "request_samples.json"  # Video-AMME's latencies (its percentiles); of seed-tts, with
    # stream off (the default), nothing of streaming's
    assert not samples.exists() or not [k for k in json.loads(samples.read_text()) if k.startswith("seedtts.")]
    assert metrics.metrics["audio.files"] == len(TARGET_SENTENCES) + 10  # and Video-AMME's ten
    m = metrics.metrics
    assert m["seedtts.failed"] == 0 and m["seedtts.wer.skipped"] == 0
    assert m["seedtts.wer.wer_corpus"] < 0.3  # real speech, really recognised
    assert metrics.rates == (24000,)
    assert any("local substitute" in note for note in metrics.notes)
    # progress while it works, and the summary table at the end
    assert "seedtts.generate: requests" in done.stdout and "seedtts.wer.wer_corpus" in done.stdout
    assert "note: seedtts.sim: local substitute" in done.stdout
    manifest = manifest_file.read(run)
    assert [s.step for s in manifest.steps if s.step.startswith("seedtts.")] == [
        "seedtts.dataset", "seedtts.generate", "seedtts.transcribe", "seedtts.similarity", "seedtts.utmos"]
    assert [s.label for s in manifest.servers] == ["videoamme", "seedtts", "asr"]
    assert list(manifest.servers[1].argv[-6:]) == ["--talker.engine.mem_fraction_static", "0.15",
                                                   "--thinker.factory.max_seq_len", "8192", "--port",
                                                   str(manifest.servers[1].port)]
    # the fingerprint: what each server said it serves once READY (its /v1/models), as --model-name asked
    assert [s.served for s in manifest.servers] == [{"ids": ["minicpmo"]}, {"ids": ["minicpmo"]},
                                                    {"ids": [manifest.servers[2].argv[manifest.servers[2].argv.index(
                                                        "--model-name") + 1]]}]


def test_result_files_have_sglang_omnis_fields(full_run):
    _, results = full_run
    (out,) = results.glob("*/run0/seedtts")
    speed = json.loads((out / "speed_results.json").read_text())
    for key in ("completed_requests", "failed_requests", "total_requests", "throughput_qps", "latency_mean_s",
                "latency_median_s", "latency_p95_s", "latency_p99_s", "rtf_mean", "rtf_median", "rtf_p95", "rtf_p99",
                "audio_duration_mean_s", "audio_throughput_s_per_s", "output_tokens_total", "prompt_tokens_total"):
        assert key in speed["summary"], key
    assert speed["summary"]["total_requests"] == len(TARGET_SENTENCES)
    row = speed["per_request"][0]
    for key in ("id", "text", "is_success", "latency_s", "audio_duration_s", "rtf", "prompt_tokens",
                "completion_tokens", "output_token_rate", "wav_path", "error"):
        assert key in row, key
    generated = json.loads((out / "generated.json").read_text())
    assert set(generated[0]) >= {"sample_id", "target_text", "wav_path", "is_success", "latency_s",
                                 "audio_duration_s"}
    assert all(("error" in g) == (not g["is_success"]) for g in generated)  # upstream: only when there is one
    wer = json.loads((out / "wer_results.json").read_text())
    assert {"wer_corpus", "wer_below_50_corpus", "n_above_50_pct_wer", "skipped", "evaluated"} <= set(wer["summary"])
    assert {"id", "target_text", "whisper_text", "ref_norm", "hyp_norm", "wer", "substitutions", "deletions",
            "insertions", "hits"} <= set(wer["per_sample"][0])
    assert "pocketsphinx" in wer["config"]["asr"]
    sim = json.loads((out / "similarity_results.json").read_text())["summary"]
    assert {"speaker_similarity_mean", "total_samples", "evaluated", "skipped"} <= set(sim)
    utmos = json.loads((out / "utmos_results.json").read_text())["summary"]
    assert {"utmos_mean", "utmos_median", "utmos_p5", "utmos_p95", "skipped"} <= set(utmos)
    assert 1 <= utmos["utmos_mean"] <= 5
    assert (out / "results.csv").read_text().startswith("id,text,latency_s,audio_duration_s,rtf,")
    assert (out / "wer_results.csv").read_text().startswith("id,target_text,whisper_text,wer,")
    assert json.loads((out / "asr_speed_results.json").read_text())["evaluated"] == wer["summary"]["evaluated"]
    assert len(list((out / "audio").glob("*.wav"))) == len(TARGET_SENTENCES)


# sglang-omni's WER summary (benchmarks/metrics/wer.py calculate_wer_metrics), key for key, as read
# from its source: both workloads' summaries must have exactly these.
SGLANG_WER_SUMMARY_KEYS = {
    "lang", "total_samples", "evaluated", "skipped", "wer_corpus", "wer_per_sample_mean", "wer_per_sample_median",
    "wer_per_sample_std", "wer_per_sample_p95", "wer_per_sample_max", "wer_below_50_corpus", "n_above_50_pct_wer",
    "pct_above_50_pct_wer", "latency_mean_s", "latency_median_s", "latency_p95_s", "rtf_mean",
    "audio_duration_mean_s",
}


def _speed_as_sglang(rows: list[dict], scored_ids: set) -> dict:
    """The five speed fields as sglang-omni computes them over the scored samples (numpy, linear p95)."""
    ok = [r for r in rows if (r.get("sample_id") or r.get("id")) in scored_ids]
    latency = np.array([r["latency_s"] for r in ok])
    audio = [r["audio_duration_s"] for r in ok if (r["audio_duration_s"] or 0) > 0]
    rtf = [r["latency_s"] / r["audio_duration_s"] for r in ok if (r["audio_duration_s"] or 0) > 0 and r["latency_s"] > 0]
    return {"latency_mean_s": float(np.mean(latency)), "latency_median_s": float(np.median(latency)),
            "latency_p95_s": float(np.percentile(latency, 95)), "rtf_mean": float(np.mean(rtf)),
            "audio_duration_mean_s": float(np.mean(audio))}


def test_wer_summaries_have_exactly_sglang_omnis_keys_and_speed_fields(full_run):
    _, results = full_run
    (run,) = results.glob("*/run0")
    seed = json.loads((run / "seedtts" / "wer_results.json").read_text())
    assert set(seed["summary"]) == SGLANG_WER_SUMMARY_KEYS
    scored = {r["id"] for r in seed["per_sample"] if r.get("wer") is not None}
    expected = _speed_as_sglang(json.loads((run / "seedtts" / "generated.json").read_text()), scored)
    assert {k: seed["summary"][k] for k in expected} == pytest.approx(expected)
    video = json.loads((run / "videoamme" / "wer_summary.json").read_text())
    assert set(video) == SGLANG_WER_SUMMARY_KEYS  # at top level, nothing else (the runbook's block writes the summary)
    per = json.loads((run / "videoamme" / "wer_per_sample.json").read_text())
    assert "pocketsphinx" in per["config"]["asr"]  # what scored it lives beside the samples
    scored = {r["sample_id"] for r in per["per_sample"] if r.get("wer") is not None}
    rows = json.loads((run / "videoamme" / "videoamme_results.json").read_text())["per_sample"]
    expected = _speed_as_sglang(rows, scored)
    assert {k: video[k] for k in expected} == pytest.approx(expected)
    assert video["evaluated"] == len(scored) > 0


@pytest.fixture(scope="module")
def asr_server(tmp_path_factory):
    port = free_port()
    log = tmp_path_factory.mktemp("asr") / "asr.log"
    proc = start_group([sys.executable, "-m", "omnibench_core.local", "serve", "--model-name", "Qwen/Qwen3-ASR-1.7B",
                        "--port", str(port), "--engines", "asr"], log_path=log, env=dict(os.environ))
    wait_ready(proc, f"http://127.0.0.1:{port}/health", timeout_s=600)
    yield port
    proc.stop(10)


@pytest.mark.slow
def test_matched_audio_wer_is_far_below_a_mismatched_control(full_run, asr_server, tmp_path):
    _, results = full_run
    (out,) = results.glob("*/run0/seedtts")
    matched, control = tmp_path / "matched", tmp_path / "control"
    rows = json.loads((out / "generated.json").read_text())[:10]  # ten samples keep it quick
    for folder in (matched, control):
        shutil.copytree(out, folder)
        (folder / "generated.json").write_text(json.dumps(rows))
    texts = [r["target_text"] for r in rows]
    for row, text in zip(rows, texts[1:] + texts[:1], strict=True):  # each WAV scored against another text
        row["target_text"] = text
    (control / "generated.json").write_text(json.dumps(rows))
    job = WerJob.from_params(seedtts.WER.params)
    good, bad = (asr_wer.score(job, folder, endpoint=Endpoint(asr_server), model="Qwen/Qwen3-ASR-1.7B")["wer_corpus"]
                 for folder in (matched, control))
    assert good < 0.3 and bad > 0.8 and bad > 3 * good


def _copy_run(full_run, tmp_path) -> Path:
    _, results = full_run
    (out,) = results.glob("*/run0/seedtts")
    return Path(shutil.copytree(out, tmp_path / "seedtts"))


def _broken(folder: Path) -> dict[str, str]:
    return {r.name: r.detail for r in collecting.collect(folder).rules if not r.ok}


def test_collect_on_the_complete_run_breaks_no_rule(full_run, tmp_path):
    assert _broken(_copy_run(full_run, tmp_path)) == {}


def test_missing_result_file_names_the_rule(full_run, tmp_path):
    folder = _copy_run(full_run, tmp_path)
    (folder / "similarity_results.json").unlink()
    broken = _broken(folder)
    assert "similarity_results.json exists" in broken
    assert "every sample generated and scored" in broken
    assert collecting.collect(folder).metrics["seedtts.sim"] is None


def test_a_run_left_unscored_is_complete_with_the_speed_metrics_and_no_quality_ones(full_run, tmp_path):
    """`invoke ab --score last` finishes its other rounds without their score phase: no WER, SIM or
    UTMOS file, and no rule or metric that needs one; the speed metrics are the scored run's own."""
    folder = _copy_run(full_run, tmp_path)
    for name in ("wer_results.json", "similarity_results.json", "utmos_results.json"):
        (folder / name).unlink()
    unscored = collecting.collect(folder, scored=False)
    assert [r.name for r in unscored.rules if not r.ok] == []
    assert not any(k.startswith(("seedtts.wer.", "seedtts.sim", "seedtts.utmos")) for k in unscored.metrics)
    scored = collecting.collect(_copy_run(full_run, tmp_path / "again")).metrics
    assert {k: v for k, v in scored.items() if k in unscored.metrics} == dict(unscored.metrics)
    # and the workload's quality names are exactly what the unscored collection leaves out
    workload = next(w for w in seedtts.omnibench_workloads() if w.name == "seedtts")
    assert {k for k in scored if workload.is_quality(k)} == set(scored) - set(unscored.metrics)


def test_corrupt_result_file_names_the_rule(full_run, tmp_path):
    folder = _copy_run(full_run, tmp_path)
    (folder / "wer_results.json").write_text('{"summary": {"wer_corpus": 0.1,')
    assert "wer_results.json is valid JSON" in _broken(folder)


def test_missing_and_nan_audio_break_their_rules(full_run, tmp_path):
    folder = _copy_run(full_run, tmp_path)
    wavs = sorted((folder / "audio").glob("*.wav"))
    wavs[0].unlink()
    sf.write(wavs[1], np.array([0.1, np.nan, 0.2], dtype=np.float32), 24000, subtype="FLOAT")
    broken = _broken(folder)
    assert broken["one WAV per sample"] == f"{len(wavs) - 1} WAVs for {len(wavs)} samples"
    figures, rates, rules = run_audio_summary(folder.parent)  # the run-wide audio rules
    assert figures == {"audio.files": len(wavs) - 1, "audio.empty_or_nan": 1} and rates == (24000,)
    assert [(name, ok) for name, ok, _ in rules] == [("speech files exist", True), ("no empty or NaN audio", False)]
    assert "nan" in rules[1][2]


def test_the_run_wide_audio_check_reads_the_repeat_folders_of_sglang_omnis_own_sweep(tmp_path):
    """An upstream sweep's run has no seedtts/audio, only seedtts/c<level>_r<k>/audio (docs/sweep.md):
    those WAVs are checked too; a warm-up set's are not the run's output."""
    run = tmp_path / "run1"
    good = np.full(2400, 0.1, dtype=np.float32)
    for folder, name, data in (("c1_r1", "a.wav", good), ("c2_r1", "b.wav", np.array([0.1, np.nan], dtype=np.float32)),
                               ("warmup", "w.wav", good)):
        (run / "seedtts" / folder / "audio").mkdir(parents=True)
        sf.write(run / "seedtts" / folder / "audio" / name, data, 24000, subtype="FLOAT")
    figures, rates, rules = run_audio_summary(run)
    assert figures == {"audio.files": 2, "audio.empty_or_nan": 1} and rates == (24000,)
    assert rules[1][:2] == ("no empty or NaN audio", False) and rules[1][2].startswith("seedtts/c2_r1/b.wav: "), rules


@pytest.mark.slow
def test_a_request_failing_mid_run_is_counted_not_fatal(tmp_path, invoke, data_cache):
    meta = ensure_local_set(data_cache / "seedtts-local-v1")
    lines = meta.read_text().splitlines()[:4]
    parts = lines[2].split("|")
    parts[3] = "word " * 9000  # longer than the server's 8192-token context: HTTP 400 for this one
    lines[2] = "|".join(parts[:2] + [str(meta.parent / parts[2])] + parts[3:])
    custom = tmp_path / "meta.lst"
    custom.write_text("\n".join(lines[:2] + [lines[2]] + lines[3:]) .replace("|wavs/", f"|{meta.parent}/wavs/") + "\n")
    done = invoke("run", "--workload", "seedtts", "--port", str(free_port()), "--opt", f"seedtts.meta={custom}",
                  timeout=600)
    assert done.returncode == 1, done.stdout + done.stderr
    (run,) = (tmp_path / "results").glob("*/run0-incomplete")
    speed = json.loads((run / "seedtts" / "speed_results.json").read_text())
    assert speed["summary"]["completed_requests"] == 3 and speed["summary"]["failed_requests"] == 1
    failed = [r for r in speed["per_request"] if not r["is_success"]]
    assert "HTTP 400" in failed[0]["error"] and "context length" in failed[0]["error"]
    metrics = metrics_file.read(run)
    assert metrics.complete is False
    broken = {r.rule for r in metrics.broken_rules}
    assert {"0 failed requests", "0 skipped in WER", "one WAV per sample"} <= broken
    manifest = manifest_file.read(run)
    assert all(s.status == "ok" for s in manifest.steps)  # every step ran to its end
    assert "RUN_INCOMPLETE" in done.stdout and "BROKEN RULE 0 failed requests" in done.stdout


@pytest.mark.slow
def test_local_set_is_made_once_in_seedtts_format(tmp_path):
    folder = tmp_path / "set"
    meta = ensure_local_set(folder)
    lines = meta.read_text().splitlines()
    assert len(lines) == len(TARGET_SENTENCES)
    sample_id, ref_text, wav, target = lines[0].split("|")
    assert not Path(wav).is_absolute() and (folder / wav).is_file()
    assert sf.info(folder / wav).samplerate == 16000
    samples = load_meta(meta)
    assert samples[0].ref_audio == str(folder / wav) and samples[0].target_text == target
    stamp = (folder / wav).stat().st_mtime_ns
    ensure_local_set(folder)  # reused, not rebuilt
    assert (folder / wav).stat().st_mtime_ns == stamp
    assert not [p for p in tmp_path.iterdir() if ".tmp-" in p.name]  # no half-made folder left


def _plan(target_env, tmp_path, **options):
    opts = {**seedtts.DEFAULTS, **options}
    ctx = RunContext(tmp_path / "run0", "seedtts", Endpoint(8000), opts, target_env, RunSettings())
    return {s.name: s for s in seedtts.plan(ctx)}, ctx


RUNBOOK_SEEDTTS_SERVER = ("sgl-omni serve --model-path openbmb/MiniCPM-o-4_5 --model-name minicpmo "
                          "--thinker.engine.mem_fraction_static 0.55 --talker.engine.mem_fraction_static 0.15 "
                          "--thinker.factory.max_seq_len 8192 --port 8000")
RUNBOOK_ASR_SERVER = "sgl-omni serve --model-path Qwen/Qwen3-ASR-1.7B --model-name Qwen/Qwen3-ASR-1.7B --port 8000"
RUNBOOK_CLIENT = {
    "generate": "python -m benchmarks.eval.benchmark_omni_seedtts --generate-only --meta zhaochenyang20/seed-tts-eval-arrow "
                "--model minicpmo --port 8000 --voice-clone --reference-audio-field audio.ref_audio "
                "--max-concurrency 16 --output-dir $OUT/seedtts",
    "transcribe": "python -m benchmarks.eval.benchmark_omni_seedtts --transcribe-only --meta "
                  "zhaochenyang20/seed-tts-eval-arrow --model minicpmo --port 8000 --asr-concurrency 4 "
                  "--output-dir $OUT/seedtts",
    "similarity": "python -m benchmarks.eval.benchmark_omni_seedtts --similarity-only --meta "
                  "zhaochenyang20/seed-tts-eval-arrow --model minicpmo --output-dir $OUT/seedtts",
    "utmos": "python -m benchmarks.eval.benchmark_omni_seedtts --utmos-only --meta zhaochenyang20/seed-tts-eval-arrow "
             "--model minicpmo --output-dir $OUT/seedtts",
}


def _as_runbook(argv, ctx) -> str:
    words = ["python" if a == ctx.target.python else a for a in argv]
    return " ".join(words).replace(str(ctx.run_dir), "$OUT")


def test_sglang_omni_commands_are_the_runbooks(tmp_path):
    env = prepare_sglang_omni(Settings.of(checkout=str(make_fake_checkout(tmp_path / "co"))))
    steps, ctx = _plan(env, tmp_path)
    assert list(steps) == ["dataset", "generate", "transcribe", "similarity", "utmos"]
    for name, expected in RUNBOOK_CLIENT.items():
        assert isinstance(steps[name].run, Command)
        assert _as_runbook(steps[name].run.argv, ctx) == expected, name
        assert steps[name].run.cwd is None  # the target's cwd: the checkout root
    assert "sgl-omni " + " ".join(env.serve_argv(steps["generate"].server, 8000)[1:]) == RUNBOOK_SEEDTTS_SERVER
    assert "sgl-omni " + " ".join(env.serve_argv(steps["transcribe"].server, 8000)[1:]) == RUNBOOK_ASR_SERVER
    assert env.cwd == str(tmp_path / "co")
    assert [steps[n].phase for n in steps] == ["generate", "generate", "score", "score", "score"]
    assert steps["similarity"].server is None and steps["utmos"].server is None


def test_native_client_on_sglang_omni_stages_the_pinned_split(tmp_path):
    env = prepare_sglang_omni(Settings.of(checkout=str(make_fake_checkout(tmp_path / "co"))))
    steps, ctx = _plan(env, tmp_path, client="native")
    assert list(steps) == ["stage-data", "dataset", "generate", "transcribe", "similarity", "utmos"]
    stage = steps["stage-data"].run.argv
    assert stage[0] == env.python and stage[1].endswith("stage_hf.py")
    assert "27f4c1adee83b5b29b7c4b375f6b976324bda308" in stage
    client = steps["generate"].run.argv
    assert client[:3] == (sys.executable, "-m", "omnibench_plugins.seedtts.client")
    assert client[client.index("--meta") + 1] == str(ctx.workload_dir / "data" / "meta.lst")
    # scoring stays sglang-omni's own (Qwen3-ASR, WavLM SIM, UTMOS)
    assert _as_runbook(steps["transcribe"].run.argv, ctx) == RUNBOOK_CLIENT["transcribe"]


def test_sglang_client_is_refused_off_sglang_omni(tmp_path):
    from omnibench_core.errors import SettingsError

    with pytest.raises(SettingsError, match="needs a target that brings its clients"):
        _plan(prepare_local(Settings()), tmp_path, client="sglang")


# -- the same One run, from Video-AMME's side -------------------------------------------------
TESTS = Path(__file__).resolve().parent
RUNBOOK_KEYS = {
    "videoamme.accuracy", "videoamme.failed", "seedtts.failed", "seedtts.sim", "seedtts.sim_skipped", "seedtts.utmos",
    "seedtts.utmos_skipped", "seedtts.completion_tokens_sum",
    *(f"{w}.{k}" for w in ("videoamme", "seedtts") for k in ("throughput_qps", "latency_mean_s", "latency_p95_s",
                                                            "rtf_mean", "audio_duration_mean_s",
                                                            "audio_throughput_s_per_s")),
    *(f"{w}.wer.{k}" for w in ("videoamme", "seedtts") for k in ("wer_corpus", "wer_below_50_corpus",
                                                                "n_above_50_pct_wer", "skipped")),
    "audio.files", "audio.empty_or_nan",
}
# omnibench's own beside the runbook's: each workload's server start, spawn to READY (issue 33)
READY_KEYS = {"videoamme.server_ready_s", "seedtts.server_ready_s"}
# and its percentiles (issue 45) the samples support: 30 seed-tts requests p50 and p90 (30 needed),
# 10 Video-AMME samples p50 only; the rest are recorded as thin, not as metrics
PERCENTILE_KEYS = {"seedtts.latency_p50_s", "seedtts.latency_p90_s", "videoamme.latency_p50_s"}
THIN_KEYS = {"seedtts.latency_p99_s", "videoamme.latency_p90_s", "videoamme.latency_p99_s"}


def test_one_run_is_complete_with_exactly_the_runbooks_keys(full_run):
    done, results = full_run
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr
    (run,) = results.glob("*/run0")
    metrics = metrics_file.read(run)
    assert metrics.complete is True
    assert set(metrics.metrics) == RUNBOOK_KEYS | READY_KEYS | PERCENTILE_KEYS
    assert set(metrics.thin_percentiles) == THIN_KEYS
    latencies = [r["latency_s"] for r in json.loads((run / "videoamme" / "videoamme_results.json").read_text())["per_sample"]]
    assert metrics.metrics["videoamme.latency_p50_s"] == pytest.approx(float(np.median(latencies)))
    assert metrics.metrics["audio.files"] == 10 + 30 and metrics.rates == (24000,)
    assert 0 <= metrics.metrics["videoamme.accuracy"] <= 1
    manifest = manifest_file.read(run)
    assert [s.label for s in manifest.servers] == ["videoamme", "seedtts", "asr"]  # one ASR server for both
    assert "--thinker.factory.max_seq_len" in manifest.servers[0].argv
    assert manifest.servers[0].argv[manifest.servers[0].argv.index("--thinker.factory.max_seq_len") + 1] == "32768"
    results_doc = json.loads((run / "videoamme" / "videoamme_results.json").read_text())
    row = results_doc["per_sample"][0]
    assert set(row) >= {"sample_id", "expected", "predicted", "raw_response", "is_correct", "is_success", "latency_s",
                        "prompt_tokens", "completion_tokens", "audio_duration_s", "rtf", "wav_path", "error"}
    assert row["raw_response"].rstrip().endswith(f"Answer: {row['predicted']}")
    assert set(results_doc["summary"]) >= {"total_samples", "correct", "accuracy", "failed"}
    assert "not a video model" in done.stdout


def test_runbooks_own_collection_script_agrees_value_for_value(full_run, tmp_path):
    _, results = full_run
    (run,) = results.glob("*/run0")
    copy = Path(shutil.copytree(run, tmp_path / "run0"))  # the script writes metrics.json itself
    script = (TESTS / "runbook_collect.py").read_text().replace("1088", "30")  # the local seed-tts set's size
    (tmp_path / "collect.py").write_text(script)
    done = subprocess.run([sys.executable, str(tmp_path / "collect.py"), str(copy)], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines()[-1] == "RUN_COMPLETE"
    theirs = json.loads((copy / "metrics.json").read_text())
    ours = json.loads((run / "metrics.json").read_text())
    # the runbook's names and values, unchanged beside omnibench's own
    assert theirs["metrics"] == {k: v for k, v in ours["metrics"].items() if k not in READY_KEYS | PERCENTILE_KEYS}
    assert theirs["rates"] == ours["rates"] and theirs["complete"] is ours["complete"] is True

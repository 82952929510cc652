"""The Video-AMME Talker workload: video and a spoken question in, text and speech out.

On ``sglang-omni`` it runs the runbook's exact client and text-audio consistency WER in the
checkout's python; elsewhere a small local set, omnibench's native client and its WER scorer.
"""

from __future__ import annotations

import sys
from collections.abc import Mapping
from pathlib import Path

from omnibench_core.hookspecs import hookimpl
from omnibench_core.jsonio import write_json
from omnibench_core.records import Collected, Command, RunContext, Step, StepContext, Workload
from omnibench_core.synthetic import LOCAL_VIDEO_ANSWER_METHOD as LOCAL_ANSWER_METHOD
from omnibench_plugins.common import ASR_MODEL, ASR_SERVER, MODEL_NAME, asr_label, model_server

from . import metrics
from .data import SET_NAME, ensure_local_set, load_samples, local_set_dir

NAME = "videoamme"
REPO_ID = "zhaochenyang20/Video_AMME_ci"
REVISION = "7a37507f1b53416b9cb6641378e5a098ea535ab8"
SERVER = model_server(NAME, 32768)  # CI stage 10's server parameters, as in the runbook
OPTIONS = {
    "max_samples": "10",
    "video_fps": "2",
    "video_max_frames": "128",
    "video_max_pixels": "401408",
    "max_tokens": "256",
    "temperature": "0",
    "timeout_s": "500",
    "max_concurrency": "16",
    "asr_concurrency": "4",
    "data_dir": "",  # where the local set is made (default ~/.cache/omnibench/videoamme-local-v1)
}
# The runbook's client block, run as `python -c` with the runbook's flags after it.
RUNBOOK_CLIENT = """\
import argparse, asyncio
from benchmarks.eval import benchmark_omni_videoamme as m
parser = argparse.ArgumentParser()
m.add_video_eval_args(parser, repo_help="")
cfg = m.video_eval_config_from_args(parser.parse_args())
asyncio.run(m.run_videoamme_eval(cfg, compute_wer=False))
"""
# The runbook's WER block (the function CI stage 10 calls); the ASR port comes second.
RUNBOOK_WER = """\
import json, sys
from benchmarks.tasks.asr import compute_text_audio_consistency_from_records
d = sys.argv[1]
records = json.load(open(f"{d}/videoamme_results.json"))["per_sample"]
wer = compute_text_audio_consistency_from_records(records, "en", "cuda:0", asr_router_port=int(sys.argv[2]), asr_concurrency=4)
json.dump(wer["summary"], open(f"{d}/wer_summary.json", "w"), indent=2)
"""


def _flags(ctx: RunContext) -> list[str]:
    o = ctx.options
    return ["--max-samples", o["max_samples"], "--video-fps", o["video_fps"], "--video-max-frames",
            o["video_max_frames"], "--video-max-pixels", o["video_max_pixels"], "--max-tokens", o["max_tokens"],
            "--temperature", o["temperature"], "--timeout-s", o["timeout_s"], "--max-concurrency",
            o["max_concurrency"], "--enable-audio", "--output-dir", str(ctx.workload_dir)]


def _dataset_step(ctx: RunContext, make) -> Step:
    return Step("dataset", make, outputs=(f"{NAME}/dataset.json",))


def _sglang_steps(ctx: RunContext) -> list[Step]:
    def record(step: StepContext) -> None:
        write_json(step.workload_dir / "dataset.json", {"source": REPO_ID, "revision": REVISION,
                                                        "samples": int(ctx.options["max_samples"])})

    client = Command((ctx.target.python, "-c", RUNBOOK_CLIENT, "--model", MODEL_NAME, "--port", str(ctx.port),
                      "--repo-id", REPO_ID, *_flags(ctx)))
    score = Command((ctx.target.python, "-c", RUNBOOK_WER, str(ctx.workload_dir), str(ctx.port)))
    return [_dataset_step(ctx, record),
            Step("generate", client, server=SERVER, outputs=(f"{NAME}/videoamme_results.json",)),
            Step("wer", score, phase="score", server=ASR_SERVER, outputs=(f"{NAME}/wer_summary.json",))]


def _own_steps(ctx: RunContext) -> list[Step]:
    folder = local_set_dir(ctx.options["data_dir"] or None)
    limit = int(ctx.options["max_samples"])

    def make(step: StepContext) -> None:
        step.progress(f"making the local {SET_NAME} set in {folder} (once)")
        ensure_local_set(folder, step.progress)
        write_json(step.workload_dir / "dataset.json", {"source": str(folder), "name": SET_NAME,
                                                        "samples": len(load_samples(folder, limit))})

    method = LOCAL_ANSWER_METHOD if ctx.target.target == "local" else ""
    client = Command((sys.executable, "-m", "omnibench_plugins.videoamme.client", "--data", str(folder), "--model",
                      MODEL_NAME, "--port", str(ctx.port), "--answer-method", method, *_flags(ctx)))
    score = Command((sys.executable, "-m", "omnibench_plugins.videoamme.score", "--output-dir", str(ctx.workload_dir),
                     "--port", str(ctx.port), "--asr-model", ASR_MODEL, "--asr-label", asr_label(ctx.target.target),
                     "--asr-concurrency", ctx.options["asr_concurrency"]))
    return [_dataset_step(ctx, make),
            Step("generate", client, server=SERVER, outputs=(f"{NAME}/videoamme_results.json",)),
            Step("wer", score, phase="score", server=ASR_SERVER, outputs=(f"{NAME}/wer_summary.json",))]


def plan(ctx: RunContext) -> list[Step]:
    """The Video-AMME steps for this target."""
    return _sglang_steps(ctx) if ctx.target.target == "sglang-omni" else _own_steps(ctx)


def collect(run_dir: Path, options: Mapping[str, str]) -> Collected:
    """The runbook's ``videoamme.*`` metrics and coverage rules."""
    return metrics.collect(run_dir / NAME, NAME)


@hookimpl
def omnibench_workloads() -> list[Workload]:
    """The Video-AMME Talker workload."""
    return [Workload(NAME, "Video-AMME Talker: video and a spoken question in, text and speech out; accuracy, WER",
                     plan, collect, options=OPTIONS)]

"""The videoamme plugin's hooks: what it registers with omnibench (the package's docstring says what it
is)."""

from __future__ import annotations

import sys
from collections.abc import Mapping
from pathlib import Path

from omnibench_core.plugin import (
    ASR_SERVER,
    Collected,
    Command,
    RunContext,
    ScorerUse,
    ServeSpec,
    SettingsError,
    Step,
    StepContext,
    Workload,
    defaults,
    format_value,
    hookimpl,
    is_complete,
    write_json,
)
from omnibench_plugins.common import MODEL_NAME, client_kind, model_server

from . import metrics
from .data import SET_NAME, ensure_local_set, load_samples, local_set_dir, set_size
from .options import CLIENT_FLAGS, OPTIONAL_FLAGS, OPTIONS
from .prompt import read_request_text

NAME = "videoamme"
REPO_ID = "zhaochenyang20/Video_AMME_ci"
REVISION = "7a37507f1b53416b9cb6641378e5a098ea535ab8"
SERVER = model_server(NAME, 32768)  # CI stage 10's server parameters, as in the runbook


def _server(ctx: RunContext) -> ServeSpec:
    """The model server under the run's server profile (runbook: exactly :data:`SERVER`)."""
    return model_server(NAME, 32768, ctx.settings.server_profile)
DEFAULTS = defaults(OPTIONS)
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
    flags = []
    for key in CLIENT_FLAGS:
        flags += [f"--{key.replace('_', '-')}", format_value(ctx.options[key])]
    for key in OPTIONAL_FLAGS:
        if ctx.options[key] is not None:
            flags += [f"--{key.replace('_', '-')}", format_value(ctx.options[key])]
    return [*flags, "--enable-audio", "--output-dir", str(ctx.workload_dir)]


def _native_flags(ctx: RunContext) -> list[str]:
    """The runbook's flags, and ``--stream`` when the ``stream`` option is on (off: the argv as before)."""
    return [*_flags(ctx), "--stream"] if ctx.options.get("stream") else _flags(ctx)


def _dataset_step(ctx: RunContext, make) -> Step:
    return Step("dataset", make, outputs=(f"{NAME}/dataset.json",))


def _generate(ctx: RunContext, client: Command) -> Step:
    return Step("generate", client, server=_server(ctx), outputs=(f"{NAME}/videoamme_results.json",))


def _native_client(ctx: RunContext, data: Path) -> Command:
    """omnibench's client with sglang-omni's request text: the checkout's where the target has one
    (text, source and hash in the argv, so the manifest records them)."""
    # only a target that runs a checkout's clients has sglang-omni's code; the local target's
    # "checkout" detail is omnibench's own repository (the history reads its commits there)
    checkout = ctx.target.details.get("checkout") if ctx.target.facts.own_clients else None
    text = read_request_text(Path(checkout) if checkout else None)
    return Command((sys.executable, "-m", "omnibench_plugins.videoamme.client", "--data", str(data), "--model",
                    MODEL_NAME, "--port", str(ctx.port), "--answer-method", ctx.target.facts.substitute("video_answer"),
                    "--request-text", text.text, "--request-text-source", text.recorded_source,
                    "--request-text-sha256", text.sha256, *_native_flags(ctx)))


def _sglang_wer(ctx: RunContext) -> Step:
    score = Command((ctx.target.python, "-c", RUNBOOK_WER, str(ctx.workload_dir), str(ctx.port)))
    return Step("wer", score, phase="score", server=ASR_SERVER, outputs=(f"{NAME}/wer_summary.json",))


def check_sglang_types(options: Mapping[str, object]) -> None:
    """sglang-omni's Video-AMME client reads ``--timeout-s`` as an int (argparse exits 2 on ``2.5``):
    a fractional ``timeout_s`` is refused here, before any server starts."""
    value = options["timeout_s"]
    if isinstance(value, float) and not value.is_integer():
        raise SettingsError(f"videoamme.timeout_s={value:g}: sglang-omni's Video-AMME client takes --timeout-s as a "
                            "whole number of seconds", hint=f"use --opt videoamme.timeout_s={max(1, round(value))}, "
                            "or --opt videoamme.client=native (omnibench's client takes fractions)")


def check_no_stream(options: Mapping[str, object]) -> None:
    """sglang-omni's Video-AMME client has no stream mode (no ``--stream``): ``stream`` needs the
    native client, refused here before any server starts."""
    if options.get("stream"):
        raise SettingsError("videoamme.stream=true: sglang-omni's Video-AMME client has no stream mode, so it cannot "
                            "time the text's tokens", hint="add --opt videoamme.client=native (omnibench's client "
                            "streams the same request), or leave videoamme.stream off")


def _sglang_steps(ctx: RunContext) -> list[Step]:
    check_sglang_types(ctx.options)
    check_no_stream(ctx.options)
    def record(step: StepContext) -> None:
        write_json(step.workload_dir / "dataset.json", {"source": REPO_ID, "revision": REVISION,
                                                        "samples": ctx.options["max_samples"]})

    client = Command((ctx.target.python, "-c", RUNBOOK_CLIENT, "--model", MODEL_NAME, "--port", str(ctx.port),
                      "--repo-id", REPO_ID, *_flags(ctx)))
    return [_dataset_step(ctx, record), _generate(ctx, client), _sglang_wer(ctx)]


def _staged_native_steps(ctx: RunContext) -> list[Step]:
    """omnibench's client on sglang-omni: the runbook's questions staged by the checkout's own loader."""
    staged = ctx.workload_dir / "data"
    stage = Command((ctx.target.python, str(Path(__file__).with_name("stage_hf.py")), "--repo-id", REPO_ID,
                     "--max-samples", str(ctx.options["max_samples"]), "--out", str(staged)))

    def record(step: StepContext) -> None:
        write_json(step.workload_dir / "dataset.json", {"source": REPO_ID, "revision": REVISION,
                                                        "samples": len(load_samples(staged))})

    return [Step("stage-data", stage, outputs=(f"{NAME}/data/samples.json",)), _dataset_step(ctx, record),
            _generate(ctx, _native_client(ctx, staged)), _sglang_wer(ctx)]


def _own_steps(ctx: RunContext) -> list[Step]:
    limit = ctx.options["max_samples"]
    size = set_size(limit)
    folder = local_set_dir(ctx.options["data_dir"], size)

    def make(step: StepContext) -> None:
        verb = "reading" if is_complete(folder, SET_NAME) else "making (once)"
        step.progress(f"{verb} the local {SET_NAME} set in {folder}")
        ensure_local_set(folder, step.progress, size)
        write_json(step.workload_dir / "dataset.json", {"source": str(folder), "name": SET_NAME,
                                                        "samples": len(load_samples(folder, limit))})

    # WER comes from the asr-wer scorer (see WER below)
    return [_dataset_step(ctx, make), _generate(ctx, _native_client(ctx, folder))]


def plan(ctx: RunContext) -> list[Step]:
    """The Video-AMME steps for this target and client."""
    kind = client_kind(ctx)
    if not ctx.target.facts.own_clients:
        return _own_steps(ctx)
    return _sglang_steps(ctx) if kind == "sglang" else _staged_native_steps(ctx)


def collect(run_dir: Path, options: Mapping[str, object]) -> Collected:
    """The runbook's ``videoamme.*`` metrics and coverage rules."""
    return metrics.collect(run_dir / NAME, NAME)


def collect_unscored(run_dir: Path, options: Mapping[str, object]) -> Collected:
    """:func:`collect` of a run whose score phase was skipped: no WER."""
    return metrics.collect(run_dir / NAME, NAME, scored=False)


# The runbook's text-audio consistency WER files: the reference is the model's own text reply;
# wer_summary.json holds the WER fields at top level, wer_per_sample.json the samples.
WER = ScorerUse("asr-wer", {"rows": "videoamme_results.json", "rows_key": "per_sample",
                            "reference_field": "raw_response", "output": "wer_summary.json", "layout": "flat",
                            "per_sample_output": "wer_per_sample.json", "record_id": "sample_id",
                            "record_reference": "reference", "record_transcript": "transcript"})


@hookimpl
def omnibench_workloads() -> list[Workload]:
    """The Video-AMME Talker workload."""
    return [Workload(NAME, "Video-AMME Talker: video and a spoken question in, text and speech out; accuracy, WER",
                     plan, collect, scorers=(WER,), options=OPTIONS, checks=("audio",),
                     collect_unscored=collect_unscored, quality_metrics=tuple(f"{NAME}.{m}" for m in metrics.QUALITY),
                     metrics=tuple(f"{NAME}.{m}" for m in metrics.NAMES))]

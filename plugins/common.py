"""What the built-in MiniCPM-o workloads share: the model, its server, the metric names."""

from __future__ import annotations

from omnibench_core.plugin import RunContext, ServeSpec, SettingsError

MODEL_PATH, MODEL_NAME = "openbmb/MiniCPM-o-4_5", "minicpmo"


# The runbook's per-workload metric names: the speed fields and the WER fields.
SPEED_METRICS = ("throughput_qps", "latency_mean_s", "latency_p95_s", "rtf_mean", "audio_duration_mean_s",
                 "audio_throughput_s_per_s")
WER_METRICS = ("wer_corpus", "wer_below_50_corpus", "n_above_50_pct_wer", "skipped")


# What each server profile adds to the MiniCPM-o speech server's flags. "runbook": nothing, the
# model's code2wav defaults (batch 8, no wait: MiniCPMOSpeechPipelineConfig, asserted by
# test_speech_pipeline_enables_code2wav_batching_by_default in sglang-omni). "ci": code2wav as CI's
# audio stages resolve it, batch 16 with a 100 ms wait (test_minicpm_stages_launch_two_single_gpu_workers,
# sglang-omni's tests/test_model; repository, path and commit in docs/fidelity.md). The flags are
# sgl-omni serve's dotted stage flags for those config keys (code2wav.factory.max_batch_size,
# code2wav.factory.max_batch_wait_ms).
SERVER_PROFILE_ARGS: dict[str, tuple[str, ...]] = {
    "runbook": (),
    "ci": ("--code2wav.factory.max_batch_size", "16", "--code2wav.factory.max_batch_wait_ms", "100"),
}


def model_server(label: str, max_seq_len: int, profile: str = "runbook") -> ServeSpec:
    """The runbook's MiniCPM-o speech server with the workload's context length, and the server
    profile's flags (``--server-profile``)."""
    return ServeSpec(label, model_path=MODEL_PATH, model_name=MODEL_NAME, args=(
        "--thinker.engine.mem_fraction_static", "0.55", "--talker.engine.mem_fraction_static", "0.15",
        "--thinker.factory.max_seq_len", str(max_seq_len), *SERVER_PROFILE_ARGS[profile]))


def client_kind(ctx: RunContext) -> str:
    """``sglang`` or ``native``: the workload's ``client`` option, ``auto`` resolved by the target."""
    kind = ctx.options["client"]
    own = ctx.target.facts.own_clients
    if kind == "auto":
        return "sglang" if own else "native"
    if kind == "sglang" and not own:
        raise SettingsError(f"sglang-omni's own client needs a target that brings its clients; "
                            f"{ctx.target.target!r} does not",
                            hint="use the native client (the default) on this target")
    return kind

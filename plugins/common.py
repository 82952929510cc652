"""What the built-in MiniCPM-o workloads share: the model, the servers, the ASR server."""

from __future__ import annotations

from omnibench_core.records import ServeSpec

MODEL_PATH, MODEL_NAME = "openbmb/MiniCPM-o-4_5", "minicpmo"
ASR_MODEL = "Qwen/Qwen3-ASR-1.7B"
LOCAL_ASR_LABEL = "pocketsphinx 5.1.1 en-us (local substitute for Qwen3-ASR-1.7B)"

# One spec for every workload's WER step: equal specs share one ASR server start in a run.
ASR_SERVER = ServeSpec("asr", model_path=ASR_MODEL, model_name=ASR_MODEL)


# The runbook's per-workload metric names: the speed fields and the WER fields.
SPEED_METRICS = ("throughput_qps", "latency_mean_s", "latency_p95_s", "rtf_mean", "audio_duration_mean_s",
                 "audio_throughput_s_per_s")
WER_METRICS = ("wer_corpus", "wer_below_50_corpus", "n_above_50_pct_wer", "skipped")


def model_server(label: str, max_seq_len: int) -> ServeSpec:
    """The runbook's MiniCPM-o server (CI's parameters) with the workload's context length."""
    return ServeSpec(label, model_path=MODEL_PATH, model_name=MODEL_NAME, args=(
        "--thinker.engine.mem_fraction_static", "0.55", "--talker.engine.mem_fraction_static", "0.15",
        "--thinker.factory.max_seq_len", str(max_seq_len)))


def asr_label(target: str) -> str:
    """What the ASR server really is on this target, for the reports."""
    return LOCAL_ASR_LABEL if target == "local" else ""

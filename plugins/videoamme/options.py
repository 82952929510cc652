"""The Video-AMME workload's options: the one place their types, ranges and defaults live.

The workload plans with them (``--opt videoamme.KEY=VALUE``) and the native client takes its
argparse defaults and checks from them, so a default is written once. The defaults are the
runbook's client flags.
"""

from __future__ import annotations

from omnibench_core.plugin import Option, default_cache_dir

OPTIONS = (
    Option("client", str, "auto", "auto: the target's own client where it brings one (sglang-omni), else native",
           choices=("auto", "native", "sglang")),
    Option("max_samples", int, 10, "the first N samples only", min=1),
    Option("video_fps", float, 2.0, "frames per second sampled from each video", min=0, min_exclusive=True),
    Option("video_max_frames", int, 128, "at most this many frames per video", min=1),
    Option("video_max_pixels", int, 401408, "at most this many pixels per frame", min=1),
    Option("video_min_pixels", int, None, "at least this many pixels per frame", min=1, optional=True,
           unset="not sent"),
    Option("video_total_pixels", int, None, "at most this many pixels over all sampled frames", min=1,
           optional=True, unset="not sent"),
    Option("max_tokens", int, 256, "max_tokens of each request", min=1),
    Option("temperature", float, 0.0, "sampling temperature of each request", min=0),
    Option("timeout_s", float, 500.0, "seconds one request may take", min=0, min_exclusive=True),
    Option("max_concurrency", int, 16, "requests in flight at once", min=1),
    Option("warmup", int, None, "untimed warmup requests, all with the first sample, before the timed window "
           "(0: none)", min=0, optional=True, unset="max_concurrency (the runbook's 16)"),
    Option("stream", bool, False, "stream each answer (stream: true) and time its text: TTFT, TPOT, ITL, output "
           "tokens/s with percentiles (native client only; docs/workloads.md)"),
    Option("asr_concurrency", int, 4, "ASR requests in flight at once when scoring WER", min=1),
    Option("data_dir", str, None, "where the local set is made", optional=True,
           unset=str(default_cache_dir() / "videoamme-local-v1")),
)
# The runbook's client flags, in its order: ``--max-samples`` ... ``--max-concurrency``, each the option
# of the same name with dashes (both clients, sglang-omni's and the native one, take them).
CLIENT_FLAGS = ("max_samples", "video_fps", "video_max_frames", "video_max_pixels", "max_tokens", "temperature",
                "timeout_s", "max_concurrency")
# Flags of both clients the runbook leaves out: passed only when set (the video ones then sent in every
# request; ``warmup`` unset is each client's default: the concurrency, as sglang-omni's since 8a6fc24).
OPTIONAL_FLAGS = ("video_min_pixels", "video_total_pixels", "warmup")

"""The seed-tts workload's options: the one place their types, ranges and defaults live.

The workload plans with them (``--opt seedtts.KEY=VALUE``) and the native client takes its
argparse defaults and checks from them, so a default is written once.
"""

from __future__ import annotations

from omnibench_core.plugin import DEFAULT_ARRIVAL_SEED, Option, default_cache_dir

OPTIONS = (
    Option("client", str, "auto", "auto: the target's own client where it brings one (sglang-omni), else native",
           choices=("auto", "native", "sglang")),
    Option("max_concurrency", int, 16, "requests in flight at once", min=1),
    Option("request_rate", float, None, "requests per second, arriving on a seeded Poisson schedule (open loop; "
           "max_concurrency still caps what is in flight)", min=0, min_exclusive=True, optional=True,
           unset="every request at once (sglang-omni's inf)"),
    Option("arrival_seed", int, DEFAULT_ARRIVAL_SEED, "seed of the arrival schedule with request_rate (native client "
           "only: sglang-omni's client draws an unseeded one)", min=0),
    Option("concurrencies", str, None, "sglang-omni's own sweep, one server for every level: comma-separated "
           "concurrency levels (e.g. 1,4,16), each run `repeats` times by its client (the sglang client on an "
           "sglang-omni checkout; generation only, no WER, SIM or UTMOS); metrics seedtts@c<level>.<name>",
           optional=True, unset="no sweep: one measurement at max_concurrency"),
    Option("repeats", int, 1, "with concurrencies: runs of each level on the one server", min=1),
    Option("max_new_tokens", int, 256, "max_tokens of each request", min=1),
    Option("temperature", float, 0.7, "sampling temperature of each request", min=0),
    Option("seed", int, None, "seed sent with each request", min=0, optional=True, unset="no seed sent"),
    Option("warmup", int, None, "untimed warmup requests before the timed window", min=0, optional=True,
           unset="max_concurrency"),
    Option("warmup_meta", str, None, "a separate seed-tts meta.lst whose first `warmup` samples warm the server "
           "(results kept apart in warmup/results.json)", optional=True,
           unset="the first measured sample, replayed (sglang-omni's default)", file=True),
    Option("max_samples", int, None, "the first N samples only", min=1, optional=True, unset="all samples"),
    Option("stream", bool, False, "stream each answer (stream: true) and measure first audio, chunk gaps and "
           "playback underruns (docs/streaming.md)"),
    Option("timeout_s", float, 300.0, "seconds one request may take", min=0, min_exclusive=True),
    Option("asr_concurrency", int, 4, "ASR requests in flight at once when scoring WER", min=1),
    Option("meta", str, None, "a seed-tts meta.lst to use instead of the default data", optional=True,
           unset="the target's default set", file=True),
    Option("data_dir", str, None, "where the local set is made", optional=True,
           unset=str(default_cache_dir() / "seedtts-local-v1")),
)

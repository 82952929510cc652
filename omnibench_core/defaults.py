"""The measurement defaults, defined once: the library's signatures and ``tasks.py`` read them
(``tests/test_identity.py`` holds the literals Invoke shows in ``--help`` equal to these)."""

from __future__ import annotations

# the checkout's packages besides the served one whose files a run imports (routers, every client and
# scorer): REV_OK checks them, and a dirty tree's state covers their untracked files
CHECKOUT_PACKAGES = ("sglang_omni_router", "benchmarks")
RUNS = 3  # measured runs after the warm-up run0, as the runbook
# omnibench's own engines run its campaign worker as `invoke measure` runs a campaign: their campaigns
# are measure's (one name); a plugin's engine is other code, and its campaigns get a name of their own
SHARED_ENGINES = ("local", "ray")
RETRIES = 2  # tries again of a run that misses a gate or a coverage rule
# `invoke ab --noisy-retries`: how often a round the noise guard marked noisy is measured again. Off by
# default: on a host that other work keeps busy all along, every round would be measured 1 + N times
# for nothing; where a tenant comes and goes (docs/ab.md, "Noisy rounds"), 2 redoes most noisy rounds
NOISY_RETRIES = 0
MAX_NOISY_RETRIES = 20  # more is a typo: on a host busy all along each one is a round and a wait for nothing
# Before a noisy round is measured again, `invoke ab` waits up to this long, looking a second at a time,
# for other processes to leave the noisy slot's CPUs: measured again at once, a round fell into the
# same busy spell (2026-12-07, seed-tts beside a hog 10 to 30 s on: 8.5 runs set aside an experiment and
# its retries spent, benchmarks/results/2026-12-07-verdicts-seedtts-noisy-retries). Waiting
# costs no run; past it the round is measured anyway (a tenant busy all along). The setting noise_wait_s.
NOISY_WAIT_S = 60.0
SCORING = "deferred"  # every run generated, then one scoring server start for all
ROUNDS = 3  # an A/B experiment's rounds after the warm-ups
ALPHA = 0.05  # the family's error rate (95 % intervals for a family of one)
MIN_EFFECT = 0.05  # the smallest relative change that counts (5 %)
# `invoke ab --max-rounds`: without --decide, the rounds go on until every metric with a better side
# whose name holds one of these words is decided (the runbook's speed metrics: a workload's latency
# and throughput, e.g. selftest.latency_mean_s, seedtts.latency_p95_s, seedtts.throughput_qps)
DECIDE_WORDS = ("latency", "throughput")
FIRST_LOOK = 3  # the fewest rounds a look judges (a paired t of 2 degrees of freedom), so --max-rounds >= 3
# The first look of the alpha-spending boundary: a look at 3 rounds (2 degrees of freedom) spends
# alpha it can hardly use (docs/verdicts.md, "Rounds until the answer is known")
SPENDING_FIRST_LOOK = 4
# The most rounds an A/B may schedule (--rounds, --max-rounds): a round runs both sides, minutes each, so
# 1000 rounds is weeks of a host; more is a typo. The record's schedule holds two entries a round, made
# up front, so it stays a few hundred KB (--max-rounds 10**30 grew past 460 MB before any round started).
MAX_ROUNDS = 1000
# Which server a measurement starts (--server-profile): the runbook's single-GPU server at the
# model's defaults, or the server as CI's audio stages resolve it (plugins/common.py, docs/usage.md).
SERVER_PROFILES = ("runbook", "ci")
SERVER_PROFILE = "runbook"
# How a matrix's runs reach the driver's results root (--results-transport): auto ships only from
# nodes that do not see that root (omnibench_core/scale/transport.py).
TRANSPORT = "auto"
TRANSPORTS: tuple[str, ...] = ("auto", "ray", "shared")  # auto, ship from every node, or a shared file system
# The GPU noise guard: a process outside the run on the slot's GPUs whose SM utilisation (NVML's
# per-process figure, in %) reached this in a timed window was computing there, and makes the window
# noisy; below it, it only held memory (named as present, not noisy). On an H100 (driver 580.159.04,
# benchmarks/results/2026-12-06-nvml-process-util-h100) a process holding 708 MiB idle read 0 % or
# no sample at all, bf16 matrix products 100 %, the second after they stopped 7 %.
GPU_TENANT_COMPUTING_SM_PCT = 5.0
ETA_REVISE_RATIO = 2.0  # a phase that took over this many times its estimate (or under 1/this) revises the ETA
# The percentiles every latency-like metric gets beside the runbook's mean and p95 (--percentiles),
# and the tail a percentile needs to count as measured: q is reported only from n >= TAIL / (1 - q)
# samples, so that P(no sample beyond the true q-quantile) = q**n <= e**-TAIL, about 5 % for 3
# (omnibench_core/stats/percentiles.py, docs/usage.md "Percentiles").
PERCENTILES = "50,90,99"
PERCENTILE_TAIL = 3
# How long a duet waits for a slot to be free before its round (a killed server may still be dying);
# gpu_free_timeout_s, where shorter, bounds it.
SLOT_FREE_WAIT_S = 30.0

# The longest a time setting (``*_s``; ``*_ms`` in milliseconds) may be: a day. A longer timeout,
# grace or planted delay is no bound at all (``local_delay_ms=1e308`` was taken and its A/B side's
# requests slept until their own timeout); a day is 12 times the longest default (a CI stage's 2 h).
MAX_SETTING_S = 86_400

# The most commits `invoke standin` makes: a bisect over 1000 commits takes 10 steps; --commits
# 10**9 made commits for as long as it was let run (a git commit each, without end in sight).
MAX_STANDIN_COMMITS = 1000

# The most campaigns one matrix plans (revisions x option sets): 2,000 --sweep values were planned and
# measured one after another without a word (second hostile round); a day of runs is far fewer.
MAX_MATRIX_CAMPAIGNS = 1000

# The one deadline of a git call that reads a checkout (its HEAD, status, log): git answers in
# well under a second; a hung one (a network file system, a hook, a stuck lock) is stopped with
# whatever it started, through process/capture.py. GIT_OUTPUT_BYTES: a long log or a dirty status.
GIT_S = 60.0
GIT_OUTPUT_BYTES = 64 * 1024 * 1024

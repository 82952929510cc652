#!/bin/bash
# issue 43: seed-tts quiet, one lane on the 2-core host: the sequential design's first 30 A/A, and
# +10 % A/B up to 30 a mode with one-lane/ab-s6.jsonl's 11 (2026-12-07-verdicts-seedtts-gate)
cd /work/main
while [ ! -f /tmp/sd/DONE ]; do sleep 5; done
(date -u; uptime; git log -1 --format=%H) > /tmp/sd/host-quiet.txt
/work/venv/bin/python benchmarks/bench_verdicts.py --workloads seedtts --conditions quiet --lanes 1 --lane-cpus 2 \
  --aa 30 --ab 19 --effects 0.10 --max-rounds 12 --modes sequential --first 13000 --budget-s 900 \
  --seedtts-samples 6 --opt seedtts.max_concurrency=1 --decide seedtts.latency_mean_s --score none \
  --out /tmp/sd/quiet-seq.jsonl > /tmp/sd/log-quiet-seq.txt 2>&1
/work/venv/bin/python benchmarks/bench_verdicts.py --workloads seedtts --conditions quiet --lanes 1 --lane-cpus 2 \
  --aa 0 --ab 19 --effects 0.10 --rounds 4 --modes fixed --first 13100 --budget-s 420 \
  --seedtts-samples 6 --opt seedtts.max_concurrency=1 --decide seedtts.latency_mean_s --score none \
  --out /tmp/sd/quiet-fixed.jsonl > /tmp/sd/log-quiet-fixed.txt 2>&1
(date -u; uptime) >> /tmp/sd/host-quiet.txt
echo done > /tmp/sd/DONE2

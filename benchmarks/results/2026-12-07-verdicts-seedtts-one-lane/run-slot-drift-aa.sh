#!/bin/bash
# issue 43: seed-tts under slot drift, one lane on the 2-core host: 10 more A/A a mode (to 30 with run-slot-drift.sh's 20)
cd /work/main
(date -u; uptime; git log -1 --format=%H) > /tmp/sd/host-slot-drift-aa.txt
/work/venv/bin/python benchmarks/bench_verdicts.py --workloads seedtts --conditions slot-drift --lanes 1 --lane-cpus 2 \
  --aa 10 --ab 0 --rounds 4 --max-rounds 12 --modes fixed,sequential --first 14000 --budget-s 720 \
  --seedtts-samples 6 --opt seedtts.max_concurrency=1 --decide seedtts.latency_mean_s --score none \
  --out /tmp/sd/slot-drift-aa.jsonl > /tmp/sd/log-slot-drift-aa.txt 2>&1
(date -u; uptime) >> /tmp/sd/host-slot-drift-aa.txt
echo done > /tmp/sd/DONE3

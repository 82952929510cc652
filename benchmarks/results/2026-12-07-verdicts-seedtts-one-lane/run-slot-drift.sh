#!/bin/bash
# issue 43: seed-tts under slot drift, one lane on the 2-core host (a hog on slot 0's CPU, 20 s on / 20 s off)
cd /work/main
(date -u; uptime; lscpu | grep 'Model name'; nproc; git log -1 --format=%H) > /tmp/sd/host.txt
/work/venv/bin/python benchmarks/bench_verdicts.py --workloads seedtts --conditions slot-drift --lanes 1 --lane-cpus 2 \
  --aa 30 --ab 30 --effects 0.10 --rounds 4 --max-rounds 12 --modes fixed,sequential --first 12000 --budget-s 2400 \
  --seedtts-samples 6 --opt seedtts.max_concurrency=1 --decide seedtts.latency_mean_s --score none \
  --out /tmp/sd/slot-drift-1.jsonl > /tmp/sd/log-1.txt 2>&1
echo done > /tmp/sd/DONE

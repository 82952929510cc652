#!/bin/bash
cd /work/main
while [ ! -f /tmp/s624/DONE ]; do sleep 5; done
/work/venv/bin/python benchmarks/bench_verdicts.py --workloads seedtts --conditions quiet --lanes 1 --lane-cpus 2 --aa 0 --ab 30 --effects 0.10 --rounds 4 --modes fixed,sequential --max-rounds 12 --first 9500 --budget-s 420 --seedtts-samples 6 --opt seedtts.max_concurrency=1 --decide seedtts.latency_mean_s --score none --out /tmp/s624/ab-s6.jsonl > /tmp/s624/log-ab-s6.txt 2>&1
echo done > /tmp/s624/DONE2

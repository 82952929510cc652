#!/bin/bash
cd /work/main
for i in 1 2; do for s in 6 24; do
  /work/venv/bin/python benchmarks/bench_verdicts.py --workloads seedtts --conditions quiet --lanes 1 --lane-cpus 2 --aa 30 --ab 0 --effects 0.10 --rounds 4 --modes fixed --first $((9000+i*100+s)) --budget-s 280 --seedtts-samples $s --opt seedtts.max_concurrency=1 --decide seedtts.latency_mean_s --score none --out /tmp/s624/s$s-$i.jsonl > /tmp/s624/log-s$s-$i.txt 2>&1
done; done
echo done > /tmp/s624/DONE

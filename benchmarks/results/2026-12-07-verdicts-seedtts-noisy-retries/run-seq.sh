#!/bin/bash
# issue 43: seed-tts under slot drift, one lane on the 2-core host, sequential (at most 12 rounds) with --noisy-retries 2 (from a clone: edits elsewhere do not move its revision)
cd /tmp/benchclone
(date -u; uptime; lscpu | grep 'Model name'; nproc; git log -1 --format=%H) > /tmp/nrs/host.txt
/work/venv/bin/python benchmarks/bench_verdicts.py --workloads seedtts --conditions slot-drift --lanes 1 --lane-cpus 2 \
  --aa 30 --ab 20 --effects 0.10 --rounds 4 --modes sequential --max-rounds 12 --first 17000 --budget-s 2400 \
  --seedtts-samples 6 --opt seedtts.max_concurrency=1 --decide seedtts.latency_mean_s --score none --noisy-retries 2 \
  --out /tmp/nrs/slot-drift-seq-redo2-wait.jsonl > /tmp/nrs/log.txt 2>&1
(date -u; uptime) >> /tmp/nrs/host.txt
echo done > /tmp/nrs/DONE

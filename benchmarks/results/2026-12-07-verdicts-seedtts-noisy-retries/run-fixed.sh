#!/bin/bash
# issue 43: seed-tts under slot drift, one lane on the 2-core host, fixed 4 rounds with --noisy-retries 2 (from a clone: edits elsewhere do not move its revision)
cd /tmp/benchclone
(date -u; uptime; lscpu | grep 'Model name'; nproc; git log -1 --format=%H) > /tmp/nr/host.txt
/work/venv/bin/python benchmarks/bench_verdicts.py --workloads seedtts --conditions slot-drift --lanes 1 --lane-cpus 2 \
  --aa 30 --ab 30 --effects 0.10 --rounds 4 --modes fixed --first 16000 --budget-s 2700 \
  --seedtts-samples 6 --opt seedtts.max_concurrency=1 --decide seedtts.latency_mean_s --score none --noisy-retries 2 \
  --out /tmp/nr/slot-drift-redo2-wait.jsonl > /tmp/nr/log.txt 2>&1
(date -u; uptime) >> /tmp/nr/host.txt
echo done > /tmp/nr/DONE

#!/bin/bash
# The planned device call: is the device's seed-tts spread its lanes' crowding? (Ran with 1 and 4 lanes
# as ../2026-12-07-verdicts-seedtts-one-lane/device/device-lanes.sh: not mainly, one lane spread 5.9 to 7.4 %.)
# The same seeds at 2, 4 and 8 lanes in one call; read the summary's "A/A spread %" and "steal %".
# Run from the repo root with .whl and .dev43 carried (see README.md): bash benchmarks/results/2026-12-07-verdicts-seedtts-gate/bench-lanes.sh 150
set -u
BUDGET=${1:-150}
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl || exit 1
export PYTHONPATH=/tmp/site
ls /tmp/pw/*.whl >/dev/null 2>&1 || CMAKE_BUILD_PARALLEL_LEVEL=16 python3 -m pip wheel -q --no-deps --no-build-isolation --no-index -w /tmp/pw .dev43/src/pocketsphinx-5.1.1.tar.gz > $OUT/build.txt 2>&1 || exit 1
python3 -m pip install -q --no-index --no-deps --no-compile --target /tmp/site /tmp/pw/*.whl || exit 1
python3 -m pip install -q --no-index --no-deps --no-build-isolation -e . > $OUT/install.txt 2>&1 || exit 1
(date -u; uptime; lscpu -e; head -1 /proc/stat; git log -1 --format=%H) > $OUT/host-lanes.txt 2>&1
for lanes in 2 4 8; do
  PYTHONUNBUFFERED=1 python3 benchmarks/bench_verdicts.py --workloads seedtts --conditions quiet --lanes $lanes --lane-cpus 2 \
    --aa 30 --ab 30 --effects 0.10 --rounds 4 --modes fixed --first 11000 --budget-s $BUDGET \
    --opt seedtts.max_concurrency=1 --decide seedtts.latency_mean_s --score none --out $OUT/verdicts-lanes-$lanes.jsonl
done

#!/bin/bash
# Ran on the device on 2026-12-07 at 13:05 UTC from the repo root as `bash <this file> 150` (with .whl and
# .dev43 carried, as ../../2026-12-07-verdicts-seedtts-gate/README.md says): the gate folder's bench-lanes.sh
# with 1 and 4 lanes (LANES) and the seeds from FIRST; the same seeds in each lane count.
set -u
BUDGET=${1:-150}
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl || exit 1
export PYTHONPATH=/tmp/site
ls /tmp/pw/*.whl >/dev/null 2>&1 || CMAKE_BUILD_PARALLEL_LEVEL=16 python3 -m pip wheel -q --no-deps --no-build-isolation --no-index -w /tmp/pw .dev43/src/pocketsphinx-5.1.1.tar.gz > $OUT/build.txt 2>&1 || exit 1
python3 -m pip install -q --no-index --no-deps --no-compile --target /tmp/site /tmp/pw/*.whl || exit 1
python3 -m pip install -q --no-index --no-deps --no-build-isolation -e . > $OUT/install.txt 2>&1 || exit 1
(date -u; uptime; lscpu -e; head -1 /proc/stat; git log -1 --format=%H) > $OUT/host-lanes.txt 2>&1
for lanes in ${LANES:-1 4}; do
  PYTHONUNBUFFERED=1 python3 benchmarks/bench_verdicts.py --workloads seedtts --conditions quiet --lanes $lanes --lane-cpus 2 \
    --aa 30 --ab 30 --effects 0.10 --rounds 4 --modes fixed --first ${FIRST:-11000} --budget-s $BUDGET \
    --opt seedtts.max_concurrency=1 --decide seedtts.latency_mean_s --score none --out $OUT/verdicts-lanes-$lanes.jsonl
done

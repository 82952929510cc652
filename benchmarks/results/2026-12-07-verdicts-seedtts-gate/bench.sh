#!/bin/bash
# issue 43: bench_verdicts.py on seed-tts on the device's 16 CPUs (the GPU is not used)
set -u
COND=$1 FIRST=$2 BUDGET=${3:-420}
t0=$(date +%s)
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl || exit 1
export PYTHONPATH=/tmp/site
ls /tmp/pw/*.whl >/dev/null 2>&1 || CMAKE_BUILD_PARALLEL_LEVEL=16 python3 -m pip wheel -q --no-deps --no-build-isolation --no-index -w /tmp/pw .dev43/src/pocketsphinx-5.1.1.tar.gz > $OUT/build.txt 2>&1 || { tail -30 $OUT/build.txt; exit 1; }
python3 -m pip install -q --no-index --no-deps --no-compile --target /tmp/site /tmp/pw/*.whl || exit 1
python3 -m pip install -q --no-index --no-deps --no-build-isolation -e . > $OUT/install.txt 2>&1 || { tail -30 $OUT/install.txt; exit 1; }
python3 -c 'import onnxruntime; print("onnxruntime", onnxruntime.__version__)' || echo 'NO onnxruntime'
python3 -c "import pocketsphinx, hibari, jiwer, whisper_normalizer, omnibench_core; print('speech ok')" || exit 1
echo "set up in $(( $(date +%s) - t0 )) s"
(date -u; nproc; lscpu | grep 'Model name'; uptime; python3 --version; git log -1 --format=%H 2>&1) > $OUT/host-$COND.txt
PYTHONUNBUFFERED=1 python3 benchmarks/bench_verdicts.py --workloads seedtts --conditions $COND --lanes 8 --lane-cpus 2 \
  --aa 30 --ab 10 --effects 0.10 --rounds 4,8 --max-rounds 12 --modes fixed,sequential --first $FIRST --budget-s $BUDGET --out $OUT/verdicts-seedtts-$COND.jsonl ${EXTRA:-}  # EXTRA last: argparse takes the last of a repeated flag
echo "done in $(( $(date +%s) - t0 )) s"

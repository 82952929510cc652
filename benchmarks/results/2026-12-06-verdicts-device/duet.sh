#!/bin/bash
# issue 43 (b): a duet A/B of seed-tts with a planted delay on this tree and on 4d1217e, side by side
set -u
R=$PWD
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .dev43/whl/*.whl || exit 1
t0=$(date +%s)
ls /tmp/pw/*.whl >/dev/null 2>&1 || CMAKE_BUILD_PARALLEL_LEVEL=16 python3 -m pip wheel -q --no-deps --no-build-isolation --no-index -w /tmp/pw .dev43/src/pocketsphinx-5.1.1.tar.gz > $OUT/build.txt 2>&1 || { tail -30 $OUT/build.txt; exit 1; }
python3 -m pip install -q --no-index --no-deps --target /tmp/site /tmp/pw/*.whl || exit 1
echo "pocketsphinx built in $(( $(date +%s) - t0 )) s"
export PYTHONPATH=/tmp/site
for side in new old; do
  python3 -m venv /tmp/env-$side
  python3 -c "import site; print(site.getsitepackages()[0])" > $(echo /tmp/env-$side/lib/python3*/site-packages)/_device.pth
  src=$R; [ $side = old ] && src=$R/.dev43/old
  /tmp/env-$side/bin/python -m pip install -q --no-index --no-deps --no-build-isolation -e $src >/dev/null 2>&1 || echo "install $side failed"
done
/tmp/env-new/bin/python -c "import pocketsphinx, hibari, jiwer, whisper_normalizer; print('speech ok')"
(date -u; nproc; lscpu | grep 'Model name'; uptime) > $OUT/host-duet.txt
one() {  # side cpus port
  local side=$1 cpus=$2 port=$3 src=$R; [ $side = old ] && src=$R/.dev43/old
  cd $src
  local s=$(date +%s.%N)
  INVOKE_OMNIBENCH_RESULTS=/tmp/res-$side timeout ${LIMIT:-520} taskset -c $cpus /tmp/env-$side/bin/python -m invoke ab \
    --workload seedtts --design duet --slots 0,1 --slot-cpus rule --rounds 4 --opt seedtts.max_samples=6 \
    --b-set local_delay_ms=${DELAY:-90} --port $port --name dev43-plant${TAG:-25} > $OUT/log-$side.txt 2>&1
  local rc=$?
  echo "$side: rc $rc, wall $(python3 -c "import time; print(round(time.time() - $s, 1))") s" | tee -a $OUT/walls.txt
}
one new 0-7 18400 &
one old 8-15 18500 &
wait
uptime >> $OUT/host-duet.txt
for side in new old; do tar -czf $OUT/results-$side.tgz -C /tmp res-$side 2>/dev/null; tail -5 $OUT/log-$side.txt; done

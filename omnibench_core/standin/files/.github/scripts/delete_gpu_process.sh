#!/bin/sh
# delete_gpu_process.sh --kill-orphans: kill every stand-in server still alive (each left a pid
# file in the stand-in's .standin/gpu), then, when nvidia-smi is on PATH, wait until the GPUs of
# CUDA_VISIBLE_DEVICES use less than 1024 MiB (120 s).
cd "$(dirname "$0")/../.."
# servers of a git worktree register in the main checkout's .standin/gpu (sglang_omni_standin.main_root)
common="$(git rev-parse --path-format=absolute --git-common-dir 2>/dev/null || true)"
state="${common%/.git}/.standin/gpu"
[ -n "$common" ] && [ -d "$state" ] || state=.standin/gpu
for f in "$state"/*.pid; do
    [ -e "$f" ] || continue
    pid="$(basename "$f" .pid)"
    if kill -0 "$pid" 2>/dev/null; then
        echo "killing orphaned server $pid"
        kill -9 "$pid" 2>/dev/null || true
    fi
    rm -f "$f"
done
command -v nvidia-smi > /dev/null || { echo "no nvidia-smi: nothing to wait for"; exit 0; }
gpus="${CUDA_VISIBLE_DEVICES:-0}"
i=0
while [ "$i" -lt 120 ]; do
    busy=0
    for used in $(nvidia-smi -i "$gpus" --query-gpu=memory.used --format=csv,noheader,nounits); do
        [ "$used" -lt 1024 ] || busy=1
    done
    [ "$busy" -eq 0 ] && { echo "GPUs $gpus free"; exit 0; }
    i=$((i + 1))
    sleep 1
done
echo "GPUs $gpus still busy after 120 s" >&2
exit 1

"""Hold GPU memory until killed: a stand-in for a server's process group on a real GPU host.

    python benchmarks/gpu_hold.py --gpu 0 --child-gpu 1 --gib 8

The leader allocates on --gpu; with --child-gpu it also spawns a child in the same process group
that allocates on that GPU (orphaned children holding memory are the case GPU_FREE guards).
Needs PyTorch with CUDA; ``--dry-run DIR`` holds nothing and only marks what it would hold, for
the fake ``nvidia-smi`` of benchmarks/dry_gpu.py.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import time
from pathlib import Path


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--gpu", type=int, required=True)
    parser.add_argument("--child-gpu", type=int)
    parser.add_argument("--gib", type=float, default=8.0)
    parser.add_argument("--setsid-child", action="store_true", help="the child leaves the group (os.setsid)")
    parser.add_argument("--setsid", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--dry-run", metavar="DIR", help="hold nothing: mark the hold in DIR (benchmarks/dry_gpu.py)")
    args = parser.parse_args()
    if args.setsid:
        os.setsid()  # escape the server's process group, as a careless pipeline stage might
    if args.child_gpu is not None:
        child = [sys.executable, __file__, "--gpu", str(args.child_gpu), "--gib", str(args.gib)]
        dry = ["--dry-run", args.dry_run] if args.dry_run else []
        subprocess.Popen(child + dry + (["--setsid"] if args.setsid_child else []))
    if args.dry_run:
        from dry_gpu import hold_marker  # next to this script

        hold_marker(Path(args.dry_run), args.gpu, args.gib)
    else:
        import torch

        block = torch.empty(int(args.gib * 2**30), dtype=torch.uint8, device=f"cuda:{args.gpu}")
        block.fill_(1)
        torch.cuda.synchronize(args.gpu)
    print(f"holding {args.gib} GiB on cuda:{args.gpu}" + (" (dry run)" if args.dry_run else ""), flush=True)
    time.sleep(3600)
    return 0


if __name__ == "__main__":
    sys.exit(main())

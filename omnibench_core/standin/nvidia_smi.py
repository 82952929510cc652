"""The stand-in's fake ``nvidia-smi``: the queries omnibench makes, answered from the stand-in's servers.

Each ``sgl-omni serve`` of a stand-in (of its checkout or of any git worktree of it) leaves
``<checkout>/.standin/gpu/<pid>.pid`` holding its ``CUDA_VISIBLE_DEVICES`` and then becomes the
server (same pid). A GPU's memory is ``busy_mib`` per live server on it plus ``idle_mib``, and
its compute processes are those servers, so GPU_FREE and SLOT_FREE see a GPU free exactly when
its servers really stopped. Answered (``-i IDS`` honoured, ids outside the fake's GPUs refused
as the real tool does):

- ``--query-gpu=FIELDS --format=csv,noheader[,nounits]``: index, name, driver_version,
  memory.total, memory.used, pci.bus_id, uuid;
- ``--query-compute-apps=pid,used_memory --format=...``;
- ``-L``.

Standalone (the standard library only): the launcher ``write_fake_nvidia_smi`` writes runs this
file by path, so each call costs one python start and no omnibench import.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

NAME = "Stand-in GPU (no GPU: omnibench standin)"
DRIVER = "0.0-standin"
TOTAL_MIB = 143771


def _alive(pid: str) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except (OSError, IndexError):
        return False


def servers(state: Path) -> dict[str, list[int]]:
    """Live stand-in servers by GPU id: ``{"0": [pid, ...]}`` (a pid file holds CUDA_VISIBLE_DEVICES)."""
    out: dict[str, list[int]] = {}
    for path in sorted(state.glob("*.pid")) if state.is_dir() else []:
        if not path.stem.isdigit() or not _alive(path.stem):
            continue
        try:
            gpus = path.read_text().strip() or "0"
        except OSError:
            continue
        for gpu in gpus.split(","):
            out.setdefault(gpu.strip(), []).append(int(path.stem))
    return out


def _field(name: str, gpu: int, used: int, nounits: bool) -> str | None:
    mib = "" if nounits else " MiB"
    values = {"index": str(gpu), "name": NAME, "driver_version": DRIVER, "memory.total": f"{TOTAL_MIB}{mib}",
              "memory.used": f"{used}{mib}", "pci.bus_id": f"00000000:{gpu + 1:02X}:00.0",
              "uuid": f"GPU-standin-{gpu:04d}"}
    return values.get(name)


def _callers(given: list[str]) -> list[str]:
    """The caller's arguments: ``given`` without the launcher's ``--standin-* VALUE`` pairs."""
    out, skip = [], False
    for arg in given:
        if skip or arg.startswith("--standin-"):
            skip = not skip and "=" not in arg
            continue
        out.append(arg)
    return out


def main(argv: list[str] | None = None) -> int:
    """Answer one call as ``nvidia-smi`` would; exit 6 for a GPU id it does not have, 2 for a query it does not know."""
    p = argparse.ArgumentParser(prog="nvidia-smi (omnibench stand-in fake)", add_help=False)
    p.add_argument("--standin-state", type=Path, required=True)
    p.add_argument("--standin-gpus", type=int, default=2)
    p.add_argument("--standin-busy-mib", type=int, default=20000)
    p.add_argument("--standin-idle-mib", type=int, default=300)
    p.add_argument("--standin-log", type=Path)
    p.add_argument("-i", "--id", dest="ids", default="")
    p.add_argument("--query-gpu", default="")
    p.add_argument("--query-compute-apps", default="")
    p.add_argument("--format", default="")
    p.add_argument("-L", "--list-gpus", action="store_true")
    given = sys.argv[1:] if argv is None else argv
    args, rest = p.parse_known_args(given)
    if args.standin_log:
        with open(args.standin_log, "a") as log:
            log.write(" ".join(_callers(given)) + "\n")
    known = [str(g) for g in range(args.standin_gpus)]
    ids = [g.strip() for g in args.ids.split(",") if g.strip()] or known
    if any(g not in known for g in ids) or rest:
        print("No devices were found" if not rest else f"Invalid combination of input arguments: {' '.join(rest)}")
        return 6
    live = servers(args.standin_state)
    nounits = "nounits" in args.format
    if args.list_gpus:
        for g in ids:
            print(f"GPU {g}: {NAME} (UUID: GPU-standin-{int(g):04d})")
    elif args.query_gpu:
        fields = [f.strip() for f in args.query_gpu.split(",")]
        for g in ids:
            used = args.standin_idle_mib + args.standin_busy_mib * len(live.get(g, []))
            cols = [_field(f, int(g), used, nounits) for f in fields]
            if None in cols:
                print(f'Field "{fields[cols.index(None)]}" is not a valid field to query.')
                return 2
            print(", ".join(c for c in cols if c is not None))
    elif args.query_compute_apps:
        fields = [f.strip() for f in args.query_compute_apps.split(",")]
        mib = "" if nounits else " MiB"
        for g in ids:
            for pid in live.get(g, []):
                row = {"pid": str(pid), "used_memory": f"{args.standin_busy_mib}{mib}", "gpu_uuid": f"GPU-standin-{int(g):04d}"}
                print(", ".join(row.get(f, "[N/A]") for f in fields))
    else:
        print("the stand-in's fake nvidia-smi answers --query-gpu, --query-compute-apps and -L only")
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())

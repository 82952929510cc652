"""A GPU host without GPUs, for the ``--dry-run`` of the real-GPU checks (``gpu_*_check.py``): their
wiring (the holder, the gates, the stops, the scans, the report) runs on any machine, so a change
that breaks a check fails the test suite, not the next session on a GPU host. The figures of a dry
run mean nothing.

``gpu_hold.py --dry-run DIR`` holds no memory: it writes ``DIR/holders/<gpu>.<pid>`` (MiB) and
sleeps. The fake ``nvidia-smi`` made here reports, for each GPU, the memory of the live holders of
that GPU and lists them as compute processes, so GPU_FREE fails while they live and passes once
they are gone, exactly as on a real host. :func:`scripted_nvml` is the tests' NVML stand-in
(tests/fake_nvml.py) for the checks that read NVML.
"""

from __future__ import annotations

import json
import os
import sys
import textwrap
from collections.abc import Sequence
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent

FAKE_NVIDIA_SMI = textwrap.dedent("""\
    #!{python}
    import os, sys
    from pathlib import Path
    HOLDERS, COUNT = Path({holders!r}), {count}

    def alive(pid):
        try:
            state = Path(f"/proc/{{pid}}/stat").read_text().rsplit(")", 1)[1].split()[0]
        except (OSError, IndexError):
            return False
        return state not in ("Z", "X")

    def held():
        out = []
        for marker in HOLDERS.glob("*.*") if HOLDERS.is_dir() else []:
            gpu, pid = marker.name.split(".", 1)
            if pid.isdigit() and alive(int(pid)):
                out.append((gpu, int(pid), int(float(marker.read_text() or 0))))
        return out

    args = sys.argv[1:]
    ids = args[args.index("-i") + 1].split(",") if "-i" in args else [str(i) for i in range(COUNT)]
    nounits = any("nounits" in a for a in args)
    query = next((a.split("=", 1) for a in args if a.startswith("--query-")), None)
    if query is None:
        sys.exit(6)
    kind, fields = query[0], query[1].split(",")
    if kind == "--query-compute-apps":
        for gpu, pid, mib in held():
            if gpu in ids:
                values = {{"pid": str(pid), "gpu_uuid": f"GPU-fake-{{gpu}}", "used_memory": str(mib) if nounits else f"{{mib}} MiB"}}
                print(", ".join(values.get(f, "") for f in fields))
        sys.exit(0)
    for gpu in ids:
        mib = sum(m for g, _, m in held() if g == gpu)
        values = {{"index": gpu, "name": "Fake GPU (dry run)", "driver_version": "0.0", "pci.bus_id": "00000000:FF:00.0",
                  "memory.used": str(mib) if nounits else f"{{mib}} MiB",
                  "memory.total": "143771" if nounits else "143771 MiB"}}
        print(", ".join(values.get(f, "0") for f in fields))
    """)


def fake_gpu_host(folder: Path, gpus: int = 2) -> Path:
    """Write ``folder/bin/nvidia-smi`` for ``gpus`` fake GPUs, put it first on ``PATH`` (this process
    and its children) and return its path; the holders write under ``folder``."""
    (folder / "bin").mkdir(parents=True, exist_ok=True)
    (folder / "holders").mkdir(exist_ok=True)
    smi = folder / "bin" / "nvidia-smi"
    smi.write_text(FAKE_NVIDIA_SMI.format(python=sys.executable, holders=str(folder / "holders"), count=gpus))
    smi.chmod(0o755)
    os.environ["PATH"] = f"{folder / 'bin'}{os.pathsep}{os.environ.get('PATH', '')}"
    return smi


def hold_marker(folder: Path, gpu: int | str, gib: float) -> Path:
    """What ``gpu_hold.py --dry-run`` writes: this process holds ``gib`` GiB on ``gpu``."""
    marker = folder / "holders" / f"{gpu}.{os.getpid()}"
    marker.parent.mkdir(parents=True, exist_ok=True)
    marker.write_text(str(int(gib * 1024)))
    return marker


def scripted_nvml(folder: Path, phases: Sequence[dict[str, Any]]) -> str:
    """Make the tests' scripted NVML (tests/fake_nvml.py) importable, playing ``phases``
    (``{"until_s", "util", "power_w"}``, seconds from nvmlInit); returns its module name."""
    script = folder / "fake_nvml.json"
    script.write_text(json.dumps({"phases": list(phases), "processes": []}))
    os.environ["FAKE_NVML_SCRIPT"] = str(script)
    sys.path.insert(0, str(ROOT / "tests"))
    return "fake_nvml"

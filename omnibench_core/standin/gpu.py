"""A fake ``nvidia-smi`` for a stand-in: memory is in use exactly while a stand-in server lives.

Each ``sgl-omni serve`` leaves ``<checkout>/.standin/gpu/<pid>.pid`` and then becomes the server
(same pid), so the GPU_FREE gate sees memory drop only after the server really stopped.
"""

from __future__ import annotations

import sys
from pathlib import Path

SCRIPT = '''\
#!{python}
import os, pathlib, sys
STATE = pathlib.Path({state!r})
with open(pathlib.Path(__file__).with_name("calls.log"), "a") as log:
    log.write(" ".join(sys.argv[1:]) + "\\n")

def alive(pid):
    try:
        with open(f"/proc/{{pid}}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except (OSError, IndexError):
        return False

live = [p for p in STATE.glob("*.pid") if alive(p.stem)] if STATE.is_dir() else []
used = {busy} * len(live) + {idle}
if "--query-gpu=memory.used" in sys.argv:
    ids = sys.argv[sys.argv.index("-i") + 1].split(",") if "-i" in sys.argv else ["0"]
    for _ in ids:
        print(used)
elif any(a.startswith("--query-gpu=") for a in sys.argv):
    print("0, Stand-in GPU, 0.0, 143771 MiB, 00000000:00:00.0")
else:
    sys.exit(6)
'''


def write_fake_nvidia_smi(folder: Path, checkout: Path, *, busy_mib: int = 20000, idle_mib: int = 300) -> Path:
    """``folder/nvidia-smi`` reporting ``busy_mib`` per live stand-in server of ``checkout``, plus ``idle_mib``."""
    folder.mkdir(parents=True, exist_ok=True)
    script = folder / "nvidia-smi"
    script.write_text(SCRIPT.format(python=sys.executable, state=str(checkout.resolve() / ".standin" / "gpu"),
                                    busy=busy_mib, idle=idle_mib))
    script.chmod(0o755)
    return script

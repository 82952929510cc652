"""A fake `nvidia-smi` for machines without a GPU, and what it was asked."""

from __future__ import annotations

import json
import sys
import textwrap
from pathlib import Path


def write_fake_nvidia_smi(folder: Path, values_mib: list[int], *, fail: bool = False,
                          apps: list[tuple[int, int]] = ()) -> Path:
    """A fake `nvidia-smi`: prints the next memory value on each memory query (the last one
    repeats), the compute processes ``apps`` (pid, MiB; none by default), and logs its argv to
    calls.log next to it."""
    folder.mkdir(parents=True, exist_ok=True)
    script = folder / "nvidia-smi"
    # -S: the standard library is all it needs, and the suite calls fakes over a thousand times
    script.write_text(textwrap.dedent(f"""\
        #!{sys.executable} -S
        import json, pathlib, sys
        here = pathlib.Path(__file__).parent
        calls = here / "calls.log"
        with calls.open("a") as f:
            f.write(json.dumps(sys.argv[1:]) + "\\n")
        n = sum("--query-gpu=memory.used" in line for line in calls.read_text().splitlines()) - 1
        values = {json.dumps(values_mib)}
        if {fail!r}:
            print("NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver", file=sys.stderr)
            sys.exit(9)
        if "--query-gpu=memory.used" in sys.argv:
            ids = sys.argv[sys.argv.index("-i") + 1].split(",")
            for _ in ids:
                print(values[min(n, len(values) - 1)])
        elif any(a.startswith("--query-compute-apps") for a in sys.argv):
            for pid, mib in {json.dumps(list(apps))}:
                print(f"{{pid}}, {{mib}}")
        else:
            sys.exit(6)
        """))
    script.chmod(0o755)
    return script


def fake_calls(folder: Path) -> list[list[str]]:
    """The argv of every call the fake nvidia-smi received."""
    log = folder / "calls.log"
    return [json.loads(line) for line in log.read_text().splitlines()] if log.exists() else []

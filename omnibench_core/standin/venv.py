"""The stand-in's ``omni`` venv: a real venv whose python sees omnibench and the checkout.

It plays the part of sglang-omni's venv (``pip install -e .`` of the checkout): a ``.pth`` file
adds the site-packages of the python that has omnibench and the checkout root, and ``bin/sgl-omni``
is the checkout's ``sgl-omni`` command. Also run by the checkout's ``prepare_omni_venv.sh``:

    python -m omnibench_core.standin.venv --checkout DIR --name omni
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import sysconfig
from pathlib import Path

from ..errors import OmnibenchError

# A POSIX sh launcher: no shebang to a long python path, and `exec` keeps the caller's pid.
SGL_OMNI = '#!/bin/sh\nexec "$(dirname "$0")/python" -m sglang_omni_standin.cli "$@"\n'


def site_dirs() -> list[str]:
    """Where this python finds omnibench (purelib and platlib, once each)."""
    paths = sysconfig.get_paths()
    return list(dict.fromkeys([paths["purelib"], paths["platlib"]]))


def make_venv(checkout: Path, name: str = "omni") -> Path:
    """(Re)build ``<checkout>/<name>`` and return it."""
    checkout = checkout.resolve()
    venv = checkout / name
    done = subprocess.run([sys.executable, "-m", "venv", "--clear", "--without-pip", str(venv)],
                          capture_output=True, text=True, check=False)
    if done.returncode != 0:
        raise OmnibenchError(f"python -m venv {venv} failed", evidence={"output": (done.stdout + done.stderr).strip()},
                             hint="install the venv module of this python (e.g. apt install python3-venv)")
    site = next(venv.glob("lib/python*/site-packages"))
    lines = [f"import site; site.addsitedir({d!r})" for d in site_dirs()] + [str(checkout)]
    (site / "omnibench_standin.pth").write_text("\n".join(lines) + "\n")
    serve = venv / "bin" / "sgl-omni"
    serve.write_text(SGL_OMNI)
    serve.chmod(0o755)
    return venv


def main(argv: list[str] | None = None) -> int:
    """Command line for ``prepare_omni_venv.sh``."""
    p = argparse.ArgumentParser(prog="python -m omnibench_core.standin.venv")
    p.add_argument("--checkout", type=Path, required=True)
    p.add_argument("--name", default="omni")
    a = p.parse_args(argv)
    print(f"venv ready: {make_venv(a.checkout, a.name)}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())

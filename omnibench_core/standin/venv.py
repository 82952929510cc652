"""The stand-in's ``omni`` venv, in upstream's layout: built at ``$OMNI_CI_HOME/<name>``, with
``<checkout>/<name>`` a symlink to it, and the checkout's package installed editable.

Upstream's newest ``.github/scripts/prepare_omni_venv.sh <name>`` (tests/fixtures/upstream/
ci-scripts.json records it and the commit) makes the venv at ``$OMNI_CI_HOME/<name>`` with
``uv venv --system-site-packages`` on the image's python 3.12, writes ``sglang-image.pth`` (an
``import site; site.addsitedir(...)`` line for the image's own site-packages, an ``/opt/sglang``
virtualenv outside the system's) and ``cosyvoice.pth`` (two source folders, a CosyVoice checkout
under the venv and its Matcha-TTS), replaces ``./<name>`` with a symlink to it and runs ``uv pip
install --no-deps -e .``: so ``omni/bin/sgl-omni`` is a console script whose ``#!`` line is the
absolute path of ``$OMNI_CI_HOME/<name>/bin/python``, the editable install's ``.pth`` and
``direct_url.json`` name the tree that built it, and three kinds of ``.pth`` put folders on
``sys.path``. The stand-in is made the same way, so whatever would serve another revision's code
upstream does here too: ``--system-site-packages`` (the base python's site-packages, and the user
site, come after the venv's own), ``sglang-image.pth`` naming the site-packages of the python that
has omnibench (the stand-in's "image": its local server), ``cosyvoice.pth`` naming the same two
folders under the venv (empty: the stand-in has no CosyVoice model). The venv's python is the one
that has omnibench (``sys.executable``), not 3.12: the image's compiled packages are that
python's (docs/fidelity.md says why).

The editable install is written here, file for file as pip writes one for a setuptools project
whose packages sit at the root (``__editable__.<dist>-<version>.pth`` holding the checkout's root,
a ``.dist-info`` with ``METADATA``, ``entry_points.txt``, ``direct_url.json`` with
``dir_info.editable``, ``RECORD``, and the console scripts of ``[project.scripts]``): pip cannot do
it offline on every host (setuptools' editable wheel needs the ``wheel`` package, which a python
3.11 venv lacks) and took 25 s where this takes milliseconds. Also run by the checkout's
``prepare_omni_venv.sh``:

    python -m omnibench_core.standin.venv --checkout DIR --name omni --home "$OMNI_CI_HOME"
"""

from __future__ import annotations

import argparse
import base64
import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
import sysconfig
from pathlib import Path

from ..errors import OmnibenchError
from ..setup.checkout_layout import SERVE_SCRIPT, console_script

IMAGE_PTH = "sglang-image.pth"  # upstream's name; here: the python that has omnibench, seen from the venv
COSYVOICE_PTH = "cosyvoice.pth"  # upstream's name: the CosyVoice checkout and its Matcha-TTS, under the venv
COSYVOICE_DIRS = ("src/CosyVoice", "src/CosyVoice/third_party/Matcha-TTS")  # relative to the venv, as upstream's
DIST, VERSION = "sglang_omni_standin", "0.0.0"  # the stand-in's pyproject.toml: sglang-omni-standin 0.0.0
MAX_SHEBANG = 127  # as pip (distlib) on Linux: a longer #! line becomes an sh `exec` of the python


def site_dirs() -> list[str]:
    """Where this python finds omnibench (purelib and platlib, once each)."""
    paths = sysconfig.get_paths()
    return list(dict.fromkeys([paths["purelib"], paths["platlib"]]))


def shebang(python: Path) -> str:
    """A console script's first lines for ``python``, as pip writes them: ``#!<python>``, or for a
    path too long for the kernel's ``#!`` line (or with a space), an sh ``exec`` of it."""
    line = f"#!{python}"
    if len(line) <= MAX_SHEBANG and " " not in str(python):
        return line + "\n"
    return f"#!/bin/sh\n'''exec' \"{python}\" \"$0\" \"$@\"\n' '''\n"


def console_script_text(python: Path, entry: str) -> str:
    """The console script pip writes for ``module:attr``."""
    module, attr = entry.split(":", 1)
    return (shebang(python) + "# -*- coding: utf-8 -*-\nimport re\nimport sys\n"
            f"from {module} import {attr.split('.')[0]}\n"
            "if __name__ == '__main__':\n"
            "    sys.argv[0] = re.sub(r'(-script\\.pyw|\\.exe)?$', '', sys.argv[0])\n"
            f"    sys.exit({attr}())\n")


def record_row(site: Path, path: Path) -> str:
    """A ``RECORD`` line: the path relative to site-packages, its sha256 (urlsafe base64) and size."""
    data = path.read_bytes()
    digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
    return f"{os.path.relpath(path, site)},sha256={digest},{len(data)}"


def _scripts(checkout: Path) -> dict[str, str]:
    """``[project.scripts]`` of the checkout that the stand-in installs (``sgl-omni`` at least)."""
    entry = console_script(checkout, SERVE_SCRIPT)
    if not entry or ":" not in entry:
        raise OmnibenchError(f"{checkout / 'pyproject.toml'} declares no `{SERVE_SCRIPT} = \"module:attr\"` under "
                             "[project.scripts]", hint="the stand-in's pyproject.toml declares it; remake the stand-in")
    return {SERVE_SCRIPT: entry}


def install_editable(venv: Path, checkout: Path) -> Path:
    """Install ``checkout`` editable into ``venv`` as pip does; returns the ``.dist-info`` folder."""
    site = next(venv.glob("lib/python*/site-packages"))
    python = venv / "bin" / "python"
    pth = site / f"__editable__.{DIST}-{VERSION}.pth"
    pth.write_text(f"{checkout}\n")
    written = [pth]
    scripts = _scripts(checkout)
    for name, entry in scripts.items():
        script = venv / "bin" / name
        script.write_text(console_script_text(python, entry))
        script.chmod(0o755)
        written.append(script)
    info = site / f"{DIST}-{VERSION}.dist-info"
    info.mkdir(exist_ok=True)
    files = {
        "METADATA": f"Metadata-Version: 2.1\nName: sglang-omni-standin\nVersion: {VERSION}\nRequires-Dist: omnibench\n",
        "WHEEL": "Wheel-Version: 1.0\nGenerator: omnibench standin\nRoot-Is-Purelib: true\nTag: py3-none-any\n",
        "entry_points.txt": "[console_scripts]\n" + "".join(f"{n} = {e}\n" for n, e in scripts.items()),
        "direct_url.json": json.dumps({"dir_info": {"editable": True}, "url": checkout.as_uri()}) + "\n",
        "top_level.txt": DIST + "\n",
        "INSTALLER": "omnibench\n",
        "REQUESTED": "",
    }
    for name, text in files.items():
        (info / name).write_text(text)
        written.append(info / name)
    rows = [record_row(site, p) for p in written] + [f"{os.path.relpath(info / 'RECORD', site)},,"]
    (info / "RECORD").write_text("\n".join(rows) + "\n")
    return info


def make_venv(checkout: Path, name: str = "omni", home: Path | None = None) -> Path:
    """(Re)build the venv at ``home/<name>`` (``home``: ``$OMNI_CI_HOME``), make ``<checkout>/<name>``
    a symlink to it and install the checkout editable; returns the venv's real folder."""
    checkout = checkout.resolve()
    if home is None:
        env_home = os.environ.get("OMNI_CI_HOME", "")
        if not env_home:
            raise OmnibenchError("OMNI_CI_HOME is not set", hint="pass --home or set OMNI_CI_HOME, as CI does")
        home = Path(env_home)
    venv = Path(os.path.abspath(home)) / name
    venv.parent.mkdir(parents=True, exist_ok=True)
    done = subprocess.run([sys.executable, "-m", "venv", "--clear", "--without-pip", "--system-site-packages", str(venv)],
                          capture_output=True, text=True, check=False)
    if done.returncode != 0:
        raise OmnibenchError(f"python -m venv {venv} failed", evidence={"output": (done.stdout + done.stderr).strip()},
                             hint="install the venv module of this python (e.g. apt install python3-venv)")
    site = next(venv.glob("lib/python*/site-packages"))
    # upstream's image line: addsitedir, so the image's own .pth files (an editable install there) work too
    (site / IMAGE_PTH).write_text("".join(f"import site; site.addsitedir({d!r})\n" for d in site_dirs()))
    sources = [venv / d for d in COSYVOICE_DIRS]
    for folder in sources:
        folder.mkdir(parents=True, exist_ok=True)
    (site / COSYVOICE_PTH).write_text("".join(f"{folder}\n" for folder in sources))
    link = checkout / name
    if link.is_symlink() or link.is_file():
        link.unlink()
    elif link.exists():
        shutil.rmtree(link)
    link.symlink_to(venv, target_is_directory=True)
    install_editable(venv, checkout)
    return venv


def main(argv: list[str] | None = None) -> int:
    """Command line for ``prepare_omni_venv.sh``."""
    p = argparse.ArgumentParser(prog="python -m omnibench_core.standin.venv")
    p.add_argument("--checkout", type=Path, required=True, help="the checkout to install editable")
    p.add_argument("--name", default="omni", help="the venv's name: $OMNI_CI_HOME/NAME, and ./NAME links to it")
    p.add_argument("--home", type=Path, default=None, help="where the venv is built (default: $OMNI_CI_HOME)")
    a = p.parse_args(argv)
    if not re.fullmatch(r"[A-Za-z0-9._-]+", a.name) or a.name in (".", ".."):
        p.error(f"--name {a.name!r} must be a plain folder name")
    print(f"venv ready: {make_venv(a.checkout, a.name, a.home)} (linked from {a.checkout.resolve() / a.name})", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())

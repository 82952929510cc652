"""Checkouts for the scale tests.

The tests make theirs with the real `invoke standin` (``invoke_standin``), as a user does, and run
the scale commands with a PATH that holds no nvidia-smi but the stand-in's fake
(``path_without_nvidia_smi``). ``make_revisions_checkout`` is a smaller checkout of the same shape
whose `sgl-omni` the caller replaces: the benchmarks use it (benchmarks/gpu_matrix_check.py starts
a real GPU load with each server, which no stand-in does)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
import textwrap
from dataclasses import dataclass
from pathlib import Path

from run_helpers import REPO

# A fake sgl-omni's answer to `serve --help`, one python line after `args = sys.argv[1:]`: the
# ConfigPatch era's serve, as the target asks it before it starts one
SERVE_HELP = ('if "--help" in args: sys.exit(print("Usage: sgl-omni serve [OPTIONS]", '
              '"  --model-path TEXT  --port INTEGER  --delay FLOAT", sep=chr(10)))')
SGL_OMNI = textwrap.dedent(f"""\
    #!{sys.executable}
    import json, os, sys
    from pathlib import Path
    checkout = Path(sys.argv[0]).parent.parent.parent  # <checkout>/omni/bin/sgl-omni, as the target starts it
    args = sys.argv[1:]
    {SERVE_HELP}
    port = args[args.index("--port") + 1]
    delay = args[args.index("--delay") + 1] if "--delay" in args else "0.05"
    ms = json.loads((checkout / "standin.json").read_text()).get("delay_ms", 0)
    os.execv(sys.executable, [sys.executable, "-m", "omnibench_core.builtin.selftest_programs", "serve", "--port", port,
                              "--delay", delay, "--delay-ms", str(ms)])
    """)

PREPARE = textwrap.dedent("""\
    #!/bin/sh
    set -eu
    venv="${1:-omni}"
    cd "$(dirname "$0")/../.."
    rm -rf "$OMNI_CI_HOME" && mkdir -p "$OMNI_CI_HOME" "$venv/bin"
    ln -sf "$(cat .python)" "$venv/bin/python"
    cp .github/scripts/sgl-omni "$venv/bin/sgl-omni" && chmod +x "$venv/bin/sgl-omni"
    . .github/scripts/omni_ci_deps_hash.sh
    omni_ci_deps_hash > "$OMNI_CI_HOME/.deps-hash"
    echo built
    """)

HASH = "omni_ci_deps_hash() {\n    cat deps.txt | sha256sum | cut -d' ' -f1\n}\n"


def make_revisions_checkout(root: Path, delays_ms: list[float], deps_change_at: int | None = None, *,
                            sgl_omni: str = SGL_OMNI, scripts_extra: dict[str, str] | None = None) -> list[str]:
    """A git repo with one commit per delay (oldest first); returns the full commits.
    ``deps_change_at``: from that commit index on, deps.txt differs (a venv rebuild). ``sgl_omni``
    replaces the launcher; ``scripts_extra`` adds files beside it (benchmarks/gpu_matrix_check.py
    launches a GPU load with the server)."""
    scripts = root / ".github" / "scripts"
    scripts.mkdir(parents=True)
    (scripts / "omni_ci_deps_hash.sh").write_text(HASH)
    (scripts / "prepare_omni_venv.sh").write_text(PREPARE)
    (scripts / "sgl-omni").write_text(sgl_omni)
    for name, text in (scripts_extra or {}).items():
        (scripts / name).write_text(text)
    (root / ".python").write_text(sys.executable + "\n")
    (root / ".gitignore").write_text("omni/\n")
    git = ["git", "-C", str(root), "-c", "user.name=t", "-c", "user.email=t@t"]
    subprocess.run(["git", "init", "-q", str(root)], check=True)
    commits = []
    for i, ms in enumerate(delays_ms):
        (root / "standin.json").write_text(json.dumps({"commit": i, "delay_ms": ms}))
        deps = "deps v2\n" if deps_change_at is not None and i >= deps_change_at else "deps v1\n"
        (root / "deps.txt").write_text(deps)
        subprocess.run([*git, "add", "-A"], check=True)
        subprocess.run([*git, "commit", "-qm", f"commit {i}: {ms} ms"], check=True)
        commits.append(subprocess.run([*git, "rev-parse", "HEAD"], capture_output=True, text=True, check=True).stdout.strip())
    return commits


def server_pids(root: Path) -> list[int]:
    """Live selftest servers (by command line) working in a folder under ``root`` (this test's: other
    tests may run servers at the same time), for the no-server-left checks."""
    out = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                cmd = (entry / "cmdline").read_bytes().replace(b"\0", b" ")
                state = (entry / "stat").read_text().rsplit(")", 1)[1].split()[0]
                cwd = Path(os.readlink(entry / "cwd"))
            except OSError:
                continue
            if (b"omnibench_core.builtin.selftest_programs serve" in cmd or b"omnibench_core.builtin.selftest serve" in cmd) \
                    and state != "Z" and (cwd == root or root in cwd.parents):
                out.append(int(entry.name))
    return out


@dataclass(frozen=True)
class MadeStandin:
    """What `invoke standin` made, read back from its output and its git history."""

    root: Path
    commits: tuple[str, ...]  # oldest first
    head: str  # the newest commit
    venv: Path  # its `omni` venv
    fake_gpus: Path | None
    output: str


def _without_nvidia_smi(folder: Path) -> Path:
    """``folder`` itself, or (when it holds an nvidia-smi, as /usr/bin does on a GPU host) a mirror
    of it made of links to everything else, so git, bash and the rest stay on PATH."""
    if not (folder / "nvidia-smi").exists():
        return folder
    mirror = Path(tempfile.gettempdir()) / f"omnibench-no-nvidia-smi-{os.getpid()}" / folder.as_posix().strip("/").replace("/", "_")
    if not mirror.is_dir():
        mirror.mkdir(parents=True)
        for entry in folder.iterdir():
            if entry.name != "nvidia-smi":
                (mirror / entry.name).symlink_to(entry)
    return mirror


def path_without_nvidia_smi(*first: Path) -> str:
    """``first``, the folder of this python (where `invoke` is), then this PATH with every
    nvidia-smi left out: a machine without a GPU, whatever this one has."""
    folders = [str(f) for f in first]
    for folder in [str(Path(sys.executable).parent), *os.environ.get("PATH", "").split(os.pathsep)]:
        if folder and folder not in folders and Path(folder).is_dir():
            folders.append(str(_without_nvidia_smi(Path(folder))))
    path = os.pathsep.join(folders)
    found = shutil.which("nvidia-smi", path=path)
    assert found is None or any(Path(found).parent == Path(f) for f in first), found
    return path


def invoke_standin(out: Path, *flags: str, timeout: float = 600) -> MadeStandin:
    """Run `invoke standin --out OUT FLAGS...` from the repository root, as the README shows it."""
    done = subprocess.run([sys.executable, "-m", "invoke", "standin", "--out", str(out), *flags], cwd=REPO,
                          capture_output=True, text=True, timeout=timeout, env={**os.environ, "PATH": path_without_nvidia_smi()})
    assert done.returncode == 0, done.stdout + done.stderr
    assert f"STANDIN_OK {out.resolve()}" in done.stdout
    commits = subprocess.run(["git", "-C", str(out), "rev-list", "--reverse", "HEAD"], capture_output=True, text=True,
                             check=True).stdout.split()
    fake = Path(flags[flags.index("--fake-gpus") + 1]).resolve() if "--fake-gpus" in flags else None
    return MadeStandin(out.resolve(), tuple(commits), commits[-1], out.resolve() / "omni", fake, done.stdout)

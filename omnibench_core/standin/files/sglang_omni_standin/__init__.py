"""The stand-in's own code: the ``sgl-omni`` command, its settings file and its data map.

Nothing here is sglang-omni's code: each program is written from omnibench's reading of the
interface (``shared/spec/sglang-omni-interface.md``) and runs omnibench's CPU server, clients and
scorers, so an sglang-omni-shaped checkout runs end to end without a GPU.
"""

from __future__ import annotations

import json
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SETTINGS_FILE = "standin.json"


def main_root(root: Path = ROOT) -> Path:
    """The stand-in's own checkout, also from a ``git worktree`` of it (whose ``.git`` is a file
    naming ``<checkout>/.git/worktrees/<name>``): every worktree's servers register there, so one
    fake nvidia-smi sees them all."""
    dot_git = root / ".git"
    if not dot_git.is_file():
        return root
    text = dot_git.read_text().strip()
    if not text.startswith("gitdir:"):
        return root
    gitdir = (root / text.split(":", 1)[1].strip()).resolve()
    common = gitdir / "commondir"
    git_dir = (gitdir / common.read_text().strip()).resolve() if common.is_file() else gitdir.parent.parent
    return git_dir.parent if git_dir.name == ".git" else root


def settings() -> dict:
    """This commit's ``standin.json`` (added latency, CI thresholds); empty when there is none."""
    path = ROOT / SETTINGS_FILE
    return json.loads(path.read_text()) if path.is_file() else {}

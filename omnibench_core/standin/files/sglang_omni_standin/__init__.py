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


MAX_SETTINGS_BYTES = 1 << 20  # a few numbers and words; a bigger file is not one invoke standin wrote


class SettingsFileError(ValueError):
    """This commit's ``standin.json`` cannot be read as the settings object ``invoke standin``
    writes (hand-edited); its message is the one line a stand-in program prints before exiting 2."""


def settings() -> dict:
    """This commit's ``standin.json`` (added latency, CI thresholds); empty when there is none.
    One that is not a JSON object (not JSON, nested past what Python parses, over
    :data:`MAX_SETTINGS_BYTES`, not valid UTF-8) raises :class:`SettingsFileError`, never a traceback."""
    path = ROOT / SETTINGS_FILE
    if not path.is_file():
        return {}
    fix = "fix it in this commit's standin.json or make the checkout again with invoke standin"
    try:
        with open(path, "rb") as handle:
            raw = handle.read(MAX_SETTINGS_BYTES + 1)
        if len(raw) > MAX_SETTINGS_BYTES:
            raise SettingsFileError(f"{path} is over {MAX_SETTINGS_BYTES} bytes, not the stand-in's settings; {fix}")
        data = json.loads(raw.decode("utf-8"))
    except (OSError, UnicodeDecodeError) as exc:
        raise SettingsFileError(f"{path} cannot be read ({exc}); {fix}") from None
    except RecursionError:
        raise SettingsFileError(f"{path} nests JSON deeper than Python parses; {fix}") from None
    except ValueError as exc:
        raise SettingsFileError(f"{path} is not JSON ({exc}); {fix}") from None
    if not isinstance(data, dict):
        raise SettingsFileError(f"{path} holds a JSON {type(data).__name__}, not an object of settings; {fix}")
    return data

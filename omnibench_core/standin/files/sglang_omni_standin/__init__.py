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


def settings() -> dict:
    """This commit's ``standin.json`` (added latency, CI thresholds); empty when there is none."""
    path = ROOT / SETTINGS_FILE
    return json.loads(path.read_text()) if path.is_file() else {}

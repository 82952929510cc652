"""Strict JSON written atomically: a reader never sees half a file, and no bare NaN/Infinity."""

from __future__ import annotations

import json
import math
import os
import tempfile
from pathlib import Path
from typing import Any


def _umask() -> int:
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


# Files get the mode any file of this process gets (mkstemp alone would make them 0600).
_FILE_MODE = 0o666 & ~_umask()


def strict(value: Any) -> Any:
    """``value`` with every non-finite float as None, for strict JSON."""
    # Non-finite floats become null: sglang-omni's client writes a bare Infinity that strict
    # parsers reject; omnibench never does.
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, dict):
        return {str(k): strict(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [strict(v) for v in value]
    return value


def write_json(path: str | os.PathLike[str], data: Any) -> Path:
    """Write ``data`` as strict, indented JSON via a temp file and rename in the same folder."""
    target = Path(path)
    target.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".tmp", dir=target.parent)
    try:
        os.fchmod(fd, _FILE_MODE)
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            json.dump(strict(data), handle, indent=2, allow_nan=False)
            handle.write("\n")
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(tmp, target)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return target


def read_json(path: str | os.PathLike[str]) -> Any:
    """Read JSON; Python's reader also accepts the bare Infinity sglang-omni writes."""
    with open(path, encoding="utf-8") as handle:
        return json.load(handle)

"""Strict JSON written atomically: a reader never sees half a file, and no bare NaN/Infinity.

An atomic write renames a finished temporary file onto its target, which replaces whatever the
target was. Only a regular file (or nothing) is replaced so: a target that is a device, a FIFO or
a socket (``--json /dev/stdout``, ``--summary /dev/full``) is written to directly, as any program
writing to it would (a device's error is the write's error, ENOSPC for /dev/full); a folder is
refused (IsADirectoryError). The device itself is never turned into a regular file.

JSON is read with one depth limit (:data:`MAX_DEPTH`): a file nested deeper is a typed
:class:`.errors.RunFileError` naming it, never a RecursionError. A file is read only when it is a
regular file of at most :data:`MAX_BYTES` (:class:`.errors.JsonTooBig` otherwise): a campaign file
planted as a FIFO would wait for a writer for ever, and a 3 GB one was read whole (issue 46).
"""

from __future__ import annotations

import errno
import json
import math
import os
import re
import stat
import tempfile
from itertools import accumulate
from pathlib import Path
from typing import Any

from .errors import JsonTooBig, JsonTooDeep

# The one depth limit of every JSON file omnibench reads: its own files nest under 10 levels;
# Python's reader recurses once per level and would end a deeper file in a RecursionError.
MAX_DEPTH = 200
# The one size bound of every JSON file omnibench reads: its largest (a full run's per-request rows)
# are a few MB; a file past this is not one omnibench or sglang-omni wrote.
MAX_BYTES = 64 * 1024 * 1024
_STRING = re.compile(rb'"[^"\\]*(?:\\.[^"\\]*)*"', re.S)  # a JSON string, escapes included
_NOT_BRACKET = bytes(b for b in range(256) if b not in b"[]{}")


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


def not_regular(path: Path) -> bool:
    """Whether ``path`` (links followed) exists and is something a rename must not replace: a
    device, a FIFO, a socket. A folder raises IsADirectoryError (nothing is written into one)."""
    try:
        mode = os.stat(path).st_mode
    except FileNotFoundError:
        return False
    if stat.S_ISDIR(mode):
        raise IsADirectoryError(21, "Is a directory", str(path))
    return not stat.S_ISREG(mode)


def write_text(path: str | os.PathLike[str], text: str, temporary: str | None = None) -> Path:
    """Write ``text`` to ``path`` whole or not at all: a temporary file in the same folder, fsync,
    rename. A target that is not a regular file (a device, a FIFO) is written to directly and
    never replaced (see the module's note); a folder is refused with IsADirectoryError.

    ``temporary``: a fixed name for the temporary file in the target's folder, for a writer that
    holds that folder (a report under its lock), so its leftovers have a known name; by default a
    unique one, safe for writers that do not take turns."""
    target = Path(path)
    if not_regular(target):
        with open(target, "w", encoding="utf-8") as handle:
            handle.write(text)
        return target
    target.parent.mkdir(parents=True, exist_ok=True)
    if temporary is None:
        fd, tmp = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".tmp", dir=target.parent)
    else:
        tmp = str(target.parent / Path(temporary).name)
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW, _FILE_MODE)
    try:
        os.fchmod(fd, _FILE_MODE)
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            handle.write(text)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(tmp, target)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return target


def write_json(path: str | os.PathLike[str], data: Any) -> Path:
    """Write ``data`` as strict, indented JSON, atomically (:func:`write_text`)."""
    return write_text(path, json.dumps(strict(data), indent=2, allow_nan=False) + "\n")


def nesting(raw: str | bytes) -> int:
    """How deep the arrays and objects of the JSON text ``raw`` nest (brackets inside strings
    not counted), found without parsing it: what :func:`loads` compares with :data:`MAX_DEPTH`."""
    data = raw.encode("utf-8", "surrogatepass") if isinstance(raw, str) else raw
    brackets = _STRING.sub(b"", data).translate(None, delete=_NOT_BRACKET)
    return max(accumulate(1 if b in b"[{" else -1 for b in brackets), default=0)


def loads(raw: str | bytes, source: str | os.PathLike[str]) -> Any:
    """``raw`` (the text of ``source``, a file or where the bytes came from) as JSON, nested at
    most :data:`MAX_DEPTH` deep: a deeper one is a :class:`.errors.JsonTooDeep` naming ``source``
    (a ValueError too, so a reader that turns an unreadable file into its own typed error does so
    here as well). Python's reader also accepts the bare Infinity sglang-omni writes."""
    opening = raw.count("[") + raw.count("{") if isinstance(raw, str) else raw.count(b"[") + raw.count(b"{")
    depth = nesting(raw) if opening > MAX_DEPTH else 0  # fewer brackets cannot nest deeper: no scan
    if depth > MAX_DEPTH:
        raise JsonTooDeep(f"{source} nests JSON {depth} levels deep; omnibench reads at most {MAX_DEPTH}"
                          " (not written by omnibench: move it aside)",
                          evidence={"file": str(source), "depth": depth, "limit": MAX_DEPTH},
                          hint="the file was not written by omnibench or sglang-omni: move it aside")
    try:
        return json.loads(raw)
    except RecursionError:  # a JSON reader nested under a deep stack: still the file's fault, named
        raise JsonTooDeep(f"{source} nests JSON too deep to read here", evidence={"file": str(source),
                          "limit": MAX_DEPTH}, hint="move the file aside") from None


_KINDS = ((stat.S_ISDIR, "a folder"), (stat.S_ISFIFO, "a FIFO (a named pipe)"), (stat.S_ISCHR, "a character device"),
          (stat.S_ISBLK, "a block device"), (stat.S_ISSOCK, "a socket"))


class NotReadable(ValueError):
    """A file :func:`read_bounded` refuses: ``kind`` names what it is when it is not a regular file
    (``"a FIFO (a named pipe)"``), else ``size`` is the bytes it holds (or grew to while read)."""

    def __init__(self, path: str, kind: str | None, size: int, max_bytes: int):
        self.path, self.kind, self.size, self.max_bytes = path, kind, size, max_bytes
        super().__init__(f"{path} is {kind}, not a regular file" if kind else
                         f"{path} holds {size:,} bytes, over the {max_bytes:,} it may hold")


def read_bounded(path: str | os.PathLike[str], max_bytes: int) -> bytes:
    """The bytes of the regular file ``path``, at most ``max_bytes``: the one bounded read under
    every file omnibench reads (its records here, a file a user names in ``records.user_files``).
    Opened without blocking and checked on the open descriptor, so a FIFO never holds the read, a
    device (``/dev/zero``) is never read without end, and a file swapped for either between a look
    and the read is still refused (:class:`NotReadable`); a file that grows while read is cut at the
    bound and refused too. A missing or unreadable file raises as ``os.open`` does."""
    fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_NOCTTY | getattr(os, "O_CLOEXEC", 0))
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            kind = next((word for test, word in _KINDS if test(info.st_mode)), "not a regular file")
            raise NotReadable(str(path), kind, 0, max_bytes)
        if info.st_size > max_bytes:
            raise NotReadable(str(path), None, info.st_size, max_bytes)
        data = bytearray()
        while len(data) <= max_bytes:
            chunk = os.read(fd, min(1 << 20, max_bytes + 1 - len(data)))
            if not chunk:
                break
            data += chunk
        if len(data) > max_bytes:
            raise NotReadable(str(path), None, len(data), max_bytes)
        return bytes(data)
    finally:
        os.close(fd)


def read_json(path: str | os.PathLike[str]) -> Any:
    """Read a JSON file (see :func:`loads`: one depth limit, a typed error naming the file): a
    regular file of at most :data:`MAX_BYTES` (:func:`read_bounded`), else
    :class:`.errors.JsonTooBig` (a missing file or a folder raise as ``open`` does)."""
    try:
        raw = read_bounded(path, MAX_BYTES)
    except NotReadable as exc:
        if exc.kind == "a folder":
            raise IsADirectoryError(errno.EISDIR, os.strerror(errno.EISDIR), str(path)) from None
        what = f"{exc.kind}, not a regular file" if exc.kind else f"{exc.size:,} bytes, over the {MAX_BYTES:,} omnibench reads"
        raise JsonTooBig(f"{path} is {what}", evidence={"file": str(path), "limit_bytes": MAX_BYTES},
                         hint="the file was not written by omnibench or sglang-omni: move it aside") from None
    return loads(raw.decode("utf-8"), path)

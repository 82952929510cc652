"""A file a user names as a workload option (``--opt seedtts.warmup_meta=PATH``), read and
checked when the options are parsed: before the target is prepared, a run folder exists or any
server starts (issue 46). What a client would otherwise meet late, as a traceback, or never get
past is refused in one line naming the option:

- not there, or not readable;
- not a regular file: a FIFO (opening one to read waits for a writer for ever), a device
  (``/dev/zero`` reads without end), a socket or a folder; links are followed to what they name;
- over :data:`MAX_BYTES` (a seed-tts ``meta.lst`` of the runbook's 1088 samples is about 200 KB);
- not UTF-8 (the clients read it as UTF-8, as sglang-omni's do).

The file is opened without blocking and checked on the open descriptor, so a regular file swapped
for a FIFO between a look and the read is still refused.
"""

from __future__ import annotations

import errno
import os

from ..jsonio import NotReadable, read_bounded

MAX_BYTES = 16 * 1024 * 1024  # 80 times the runbook's whole seed-tts list: more is not a list of samples


class UserFileError(ValueError):
    """A named file that cannot be used; the text says why, in words a refusal can quote."""


def read_user_file(path_text: str, max_bytes: int = MAX_BYTES) -> str:
    """The text of the regular file ``path_text`` (``~`` expanded), at most ``max_bytes`` bytes of
    UTF-8 (the bounded read of :func:`omnibench_core.jsonio.read_bounded`); raises
    :class:`UserFileError` saying why not."""
    path = os.path.expanduser(path_text)
    try:
        data = read_bounded(path, max_bytes)
    except NotReadable as exc:
        if exc.kind:
            raise UserFileError(f"{path} is {exc.kind}, not a regular file") from None
        raise UserFileError(f"{path} holds {exc.size:,} bytes, over the {max_bytes:,} a named file may hold") from None
    except OSError as exc:
        why = {errno.ENOENT: "no such file", errno.EACCES: "it cannot be read (permission denied)",
               errno.ENOTDIR: "a part of its path is not a folder", errno.ELOOP: "it is a loop of links"}
        raise UserFileError(f"{path}: {why.get(exc.errno or 0, exc.strerror or str(exc))}") from None
    try:
        return bytes(data).decode("utf-8")
    except UnicodeDecodeError as exc:
        raise UserFileError(f"{path} is not UTF-8 text (byte {exc.start}: {bytes(data[exc.start:exc.start + 4])!r})"
                            ) from None

"""Local media files named in a request (``videos``, ``audios``): only under allowed folders.

A request names paths on the server's filesystem, as sglang-omni's clients do. On a shared
machine that must not become a way to read (or probe for) other files, so:

- only absolute paths; a relative one would resolve against the server's working directory;
- symlinks and ``..`` are resolved first, and the real path must lie under an allowed root;
- it must be a regular file (no FIFO that blocks, no device) and readable, at most ``max_bytes``;
- every refusal (outside, missing, unreadable, a folder, relative) gets one identical detail,
  so the reply does not reveal whether a path exists.
"""

from __future__ import annotations

import os
import stat
from dataclasses import dataclass
from pathlib import Path

from .errors import RequestError

REFUSED = ("not an allowed local media file (it must be an absolute path to a readable file under the "
           "server's allowed media folders)")


@dataclass(frozen=True)
class MediaPolicy:
    """Where request media may come from, and how much of it is read."""

    roots: tuple[Path, ...]
    max_bytes: int = 256 * 2**20

    @classmethod
    def of(cls, roots: list[str] | tuple[str, ...], max_bytes: int) -> MediaPolicy:
        """Roots resolved once (symlinks, ``..``), as later paths will be."""
        return cls(tuple(Path(os.path.abspath(r)).resolve() for r in roots), max_bytes)


def _allowed(real: Path, roots: tuple[Path, ...]) -> bool:
    return any(real == root or real.is_relative_to(root) for root in roots)


def read_media(path: str, what: str, policy: MediaPolicy) -> bytes:
    """The bytes of the file at ``path`` if the policy allows it; else a 400 (one detail for all refusals)."""
    refused = RequestError(400, f"{what}: {REFUSED}")
    if not os.path.isabs(path) or "\x00" in path:
        raise refused
    try:
        real = Path(path).resolve(strict=True)
    except (OSError, RuntimeError, ValueError):  # missing, loop, unreadable folder on the way
        raise refused from None
    if not _allowed(real, policy.roots):
        raise refused
    try:
        # O_NONBLOCK: opening a FIFO must not hang the worker; O_NOFOLLOW: the checked path, not a swapped link.
        fd = os.open(real, os.O_RDONLY | os.O_NONBLOCK | os.O_NOFOLLOW | getattr(os, "O_CLOEXEC", 0))
    except OSError:
        raise refused from None
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise refused
        chunks, left = [], policy.max_bytes + 1
        while left > 0 and (chunk := os.read(fd, min(left, 2**20))):
            chunks.append(chunk)
            left -= len(chunk)
    except OSError:
        raise refused from None
    finally:
        os.close(fd)
    data = b"".join(chunks)
    if len(data) > policy.max_bytes:
        raise RequestError(400, f"{what}: file larger than the server's limit of {policy.max_bytes} bytes")
    return data

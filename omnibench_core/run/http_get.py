"""One HTTP GET to a server omnibench started (READY's ``/health``, the served model's
``/v1/models``), with every bound a hostile or broken server can break:

- one overall deadline for the whole call, redirects included: each connect, send and read is
  given only the time left, so a server that sends one byte at a time, or redirects slowly, ends
  the call at the deadline (a timeout per read, as ``urlopen``'s and ``requests``' are, lets a
  byte every 9 s hold a 10 s call for ever);
- at most :data:`MAX_REDIRECTS` redirects, each to plain ``http`` (the servers' endpoints are
  ``http://host:port``: :class:`omnibench_core.records.Endpoint`);
- the body cut at ``max_bytes``.

Only the standard library is used.
"""

from __future__ import annotations

import http.client
import socket
import time
from dataclasses import dataclass
from typing import Any
from urllib.parse import urljoin, urlsplit

MAX_REDIRECTS = 5
REDIRECT_CODES = frozenset({301, 302, 303, 307, 308})
_CHUNK = 64 * 1024


class DeadlineExceeded(TimeoutError):
    """The call's overall deadline passed (the text says where: connecting, sending or reading)."""


class NotFollowed(OSError):
    """A redirect omnibench does not follow: too many, no ``Location``, or not to ``http``."""


@dataclass(frozen=True)
class Reply:
    """A server's answer: its status, its body (at most ``max_bytes``), the URL that gave it (after
    redirects) and whether the body was longer than ``max_bytes``."""

    status: int
    body: bytes
    url: str
    truncated: bool = False


class _DeadlineSocket(socket.socket):
    """A socket whose every send and receive is given only the time left before ``deadline``."""

    deadline: float = 0.0

    def _arm(self, doing: str) -> None:
        left = self.deadline - time.monotonic()
        if left <= 0:
            raise DeadlineExceeded(f"the deadline passed while {doing}")
        self.settimeout(left)

    def recv_into(self, buffer: Any, nbytes: int = 0, flags: int = 0) -> int:
        self._arm("reading the reply")
        try:
            return super().recv_into(buffer, nbytes, flags)
        except TimeoutError:
            raise DeadlineExceeded("the deadline passed while reading the reply") from None

    def recv(self, bufsize: int, flags: int = 0) -> bytes:
        self._arm("reading the reply")
        try:
            return super().recv(bufsize, flags)
        except TimeoutError:
            raise DeadlineExceeded("the deadline passed while reading the reply") from None

    def sendall(self, data: Any, flags: int = 0) -> None:
        self._arm("sending the request")
        try:
            super().sendall(data, flags)
        except TimeoutError:
            raise DeadlineExceeded("the deadline passed while sending the request") from None


class _Connection(http.client.HTTPConnection):
    def __init__(self, host: str, port: int | None, deadline: float):
        super().__init__(host, port, timeout=max(deadline - time.monotonic(), 0.001))
        self._deadline = deadline

    def connect(self) -> None:
        left = self._deadline - time.monotonic()
        if left <= 0:
            raise DeadlineExceeded("the deadline passed before connecting")
        try:
            raw = socket.create_connection((self.host, self.port), left)
        except TimeoutError:
            raise DeadlineExceeded("the deadline passed while connecting") from None
        sock = _DeadlineSocket(raw.family, raw.type, raw.proto, fileno=raw.detach())
        sock.deadline = self._deadline
        self.sock = sock


def get(url: str, deadline_s: float, max_bytes: int, *, max_redirects: int = MAX_REDIRECTS) -> Reply:
    """``GET url`` within ``deadline_s`` seconds in all, following at most ``max_redirects``
    redirects to ``http`` URLs, keeping at most ``max_bytes`` of the body. Raises
    :class:`DeadlineExceeded` (a ``TimeoutError``), :class:`NotFollowed` or another ``OSError``
    (refused, reset), or ``ValueError`` / ``http.client.HTTPException`` for a URL or a reply that
    is not HTTP."""
    deadline = time.monotonic() + deadline_s
    for _hop in range(max_redirects + 1):
        parts = urlsplit(url)
        if parts.scheme != "http" or not parts.hostname:
            raise NotFollowed(f"{url!r} is not an http:// URL")
        conn = _Connection(parts.hostname, parts.port, deadline)
        try:
            conn.request("GET", (parts.path or "/") + (f"?{parts.query}" if parts.query else ""),
                         headers={"Accept": "application/json", "Connection": "close"})
            answer = conn.getresponse()
            if answer.status in REDIRECT_CODES:
                where = answer.getheader("Location")
                if not where:
                    raise NotFollowed(f"HTTP {answer.status} from {url} names no Location")
                url = urljoin(url, where)
                continue
            body = bytearray()
            while len(body) <= max_bytes:
                chunk = answer.read(min(_CHUNK, max_bytes + 1 - len(body)))
                if not chunk:
                    break
                body += chunk
            return Reply(answer.status, bytes(body[:max_bytes]), url, truncated=len(body) > max_bytes)
        finally:
            conn.close()
    raise NotFollowed(f"more than {max_redirects} redirects (the last to {url})")

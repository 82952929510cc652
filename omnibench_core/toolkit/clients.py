"""Pieces shared by omnibench's native asyncio clients: progress lines, HTTP errors, chat replies."""

from __future__ import annotations

import asyncio
import base64
import json
import sys
import threading
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # at run time imported by the coroutine that needs it: see post_chat
    import aiohttp

from ..heartbeat import PROGRESS_PREFIX, Ticker


class Progress:
    """Prints ``progress: label done/total ...`` at most once every ``interval_s`` as items finish,
    and at the end; inside ``with``, also at the start and every ``quiet_s`` while none finishes
    (a slow first reply must not leave the terminal silent)."""

    def __init__(self, total: int, label: str, stream=sys.stdout, interval_s: float = 2.0, quiet_s: float = 5.0,
                 clock=time.perf_counter):
        self.total, self.label, self.stream, self.interval_s, self.quiet_s = total, label, stream, interval_s, quiet_s
        self.clock = clock  # injectable, so the quiet rule is tested without waiting
        self.done = self.failed = 0
        self._t0 = self._last = clock()
        self._lock = threading.Lock()
        self._ticker = Ticker(self.quiet_tick, min(0.5, quiet_s))

    def line(self) -> str:
        """The current count, as printed."""
        elapsed = self.clock() - self._t0
        rate = self.done / max(elapsed, 1e-9)
        return (f"{PROGRESS_PREFIX}{self.label} {self.done}/{self.total} ({self.failed} failed, {rate:.1f}/s, "
                f"{elapsed:.0f}s)")

    def _print(self) -> None:
        self._last = self.clock()
        print(self.line(), file=self.stream, flush=True)

    def tick(self, ok: bool) -> None:
        """Count one finished item."""
        with self._lock:
            self.done += 1
            self.failed += not ok
            if self.clock() - self._last >= self.interval_s or self.done == self.total:
                self._print()

    def __enter__(self) -> Progress:
        with self._lock:
            self._print()
        self._ticker.__enter__()
        return self

    def __exit__(self, *exc: object) -> None:
        self._ticker.__exit__(*exc)

    def quiet_tick(self) -> None:
        """Print the count again if nothing was printed for ``quiet_s`` (the ticker calls this)."""
        with self._lock:
            if self.done < self.total and self.clock() - self._last >= self.quiet_s:
                self._print()


# A reply is read up to a bound, never whole into memory first: a server that streams without
# end, sends 600 MB or a deflate bomb (aiohttp inflates as it reads: these are inflated bytes)
# fails its one request with the bound named, not the client. 32 MiB is ~8 minutes of 24 kHz
# 16-bit speech as base64, far over any answer of a benchmark's max_tokens.
REPLY_BYTES = 32 * 2**20
ERROR_BYTES = 64 * 2**10  # an error reply: only its first 300 characters are kept


class ReplyTooLarge(ValueError):
    """A reply passed its byte bound: the request fails with the bound named."""


def mib(n: int) -> str:
    """``32 MiB`` (or ``64 KiB``) for a bound in an error."""
    return f"{n / 2**20:g} MiB" if n >= 2**20 else f"{n / 2**10:g} KiB"


async def read_bounded(response: aiohttp.ClientResponse, limit: int = REPLY_BYTES) -> bytes:
    """The whole (inflated) body, or :class:`ReplyTooLarge` once it passes ``limit`` bytes."""
    parts, size = [], 0
    async for chunk in response.content.iter_any():
        size += len(chunk)
        if size > limit:
            raise ReplyTooLarge(f"the reply passed the client's bound of {mib(limit)} a request "
                                f"(Content-Encoding {response.headers.get('Content-Encoding', 'none')}); "
                                "no answer of a benchmark request is that large: check the server")
        parts.append(chunk)
    return b"".join(parts)


def token_count(usage: Any, key: str) -> int | None:
    """``usage[key]`` as a count; anything but a whole number >= 0 (``"12"``, ``true``, ``-1``)
    is a ValueError naming the field, so one request fails, never the client's arithmetic."""
    value = usage.get(key) if isinstance(usage, dict) else None
    if value is None:
        return None
    if not isinstance(value, int) or isinstance(value, bool) or value < 0:
        raise ValueError(f"usage.{key} is {str(value)[:40]!r}, not a whole number of tokens")
    return value


TOO_DEEP = "the reply's JSON is nested deeper than Python can read (a broken or hostile server)"


async def error_text(response: aiohttp.ClientResponse) -> str:
    """``HTTP 400: <detail>`` from an error reply, whatever its body (its first 64 KiB)."""
    try:
        body = (await read_bounded(response, ERROR_BYTES)).decode("utf-8", errors="replace")
    except ReplyTooLarge:
        return f"HTTP {response.status}: an error reply over {mib(ERROR_BYTES)}"
    try:
        detail = json.loads(body).get("detail", body)
    except (ValueError, AttributeError, RecursionError):
        detail = body
    return f"HTTP {response.status}: {str(detail)[:300]}"


@dataclass
class ChatReply:
    """What a client needs from one ``/v1/chat/completions`` reply (or why it failed)."""

    text: str | None = None
    wav: bytes | None = None
    prompt_tokens: int | None = None
    completion_tokens: int | None = None
    error: str = ""


async def post_chat(session: aiohttp.ClientSession, url: str, body: dict[str, Any], timeout_s: float) -> ChatReply:
    """Send one chat request; an HTTP error, a timeout or a malformed reply becomes ``error``."""
    # Imported here: every process that loads the plugins imports this module through the plugin
    # face, and only a client sends requests (aiohttp costs a start about 0.1 CPU-s).
    import aiohttp

    try:
        async with session.post(url, json=body) as response:
            if response.status != 200:
                return ChatReply(error=await error_text(response))
            reply = json.loads(await read_bounded(response))
        choice = (reply.get("choices") or [{}])[0]
        message = choice.get("message") or {}
        usage = reply.get("usage") or {}
        audio = (message.get("audio") or {}).get("data")
        return ChatReply(text=message.get("content"), wav=base64.b64decode(audio) if audio else None,
                         prompt_tokens=token_count(usage, "prompt_tokens"),
                         completion_tokens=token_count(usage, "completion_tokens"))
    except asyncio.TimeoutError:
        return ChatReply(error=f"timed out after {timeout_s:g} s")
    except RecursionError:
        return ChatReply(error=TOO_DEEP)
    except (aiohttp.ClientError, ValueError, AttributeError, TypeError) as exc:
        return ChatReply(error=f"{type(exc).__name__}: {exc}")

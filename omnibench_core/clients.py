"""Pieces shared by omnibench's native asyncio clients: progress lines, HTTP errors, chat replies."""

from __future__ import annotations

import asyncio
import base64
import json
import sys
import time
from dataclasses import dataclass
from typing import Any

import aiohttp

PROGRESS_PREFIX = "progress: "  # lines the runner relays to the terminal


class Progress:
    """Prints ``progress: done/total ...`` at most once every ``interval_s``, and at the end."""

    def __init__(self, total: int, label: str, stream=sys.stdout, interval_s: float = 2.0):
        self.total, self.label, self.stream, self.interval_s = total, label, stream, interval_s
        self.done = self.failed = 0
        self._t0 = self._last = time.perf_counter()

    def tick(self, ok: bool) -> None:
        """Count one finished item."""
        self.done += 1
        self.failed += not ok
        now = time.perf_counter()
        if now - self._last >= self.interval_s or self.done == self.total:
            self._last = now
            rate = self.done / max(now - self._t0, 1e-9)
            print(f"{PROGRESS_PREFIX}{self.label} {self.done}/{self.total} ({self.failed} failed, {rate:.1f}/s)",
                  file=self.stream, flush=True)


async def error_text(response: aiohttp.ClientResponse) -> str:
    """``HTTP 400: <detail>`` from an error reply, whatever its body."""
    body = await response.text()
    try:
        detail = json.loads(body).get("detail", body)
    except (ValueError, AttributeError):
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
    try:
        async with session.post(url, json=body) as response:
            if response.status != 200:
                return ChatReply(error=await error_text(response))
            reply = await response.json(content_type=None)
        choice = (reply.get("choices") or [{}])[0]
        message = choice.get("message") or {}
        usage = reply.get("usage") or {}
        audio = (message.get("audio") or {}).get("data")
        return ChatReply(text=message.get("content"), wav=base64.b64decode(audio) if audio else None,
                         prompt_tokens=usage.get("prompt_tokens"), completion_tokens=usage.get("completion_tokens"))
    except asyncio.TimeoutError:
        return ChatReply(error=f"timed out after {timeout_s:g} s")
    except (aiohttp.ClientError, ValueError, AttributeError, TypeError) as exc:
        return ChatReply(error=f"{type(exc).__name__}: {exc}")

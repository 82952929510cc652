"""Pieces shared by omnibench's native asyncio clients: progress lines and HTTP error text."""

from __future__ import annotations

import sys
import time

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
        import json

        detail = json.loads(body).get("detail", body)
    except (ValueError, AttributeError):
        detail = body
    return f"HTTP {response.status}: {str(detail)[:300]}"

"""Transcribe WAV files on an ASR server's ``/v1/audio/transcriptions`` (asyncio, bounded)."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Sequence
from pathlib import Path

import aiohttp

from ..toolkit.clients import Progress, error_text


async def _all(paths: Sequence[Path | None], url: str, model: str, lang: str, concurrency: int,
               timeout_s: float) -> tuple[list[tuple[str | None, str, float]], float]:
    gate = asyncio.Semaphore(concurrency)
    progress = Progress(len(paths), "transcribed")

    async def one(session: aiohttp.ClientSession, path: Path | None) -> tuple[str | None, str, float]:
        if path is None:
            progress.tick(False)
            return None, "generation failed", 0.0
        result: tuple[str | None, str]
        async with gate:
            t0 = None
            try:
                audio = path.read_bytes()  # read before the clock starts, as upstream's send function
                form = aiohttp.FormData()
                form.add_field("model", model)
                form.add_field("language", lang)
                form.add_field("response_format", "json")
                form.add_field("file", audio, filename=path.name, content_type="audio/wav")
                t0 = time.perf_counter()
                async with session.post(url, data=form) as response:
                    if response.status != 200:
                        result = None, await error_text(response)
                    else:
                        result = str((await response.json(content_type=None)).get("text", "")), ""
            except (aiohttp.ClientError, asyncio.TimeoutError, OSError, ValueError) as exc:
                result = None, f"{type(exc).__name__}: {exc}"
            seconds = time.perf_counter() - t0 if t0 is not None else 0.0
        progress.tick(result[0] is not None)
        return result[0], result[1], seconds

    with progress:
        async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=timeout_s)) as session:
            start = time.perf_counter()
            heard = await asyncio.gather(*(one(session, p) for p in paths))
            return list(heard), time.perf_counter() - start


def transcribe_files_timed(paths: Sequence[Path | None], *, url: str, model: str, lang: str = "en",
                           concurrency: int = 4, timeout_s: float = 300.0
                           ) -> tuple[list[tuple[str | None, str, float]], float]:
    """``(text, "", seconds)`` or ``(None, error, seconds)`` per file (``seconds``: its request, send
    to reply read; 0 when none was sent) and the whole transcription's wall time."""
    return asyncio.run(_all(paths, url, model, lang, concurrency, timeout_s))


def transcribe_files(paths: Sequence[Path | None], *, url: str, model: str, lang: str = "en", concurrency: int = 4,
                     timeout_s: float = 300.0) -> list[tuple[str | None, str]]:
    """``(text, "")`` or ``(None, error)`` per file; ``None`` paths are generations that failed."""
    heard, _ = transcribe_files_timed(paths, url=url, model=model, lang=lang, concurrency=concurrency,
                                      timeout_s=timeout_s)
    return [(text, error) for text, error, _ in heard]

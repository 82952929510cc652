"""Transcribe WAV files on an ASR server's ``/v1/audio/transcriptions`` (asyncio, bounded)."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from pathlib import Path

import aiohttp

from ..toolkit.clients import Progress, error_text


async def _all(paths: Sequence[Path | None], url: str, model: str, lang: str, concurrency: int,
               timeout_s: float) -> list[tuple[str | None, str]]:
    gate = asyncio.Semaphore(concurrency)
    progress = Progress(len(paths), "transcribed")

    async def one(session: aiohttp.ClientSession, path: Path | None) -> tuple[str | None, str]:
        if path is None:
            progress.tick(False)
            return None, "generation failed"
        result: tuple[str | None, str]
        async with gate:
            try:
                form = aiohttp.FormData()
                form.add_field("model", model)
                form.add_field("language", lang)
                form.add_field("response_format", "json")
                form.add_field("file", path.read_bytes(), filename=path.name, content_type="audio/wav")
                async with session.post(url, data=form) as response:
                    if response.status != 200:
                        result = None, await error_text(response)
                    else:
                        result = str((await response.json(content_type=None)).get("text", "")), ""
            except (aiohttp.ClientError, asyncio.TimeoutError, OSError, ValueError) as exc:
                result = None, f"{type(exc).__name__}: {exc}"
        progress.tick(result[0] is not None)
        return result

    with progress:
        async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=timeout_s)) as session:
            return await asyncio.gather(*(one(session, p) for p in paths))


def transcribe_files(paths: Sequence[Path | None], *, url: str, model: str, lang: str = "en", concurrency: int = 4,
                     timeout_s: float = 300.0) -> list[tuple[str | None, str]]:
    """``(text, "")`` or ``(None, error)`` per file; ``None`` paths are generations that failed."""
    return asyncio.run(_all(paths, url, model, lang, concurrency, timeout_s))

"""One streaming chat request: server-sent events read as they arrive, each timed as it is parsed.

The body is read with ``iter_any()``: whatever bytes the socket has delivered, never a
fixed-size read that waits to fill (that would time the buffer, not the chunk). Bytes are split
into events (a blank line ends one), and ``time.perf_counter()`` is read right after an event is
parsed. Audio deltas are small WAV files; their PCM frames are joined into one WAV.

A reply that is one JSON body, not events, is measured as one chunk at the time its whole body
arrived and marked ``streamed = False``. An event that is not JSON, audio that does not decode, an
error event, or a stream that ends without ``[DONE]`` fails the request with that reason; a
stream that stalls is cut by the session's request timeout.
"""

from __future__ import annotations

import asyncio
import base64
import binascii
import io
import json
import time
import wave
from dataclasses import dataclass, field
from typing import Any

import aiohttp

from omnibench_core.plugin import REPLY_BYTES, TOO_DEEP, ReplyTooLarge, error_text, mib, read_bounded, token_count

# One event is a text delta or one audio chunk (seconds of speech, ~64 KiB of base64 a second at
# 24 kHz): 8 MiB is minutes of audio in one chunk, so a longer "event" is a broken server.
EVENT_BYTES = 8 * 2**20


class StreamBroken(Exception):
    """The stream cannot be measured: the reason is the request's error."""


@dataclass
class StreamReply:
    """What a streamed answer delivered, with the time each part arrived (``perf_counter``)."""

    streamed: bool = True
    text_parts: list[str] = field(default_factory=list)  # joined once (text): a += per delta is quadratic
    arrivals: list[float] = field(default_factory=list)  # one per audio chunk
    durations: list[float] = field(default_factory=list)  # seconds of audio in each chunk
    text_first: float | None = None
    text_arrivals: list[float] = field(default_factory=list)  # one per non-empty ``delta.content``
    first_payload_bytes: int | None = None
    wav: bytes | None = None
    prompt_tokens: int | None = None
    completion_tokens: int | None = None
    error: str = ""

    @property
    def text(self) -> str:
        """The answer's text, every delta joined."""
        return "".join(self.text_parts)


class EventSplitter:
    """Server-sent events out of bytes as they come: ``feed`` returns each event completed so far
    (its ``data:`` lines joined by newlines), keeping a partial one for the next call. An event
    (or a line between events) longer than ``max_event`` bytes is :class:`StreamBroken`."""

    def __init__(self, max_event: int = EVENT_BYTES) -> None:
        self._pending = b""
        self._data: list[str] = []
        self._size = 0  # bytes of the event being gathered
        self.max_event = max_event
        self.events = 0  # events completed so far

    def _check(self, pending: int) -> None:
        if self._size + pending > self.max_event:
            raise StreamBroken(f"event {self.events} passed the client's bound of {mib(self.max_event)} an event; "
                               "no audio chunk is that large: check the server")

    def feed(self, chunk: bytes) -> list[str]:
        """The events that ``chunk`` completes."""
        pending = self._pending + chunk
        events, start = [], 0
        while True:  # by index: slicing the rest off after each line would copy it once a line
            end = pending.find(b"\n", start)
            if end < 0:
                self._pending = pending[start:]
                self._check(len(self._pending))
                return events
            line, start = pending[start:end], end + 1
            self._check(len(line))
            text = line.rstrip(b"\r").decode("utf-8", errors="replace")
            if not text:
                if self._data:
                    events.append("\n".join(self._data))
                    self.events += 1
                    self._data, self._size = [], 0
            elif text.startswith("data:"):
                self._data.append(text[5:].lstrip(" "))
                self._size += len(line)
            # comments (":") and other fields (event:, id:, retry:) carry nothing measured here

    def flush(self) -> list[str]:
        """An event the stream ended inside (no blank line after its data)."""
        rest = self.feed(b"\n\n") if self._pending or self._data else []
        return rest


class _Pcm:
    """Audio chunks' frames, joined; every chunk must have the first one's format."""

    def __init__(self) -> None:
        self.frames: list[bytes] = []
        self.format: tuple[int, int, int] | None = None  # rate, channels, sample width

    def add(self, data: bytes, index: int) -> float:
        """Append one chunk's WAV; returns its duration in seconds."""
        try:
            with wave.open(io.BytesIO(data), "rb") as wav:
                fmt = (wav.getframerate(), wav.getnchannels(), wav.getsampwidth())
                frames = wav.readframes(wav.getnframes())
        except (wave.Error, EOFError) as exc:
            raise StreamBroken(f"audio chunk {index} does not decode: {exc}") from None
        if self.format is not None and fmt != self.format:
            raise StreamBroken(f"audio chunk {index} is {fmt[0]} Hz, {fmt[1]} channel(s), {8 * fmt[2]}-bit; "
                               f"the first was {self.format[0]} Hz, {self.format[1]}, {8 * self.format[2]}-bit")
        self.format = fmt
        self.frames.append(frames)
        return len(frames) / (fmt[0] * fmt[1] * fmt[2]) if fmt[0] else 0.0

    def wav(self) -> bytes | None:
        if self.format is None:
            return None
        out = io.BytesIO()
        with wave.open(out, "wb") as wav:
            wav.setframerate(self.format[0])
            wav.setnchannels(self.format[1])
            wav.setsampwidth(self.format[2])
            wav.writeframes(b"".join(self.frames))
        return out.getvalue()


def _audio_bytes(payload: Any, index: int) -> bytes:
    try:
        return base64.b64decode(payload, validate=True)
    except (binascii.Error, ValueError, TypeError) as exc:
        raise StreamBroken(f"audio chunk {index} is not base64: {exc}") from None


def _take_event(reply: StreamReply, pcm: _Pcm, event: dict[str, Any], at: float) -> None:
    """One parsed event into the reply: text, an audio chunk (timed ``at``), usage."""
    if "error" in event:  # an error event mid-stream (OpenAI's form); the answer is cut
        raise StreamBroken(f"the server sent an error event: {str(event['error'])[:300]}")
    usage = event.get("usage")
    if isinstance(usage, dict):
        try:
            prompt, completion = token_count(usage, "prompt_tokens"), token_count(usage, "completion_tokens")
        except ValueError as exc:
            raise StreamBroken(str(exc)) from None
        reply.prompt_tokens = reply.prompt_tokens if prompt is None else prompt
        reply.completion_tokens = reply.completion_tokens if completion is None else completion
    for choice in event.get("choices") or []:
        delta = choice.get("delta") if isinstance(choice, dict) else None
        if not isinstance(delta, dict):
            continue
        content = delta.get("content")
        if isinstance(content, str) and content:
            reply.text_parts.append(content)
            reply.text_arrivals.append(at)
            if reply.text_first is None:
                reply.text_first = at
        audio = delta.get("audio")
        if isinstance(audio, dict) and audio.get("data"):
            data = _audio_bytes(audio["data"], len(reply.arrivals))
            reply.durations.append(pcm.add(data, len(reply.arrivals)))
            reply.arrivals.append(at)
            if reply.first_payload_bytes is None:
                reply.first_payload_bytes = len(data)


async def _read_events(response: aiohttp.ClientResponse, reply: StreamReply, max_reply: int, max_event: int) -> None:
    splitter, pcm, count, size = EventSplitter(max_event), _Pcm(), 0, 0
    async for chunk in response.content.iter_any():
        size += len(chunk)  # inflated bytes: what this client holds, whatever came over the wire
        if size > max_reply:
            raise StreamBroken(f"the reply passed the client's bound of {mib(max_reply)} a request after {count} "
                               f"event(s) ({len(reply.arrivals)} audio chunk(s)); no answer of a benchmark request "
                               "is that large: check the server")
        for data in splitter.feed(chunk):
            if data == "[DONE]":
                reply.wav = pcm.wav()
                return
            try:
                event = json.loads(data)
            except ValueError as exc:
                raise StreamBroken(f"event {count} is not valid JSON ({exc}): {data[:80]!r}") from None
            except RecursionError:
                raise StreamBroken(f"event {count}: {TOO_DEEP}") from None
            at = time.perf_counter()  # parsed: this is when the client has the event
            if not isinstance(event, dict):
                raise StreamBroken(f"event {count} is JSON but not an object: {data[:80]!r}")
            _take_event(reply, pcm, event, at)
            count += 1
    if any(d == "[DONE]" for d in splitter.flush()):
        reply.wav = pcm.wav()
        return
    raise StreamBroken(f"the stream ended without [DONE] after {count} event(s)")


def _whole_body(reply: StreamReply, body: Any, at: float) -> None:
    """A reply that did not stream: one chunk, arriving when the whole body had."""
    reply.streamed = False
    choice = (body.get("choices") or [{}])[0] if isinstance(body, dict) else {}
    message = choice.get("message") or {}
    usage = body.get("usage") or {} if isinstance(body, dict) else {}
    content = message.get("content")
    reply.text_parts = [content] if isinstance(content, str) and content else []
    reply.text_first = at if reply.text_parts else None
    reply.text_arrivals = [at] if reply.text_parts else []
    reply.prompt_tokens, reply.completion_tokens = token_count(usage, "prompt_tokens"), token_count(usage, "completion_tokens")
    audio = (message.get("audio") or {}).get("data")
    if audio:
        pcm = _Pcm()
        data = _audio_bytes(audio, 0)
        reply.durations.append(pcm.add(data, 0))
        reply.arrivals.append(at)
        reply.first_payload_bytes = len(data)
        reply.wav = pcm.wav()


async def post_stream(session: aiohttp.ClientSession, url: str, body: dict[str, Any], timeout_s: float, *,
                      max_reply: int = REPLY_BYTES, max_event: int = EVENT_BYTES) -> StreamReply:
    """Send one chat request whose body asks ``stream: true`` and read its events as they come,
    at most ``max_reply`` bytes in all and ``max_event`` an event; never raises."""
    reply = StreamReply()
    try:
        async with session.post(url, json=body) as response:
            if response.status != 200:
                reply.error = await error_text(response)
                return reply
            if response.content_type != "text/event-stream":
                raw = await read_bounded(response, max_reply)
                _whole_body(reply, json.loads(raw), time.perf_counter())
                return reply
            await _read_events(response, reply, max_reply, max_event)
    except (StreamBroken, ReplyTooLarge) as exc:
        reply.error = str(exc)
    except RecursionError:
        reply.error = TOO_DEEP
    except asyncio.TimeoutError:
        reply.error = f"timed out after {timeout_s:g} s ({len(reply.arrivals)} audio chunk(s) had arrived)"
    except (aiohttp.ClientError, ValueError, AttributeError, TypeError) as exc:
        reply.error = f"{type(exc).__name__}: {exc}"
    return reply

"""Request parsing and reply composition of the local server, as plain functions.

Kept apart from the HTTP layer so every validation rule can be tested directly. A rule that
fails raises :class:`RequestError` with the HTTP status and the ``detail`` sglang-omni would give.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ..toolkit.audio import AudioError, decode_data_uri
from .errors import RequestError
from .wav import AudioLimits, decode_wav

# sglang-omni's seed-tts client's prompt (benchmark_omni_seedtts): the default of
# --read-aloud-prefix, so that client works unchanged against the local server.
SGLANG_SEEDTTS_PROMPT = "Please read the following text out loud in English:"
DEFAULT_READ_ALOUD_PREFIXES = (SGLANG_SEEDTTS_PROMPT,)
MAX_SEED = 2**63 - 1  # hibari-tts takes 0..2**63-1
MAX_MEDIA_FILES = 16  # per list (videos, audios); Video-AMME sends one of each
MODALITIES = ("text", "audio")
AUDIO_TOKENS_PER_S = 25  # MiniCPM-o's speech codec rate; the local target counts audio alike
_TOKEN = re.compile(r"\w+|[^\w\s]")


def count_tokens(text: str) -> int:
    """Words and punctuation marks: the local target's stand-in for a tokenizer."""
    return len(_TOKEN.findall(text))


def audio_tokens(seconds: float) -> int:
    """Tokens for audio at the codec rate."""
    return int(math.ceil(seconds * AUDIO_TOKENS_PER_S))


@dataclass
class ChatRequest:
    """A validated ``/v1/chat/completions`` request."""

    prompt: str
    modalities: tuple[str, ...]
    max_tokens: int
    temperature: float
    seed: int | None
    stream: bool
    reference: np.ndarray | None = None
    reference_rate: int = 0
    prompt_tokens: int = 0
    extra: dict[str, Any] = field(default_factory=dict)
    model: str | None = None  # the name the request asked for (any name is answered, as sglang-omni does)

    @property
    def wants_audio(self) -> bool:
        """True when speech is asked for."""
        return "audio" in self.modalities


def _message_text(content: Any, index: int) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        texts = []
        for part in content:
            if not isinstance(part, dict) or "type" not in part:
                raise RequestError(400, f"messages[{index}].content parts must be objects with a 'type'")
            if part["type"] == "text":
                texts.append(str(part.get("text", "")))
        return "\n".join(texts)
    if content is None:
        return ""
    raise RequestError(400, f"messages[{index}].content must be a string or a list of parts")


def _finite_number(body: dict[str, Any], key: str, default: float) -> float:
    value = body.get(key, default)
    if not isinstance(value, (int, float)) or isinstance(value, bool) or not math.isfinite(value) or value < 0:
        raise RequestError(400, f"'{key}' must be a number, finite and >= 0")
    return float(value)


def parse_chat(body: Any, *, max_seq_len: int, limits: AudioLimits | None = None) -> ChatRequest:
    """Validate a chat request body the way sglang-omni's server does (400s with a detail).

    Any ``model`` name is accepted, as the real server answers with its own model whatever a
    request names; the name is kept on the request so the server can record it.
    """
    limits = limits or AudioLimits()
    if not isinstance(body, dict):
        raise RequestError(400, "request body must be a JSON object")
    model = body.get("model")
    if model is not None and not isinstance(model, str):
        raise RequestError(400, "'model' must be a string")
    messages = body.get("messages")
    if not isinstance(messages, list) or not messages:
        raise RequestError(400, "'messages' is required and must be a non-empty list")
    texts = []
    for i, message in enumerate(messages):
        if not isinstance(message, dict) or message.get("role") not in ("system", "user", "assistant"):
            raise RequestError(400, f"messages[{i}] must be an object with role system, user or assistant")
        texts.append(_message_text(message.get("content"), i))
    users = [t for m, t in zip(messages, texts, strict=True) if m["role"] == "user"]
    if not users:
        raise RequestError(400, "'messages' holds no user message")
    modalities = body.get("modalities", ["text"])
    if not isinstance(modalities, list) or not modalities:
        raise RequestError(400, "'modalities' must be a non-empty list")
    unknown = [m for m in modalities if m not in MODALITIES]
    if unknown:
        raise RequestError(400, f"unknown modality {str(unknown[0])[:40]!r}; supported: {', '.join(MODALITIES)}")
    max_tokens = body.get("max_tokens", 256)
    if not isinstance(max_tokens, int) or isinstance(max_tokens, bool) or max_tokens < 1:
        raise RequestError(400, "'max_tokens' must be a positive integer")
    temperature = _finite_number(body, "temperature", 1.0)  # Python's json lets NaN and Infinity through
    seed = body.get("seed")
    if seed is not None and (not isinstance(seed, int) or isinstance(seed, bool) or not 0 <= seed <= MAX_SEED):
        raise RequestError(400, "'seed' must be an integer from 0 to 2**63 - 1")
    stream = body.get("stream", False)
    if not isinstance(stream, bool):
        raise RequestError(400, "'stream' must be true or false")
    request = ChatRequest(prompt=users[-1], modalities=tuple(modalities), max_tokens=max_tokens,
                          temperature=temperature, seed=seed, stream=stream, model=model)
    audio = body.get("audio")
    if audio is not None:
        if not isinstance(audio, dict):
            raise RequestError(400, "'audio' must be an object")
        if audio.get("format", "wav") != "wav":
            raise RequestError(400, f"audio format {str(audio.get('format'))[:40]!r} is not supported; use 'wav'")
        ref = audio.get("ref_audio")
        if ref is not None:
            request.reference, request.reference_rate = _reference(ref, limits)
    ref_seconds = len(request.reference) / request.reference_rate if request.reference is not None else 0.0
    request.prompt_tokens = sum(count_tokens(t) for t in texts) + audio_tokens(ref_seconds)
    if request.prompt_tokens >= max_seq_len:
        raise RequestError(400, f"The input ({request.prompt_tokens} tokens) is longer than the model's context "
                                f"length ({max_seq_len} tokens).")
    request.extra = _media_fields(body)
    return request


def _media_fields(body: dict[str, Any]) -> dict[str, Any]:
    """The Video-AMME fields, type-checked; files are read later (media.py)."""
    extra: dict[str, Any] = {}
    for key in ("videos", "audios"):
        if key not in body:
            continue
        value = body[key]
        if not isinstance(value, list) or not all(isinstance(p, str) and p for p in value):
            raise RequestError(400, f"'{key}' must be a list of file paths")
        if len(value) > MAX_MEDIA_FILES:
            raise RequestError(400, f"'{key}' holds more than {MAX_MEDIA_FILES} files")
        extra[key] = value
    for key, default in (("video_fps", 2.0), ("video_max_frames", 128), ("video_max_pixels", 401408),
                         ("video_min_pixels", 0), ("video_total_pixels", 0)):
        extra[key] = _finite_number(body, key, default)
    if 0 < extra["video_max_pixels"] < extra["video_min_pixels"]:
        raise RequestError(400, "'video_min_pixels' must not exceed 'video_max_pixels'")
    return extra


def _reference(ref: Any, limits: AudioLimits) -> tuple[np.ndarray, int]:
    if not isinstance(ref, str) or not ref:
        raise RequestError(400, "'audio.ref_audio' must be a data URI string")
    try:
        data = decode_data_uri(ref)
    except AudioError as exc:
        raise RequestError(400, f"'audio.ref_audio': {exc}") from exc
    return decode_wav(data, "'audio.ref_audio'", limits)


def reply_text(request: ChatRequest, read_aloud_prefixes: tuple[str, ...] = DEFAULT_READ_ALOUD_PREFIXES) -> str:
    """What the local 'model' answers: the text after a read-aloud prefix, else the prompt itself.

    A prefix matches at the prompt's start, ignoring case and surrounding spaces; empty prefixes
    never match. It is a speech synthesizer, not a language model; reports say so.
    """
    prompt = request.prompt.strip()
    for prefix in read_aloud_prefixes:
        prefix = prefix.strip()
        if prefix and prompt[:len(prefix)].lower() == prefix.lower():
            return prompt[len(prefix):].strip()
    return prompt


def split_tokens(text: str) -> list[str]:
    """``text`` cut into its tokens (:func:`count_tokens`'s), each with the text before the next
    one: joined, they are ``text`` again (a streamed answer's ``delta.content`` pieces)."""
    starts = [m.start() for m in _TOKEN.finditer(text)]
    if not starts:
        return [text] if text else []
    starts[0] = 0
    return [text[a:b] for a, b in zip(starts, [*starts[1:], len(text)], strict=True)]


def truncate_tokens(text: str, max_tokens: int) -> tuple[str, bool]:
    """At most ``max_tokens`` tokens of ``text``; True when something was cut."""
    tokens = list(_TOKEN.finditer(text))
    if len(tokens) <= max_tokens:
        return text, False
    return text[:tokens[max_tokens - 1].end()], True

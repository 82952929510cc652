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

from ..audio import AudioError, decode_data_uri, read_wav_bytes

READ_ALOUD = re.compile(r"^\s*please read the following text out loud in english:\s*", re.I)
MODALITIES = ("text", "audio")
AUDIO_TOKENS_PER_S = 25  # MiniCPM-o's speech codec rate; the local target counts audio alike
_TOKEN = re.compile(r"\w+|[^\w\s]")


class RequestError(Exception):
    """A request the server refuses: ``status`` (4xx) and ``detail``."""

    def __init__(self, status: int, detail: str):
        super().__init__(detail)
        self.status = status
        self.detail = detail


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


def parse_chat(body: Any, *, model_name: str, max_seq_len: int) -> ChatRequest:
    """Validate a chat request body the way sglang-omni's server does (400s with a detail)."""
    if not isinstance(body, dict):
        raise RequestError(400, "request body must be a JSON object")
    model = body.get("model")
    if model is not None and model != model_name:
        raise RequestError(404, f"model {model!r} is not served here; this server serves {model_name!r}")
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
        raise RequestError(400, f"unknown modality {unknown[0]!r}; supported: {', '.join(MODALITIES)}")
    max_tokens = body.get("max_tokens", 256)
    if not isinstance(max_tokens, int) or isinstance(max_tokens, bool) or max_tokens < 1:
        raise RequestError(400, "'max_tokens' must be a positive integer")
    temperature = body.get("temperature", 1.0)
    if not isinstance(temperature, (int, float)) or isinstance(temperature, bool) or temperature < 0:
        raise RequestError(400, "'temperature' must be a number >= 0")
    seed = body.get("seed")
    if seed is not None and (not isinstance(seed, int) or isinstance(seed, bool)):
        raise RequestError(400, "'seed' must be an integer")
    request = ChatRequest(prompt=users[-1], modalities=tuple(modalities), max_tokens=max_tokens,
                          temperature=float(temperature), seed=seed, stream=bool(body.get("stream", False)))
    audio = body.get("audio")
    if audio is not None:
        if not isinstance(audio, dict):
            raise RequestError(400, "'audio' must be an object")
        if audio.get("format", "wav") != "wav":
            raise RequestError(400, f"audio format {audio.get('format')!r} is not supported; use 'wav'")
        ref = audio.get("ref_audio")
        if ref is not None:
            request.reference, request.reference_rate = _reference(ref)
    ref_seconds = len(request.reference) / request.reference_rate if request.reference is not None else 0.0
    request.prompt_tokens = sum(count_tokens(t) for t in texts) + audio_tokens(ref_seconds)
    if request.prompt_tokens >= max_seq_len:
        raise RequestError(400, f"The input ({request.prompt_tokens} tokens) is longer than the model's context "
                                f"length ({max_seq_len} tokens).")
    request.extra = {k: body[k] for k in ("videos", "audios", "video_fps", "video_max_frames", "video_max_pixels")
                     if k in body}
    return request


def _reference(ref: Any) -> tuple[np.ndarray, int]:
    if not isinstance(ref, str) or not ref:
        raise RequestError(400, "'audio.ref_audio' must be a data URI string")
    try:
        samples, rate = read_wav_bytes(decode_data_uri(ref))
    except AudioError as exc:
        raise RequestError(400, f"'audio.ref_audio': {exc}") from exc
    if samples.size == 0 or not np.isfinite(samples).all():
        raise RequestError(400, "'audio.ref_audio' holds no audio samples")
    return samples, rate


def reply_text(request: ChatRequest) -> str:
    """What the local 'model' answers: the text to read aloud, else the prompt itself.

    It is a speech synthesizer, not a language model; reports say so.
    """
    match = READ_ALOUD.match(request.prompt)
    return request.prompt[match.end():].strip() if match else request.prompt.strip()


def truncate_tokens(text: str, max_tokens: int) -> tuple[str, bool]:
    """At most ``max_tokens`` tokens of ``text``; True when something was cut."""
    tokens = list(_TOKEN.finditer(text))
    if len(tokens) <= max_tokens:
        return text, False
    return text[:tokens[max_tokens - 1].end()], True


def split_sentences(text: str) -> list[str]:
    """Sentences for streamed audio chunks."""
    parts = [p.strip() for p in re.split(r"(?<=[.!?])\s+", text) if p.strip()]
    return parts or [text]

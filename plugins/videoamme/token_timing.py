"""Token timing of one streamed answer's text, from the times its content chunks arrived.

Definitions (vLLM ``bench serve``'s, on the thinker's text): every time is from the request's send.
``ttft_s`` is the first non-empty ``delta.content``; ``itl_s`` every gap between consecutive content
chunks; ``e2e`` the last content chunk (the text's end: the talker's audio after it is not text);
``tpot_s`` ``(e2e - ttft) / (tokens - 1)`` (None for one token); ``output_tokens_per_s`` ``tokens /
e2e``. Tokens are ``usage.completion_tokens`` when the server sent it (``TokensFrom.USAGE``,
written ``"usage"``), else the number of content chunks (``TokensFrom.CHUNKS``, ``"chunks"``).
"""

from __future__ import annotations

import enum
from collections.abc import Sequence
from dataclasses import dataclass


class TokensFrom(str, enum.Enum):
    """Where an answer's token count came from; a ``str`` whose value is the word the per-sample
    row holds (``output_tokens_from``), so the files read as before."""

    USAGE = "usage"  # the server's usage.completion_tokens
    CHUNKS = "chunks"  # no usage sent: the content chunks counted

    def __str__(self) -> str:
        return str(self.value)


@dataclass(frozen=True)
class TokenTiming:
    """One answer's text timing (seconds) and the token count it divides by."""

    ttft_s: float
    tpot_s: float | None
    itl_s: tuple[float, ...]
    e2e_s: float
    output_tokens: int
    tokens_from: TokensFrom
    output_tokens_per_s: float | None


def token_timing(sent: float, arrivals: Sequence[float], completion_tokens: int | None) -> TokenTiming | None:
    """The timing of text whose content chunks arrived at ``arrivals`` (``perf_counter``) after a
    send at ``sent``; None when no text arrived. ``completion_tokens`` is the usage count, if sent."""
    if not arrivals:
        return None
    ttft, e2e = arrivals[0] - sent, arrivals[-1] - sent
    itl = tuple(b - a for a, b in zip(arrivals[:-1], arrivals[1:], strict=True))
    if completion_tokens is not None and completion_tokens > 0:
        tokens, source = completion_tokens, TokensFrom.USAGE
    else:
        tokens, source = len(arrivals), TokensFrom.CHUNKS
    tpot = (e2e - ttft) / (tokens - 1) if tokens > 1 else None
    rate = tokens / e2e if e2e > 0 else None
    return TokenTiming(ttft, tpot, itl, e2e, tokens, source, rate)

"""Requests with ``videos``/``audios`` files on the local target (media.py decides which files may
be read): Video-AMME questions are answered ``Answer: <LETTER>`` (see vision.py for how, and why it
is a substitute); an ``audios`` voice clone (an older sglang-omni seed-tts client's) is served as a
voice clone: the target text, spoken in the reference's voice.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import PurePath

import numpy as np

from ..toolkit.speech import Recognizer
from . import flip
from .errors import RequestError
from .heard import HeardCache
from .media import MediaPolicy, read_media
from .protocol import ChatRequest, audio_tokens
from .seen import SeenVideos
from .vision import TOKENS_PER_FRAME, Sampling, VideoError, choose_option, summarize_video
from .wav import AudioLimits, decode_wav

# An older sglang-omni seed-tts client (no --reference-audio-field) sends the reference WAV as
# `audios: [path]` and the prompt 'Listen to the audio above. The speaker is reading: "<ref text>".
# Now please read the following text out loud in the same voice and style: <target text>'.
CLONE_OPENING = "listen to the audio above"
CLONE_MARKER = "read the following text out loud in the same voice and style:"
CLONE_FIELDS = ("'audio.ref_audio' (a WAV data URI) with the prompt 'Please read the following text out loud in "
                "English: <text>'", f"'audios': [one WAV path] with a prompt ending '{CLONE_MARKER} <text>'")


@dataclass(frozen=True)
class Answer:
    """The reply text, and the voice to speak it in when the request brought one in ``audios``."""

    text: str
    reference: tuple[np.ndarray, int] | None = None


def clone_target(prompt: str) -> str | None:
    """The text an ``audios`` voice clone asks to be read (after the last marker), or None when the
    prompt is not one. A prompt that opens like one but names no text is a 400, never a guess."""
    lowered = prompt.lower()
    at = lowered.rfind(CLONE_MARKER)
    if at < 0:
        if lowered.lstrip().startswith(CLONE_OPENING):
            raise RequestError(400, "this looks like a voice clone through 'audios' but names no text to read; "
                                    "supported: " + "; or ".join(CLONE_FIELDS))
        return None
    target = prompt[at + len(CLONE_MARKER):].strip()
    if not target:
        raise RequestError(400, "the voice clone names no text to read after "
                                f"'{CLONE_MARKER}'; supported: " + "; or ".join(CLONE_FIELDS))
    return target


def _clone(request: ChatRequest, target: str, media: MediaPolicy, limits: AudioLimits) -> Answer:
    """The reference from ``audios`` (only its length counts as prompt tokens; it is not transcribed)."""
    paths = request.extra.get("audios", [])
    if len(paths) != 1 or request.extra.get("videos"):
        raise RequestError(400, f"a voice clone through 'audios' takes one reference WAV and no video, not "
                                f"{len(paths)} audio and {len(request.extra.get('videos', []))} video files; "
                                "supported: " + "; or ".join(CLONE_FIELDS))
    samples, rate = decode_wav(read_media(paths[0], "audios[0]", media), "audios[0]", limits)
    request.prompt_tokens += audio_tokens(len(samples) / rate)
    return Answer(target, (samples, rate))


def is_multimodal(request: ChatRequest) -> bool:
    """True when the request carries videos or audio files."""
    return bool(request.extra.get("videos") or request.extra.get("audios"))


def sampling_of(extra: dict) -> Sampling:
    """The request's ``video_*`` fields (already checked: finite, >= 0)."""
    return Sampling(fps=extra["video_fps"], max_frames=int(extra["video_max_frames"]),
                    max_pixels=int(extra["video_max_pixels"]), min_pixels=int(extra["video_min_pixels"]),
                    total_pixels=int(extra["video_total_pixels"]))


def answer(request: ChatRequest, recognizer: Recognizer | HeardCache, max_seq_len: int, media: MediaPolicy,
           limits: AudioLimits, quality_flip: float = 0.0, videos: SeenVideos | None = None) -> Answer:
    """Read and check the files, add their tokens to the prompt, and compose the reply; a video
    question among the ``quality_flip`` share (keyed by the video's file name) gets another letter.
    ``videos``: the server's summaries kept by content (seen.py), else each video is decoded."""
    target = clone_target(request.prompt) if request.extra.get("audios") else None
    if target is not None:
        found = _clone(request, target, media, limits)
        _check_length(request, max_seq_len)
        return found
    sampling = sampling_of(request.extra)
    summarize = videos.summarize if videos is not None else summarize_video
    summaries = []
    for i, path in enumerate(request.extra.get("videos", [])):
        what = f"videos[{i}]"
        try:
            summaries.append(summarize(read_media(path, what, media), sampling, what))
        except VideoError as exc:
            raise RequestError(400, str(exc)) from exc
    heard = []
    for i, path in enumerate(request.extra.get("audios", [])):
        what = f"audios[{i}]"
        samples, rate = decode_wav(read_media(path, what, media), what, limits)
        request.prompt_tokens += audio_tokens(len(samples) / rate)
        heard.append(recognizer.transcribe(samples, rate))
    request.prompt_tokens += TOKENS_PER_FRAME * sum(s.frames for s in summaries)
    _check_length(request, max_seq_len)
    if not summaries:
        return Answer(f"I heard: {' '.join(heard)}." if heard else request.prompt)
    color = summaries[0].color
    letter, _ = choose_option(" ".join(heard), color)
    key = PurePath(request.extra["videos"][0]).name  # the sample's own file: the same sample on both sides
    if flip.chosen(key, quality_flip):
        letter = flip.other_letter(letter, key)
    return Answer(f"The video is mostly {color}. Answer: {letter}")


def _check_length(request: ChatRequest, max_seq_len: int) -> None:
    if request.prompt_tokens >= max_seq_len:
        raise RequestError(400, f"The input ({request.prompt_tokens} tokens) is longer than the model's context "
                                f"length ({max_seq_len} tokens).")

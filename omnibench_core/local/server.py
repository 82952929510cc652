"""The local server's HTTP layer (aiohttp): sglang-omni's routes on real CPU speech engines."""

from __future__ import annotations

import asyncio
import base64
import json
import time
import traceback
import uuid
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

import numpy as np
from aiohttp import web

from ..toolkit.audio import to_wav_bytes
from ..toolkit.speech import TTS_RATE, Recognizer, Synthesizer
from . import flip, multimodal, protocol
from .errors import RequestError
from .heard import HeardCache
from .media import MediaPolicy
from .request_counts import ModelNames
from .seen import SeenVideos
from .wav import AudioLimits, decode_wav

DelayOn = Literal["request", "first-chunk", "every-chunk", "every-token"]
DELAY_ON: tuple[DelayOn, ...] = ("request", "first-chunk", "every-chunk", "every-token")
# What a server loads: the synthesizer and the recogniser, or the recogniser alone (a scoring ASR server).
ENGINES = ("speech", "asr")


@dataclass(frozen=True)
class ServerConfig:
    """How the local server runs (see ``__main__`` for the flags)."""

    model_name: str
    host: str = "127.0.0.1"
    port: int = 8000
    max_seq_len: int = 8192
    workers: int = 2
    max_body_mb: int = 256
    read_aloud_prefixes: tuple[str, ...] = protocol.DEFAULT_READ_ALOUD_PREFIXES
    media_roots: tuple[str, ...] = ()  # allowed folders for request media files; none: no file is allowed
    max_media_mb: int = 256
    idle_timeout_s: float = 30.0  # a connection that sends no request for this long is closed
    body_timeout_s: float = 60.0  # a request body must arrive within this
    audio_limits: AudioLimits = field(default_factory=AudioLimits)
    delay_ms: float = 0.0  # added latency, slept where delay_on says (a planted regression)
    delay_on: DelayOn = "request"  # each request, an answer's first or every audio chunk, or between text tokens
    stream_chunk_s: float = 0.5  # a streamed answer's audio goes out in pieces of this length
    quality_flip: float = 0.0  # share of samples answered differently (a planted quality change: flip.py)
    heard_dir: str = ""  # where video questions' transcripts are kept for later servers (heard.py); "": memory only


def _error(status: int, detail: str) -> web.Response:
    response = web.json_response({"detail": detail}, status=status)
    if status in (408, 413):
        response.force_close()  # the unread rest of the body must not be parsed as a next request
    return response


@web.middleware
async def _errors_as_json(request: web.Request, handler):
    """Every error is ``{"detail": ...}``; a bug is a 500, and the server keeps serving."""
    try:
        return await handler(request)
    except RequestError as exc:
        return _error(exc.status, exc.detail)
    except web.HTTPException as exc:
        if exc.status < 400:
            raise
        return _error(exc.status, exc.reason or str(exc))
    except (asyncio.CancelledError, ConnectionResetError):
        raise
    except Exception as exc:
        traceback.print_exc()
        return _error(500, f"internal error: {type(exc).__name__}: {exc}")


class Handlers:
    """Route handlers; engines run in a thread pool so the event loop keeps accepting."""

    def __init__(self, config: ServerConfig, synth: Synthesizer | None, recog: Recognizer):
        self.config = config
        self.synth = synth
        self.recog = recog
        self.pool = ThreadPoolExecutor(max_workers=config.workers, thread_name_prefix="speech")
        self.media = MediaPolicy.of(config.media_roots, config.max_media_mb * 2**20)
        self.stats = ModelNames(config.model_name)
        # the same audio is transcribed once, and kept for the servers after this one (every run starts
        # one; heard.py): a deterministic answer's audio that every run and campaign sends its scoring
        # server again, and a video question's spoken audio (counted apart: /local/stats)
        folder = Path(config.heard_dir) if config.heard_dir else None
        self.heard = HeardCache(recog, folder=folder)
        self.questions = HeardCache(recog, folder=folder)
        # the videos' summaries by content (a set past ten questions reuses its ten videos)
        self.videos = SeenVideos()

    async def _run(self, fn, *args, **kwargs):
        return await asyncio.get_running_loop().run_in_executor(self.pool, lambda: fn(*args, **kwargs))

    async def health(self, request: web.Request) -> web.Response:
        return web.json_response({"status": "healthy"})

    async def models(self, request: web.Request) -> web.Response:
        name = self.config.model_name
        return web.json_response({"object": "list", "data": [
            {"id": name, "object": "model", "root": name, "created": 0, "owned_by": "omnibench-local"}]})

    async def _delay(self, where: DelayOn = "request") -> None:
        """Sleep the planted delay if it is planted ``where``: ``request``, ``first-chunk``
        (given for an answer's first audio chunk) or ``every-chunk`` (given for each chunk)."""
        cfg = self.config
        if cfg.delay_ms > 0 and (cfg.delay_on == where or (where == "first-chunk" and cfg.delay_on == "every-chunk")):
            await asyncio.sleep(cfg.delay_ms / 1000)

    async def stats_view(self, request: web.Request) -> web.Response:
        return web.json_response({**self.stats.as_json(), "transcribed": self.heard.misses,  # audio heard anew
                                  "recalled": self.heard.recalled,  # read from --heard-dir
                                  "waited": self.heard.waited,  # for another server's transcription of that audio
                                  "questions_transcribed": self.questions.misses,
                                  "questions_recalled": self.questions.recalled,
                                  "questions_waited": self.questions.waited, "videos_decoded": self.videos.decoded})

    def _record(self, route: str, asked: str | None) -> None:
        line = self.stats.record(route, asked)
        if line:
            print(line, flush=True)

    async def _body(self, reader) -> Any:
        """``await reader`` under the body timeout: a stalled body is a 408, not a held worker."""
        try:
            return await asyncio.wait_for(reader, self.config.body_timeout_s)
        except asyncio.TimeoutError:
            raise RequestError(408, f"the request body did not arrive within {self.config.body_timeout_s:g} s") from None

    async def _json(self, request: web.Request) -> Any:
        raw = await self._body(request.read())
        try:
            text = raw.decode(request.charset or "utf-8")
        except LookupError:
            raise RequestError(400, f"unknown charset {(request.charset or '')[:40]!r} in Content-Type") from None
        except UnicodeDecodeError as exc:
            raise RequestError(400, f"request body is not valid JSON: {exc}") from exc
        try:
            return json.loads(text)
        except ValueError as exc:
            raise RequestError(400, f"request body is not valid JSON: {exc}") from exc
        except RecursionError:
            raise RequestError(400, "request body is not valid JSON: nested too deeply") from None

    async def chat(self, request: web.Request) -> web.StreamResponse:
        synth = self.synth
        if synth is None:
            raise RequestError(400, "this server serves the recogniser alone (--engines asr): it answers "
                                    "/v1/audio/transcriptions only; start it with --engines speech for chat")
        await self._delay()
        body = await self._json(request)
        cfg = self.config
        req = protocol.parse_chat(body, max_seq_len=cfg.max_seq_len, limits=cfg.audio_limits)
        self._record("chat", req.model)
        reference = (req.reference, req.reference_rate) if req.reference is not None else None
        if multimodal.is_multimodal(req):
            found = await self._run(multimodal.answer, req, self.questions, cfg.max_seq_len, self.media,
                                    cfg.audio_limits, cfg.quality_flip, self.videos)
            reply, reference = found.text, reference or found.reference  # audio.ref_audio wins over audios
        else:
            reply = protocol.reply_text(req, cfg.read_aloud_prefixes)
            if flip.chosen(reply, cfg.quality_flip):  # the utterance is its own key: A and B change the same ones
                reply = flip.altered_text(reply, reply)
        text, cut = protocol.truncate_tokens(reply, req.max_tokens)
        seed = 0 if req.temperature == 0 and req.seed is None else req.seed
        factor = 1.0
        if req.wants_audio and reference is not None:
            factor = await self._run(synth.match_factor, *reference)
        base = {"id": f"chatcmpl-{uuid.uuid4().hex}", "created": int(time.time()), "model": self.config.model_name}
        finish = "length" if cut else "stop"
        if req.stream:
            return await self._stream(request, req, text, seed, factor, base, finish, synth)
        audio = None
        if req.wants_audio and text:
            audio = await self._run(synth.speak_like, text, factor, seed=seed)
            await self._delay("first-chunk")  # an answer that does not stream is one chunk
        message: dict[str, Any] = {"role": "assistant", "content": text}
        if audio is not None:
            message["audio"] = {"id": f"audio-{uuid.uuid4().hex}", "transcript": text,
                                "data": base64.b64encode(to_wav_bytes(audio, TTS_RATE)).decode("ascii")}
        return web.json_response({**base, "object": "chat.completion",
                                  "choices": [{"index": 0, "message": message, "finish_reason": finish}],
                                  "usage": self._usage(req, text, audio)})

    def _usage(self, req: protocol.ChatRequest, text: str, audio: np.ndarray | None) -> dict[str, int]:
        completion = protocol.count_tokens(text) + (protocol.audio_tokens(len(audio) / TTS_RATE) if audio is not None else 0)
        return {"prompt_tokens": req.prompt_tokens, "completion_tokens": completion,
                "total_tokens": req.prompt_tokens + completion}

    async def _stream(self, request, req, text, seed, factor, base, finish, synth: Synthesizer) -> web.StreamResponse:
        """Server-sent events: the text, then the answer's audio in pieces of ``stream_chunk_s``,
        then usage and ``[DONE]``. The audio is the one the same request without ``stream`` gets
        (synthesized whole, then cut), so streamed and non-streamed quality (WER, SIM, duration)
        are like for like; only its delivery differs."""
        response = web.StreamResponse(headers={"Content-Type": "text/event-stream", "Cache-Control": "no-cache"})
        await response.prepare(request)

        async def send(delta: dict[str, Any], finish_reason: str | None = None, **extra: Any) -> None:
            chunk = {**base, "object": "chat.completion.chunk",
                     "choices": [{"index": 0, "delta": delta, "finish_reason": finish_reason}], **extra}
            await response.write(f"data: {json.dumps(chunk)}\n\n".encode())

        # the text one token a chunk, as a model's thinker streams it (sglang-omni: one delta.content
        # an engine step); "every-token" plants a gap before each token after the first
        tokens = protocol.split_tokens(text)
        for i, token in enumerate(tokens or [""]):
            if i:
                await self._delay("every-token")
            await send({"role": "assistant", "content": token} if i == 0 else {"content": token})
        pieces: list[np.ndarray] = []
        if req.wants_audio and text:
            step = max(1, int(self.config.stream_chunk_s * TTS_RATE))
            audio = await self._run(synth.speak_like, text, factor, seed=seed)
            for start in range(0, len(audio), step):
                await self._delay("every-chunk" if pieces else "first-chunk")
                piece = audio[start:start + step]
                pieces.append(piece)
                data = base64.b64encode(to_wav_bytes(piece, TTS_RATE)).decode("ascii")
                await send({"audio": {"id": f"audio-{uuid.uuid4().hex}", "data": data}})
        whole = np.concatenate(pieces) if pieces else None
        await send({}, finish, usage=self._usage(req, text, whole))
        await response.write(b"data: [DONE]\n\n")
        await response.write_eof()
        return response

    async def _form(self, request: web.Request):
        if not request.content_type.startswith("multipart/"):
            raise RequestError(400, "send a multipart/form-data body with 'file' and 'model'")
        try:
            return await self._body(request.post())
        except (RequestError, web.HTTPException):
            raise
        except Exception as exc:  # whatever aiohttp's parser trips on, the body came from the client
            raise RequestError(400, f"malformed multipart body ({type(exc).__name__})") from exc

    async def transcriptions(self, request: web.Request) -> web.Response:
        await self._delay()
        form = await self._form(request)
        model = form.get("model")
        if not isinstance(model, str):
            raise RequestError(400, "'model' is required (a form field)")
        self._record("transcriptions", model)
        language = form.get("language") or "en"
        if language != "en":
            shown = language[:40] if isinstance(language, str) else "(a file)"
            raise RequestError(400, f"language {shown!r} is not supported by the local recogniser (en only)")
        upload = form.get("file")
        if upload is None or isinstance(upload, str):
            raise RequestError(400, "'file' is required and must be an uploaded file")
        data = upload.file.read()
        if not data:
            raise RequestError(400, "'file' is empty")
        samples, rate = decode_wav(data, "'file'", self.config.audio_limits)
        text = await self._run(self.heard.transcribe, samples, rate)
        if form.get("response_format") == "text":
            return web.Response(text=text)
        return web.json_response({"text": text})


def build_app(config: ServerConfig, synth: Synthesizer | None, recog: Recognizer) -> web.Application:
    """The aiohttp application with sglang-omni's routes, and ``GET /local/stats``."""
    handlers = Handlers(config, synth, recog)
    app = web.Application(middlewares=[_errors_as_json], client_max_size=config.max_body_mb * 2**20)
    app.router.add_get("/health", handlers.health)
    app.router.add_get("/v1/models", handlers.models)
    app.router.add_post("/v1/chat/completions", handlers.chat)
    app.router.add_post("/v1/audio/transcriptions", handlers.transcriptions)
    app.router.add_get("/local/stats", handlers.stats_view)
    return app

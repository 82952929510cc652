"""The local server's HTTP layer (aiohttp): sglang-omni's routes on real CPU speech engines."""

from __future__ import annotations

import asyncio
import base64
import json
import time
import traceback
import uuid
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

import numpy as np
from aiohttp import web

from ..audio import AudioError, read_wav_bytes, to_wav_bytes
from . import multimodal, protocol
from .protocol import RequestError
from .speech import TTS_RATE, Recognizer, Synthesizer


@dataclass(frozen=True)
class ServerConfig:
    """How the local server runs."""

    model_name: str
    host: str = "127.0.0.1"
    port: int = 8000
    max_seq_len: int = 8192
    workers: int = 2
    max_body_mb: int = 256
    delay_ms: float = 0.0  # added per chat/transcription request before answering


def _error(status: int, detail: str) -> web.Response:
    return web.json_response({"detail": detail}, status=status)


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

    def __init__(self, config: ServerConfig, synth: Synthesizer, recog: Recognizer):
        self.config = config
        self.synth = synth
        self.recog = recog
        self.pool = ThreadPoolExecutor(max_workers=config.workers, thread_name_prefix="speech")

    async def _run(self, fn, *args, **kwargs):
        return await asyncio.get_running_loop().run_in_executor(self.pool, lambda: fn(*args, **kwargs))

    async def health(self, request: web.Request) -> web.Response:
        return web.json_response({"status": "healthy"})

    async def models(self, request: web.Request) -> web.Response:
        name = self.config.model_name
        return web.json_response({"object": "list", "data": [
            {"id": name, "object": "model", "root": name, "created": 0, "owned_by": "omnibench-local"}]})

    async def _delay(self) -> None:
        if self.config.delay_ms > 0:
            await asyncio.sleep(self.config.delay_ms / 1000)

    async def chat(self, request: web.Request) -> web.StreamResponse:
        await self._delay()
        try:
            body = await request.json(loads=json.loads)
        except (ValueError, UnicodeDecodeError) as exc:
            raise RequestError(400, f"request body is not valid JSON: {exc}") from exc
        req = protocol.parse_chat(body, model_name=self.config.model_name, max_seq_len=self.config.max_seq_len)
        if multimodal.is_multimodal(req):
            reply = await self._run(multimodal.answer, req, self.recog, self.config.max_seq_len)
        else:
            reply = protocol.reply_text(req)
        text, cut = protocol.truncate_tokens(reply, req.max_tokens)
        seed = 0 if req.temperature == 0 and req.seed is None else req.seed
        factor = 1.0
        if req.wants_audio and req.reference is not None:
            factor = await self._run(self.synth.match_factor, req.reference, req.reference_rate)
        base = {"id": f"chatcmpl-{uuid.uuid4().hex}", "created": int(time.time()), "model": self.config.model_name}
        finish = "length" if cut else "stop"
        if req.stream:
            return await self._stream(request, req, text, seed, factor, base, finish)
        audio = None
        if req.wants_audio and text:
            audio = await self._run(self.synth.speak_like, text, factor, seed=seed)
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

    async def _stream(self, request, req, text, seed, factor, base, finish) -> web.StreamResponse:
        response = web.StreamResponse(headers={"Content-Type": "text/event-stream", "Cache-Control": "no-cache"})
        await response.prepare(request)

        async def send(delta: dict[str, Any], finish_reason: str | None = None, **extra: Any) -> None:
            chunk = {**base, "object": "chat.completion.chunk",
                     "choices": [{"index": 0, "delta": delta, "finish_reason": finish_reason}], **extra}
            await response.write(f"data: {json.dumps(chunk)}\n\n".encode())

        await send({"role": "assistant", "content": text})
        pieces = []
        if req.wants_audio and text:
            for sentence in protocol.split_sentences(text):
                audio = await self._run(self.synth.speak_like, sentence, factor, seed=seed)
                pieces.append(audio)
                data = base64.b64encode(to_wav_bytes(audio, TTS_RATE)).decode("ascii")
                await send({"audio": {"id": f"audio-{uuid.uuid4().hex}", "data": data}})
        whole = np.concatenate(pieces) if pieces else None
        await send({}, finish, usage=self._usage(req, text, whole))
        await response.write(b"data: [DONE]\n\n")
        await response.write_eof()
        return response

    async def transcriptions(self, request: web.Request) -> web.Response:
        await self._delay()
        if not request.content_type.startswith("multipart/"):
            raise RequestError(400, "send a multipart/form-data body with 'file' and 'model'")
        form = await request.post()
        model = form.get("model")
        if model is None:
            raise RequestError(400, "'model' is required")
        if model != self.config.model_name:
            raise RequestError(404, f"model {model!r} is not served here; this server serves {self.config.model_name!r}")
        language = form.get("language") or "en"
        if language != "en":
            raise RequestError(400, f"language {language!r} is not supported by the local recogniser (en only)")
        upload = form.get("file")
        if upload is None or isinstance(upload, str):
            raise RequestError(400, "'file' is required and must be an uploaded file")
        data = upload.file.read()
        if not data:
            raise RequestError(400, "'file' is empty")
        try:
            samples, rate = read_wav_bytes(data)
        except AudioError as exc:
            raise RequestError(400, f"'file': {exc}") from exc
        if samples.size == 0:
            raise RequestError(400, "'file' holds no audio samples")
        text = await self._run(self.recog.transcribe, samples, rate)
        if form.get("response_format") == "text":
            return web.Response(text=text)
        return web.json_response({"text": text})


def build_app(config: ServerConfig, synth: Synthesizer, recog: Recognizer) -> web.Application:
    """The aiohttp application with sglang-omni's routes."""
    handlers = Handlers(config, synth, recog)
    app = web.Application(middlewares=[_errors_as_json], client_max_size=config.max_body_mb * 2**20)
    app.router.add_get("/health", handlers.health)
    app.router.add_get("/v1/models", handlers.models)
    app.router.add_post("/v1/chat/completions", handlers.chat)
    app.router.add_post("/v1/audio/transcriptions", handlers.transcriptions)
    return app

"""``python -m omnibench_core.local serve --model-name NAME --port N``: the local server.

Like ``sgl-omni serve``, the port stays closed while the engines load, a taken port is an error
(always strict), and SIGTERM stops it. sglang-omni's engine flags (``--thinker.*``,
``--talker.*``) are accepted; ``--thinker.factory.max_seq_len`` sets the context length and the
others are logged and ignored.

Safety flags (the server is safe to leave running on a shared machine; see the README):
``--allowed-local-media-path DIR`` (repeatable; default the omnibench cache folder, where the
local data sets live), ``--max-media-mb``, ``--max-audio-seconds``, ``--idle-timeout``,
``--body-timeout``. ``--engines asr`` serves the recogniser alone (the scoring ASR server).
``--read-aloud-prefix TEXT`` (repeatable) replaces the prompt prefixes after
which the reply is the text to read; the default is sglang-omni's seed-tts prompt.
"""

from __future__ import annotations

import argparse
import sys
import time

from aiohttp import web

from ..toolkit.datasets import default_cache_dir
from ..toolkit.speech import Recognizer, Synthesizer
from .heard import FOLDER
from .protocol import DEFAULT_READ_ALOUD_PREFIXES
from .server import DELAY_ON, ENGINES, ServerConfig, build_app
from .wav import AudioLimits


def main(argv: list[str] | None = None) -> int:
    """Parse flags, load the engines, then open the port and serve until SIGTERM/SIGINT."""
    parser = argparse.ArgumentParser(prog="python -m omnibench_core.local")
    sub = parser.add_subparsers(dest="command", required=True)
    serve = sub.add_parser("serve", help="serve sglang-omni's HTTP API on CPU speech engines")
    serve.add_argument("--model-name", required=True,
                       help="the name /v1/models reports and replies carry, whatever model a request names")
    serve.add_argument("--model-path", default="", help="accepted for sglang-omni compatibility; recorded only")
    serve.add_argument("--host", default="127.0.0.1")
    serve.add_argument("--port", type=int, default=8000)
    serve.add_argument("--max-seq-len", "--thinker.factory.max_seq_len", dest="max_seq_len", type=int, default=8192)
    serve.add_argument("--workers", type=int, default=2, help="synthesis/recognition threads")
    serve.add_argument("--engines", choices=ENGINES, default="speech",
                       help="what it serves: 'speech' (the default: the synthesizer, loaded before the port "
                            "opens, and the recogniser, for a model that answers chat) or 'asr' (the recogniser alone, "
                            "for the ASR model of scoring: chat is refused with 400). Either loads the recogniser "
                            "when audio it has not heard first needs it")
    serve.add_argument("--read-aloud-prefix", action="append", metavar="TEXT",
                       help="a prompt starting with TEXT is answered with the rest (repeatable; replaces the "
                            f"default, sglang-omni's seed-tts prompt {DEFAULT_READ_ALOUD_PREFIXES[0]!r}; "
                            "'' for none: the reply is the prompt)")
    serve.add_argument("--allowed-local-media-path", action="append", metavar="DIR",
                       help="folder whose files requests may name in 'videos'/'audios' (repeatable; default: "
                            "the omnibench cache folder, $OMNIBENCH_CACHE or ~/.cache/omnibench)")
    serve.add_argument("--max-media-mb", type=int, default=256, help="largest media file a request may name")
    serve.add_argument("--max-audio-seconds", type=float, default=600.0, help="longest input audio")
    serve.add_argument("--idle-timeout", type=float, default=30.0,
                       help="seconds before a connection that sends no request is closed")
    serve.add_argument("--body-timeout", type=float, default=60.0,
                       help="seconds a request body may take to arrive (else 408)")
    serve.add_argument("--delay-ms", type=float, default=0.0,
                       help="added latency, slept asynchronously where --delay-on says (a planted regression)")
    serve.add_argument("--delay-on", choices=DELAY_ON, default="request",
                       help="where --delay-ms goes: before each chat/transcription request (default), or before the "
                            "first / every audio chunk of a chat answer (an answer that does not stream is one chunk), or "
                            "between the text tokens of a streamed answer (every-token)")
    serve.add_argument("--stream-chunk-ms", type=float, default=500.0,
                       help="length of each audio piece of a streamed answer")
    serve.add_argument("--quality-flip", type=float, default=0.0, metavar="P",
                       help="a planted quality change: a share P (0 to 1) of video questions is answered with another "
                            "letter and of spoken answers has words dropped or replaced; the same samples every run")
    serve.add_argument("--heard-dir", metavar="DIR",
                       help="folder where transcripts (of video questions' spoken audio, and what "
                            "/v1/audio/transcriptions is sent) are kept for the servers started after this one, keyed "
                            "by the recogniser and the audio (default: heard/ in the omnibench cache folder; '' keeps "
                            "them in memory only)")
    args, ignored = parser.parse_known_args(argv)
    if not 0 <= args.quality_flip <= 1:
        parser.error(f"--quality-flip {args.quality_flip:g} is outside 0..1")
    unknown = [a for a in ignored if a.startswith("--") and not a.startswith(("--thinker.", "--talker."))]
    if unknown:
        parser.error(f"unrecognized arguments: {' '.join(unknown)}")
    if ignored:
        print(f"ignoring sglang-omni engine flags: {' '.join(ignored)}", flush=True)
    t0 = time.monotonic()
    print(f"loading speech engines for {args.model_name!r} (model path {args.model_path or '-'})", flush=True)
    synth = Synthesizer(args.workers) if args.engines == "speech" else None
    # either server hears only audio its heard cache lacks (a spoken question, an answer scored
    # before): its decoders are loaded when first needed (most starts never are: 0.5 CPU-s a start
    # saved, issue 40)
    recog = Recognizer(args.workers)
    voice = (f"; voice pitch {synth.voice_f0:.0f} Hz" if synth is not None else "; recogniser only (--engines asr)") \
        + "; recogniser loaded when first needed"
    print(f"engines loaded in {time.monotonic() - t0:.2f} s{voice}", flush=True)
    prefixes = DEFAULT_READ_ALOUD_PREFIXES if args.read_aloud_prefix is None else tuple(
        p for p in args.read_aloud_prefix if p.strip())
    roots = tuple(args.allowed_local_media_path or [str(default_cache_dir())])
    config = ServerConfig(model_name=args.model_name, host=args.host, port=args.port, max_seq_len=args.max_seq_len,
                          workers=args.workers, read_aloud_prefixes=prefixes, media_roots=roots,
                          max_media_mb=args.max_media_mb, idle_timeout_s=args.idle_timeout,
                          body_timeout_s=args.body_timeout, delay_ms=args.delay_ms, delay_on=args.delay_on,
                          stream_chunk_s=max(args.stream_chunk_ms, 1.0) / 1000, quality_flip=args.quality_flip,
                          audio_limits=AudioLimits(max_seconds=args.max_audio_seconds),
                          heard_dir=str(default_cache_dir() / FOLDER) if args.heard_dir is None else args.heard_dir)
    print(f"local media allowed under: {', '.join(roots)}", flush=True)
    try:
        web.run_app(build_app(config, synth, recog), host=config.host, port=config.port, print=None,
                    access_log=None, handle_signals=True, keepalive_timeout=config.idle_timeout_s)
    except OSError as exc:
        print(f"cannot serve on {config.host}:{config.port}: {exc}", file=sys.stderr, flush=True)
        return 1
    print("Pipeline stopped.", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())

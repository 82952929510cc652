"""``python -m omnibench_core.local serve --model-name NAME --port N``: the local server.

Like ``sgl-omni serve``, the port stays closed while the engines load, a taken port is an error
(always strict), and SIGTERM stops it. sglang-omni's engine flags (``--thinker.*``,
``--talker.*``) are accepted; ``--thinker.factory.max_seq_len`` sets the context length and the
others are logged and ignored.
"""

from __future__ import annotations

import argparse
import sys
import time

from aiohttp import web

from .server import ServerConfig, build_app
from .speech import Recognizer, Synthesizer


def main(argv: list[str] | None = None) -> int:
    """Parse flags, load the engines, then open the port and serve until SIGTERM/SIGINT."""
    parser = argparse.ArgumentParser(prog="python -m omnibench_core.local")
    sub = parser.add_subparsers(dest="command", required=True)
    serve = sub.add_parser("serve", help="serve sglang-omni's HTTP API on CPU speech engines")
    serve.add_argument("--model-name", required=True, help="the name /v1/models reports and requests must use")
    serve.add_argument("--model-path", default="", help="accepted for sglang-omni compatibility; recorded only")
    serve.add_argument("--host", default="127.0.0.1")
    serve.add_argument("--port", type=int, default=8000)
    serve.add_argument("--max-seq-len", "--thinker.factory.max_seq_len", dest="max_seq_len", type=int, default=8192)
    serve.add_argument("--workers", type=int, default=2, help="synthesis/recognition threads")
    serve.add_argument("--delay-ms", type=float, default=0.0,
                       help="added latency per chat/transcription request, slept asynchronously (a planted regression)")
    args, ignored = parser.parse_known_args(argv)
    unknown = [a for a in ignored if a.startswith("--") and not a.startswith(("--thinker.", "--talker."))]
    if unknown:
        parser.error(f"unrecognized arguments: {' '.join(unknown)}")
    if ignored:
        print(f"ignoring sglang-omni engine flags: {' '.join(ignored)}", flush=True)
    t0 = time.monotonic()
    print(f"loading speech engines for {args.model_name!r} (model path {args.model_path or '-'})", flush=True)
    synth, recog = Synthesizer(args.workers), Recognizer(args.workers)
    print(f"engines loaded in {time.monotonic() - t0:.2f} s; voice pitch {synth.voice_f0:.0f} Hz", flush=True)
    config = ServerConfig(model_name=args.model_name, host=args.host, port=args.port, max_seq_len=args.max_seq_len,
                          workers=args.workers, delay_ms=args.delay_ms)
    try:
        web.run_app(build_app(config, synth, recog), host=config.host, port=config.port, print=None,
                    access_log=None, handle_signals=True)
    except OSError as exc:
        print(f"cannot serve on {config.host}:{config.port}: {exc}", file=sys.stderr, flush=True)
        return 1
    print("Pipeline stopped.", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())

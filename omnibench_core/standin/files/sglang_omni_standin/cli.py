"""``sgl-omni serve``: the stand-in's server command.

It accepts the flags the runbook and CI pass (``--model-path``, ``--model-name``, ``--port``,
``--host``, ``--text-only`` and the ``--thinker.*``/``--talker.*`` engine flags), checks the port
as sglang-omni does (``SGLANG_OMNI_STRICT_PORT=1``: a taken port is an error; otherwise it moves to
a free one and says so), then replaces itself with omnibench's local server, so the process the
caller started is the server. This commit's ``standin.json`` may add per-request latency
(``delay_ms``, passed on as the local server's ``--delay-ms``).

One model is the stand-in's own: ``--model-path selftest`` (what omnibench's selftest workload
asks for with ``selftest.serve_with_target=true``) becomes omnibench's selftest server instead,
with the same ``delay_ms``, and ``--delay SECONDS`` is its loading time (the port stays closed
that long). Any other model with ``--delay`` is refused: sglang-omni has no such flag.
"""

from __future__ import annotations

import argparse
import os
import socket
import sys
from pathlib import Path

from sglang_omni_standin import ROOT, main_root, settings

# one file per live server, in the stand-in's own checkout (also for a worktree): the fake nvidia-smi reads them
GPU_STATE = main_root(ROOT) / ".standin" / "gpu"
SELFTEST = "selftest"  # omnibench's selftest workload's model path (omnibench_core.builtin.selftest.NAME)


def _port_free(host: str, port: int) -> bool:
    with socket.socket() as sock:
        # as the server binds: connections of a stopped server in TIME_WAIT must not count
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind((host, port))
        except OSError:
            return False
    return True


def _free_port(host: str) -> int:
    with socket.socket() as sock:
        sock.bind((host, 0))
        return sock.getsockname()[1]


def _delay_supported(module: str = "omnibench_core.local.__main__") -> bool:
    """Whether this omnibench's server ``module`` has ``--delay-ms`` (added per-request latency).
    Read, not imported: importing the local server loads its speech engines' libraries."""
    import importlib.util

    spec = importlib.util.find_spec(module)
    origin = spec.origin if spec is not None else None
    return origin is not None and "--delay-ms" in Path(origin).read_text()


def parse(argv: list[str]) -> tuple[argparse.Namespace, list[str]]:
    """The ``serve`` flags, and the engine flags (``--thinker.*``, ``--talker.*``) passed on."""
    parser = argparse.ArgumentParser(prog="sgl-omni")
    sub = parser.add_subparsers(dest="command", required=True)
    serve = sub.add_parser("serve", help="serve the OpenAI-compatible API (omnibench's CPU server)")
    serve.add_argument("--model-path", required=True)
    serve.add_argument("--model-name", default="", help="what /v1/models reports (default: the model path)")
    serve.add_argument("--host", default="127.0.0.1", help="the stand-in binds loopback unless told otherwise")
    serve.add_argument("--port", type=int, default=8000)
    serve.add_argument("--text-only", action="store_true", help="accepted as CI's text stages pass it")
    serve.add_argument("--delay", type=float, default=None,
                       help=f"--model-path {SELFTEST} only: seconds its server loads with the port closed")
    args, rest = parser.parse_known_args(argv)
    if args.delay is not None and args.model_path != SELFTEST:
        parser.error(f"--delay is the {SELFTEST} model's loading time; sglang-omni has no such flag")
    engine = []
    i = 0
    while i < len(rest):  # --thinker.x VALUE / --talker.x=VALUE pairs, nothing else
        flag = rest[i]
        if not flag.startswith(("--thinker.", "--talker.")):
            parser.error(f"unrecognized argument: {flag}")
        if "=" in flag or i + 1 >= len(rest):
            engine.append(flag)
            i += 1
        else:
            engine += [flag, rest[i + 1]]
            i += 2
    return args, engine


def serve_argv(args: argparse.Namespace, engine: list[str], port: int, delay_ms: float) -> list[str]:
    """The server's argv for these flags: the selftest server for ``--model-path selftest``, else the local server."""
    if args.model_path == SELFTEST:
        argv = [sys.executable, "-m", "omnibench_core.builtin.selftest", "serve", "--host", args.host, "--port", str(port)]
        if args.delay is not None:
            argv += ["--delay", f"{args.delay:g}"]
        return argv + (["--delay-ms", f"{delay_ms:g}"] if delay_ms else [])
    argv = [sys.executable, "-m", "omnibench_core.local", "serve", "--model-path", args.model_path,
            "--model-name", args.model_name or args.model_path, "--host", args.host, "--port", str(port), *engine]
    if delay_ms:
        argv += ["--delay-ms", f"{delay_ms:g}"]
    return argv


def main(argv: list[str] | None = None) -> int:
    """Check the port, then exec omnibench's local server."""
    args, engine = parse(sys.argv[1:] if argv is None else argv)
    port = args.port
    if not _port_free(args.host, port):
        if os.environ.get("SGLANG_OMNI_STRICT_PORT") == "1":
            print(f"Port {port} is already in use and SGLANG_OMNI_STRICT_PORT=1: not moving", file=sys.stderr, flush=True)
            return 1
        port = _free_port(args.host)  # sglang-omni's default: move silently, but log it
        print(f"Port {args.port} is already in use. Using port {port} instead.", flush=True)
    delay_ms = float(settings().get("delay_ms", 0) or 0)
    if delay_ms and not _delay_supported("omnibench_core.builtin.selftest" if args.model_path == SELFTEST else
                                          "omnibench_core.local.__main__"):
        print(f"standin.json asks for {delay_ms:g} ms of added latency, but this omnibench's local server has "
              "no --delay-ms flag; update omnibench", file=sys.stderr, flush=True)
        return 2
    full = serve_argv(args, engine, port, delay_ms)
    print(f"sgl-omni (stand-in) serving {args.model_name or args.model_path} on {args.host}:{port}: "
          f"{' '.join(full)}", flush=True)
    GPU_STATE.mkdir(parents=True, exist_ok=True)
    for old in GPU_STATE.glob("*.pid"):  # servers long gone: their files only slow the fake down
        if old.stem.isdigit() and not Path(f"/proc/{old.stem}").exists():
            old.unlink(missing_ok=True)
    # exec keeps this pid, so the fake nvidia-smi sees memory in use exactly while the server lives
    (GPU_STATE / f"{os.getpid()}.pid").write_text(os.environ.get("CUDA_VISIBLE_DEVICES", "0") + "\n")
    os.execv(sys.executable, full)
    return 127  # not reached


if __name__ == "__main__":
    sys.exit(main())

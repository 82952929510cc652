"""``sgl-omni serve``: the stand-in's server command.

It parses upstream's ``serve`` flags (``--model-path``, ``--config``, ``--model-name``, ``--port``,
``--host``, ``--text-only``, ``--allowed-local-media-path``, ``--mem-fraction-static``, ... and the
dotted stage flags of every stage of MiniCPM-o's pipeline), refuses what upstream refuses, checks the port
as sglang-omni does (``SGLANG_OMNI_STRICT_PORT=1``: a taken port is an error; otherwise it moves to
a free one and says so), then replaces itself with omnibench's local server, so the process the
caller started is the server. This commit's ``standin.json`` may add per-request latency
(``delay_ms``, passed on as the local server's ``--delay-ms``) and a loading time (``startup_s``:
the port stays closed that long, as while a GPU host loads weights) and a planted quality change
(``quality_flip``, 0 to 1: passed on as the local server's ``--quality-flip``; real sglang-omni has
no such setting, it is the stand-in's test plant).

A commit whose ``standin.json`` says ``"serve_era": "legacy-1b4b375"`` (``invoke standin
--serve-era-from``) serves as upstream's legacy serve did: named flags (``--thinker-mem-fraction-static``,
``--talker-mem-fraction-static``, ``--thinker-max-seq-len``, ``--version``...) and no dotted stage
flags; every other ``--a.b.c VALUE`` is walked as a raw path into the pipeline config, so a stage
name is a ``KeyError`` (a traceback, exit 1), as upstream's config manager raised it.

One model is the stand-in's own: ``--model-path selftest`` (what omnibench's selftest workload
asks for with ``selftest.serve_with_target=true``) becomes omnibench's selftest server instead,
with the same ``delay_ms``, and ``--delay SECONDS`` is its loading time (the port stays closed
that long). Any other model with ``--delay`` is refused: sglang-omni has no such flag.
"""

from __future__ import annotations

import argparse
import math
import os
import socket
import sys
import time
from pathlib import Path

from sglang_omni_standin import ROOT, SettingsFileError, main_root, settings

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


LEGACY_ERA = "legacy-1b4b375"  # omnibench_core.builtin.serve_flags.LEGACY_V1_SWITCH.name
# the legacy pipeline config's top-level keys: the first segment a raw config path may start with
LEGACY_CONFIG_KEYS = ("model_path", "stages", "name", "entry_stage", "fused_stages", "runtime_overrides",
                      "env_defaults", "placement", "placement_policy", "endpoints", "terminal_stages_fn", "config_cls")


def parse_legacy(argv: list[str]) -> tuple[argparse.Namespace, list[str]]:
    """``serve``'s flags as upstream's legacy serve took them (no dotted stage flags), and the
    engine settings they make for the CPU server (in the dotted form the local server reads)."""
    parser = argparse.ArgumentParser(prog="sgl-omni")
    sub = parser.add_subparsers(dest="command", required=True)
    serve = sub.add_parser("serve", help="serve the OpenAI-compatible API (omnibench's CPU server; legacy serve)")
    serve.add_argument("--model-path", required=True, help="the model")
    serve.add_argument("--config", help="a pipeline config file")
    serve.add_argument("--text-only", action="store_true", help="the thinker-only pipeline")
    serve.add_argument("--host", default="127.0.0.1", help="bind address (upstream's default: 0.0.0.0)")
    serve.add_argument("--port", type=int, default=8000)
    serve.add_argument("--model-name", default="", help="what /v1/models reports")
    serve.add_argument("--mem-fraction-static", type=float, help="every stage that supports it")
    serve.add_argument("--thinker-mem-fraction-static", type=float, help="the thinker's; over --mem-fraction-static")
    serve.add_argument("--talker-mem-fraction-static", type=float, help="the talker's; over --mem-fraction-static")
    serve.add_argument("--thinker-max-seq-len", type=int, help="the thinker's max sequence length")
    serve.add_argument("--encoder-mem-reserve", type=float, help="a fraction kept for the encoder")
    serve.add_argument("--version", default="legacy", choices=("legacy", "v1"), help="which server implementation")
    serve.add_argument("--log-level", default="info", choices=("debug", "info", "warning", "error", "critical"))
    serve.add_argument("--delay", type=float, default=None,
                       help=f"--model-path {SELFTEST} only: seconds its server loads with the port closed")
    args, rest = parser.parse_known_args(argv)
    args.allowed_local_media_path = None
    if args.delay is not None and args.model_path != SELFTEST:
        parser.error(f"--delay is the {SELFTEST} model's loading time; sglang-omni has no such flag")
    for name in ("mem_fraction_static", "thinker_mem_fraction_static", "talker_mem_fraction_static"):
        value = getattr(args, name)
        if value is not None and not 0.0 < value < 1.0:
            parser.error(f"--{name.replace('_', '-')} must be > 0 and < 1, got {value}")
    if args.thinker_max_seq_len is not None and args.thinker_max_seq_len <= 0:
        parser.error("--thinker-max-seq-len must be a positive integer.")
    i = 0
    while i < len(rest):  # the config manager's KEY VALUE / KEY=VALUE pairs, each key a raw config path
        key, eq, _ = rest[i].lstrip("-").partition("=")
        i += 1 if eq else 2
        first = key.replace("-", "_").split(".")[0]
        if first not in LEGACY_CONFIG_KEYS:
            print("Traceback (most recent call last):\n  File \"sglang_omni/config/manager.py\", in merge_config\n"
                  f"    current = current[k]\nKeyError: {first!r}", file=sys.stderr, flush=True)
            raise SystemExit(1)
    engine = [f"--{key}={value}" for key, value in (
        ("thinker.engine.mem_fraction_static", args.thinker_mem_fraction_static or args.mem_fraction_static),
        ("talker.engine.mem_fraction_static", args.talker_mem_fraction_static or args.mem_fraction_static),
        ("thinker.factory.max_seq_len", args.thinker_max_seq_len)) if value is not None]
    return args, engine


def parse(argv: list[str]) -> tuple[argparse.Namespace, list[str]]:
    """``serve``'s flags as upstream's ``sgl-omni serve`` takes them, and the dotted stage flags.

    Upstream's dotted flags (``--<stage>.<field> VALUE``) are compiled against the model's pipeline:
    an unknown stage or field, a value of the wrong type, ``--stages.`` or a flag without a value is
    a usage error, exit 2, never merged. The rules are omnibench's record of upstream's
    (``omnibench_core.builtin.serve_flags``, held to ``tests/fixtures/upstream/sgl-omni-serve.json``).
    Returns the parsed flags and the dotted pairs the CPU server understands (``--thinker.*``,
    ``--talker.*``); the other stages' settings are accepted and have nothing to set here.
    """
    from omnibench_core.builtin.serve_flags import TEXT_ONLY_STAGES, dotted_problem

    if settings().get("serve_era") == LEGACY_ERA:
        return parse_legacy(argv)
    parser = argparse.ArgumentParser(prog="sgl-omni")
    sub = parser.add_subparsers(dest="command", required=True)
    serve = sub.add_parser("serve", help="serve the OpenAI-compatible API (omnibench's CPU server)")
    serve.add_argument("--model-path", help="required unless --config gives one")
    serve.add_argument("--config", help="a pipeline config file (its model_path is read)")
    serve.add_argument("--text-only", action="store_true", help="the thinker-only pipeline")
    serve.add_argument("--colocate", action="store_true", help="needs --config; not with --text-only")
    # upstream binds 0.0.0.0 by default; the stand-in stays on loopback, where its tests run
    serve.add_argument("--host", default="127.0.0.1", help="bind address (upstream's default: 0.0.0.0)")
    serve.add_argument("--port", type=int, default=8000)
    serve.add_argument("--model-name", default="", help="what /v1/models reports (default: the model path)")
    serve.add_argument("--allowed-local-media-path", "--allowed_local_media_path", dest="allowed_local_media_path",
                       help="the folder local media must resolve inside")
    serve.add_argument("--allowed-media-domain", "--allowed_media_domain", action="append", default=[],
                       help="a domain remote media may come from (repeatable)")
    serve.add_argument("--tts-batch-max-items", type=int, default=32, help="largest /v1/audio/speech/batch")
    serve.add_argument("--mem-fraction-static", type=float, help="engine.mem_fraction_static of every engine stage")
    serve.add_argument("--log-level", default="info", choices=("debug", "info", "warning", "error", "critical"))
    serve.add_argument("--enable-realtime", "--enable_realtime", action="store_true", help="/v1/realtime")
    serve.add_argument("--delay", type=float, default=None,
                       help=f"--model-path {SELFTEST} only: seconds its server loads with the port closed")
    args, rest = parser.parse_known_args(argv)
    if args.delay is not None and args.model_path != SELFTEST:
        parser.error(f"--delay is the {SELFTEST} model's loading time; sglang-omni has no such flag")
    if args.colocate and (args.text_only or not args.config):
        parser.error("--colocate requires --config and cannot be combined with --text-only")
    if args.config and not args.model_path:
        args.model_path = _config_model_path(Path(args.config), parser)
    if not args.model_path:
        parser.error("--model-path is required unless --config is set")
    stages = TEXT_ONLY_STAGES if args.text_only else None
    engine: list[str] = []
    i = 0
    while i < len(rest):  # KEY VALUE / KEY=VALUE pairs, as upstream pairs them; then judged as config paths
        flag = rest[i]
        key, eq, value = flag.lstrip("-").partition("=")
        if not eq:
            if i + 1 >= len(rest):
                parser.error(f"Missing value for argument: {flag}")
            value = rest[i + 1]
            i += 1
        i += 1
        problem = dotted_problem(key, value, stages) if stages else dotted_problem(key, value)
        if problem:
            parser.error(problem)
        if key.startswith(("thinker.", "talker.")):
            engine.append(f"--{key}={value}")
    return args, engine


def _config_model_path(config: Path, parser: argparse.ArgumentParser) -> str:
    """The ``model_path:`` line of a pipeline config file (the stand-in reads no other key)."""
    try:
        lines = config.read_text().splitlines()
    except OSError as exc:
        parser.error(f"Config file {str(config)!r} does not exist ({exc.strerror})")
    for line in lines:
        key, sep, value = line.partition(":")
        if sep and key.strip() == "model_path":
            return value.strip().strip("'\"")
    parser.error(f"Config file {str(config)!r} sets no model_path")


def serve_argv(args: argparse.Namespace, engine: list[str], port: int, delay_ms: float,
               quality_flip: float = 0.0) -> list[str]:
    """The server's argv for these flags: the selftest server for ``--model-path selftest``, else the local server
    (with ``quality_flip``, the share of samples it answers differently)."""
    if args.model_path == SELFTEST:
        argv = [sys.executable, "-m", "omnibench_core.builtin.selftest_programs", "serve", "--host", args.host, "--port", str(port)]
        if args.delay is not None:
            argv += ["--delay", f"{args.delay:g}"]
        return argv + (["--delay-ms", f"{delay_ms:g}"] if delay_ms else [])
    argv = [sys.executable, "-m", "omnibench_core.local", "serve", "--model-path", args.model_path,
            "--model-name", args.model_name or args.model_path, "--host", args.host, "--port", str(port), *engine]
    if args.allowed_local_media_path:
        argv += ["--allowed-local-media-path", args.allowed_local_media_path]
    if delay_ms:
        argv += ["--delay-ms", f"{delay_ms:g}"]
    if quality_flip:
        argv += ["--quality-flip", f"{quality_flip:g}"]
    return argv


class BadSetting(ValueError):
    """A hand-edited ``standin.json`` value that is not a finite number >= 0; its message is the
    one line the stand-in prints before exiting 2."""


def _number_setting(key: str) -> float:
    """``standin.json``'s ``key`` as a finite number >= 0 (0 when unset); else :class:`BadSetting`
    saying why: the file is hand-editable, and a bad value must not end in a traceback."""
    raw = settings().get(key, 0) or 0
    try:
        value = float(raw)
    except (TypeError, ValueError):
        value = float("nan")
    if isinstance(raw, bool) or not math.isfinite(value) or value < 0:
        raise BadSetting(f"standin.json's {key} is {raw!r}, not a finite number >= 0; fix it in this commit's "
                         "standin.json or make the checkout again with invoke standin")
    return value


def main(argv: list[str] | None = None) -> int:
    """Check the port, then exec omnibench's local server."""
    try:
        settings()  # a hand-edited standin.json that is no settings object: one line, exit 2
    except SettingsFileError as exc:
        print(exc, file=sys.stderr, flush=True)
        return 2
    args, engine = parse(sys.argv[1:] if argv is None else argv)
    port = args.port
    if not _port_free(args.host, port):
        if os.environ.get("SGLANG_OMNI_STRICT_PORT") == "1":
            print(f"Port {port} is already in use and SGLANG_OMNI_STRICT_PORT=1: not moving", file=sys.stderr, flush=True)
            return 1
        port = _free_port(args.host)  # sglang-omni's default: move silently, but log it
        print(f"Port {args.port} is already in use. Using port {port} instead.", flush=True)
    try:
        delay_ms, startup_s = _number_setting("delay_ms"), _number_setting("startup_s")
        quality_flip = _number_setting("quality_flip")
        if quality_flip > 1:
            raise BadSetting(f"standin.json's quality_flip is {quality_flip:g}, not a share of samples from 0 to 1; "
                             "fix it in this commit's standin.json or make the checkout again with invoke standin")
    except BadSetting as exc:
        print(exc, file=sys.stderr, flush=True)
        return 2
    if delay_ms and not _delay_supported("omnibench_core.builtin.selftest_programs" if args.model_path == SELFTEST else
                                          "omnibench_core.local.__main__"):
        print(f"standin.json asks for {delay_ms:g} ms of added latency, but this omnibench's local server has "
              "no --delay-ms flag; update omnibench", file=sys.stderr, flush=True)
        return 2
    full = serve_argv(args, engine, port, delay_ms, quality_flip)
    print(f"sgl-omni (stand-in) serving {args.model_name or args.model_path} on {args.host}:{port}: "
          f"{' '.join(full)}", flush=True)
    GPU_STATE.mkdir(parents=True, exist_ok=True)
    for old in GPU_STATE.glob("*.pid"):  # servers long gone: their files only slow the fake down
        if old.stem.isdigit() and not Path(f"/proc/{old.stem}").exists():
            old.unlink(missing_ok=True)
    # exec keeps this pid, so the fake nvidia-smi sees memory in use exactly while the server lives
    (GPU_STATE / f"{os.getpid()}.pid").write_text(os.environ.get("CUDA_VISIBLE_DEVICES", "0") + "\n")
    if startup_s:  # a GPU host's weight loading, scaled down: the GPU is held, the port still closed
        print(f"loading the model for {startup_s:g} s (standin.json startup_s)", flush=True)
        time.sleep(startup_s)
    os.execv(sys.executable, full)
    return 127  # not reached


if __name__ == "__main__":
    sys.exit(main())

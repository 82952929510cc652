"""What ``sgl-omni serve`` accepts, as upstream sglang-omni parses it, and the check that refuses the rest.

Facts, not code, from upstream's own files (``sglang_omni/cli/serve.py`` and the config path
compiler it delegates dotted flags to, ``sglang_omni/config/{manager,sources,path,schema}.py``, and
MiniCPM-o's pipeline in ``sglang_omni/models/minicpm_o/config.py``), recorded with repository, path and
commit in ``tests/fixtures/upstream/sgl-omni-serve.json``; ``tests/test_contracts.py`` holds this
module to that record. Upstream refuses an unknown ``--<stage>.<field>`` with a usage error (exit 2)
after the server command has started loading; omnibench refuses it before any server starts.
"""

from __future__ import annotations

from collections.abc import Sequence

from omnibench_core.errors import SettingsError

# serve's own flags and the type of their value (None: a switch without a value)
TOP_FLAGS: dict[str, str | None] = {
    "--model-path": "str", "--config": "str", "--text-only": None, "--colocate": None, "--host": "str",
    "--port": "int", "--model-name": "str", "--allowed-local-media-path": "str",
    "--allowed_local_media_path": "str", "--allowed-media-domain": "str", "--allowed_media_domain": "str",
    "--tts-batch-max-items": "int", "--mem-fraction-static": "float", "--log-level": "str",
    "--enable-realtime": None, "--enable_realtime": None,
}
# MiniCPM-o's speech pipeline (the text variant, --text-only, has the first five)
STAGES = ("preprocessing", "thinker", "image_encoder", "audio_encoder", "decode", "talker", "code2wav")
TEXT_ONLY_STAGES = STAGES[:5]
ENGINE_STAGES = ("thinker", "talker")
STAGE_FIELDS: dict[str, str] = {
    "gpu": "int", "tp_size": "int", "process": "str", "gpu_memory_fraction": "float",
    "total_reserve_bytes": "str", "enforce_total_reserve": "bool", "can_accept_stream_before_payload": "bool",
    "disable_direct_cuda_ipc_payload": "bool",
}
GROUPS = ("engine", "factory", "env", "comm")  # settings groups: a flag names one key below them
ENGINE_KEYS: dict[str, str] = {
    "mem_fraction_static": "float", "max_running_requests": "int", "max_total_tokens": "int",
    "cuda_graph_max_bs": "int", "disable_cuda_graph": "bool", "enable_torch_compile": "bool",
    "torch_compile_max_bs": "int", "cpu_offload_gb": "int", "quantization": "str",
    "disable_custom_all_reduce": "bool", "kv_cache_bytes": "str",
}
FACTORY_KEYS: dict[str, str] = {
    "device": "str", "dtype": "str", "max_seq_len": "int", "video_fps": "float", "max_new_tokens": "int",
    "context_length": "int", "max_concurrency": "int", "max_batch_size": "int", "max_batch_wait_ms": "float",
    "enable_async_decode": "bool", "async_decode_min_batch_size": "int", "prefill_coalesce_requests": "int",
    "prefill_coalesce_wait_ms": "float", "prefill_coalesce_when_idle": "bool", "encoder_mem_reserve": "float",
    "enable_partial_start": "bool", "partial_start_min_chunks": "int",
}
COMM_KEYS = ("slot_size_mb", "credits", "cuda_ipc_slot_size_kb", "cuda_ipc_pool_size_mb", "mooncake_protocol",
             "mooncake_hostname", "mooncake_device_name")
# omnibench's selftest model: upstream never serves it, only the stand-in's `sgl-omni serve` does
# (selftest.serve_with_target), and there it takes one flag of its own, its loading time
OWN_MODEL = "selftest"
OWN_MODEL_FLAGS: dict[str, str | None] = {"--delay": "float"}
HINT = ("write --<stage>.<field> VALUE with a stage of MiniCPM-o's pipeline ("
        + ", ".join(STAGES) + "); engine.* only on " + " and ".join(ENGINE_STAGES))


def _fits(value: str, kind: str) -> bool:
    """Whether ``value`` converts to ``kind`` as upstream's lossless scalar rule allows (no float for an int)."""
    if kind == "int":
        return value.lstrip("-").isdigit() or value.lower() == "none"
    if kind == "float":
        try:
            float(value)
        except ValueError:
            return value.lower() == "none"
        return value.lower() not in ("true", "false")
    if kind == "bool":
        return value.lower() in ("true", "false", "0", "1", "none")
    return True


def dotted_problem(key: str, value: str, stages: Sequence[str] = STAGES) -> str | None:
    """Why upstream refuses ``--key value`` (``key`` without dashes), or None when it takes it."""
    head, _, rest = key.partition(".")
    head = head.replace("-", "_")
    if head == "stages" and rest:
        return f"--{key}: the stages. prefix is implied on the command line; write --{rest}"
    if head not in stages:
        return f"--{key}: no stage {head!r} in this pipeline"
    field, _, sub = rest.partition(".")
    kind: str | None
    if field in GROUPS:
        if not sub:
            return f"--{key} addresses a settings group, not a single value"
        if field == "engine" and head not in ENGINE_STAGES:
            return f"--{key}: engine.* exists only on engine stages ({', '.join(ENGINE_STAGES)})"
        if field == "comm" and sub not in COMM_KEYS:
            return f"--{key}: comm has no field {sub!r}"
        kind = {"engine": ENGINE_KEYS, "factory": FACTORY_KEYS}.get(field, {}).get(sub)
    elif field in STAGE_FIELDS and not sub:
        kind = STAGE_FIELDS[field]
    else:
        return f"--{key}: stage {head!r} has no setting {field!r}"
    if kind is not None and not _fits(value, kind):
        return f"--{key} expects {kind}, got {value!r}"
    return None


def check_serve_args(args: Sequence[str], text_only: bool = False, model_path: str = "") -> None:
    """Refuse, as a SettingsError naming the flag, what upstream's ``sgl-omni serve`` would refuse in ``args``
    (serve's own flags and ``--<stage>.<field> VALUE`` / ``--<stage>.<field>=VALUE`` pairs). For
    ``model_path`` ``selftest`` (``OWN_MODEL``) the stand-in's ``--delay`` is accepted too."""
    stages = TEXT_ONLY_STAGES if text_only or "--text-only" in args else STAGES
    top = {**TOP_FLAGS, **OWN_MODEL_FLAGS} if model_path == OWN_MODEL else TOP_FLAGS
    i = 0
    while i < len(args):
        flag = args[i]
        if flag in top:
            kind = top[flag]
            if kind is None:
                i += 1
                continue
            if i + 1 >= len(args):
                raise SettingsError(f"sgl-omni serve: {flag} needs a value", hint=HINT)
            if not _fits(args[i + 1], kind):
                raise SettingsError(f"sgl-omni serve: {flag} expects {kind}, got {args[i + 1]!r}", hint=HINT)
            i += 2
            continue
        if not flag.startswith("--") or "." not in flag.split("=", 1)[0]:
            raise SettingsError(f"sgl-omni serve has no flag {flag!r} (upstream exits 2)", hint=HINT)
        key, eq, value = flag[2:].partition("=")
        if not eq:
            if i + 1 >= len(args):
                raise SettingsError(f"sgl-omni serve: missing value for {flag}", hint=HINT)
            value = args[i + 1]
            i += 1
        i += 1
        problem = dotted_problem(key, value, stages)
        if problem:
            raise SettingsError(f"sgl-omni serve refuses {problem} (upstream exits 2 before serving)", hint=HINT)

"""What ``sgl-omni serve`` accepts, as upstream sglang-omni parses it, era by era, and the check that
spells the runbook's settings in a checkout's era and refuses the rest.

Facts, not code, from upstream's own files (``sglang_omni/cli/serve.py`` and the config path
compiler it delegates dotted flags to, ``sglang_omni/config/{manager,sources,path,schema}.py``, and
MiniCPM-o's pipeline in ``sglang_omni/models/minicpm_o/config.py``), recorded with repository, path and
commit in ``tests/fixtures/upstream/sgl-omni-serve.json``; ``tests/test_contracts.py`` holds this
module to that record. Upstream refuses an unknown ``--<stage>.<field>`` with a usage error (exit 2)
after the server command has started loading; omnibench refuses it before any server starts.

Serve has eras (:data:`ERAS`, recorded in ``tests/fixtures/upstream/sgl-omni-serve-legacy.json``).
omnibench writes a server's settings as the ConfigPatch era's dotted flags
(``--thinker.engine.mem_fraction_static 0.55``); before it, upstream's serve took named flags
(``--thinker-mem-fraction-static``) and handed every other ``--a.b.c`` to a config manager that walked
it as a raw path into the dumped config (``current[key]``), so a dotted stage flag ended in a
``KeyError`` traceback after the model's config had loaded. :func:`check_serve_args` spells each
setting in the checkout's era and refuses, as :class:`~omnibench_core.errors.UnsupportedOption`, a
setting that era has no spelling for, before any server starts.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from omnibench_core.errors import SettingsError, UnsupportedOption

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


@dataclass(frozen=True)
class ServeEra:
    """One era of upstream's ``sgl-omni serve``: what it was read from, its own flags (value type,
    None for a switch), whether it compiles dotted stage flags, and for a named-flag era the flag
    that spells each dotted setting omnibench writes (a setting absent there has no spelling).
    ``marks``: flags its ``--help`` prints that tell it apart; ``lacks``: flags it must not print."""

    name: str
    read_at: str
    top_flags: Mapping[str, str | None]
    dotted: bool
    spellings: Mapping[str, str] = field(default_factory=dict)
    marks: tuple[str, ...] = ()
    lacks: tuple[str, ...] = ()

    def matches(self, help_flags: Sequence[str]) -> bool:
        """Whether a ``serve --help`` that prints ``help_flags`` is of this era."""
        shown = set(help_flags)
        return set(self.marks) <= shown and not shown & set(self.lacks)


# The ConfigPatch serve: dotted stage flags compiled against the pipeline (the module's tables above)
CONFIGPATCH = ServeEra(
    "configpatch-8a6fc24",
    "stevejake007/sglang-omni sglang_omni/cli/serve.py at 8a6fc24123ced2516b6d0acd9278f4771ab0e6b6",
    TOP_FLAGS, dotted=True, marks=("--model-path",),
    lacks=("--thinker-mem-fraction-static", "--thinker-max-seq-len"))
# Upstream's main of 2026-07 (after its PR #1073's prefill coalescing): named flags, no max-seq-len flag
LEGACY_0726 = ServeEra(
    "legacy-03b5a6e",
    "sgl-project/sglang-omni sglang_omni/cli/serve.py at 03b5a6ef6cd3af41946d2d2cabf39b263f19bcb1",
    {"--model-path": "str", "--config": "str", "--text-only": None, "--colocate": None, "--isolate-stage": "str",
     "--stage-process": "str", "--host": "str", "--port": "int", "--model-name": "str",
     "--allowed-local-media-path": "str", "--allowed_local_media_path": "str", "--allowed-media-domain": "str",
     "--allowed_media_domain": "str", "--tts-batch-max-items": "int", "--mem-fraction-static": "float",
     "--thinker-mem-fraction-static": "float", "--talker-mem-fraction-static": "float",
     "--encoder-mem-reserve": "float", "--cpu-offload-gb": "int", "--cpu_offload_gb": "int", "--quantization": "str",
     "--log-level": "str", "--thinker-tp-size": "int", "--thinker_tp_size": "int", "--thinker-gpus": "str",
     "--thinker_gpus": "str", "--image-encoder-tp-size": "int", "--image_encoder_tp_size": "int",
     "--image-encoder-gpus": "str", "--image_encoder_gpus": "str", "--talker-gpu": "int", "--talker_gpu": "int",
     "--code2wav-gpu": "int", "--code2wav_gpu": "int", "--thinker-cuda-graph": "str", "--thinker_cuda_graph": "str",
     "--thinker_CUDA_graph": "str", "--talker-cuda-graph": "str", "--talker_cuda_graph": "str",
     "--talker_CUDA_graph": "str", "--talker-partial-start": "str", "--talker_partial_start": "str",
     "--thinker-torch-compile": "str", "--thinker_torch_compile": "str", "--talker-torch-compile": "str",
     "--talker_torch_compile": "str", "--thinker-torch-compile-max-bs": "int", "--thinker_torch_compile_max_bs": "int",
     "--talker-torch-compile-max-bs": "int", "--talker_torch_compile_max_bs": "int", "--torch-compile": "str",
     "--torch_compile": "str", "--torch-compile-max-bs": "int", "--torch_compile_max_bs": "int",
     "--enable-realtime": None, "--enable_realtime": None, "--decode-mode": "str", "--decode_mode": "str",
     "--async-lookahead-min-batch-size": "int", "--async_lookahead_min_batch_size": "int",
     "--thinker-max-running-requests": "int", "--thinker_max_running_requests": "int",
     "--prefill-coalesce-requests": "int", "--prefill_coalesce_requests": "int", "--prefill-coalesce-wait-ms": "float",
     "--prefill_coalesce_wait_ms": "float", "--max-running-requests": "int", "--max_running_requests": "int",
     "--max-total-tokens": "int", "--max_total_tokens": "int", "--cuda-graph-max-bs": "int",
     "--cuda_graph_max_bs": "int"},
    dotted=False,
    spellings={"thinker.engine.mem_fraction_static": "--thinker-mem-fraction-static",
               "talker.engine.mem_fraction_static": "--talker-mem-fraction-static"},
    marks=("--thinker-mem-fraction-static", "--decode-mode"), lacks=("--thinker-max-seq-len",))
# An older main: named flags with --thinker-max-seq-len, and --version legacy|v1
LEGACY_V1_SWITCH = ServeEra(
    "legacy-1b4b375",
    "sgl-project/sglang-omni sglang_omni/cli/serve.py at 1b4b3750bd76c642ba8a7823edc2249d352443ec",
    {"--model-path": "str", "--config": "str", "--text-only": None, "--host": "str", "--port": "int",
     "--model-name": "str", "--mem-fraction-static": "float", "--thinker-mem-fraction-static": "float",
     "--talker-mem-fraction-static": "float", "--thinker-max-seq-len": "int", "--encoder-mem-reserve": "float",
     "--version": "str", "--log-level": "str"},
    dotted=False,
    spellings={"thinker.engine.mem_fraction_static": "--thinker-mem-fraction-static",
               "talker.engine.mem_fraction_static": "--talker-mem-fraction-static",
               "thinker.factory.max_seq_len": "--thinker-max-seq-len"},
    marks=("--thinker-max-seq-len", "--thinker-mem-fraction-static"))
ERAS = (CONFIGPATCH, LEGACY_0726, LEGACY_V1_SWITCH)  # newest first; at most one matches a --help


def era_of(help_flags: Sequence[str]) -> ServeEra | None:
    """The era whose ``serve --help`` prints ``help_flags``; None when no recorded era's does."""
    found = [era for era in ERAS if era.matches(help_flags)]
    return found[0] if len(found) == 1 else None


def _refuse_in(era: ServeEra, commit: str, setting: str, why: str) -> UnsupportedOption:
    at = commit[:12] or "this checkout"
    return UnsupportedOption(
        f"the checkout at {at} serves with sgl-omni serve of era {era.name}, which {why}: not measurable with "
        f"these settings", option=setting, commit=commit,
        evidence={"era": era.name, "read at": era.read_at},
        hint=f"measure a commit whose serve takes {setting} (dotted stage flags since {CONFIGPATCH.name}), or leave "
             "the setting out; in a matrix, bisect or history such a commit is skipped as not-measurable")


def check_serve_args(args: Sequence[str], text_only: bool = False, model_path: str = "",
                     era: ServeEra = CONFIGPATCH, commit: str = "") -> list[str]:
    """``args`` (serve's own flags and ``--<stage>.<field> VALUE`` / ``--<stage>.<field>=VALUE`` pairs,
    omnibench's spelling) in ``era``'s spelling. Refuses, as a SettingsError naming the flag, what
    upstream's ``sgl-omni serve`` would refuse in any era (an unknown stage or field, a value of the
    wrong type), and as :class:`UnsupportedOption` naming the setting, ``commit`` and the era a
    setting ``era`` has no flag for. For ``model_path`` ``selftest`` (``OWN_MODEL``) the stand-in's
    ``--delay`` is accepted too."""
    stages = TEXT_ONLY_STAGES if text_only or "--text-only" in args else STAGES
    own = OWN_MODEL_FLAGS if model_path == OWN_MODEL else {}
    top = {**TOP_FLAGS, **own}
    spelled: list[str] = []
    i = 0
    while i < len(args):
        flag = args[i]
        if flag in top:
            kind = top[flag]
            if kind is None:
                value: list[str] = []
            elif i + 1 >= len(args):
                raise SettingsError(f"sgl-omni serve: {flag} needs a value", hint=HINT)
            elif not _fits(args[i + 1], kind):
                raise SettingsError(f"sgl-omni serve: {flag} expects {kind}, got {args[i + 1]!r}", hint=HINT)
            else:
                value = [args[i + 1]]
            if flag not in era.top_flags and flag not in own:
                raise _refuse_in(era, commit, flag, f"has no flag {flag}")
            spelled += [flag, *value]
            i += 1 + len(value)
            continue
        if not flag.startswith("--") or "." not in flag.split("=", 1)[0]:
            raise SettingsError(f"sgl-omni serve has no flag {flag!r} (upstream exits 2)", hint=HINT)
        key, eq, value_ = flag[2:].partition("=")
        if not eq:
            if i + 1 >= len(args):
                raise SettingsError(f"sgl-omni serve: missing value for {flag}", hint=HINT)
            value_ = args[i + 1]
            i += 1
        i += 1
        problem = dotted_problem(key, value_, stages)
        if problem:
            raise SettingsError(f"sgl-omni serve refuses {problem} (upstream exits 2 before serving)", hint=HINT)
        if era.dotted:
            spelled += [flag] if eq else [flag, value_]
        elif key in era.spellings:
            spelled += [era.spellings[key], value_]
        else:
            raise _refuse_in(era, commit, f"--{key}", f"has no spelling for the setting {key} (its serve takes no "
                                                       "dotted stage flags: a KeyError after loading)")
    return spelled

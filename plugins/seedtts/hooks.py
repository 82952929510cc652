"""The seedtts plugin's hooks: what it registers with omnibench (the package's docstring says what it
is)."""

from __future__ import annotations

import sys
from collections.abc import Mapping
from pathlib import Path

from omnibench_core.plugin import (
    ASR_SERVER,
    Collected,
    Command,
    RunContext,
    ScorerUse,
    ServeSpec,
    SettingsError,
    Step,
    StepContext,
    Workload,
    defaults,
    format_value,
    hookimpl,
    is_complete,
    schedule_problem,
    slowest_rate,
    write_json,
)
from omnibench_plugins.common import MODEL_NAME, client_kind, model_server

from . import metrics
from .data import SET_NAME, TARGET_SENTENCES, ensure_local_set, load_meta, local_set_dir, missing_references
from .options import OPTIONS

NAME = "seedtts"
HF_META = "zhaochenyang20/seed-tts-eval-arrow"
HF_REVISION = "27f4c1adee83b5b29b7c4b375f6b976324bda308"
RUNBOOK_SAMPLES = 1088  # the EN full set at HF_REVISION
SGLANG_CLIENT = "benchmarks.eval.benchmark_omni_seedtts"
SERVER = model_server(NAME, 8192)  # CI stage 2's server parameters, as in the runbook


def _server(ctx: RunContext) -> ServeSpec:
    """The model server under the run's server profile (runbook: exactly :data:`SERVER`)."""
    return model_server(NAME, 8192, ctx.settings.server_profile)

# The runbook leaves these at sglang-omni's defaults, which are ours: pass them only when changed.
SGLANG_OMITS_AT_DEFAULT = ("max_new_tokens", "temperature")
DEFAULTS = defaults(OPTIONS)


def _path(value: object) -> str:
    """A user's path option made absolute: the clients run in other folders than the user's."""
    return str(Path(str(value)).expanduser().resolve())


def _rel(ctx: RunContext, name: str) -> str:
    return f"{ctx.workload}/{name}"


def _write_dataset(ctx: StepContext, source: str, samples: int, **extra: object) -> None:
    write_json(ctx.workload_dir / "dataset.json", {"source": source, "samples": samples, **extra})


def _local_data_step(ctx: RunContext, meta: Path, max_samples: int | None) -> Step:
    def make(step: StepContext) -> None:
        if not ctx.options["meta"]:
            verb = "reading" if is_complete(meta.parent, SET_NAME) else "making (once)"
            step.progress(f"{verb} the local {SET_NAME} set in {meta.parent}")
            ensure_local_set(meta.parent, step.progress)
        samples = load_meta(meta, max_samples)
        if not samples:
            raise ValueError(f"{meta} holds no samples")
        _write_dataset(step, str(meta), len(samples), name=SET_NAME if not ctx.options["meta"] else "custom")

    return Step("dataset", make, outputs=(_rel(ctx, "dataset.json"),))


def _native_client(ctx: RunContext, meta: str) -> Step:
    o = ctx.options
    argv = [sys.executable, "-m", "omnibench_plugins.seedtts.client", "--meta", meta, "--model", MODEL_NAME,
            "--port", str(ctx.port), "--voice-clone", "--reference-audio-field", "audio.ref_audio",
            "--max-concurrency", format_value(o["max_concurrency"]), "--max-new-tokens",
            format_value(o["max_new_tokens"]), "--temperature", format_value(o["temperature"]),
            "--timeout-s", format_value(o["timeout_s"]), "--output-dir", str(ctx.workload_dir)]
    for flag, key in (("--seed", "seed"), ("--warmup", "warmup"), ("--max-samples", "max_samples")):
        if o[key] is not None:
            argv += [flag, format_value(o[key])]
    if o["warmup_meta"] is not None:
        argv += ["--warmup-meta", _path(o["warmup_meta"])]
    if o["request_rate"] is not None:
        argv += ["--request-rate", format_value(o["request_rate"]), "--arrival-seed", format_value(o["arrival_seed"])]
    if o["stream"]:
        argv.append("--stream")
    return Step("generate", Command(tuple(argv)), server=_server(ctx),
                outputs=(_rel(ctx, "speed_results.json"), _rel(ctx, "generated.json")))


def _sglang_client(ctx: RunContext, mode: str, *extra: str) -> Command:
    """``python -m benchmarks.eval.benchmark_omni_seedtts --<mode> ...`` as the runbook writes it."""
    return Command((ctx.target.python, "-m", SGLANG_CLIENT, f"--{mode}", "--meta", HF_META, "--model", MODEL_NAME,
                    *extra, "--output-dir", str(ctx.workload_dir)))


def refuse_unreceived(options: Mapping[str, object]) -> None:
    """sglang-omni's seed-tts client has no ``--timeout-s`` (each request may take a fixed 300 s, our
    default) and no arrival seed (its ``RunConfig`` gets none: stevejake007/sglang-omni
    ``benchmarks/eval/benchmark_omni_seedtts.py`` at 8a6fc24123ce): either set away from its default
    would be dropped silently, so it is refused."""
    if options["timeout_s"] != DEFAULTS["timeout_s"]:
        raise SettingsError(
            f"seedtts.timeout_s={format_value(options['timeout_s'])} does not reach sglang-omni's seed-tts client: "
            f"it has no --timeout-s and waits a fixed {format_value(DEFAULTS['timeout_s'])} s per request",
            hint="drop --opt seedtts.timeout_s, or add --opt seedtts.client=native (omnibench's client takes it)")
    if options["arrival_seed"] != DEFAULTS["arrival_seed"]:
        raise SettingsError(
            f"seedtts.arrival_seed={format_value(options['arrival_seed'])} does not reach sglang-omni's seed-tts "
            "client: it draws an unseeded arrival schedule for --request-rate",
            hint="drop --opt seedtts.arrival_seed, or add --opt seedtts.client=native (omnibench's client takes it)")


def sweep_levels(options: Mapping[str, object]) -> list[int] | None:
    """``concurrencies`` as levels (``"1,4"`` -> [1, 4]), or None when no sweep is asked for
    (``repeats`` alone sweeps ``max_concurrency``, as upstream's ``--repeats`` does)."""
    text = options.get("concurrencies")
    if text is None:
        return None if options.get("repeats", 1) == 1 else [int(str(options["max_concurrency"]))]
    words = [w.strip() for w in str(text).split(",")]
    if not all(w.isdigit() and int(w) >= 1 for w in words) or len(set(words)) != len(words):
        raise SettingsError(f"seedtts.concurrencies={text!r}: not distinct whole numbers of at least 1",
                            hint="write --opt seedtts.concurrencies=1,4,16")
    return [int(w) for w in words]


def _upstream_sweep(ctx: RunContext, max_samples: int | None, levels: list[int]) -> list[Step]:
    """sglang-omni's own sweep: its client at every level on the one server, ``repeats`` times each,
    generation only (its client refuses the sweep otherwise), ``sweep.json`` collected."""
    if not ctx.target.facts.own_clients or client_kind(ctx) != "sglang":
        raise SettingsError("seedtts.concurrencies is sglang-omni's own sweep (its seed-tts client, one server for "
                            "every level): it needs that client on an sglang-omni checkout",
                            hint="sweep with omnibench instead (invoke sweep --workload seedtts --concurrency 1,4: a "
                                 "campaign per point, any client), or run on --target sglang-omni with "
                                 "--opt seedtts.client=sglang")
    sweep = ("--concurrencies", ",".join(map(str, levels)), "--repeats", format_value(ctx.options["repeats"]))
    return _sglang_generate(ctx, max_samples, sweep)


def _sglang_generate(ctx: RunContext, max_samples: int | None, sweep: tuple[str, ...] = ()) -> list[Step]:
    """sglang-omni's own client, with the runbook's flags (others only when set away from default);
    ``sweep``: its ``--concurrencies``/``--repeats``, whose record is ``sweep.json``."""
    o = ctx.options
    refuse_unreceived(o)
    # The count the client will read, from the checkout's own loader (the runbook's is 1088).
    count = [ctx.target.python, str(Path(__file__).with_name("dataset_hf.py")), "--repo", HF_META, "--split", "en",
             "--revision", HF_REVISION, "--runbook-samples", str(RUNBOOK_SAMPLES),
             "--out", str(ctx.workload_dir / "dataset.json")]
    if max_samples:
        count += ["--max-samples", str(max_samples)]
    extra = []
    for key in SGLANG_OMITS_AT_DEFAULT:
        if o[key] != DEFAULTS[key]:
            extra += [f"--{key.replace('_', '-')}", format_value(o[key])]
    for key in ("seed", "warmup", "max_samples", "request_rate"):  # a checkout without one is refused by the probe
        if o[key] is not None:
            extra += [f"--{key.replace('_', '-')}", format_value(o[key])]
    if o["warmup_meta"] is not None:
        extra += ["--warmup-meta", _path(o["warmup_meta"])]
    if o["stream"]:  # the checkout's own streaming mode (sglang-omni #582); off, the runbook's argv exactly
        extra.append("--stream")
    client = _sglang_client(ctx, "generate-only", "--port", str(ctx.port), "--voice-clone", "--reference-audio-field",
                            "audio.ref_audio", "--max-concurrency", format_value(o["max_concurrency"]), *extra,
                            *sweep)
    made = metrics.SWEEP_FILE if sweep else "speed_results.json"
    return [Step("dataset", Command(tuple(count)), outputs=(_rel(ctx, "dataset.json"),)),
            Step("generate", client, server=_server(ctx), outputs=(_rel(ctx, made),))]


def _staged_native_generate(ctx: RunContext, max_samples: int | None) -> list[Step]:
    """omnibench's client on sglang-omni: the pinned split staged by the checkout's own loader."""
    staged = ctx.workload_dir / "data"
    stage = [ctx.target.python, str(Path(__file__).with_name("stage_hf.py")), "--repo", HF_META,
             "--split", "en", "--revision", HF_REVISION, "--out", str(staged)]
    if max_samples is not None:
        stage += ["--max-samples", str(max_samples)]

    def record(step: StepContext) -> None:
        _write_dataset(step, HF_META, len(load_meta(staged / "meta.lst")), revision=HF_REVISION, split="en")

    return [Step("stage-data", Command(tuple(stage)), outputs=(_rel(ctx, "data/meta.lst"),)),
            Step("dataset", record, outputs=(_rel(ctx, "dataset.json"),)),
            _native_client(ctx, str(staged / "meta.lst"))]


def _sglang_scoring(ctx: RunContext) -> list[Step]:
    """The runbook's scoring: Qwen3-ASR WER, then SIM and UTMOS without a server."""
    transcribe = _sglang_client(ctx, "transcribe-only", "--port", str(ctx.port), "--asr-concurrency",
                                format_value(ctx.options["asr_concurrency"]))
    return [Step("transcribe", transcribe, phase="score", server=ASR_SERVER, outputs=(_rel(ctx, "wer_results.json"),)),
            Step("similarity", _sglang_client(ctx, "similarity-only"), phase="score",
                 outputs=(_rel(ctx, "similarity_results.json"),)),
            Step("utmos", _sglang_client(ctx, "utmos-only"), phase="score", outputs=(_rel(ctx, "utmos_results.json"),))]


def _own_steps(ctx: RunContext, max_samples: int | None) -> list[Step]:
    """A target without its own clients: omnibench's own data, client and scorers."""
    o = ctx.options
    meta = Path(o["meta"]).expanduser().resolve() if o["meta"] else local_set_dir(o["data_dir"]) / "meta.lst"
    score = [sys.executable, "-m", "omnibench_plugins.seedtts.score"]
    out = ["--output-dir", str(ctx.workload_dir)]
    return [  # WER comes from the asr-wer scorer (see WER below)
        _local_data_step(ctx, meta, max_samples),
        _native_client(ctx, str(meta)),
        Step("similarity", Command((*score, "similarity", "--meta", str(meta), *out)), phase="score",
             outputs=(_rel(ctx, "similarity_results.json"),)),
        Step("utmos", Command((*score, "utmos", *out)), phase="score", outputs=(_rel(ctx, "utmos_results.json"),)),
    ]


def _count(meta: object, most: int | None) -> int | None:
    """The samples of a named meta.lst (at most ``most``), or None when it cannot be read here: the
    options' parse read and checked it (records/user_files.py); one gone since is the client's to name."""
    try:
        return len(load_meta(_path(meta), most))
    except (OSError, UnicodeDecodeError):
        return None


def _samples(ctx: RunContext, max_samples: int | None) -> int:
    """How many samples the run will send: the named meta's, else the set's size (the local set, or
    the runbook's split), at most ``max_samples`` (at least one request, when the meta is unread)."""
    if ctx.options["meta"]:
        found = _count(ctx.options["meta"], max_samples)
        return found if found is not None else (max_samples or 1)
    size = RUNBOOK_SAMPLES if ctx.target.facts.own_clients else len(TARGET_SENTENCES)
    return min(size, max_samples) if max_samples is not None else size


def _check_references(option: str, meta: object, most: int | None) -> None:
    """Refuse a named meta.lst whose samples (the first ``most``) name reference audio that is not a
    regular file: each of their requests would fail, found only once the server is up (issue 46)."""
    try:
        missing = missing_references(_path(meta), most)
    except (OSError, UnicodeDecodeError):
        return  # the options' parse read and checked it; one gone since is the client's to name
    if missing:
        first = missing[0]
        more = f" (and {len(missing) - 1} more line(s): {', '.join(str(m.line) for m in missing[1:6])}" \
               f"{'...' if len(missing) > 6 else ''})" if len(missing) > 1 else ""
        raise SettingsError(f"{option}={meta} line {first.line} names reference audio {first.path}, which is not "
                            f"a regular file{more}",
                            evidence={"option": option, "file": _path(meta), "line": str(first.line),
                                      "reference": first.path},
                            hint="fix the meta.lst's third field (a path relative to the meta.lst's folder) or "
                                 "put the audio there; --opt seedtts.max_samples=N sends only the first N lines")


def check_up_front(ctx: RunContext, max_samples: int | None) -> None:
    """What a client would meet only once the server is up, refused while the run is planned: a
    request rate whose schedule outlasts :data:`~omnibench_core.toolkit.arrivals.MAX_SCHEDULE_S`,
    a warm-up set holding fewer samples than the warm-up sends (both clients stop on that), and a
    named meta.lst whose reference audio is missing (by file and line)."""
    o = ctx.options
    if o["meta"]:
        _check_references("seedtts.meta", o["meta"], max_samples)
    rate = o["request_rate"]
    if rate is not None:
        count = _samples(ctx, max_samples)
        if problem := schedule_problem(float(str(rate)), count):
            raise SettingsError(f"seedtts.request_rate={format_value(rate)} is refused: {problem}",
                                evidence={"option": "seedtts.request_rate", "requests": str(count)},
                                hint=f"give a rate of at least {slowest_rate(count):.3g} per second, or fewer "
                                     "samples (--opt seedtts.max_samples=N)")
    if o["warmup_meta"] is not None:
        wanted = o["warmup"] if o["warmup"] is not None else o["max_concurrency"]
        held = _count(o["warmup_meta"], int(str(wanted))) if wanted else 0
        if held is not None and held < int(str(wanted)):
            raise SettingsError(f"seedtts.warmup_meta={o['warmup_meta']} holds {held} samples; the warm-up sends "
                                f"{wanted} (seedtts.warmup, else seedtts.max_concurrency) and its client stops short",
                                evidence={"option": "seedtts.warmup_meta", "samples": str(held)},
                                hint=f"name a meta.lst of at least {wanted} samples, or set --opt seedtts.warmup={held}")
        if wanted:
            _check_references("seedtts.warmup_meta", o["warmup_meta"], int(str(wanted)))


def plan(ctx: RunContext) -> list[Step]:
    """The seed-tts steps for this target and client, once :func:`check_up_front` passed."""
    max_samples = ctx.options["max_samples"]  # an int >= 1, or None for all (checked by the schema)
    check_up_front(ctx, max_samples)
    levels = sweep_levels(ctx.options)
    if levels is not None:
        return _upstream_sweep(ctx, max_samples, levels)
    kind = client_kind(ctx)
    if not ctx.target.facts.own_clients:
        return _own_steps(ctx, max_samples)
    generate = _sglang_generate if kind == "sglang" else _staged_native_generate
    return generate(ctx, max_samples) + _sglang_scoring(ctx)


def collect(run_dir: Path, options: Mapping[str, object]) -> Collected:
    """The runbook's ``seedtts.*`` metrics and coverage rules (and the streaming ones with ``stream`` on);
    with ``concurrencies``, those of sglang-omni's own sweep (``seedtts@c<level>.*``)."""
    levels = sweep_levels(options)
    if levels is not None:
        return metrics.collect_sweep(run_dir / NAME, NAME, levels, int(str(options.get("repeats", 1))))
    return metrics.collect(run_dir / NAME, NAME, stream=bool(options.get("stream")))


def collect_unscored(run_dir: Path, options: Mapping[str, object]) -> Collected:
    """:func:`collect` of a run whose score phase was skipped: the speed metrics and the
    generation's rules (sglang-omni's own sweep scores nothing: its collection is the same)."""
    levels = sweep_levels(options)
    if levels is not None:
        return collect(run_dir, options)
    return metrics.collect(run_dir / NAME, NAME, stream=bool(options.get("stream")), scored=False)


# sglang-omni's --transcribe-only files: wer_results.json (summary, config, per_sample), wer_results.csv and
# asr_speed_results.json; the config's model, speaker, meta... read from the client's speed_results.json.
WER = ScorerUse("asr-wer", {"step": "transcribe", "rows": "generated.json", "reference_field": "target_text",
                            "output": "wer_results.json", "generation_config": "speed_results.json"})


@hookimpl
def omnibench_workloads() -> list[Workload]:
    """The seed-tts voice-clone workload."""
    return [Workload(NAME, "seed-tts voice clone: speech from text with a reference voice; WER, SIM, UTMOS",
                     plan, collect, scorers=(WER,), options=OPTIONS, checks=("audio",),
                     collect_unscored=collect_unscored, quality_metrics=tuple(f"{NAME}.{m}" for m in metrics.QUALITY),
                     metrics=tuple(f"{NAME}.{m}" for m in metrics.names()))]

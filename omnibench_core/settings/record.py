"""The settings' records and their checks (the package's face re-exports them: see its docstring)."""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field, fields
from pathlib import Path
from typing import Any

from ..defaults import MAX_SETTING_S, NOISY_WAIT_S, PERCENTILES, SERVER_PROFILE, SERVER_PROFILES
from ..errors import SettingsError
from ..store.names import path_problem


@dataclass(frozen=True)
class RunSettings:
    """What a run needs: results, target, port, checkout, GPUs, CPUs, limits and poll intervals."""

    results: str = "results"  # the runbook's /results inside the container
    target: str = "local"
    port: int = 8000
    checkout: str = "/sglang-omni"
    venv: str = "omni"  # relative to the checkout, as `. omni/bin/activate`
    gpus: str = "0"  # CUDA_VISIBLE_DEVICES for single-GPU measurement
    cpus: str = ""  # BENCH_CPUS, e.g. "2-15,66-79"; empty: not pinned
    ready_timeout_s: float = 1800.0
    gpu_free_timeout_s: float = 600.0
    gpu_free_mib: int = 1024
    stop_grace_s: float = 30.0
    health_interval_s: float = 0.05
    gpu_poll_interval_s: float = 0.1
    telemetry_interval_s: float = 0.2  # GPU telemetry sampling while servers are up (GPU targets)
    local_delay_ms: float = 0.0  # local target: added latency per chat/transcription request (a planted regression)
    # Where local_delay_ms goes instead: "first" or "every" audio chunk of a chat answer; "": per request.
    local_stream_delay: str = ""
    # Local target: the share (0 to 1) of samples whose output is planted changed (a planted quality
    # change): another Video-AMME letter, words dropped or replaced in a spoken answer; which samples
    # follows from each sample's own id or text, so both sides of an A/A change the same ones.
    local_quality_flip: float = 0.0
    # The server a run measures: "runbook" (the model's defaults) or "ci" (as CI's audio stages).
    server_profile: str = SERVER_PROFILE
    # The percentiles of every latency-like metric beside the runbook's mean and p95 (--percentiles)
    percentiles: str = PERCENTILES
    # The noise guard: a timed window in which other processes took more than this share of the
    # slot's CPU time marks its run noisy (reports, comparisons and verdicts name it).
    noise_max_foreign: float = 0.10
    # A duet A/B's side worker that gives no sign of life this long while it has a run (stopped, hung,
    # swapped out) is named and killed, and its run counted lost (ab/duet.py); 0: not watched
    worker_silence_s: float = 60.0
    # `invoke ab --noisy-retries`: how long a noisy round waits for other processes to leave its
    # slot's CPUs before it is measured again (ab/execute.py); 0: measured again at once
    noise_wait_s: float = NOISY_WAIT_S

    @property
    def results_root(self) -> Path:
        """The results root as an absolute path."""
        return Path(self.results).expanduser().resolve()

    def gpu_list(self) -> tuple[str, ...]:
        """The configured GPUs, e.g. ``("0",)``."""
        return tuple(g.strip() for g in self.gpus.split(",") if g.strip())

    def cpu_list(self) -> tuple[int, ...]:
        """The CPU set as numbers; accepts taskset's list format ``2-15,66-79``."""
        return parse_cpu_list(self.cpus)


@dataclass(frozen=True)
class CiSettings:
    """The model-CI stages (``nox -s ci_stages``): the GPU pair, CI's home, attempts and limits."""

    ci_gpus: str = "0,1"
    omni_ci_home: str = "/root/omni_ci"  # also where `invoke setup venv` builds CI's venv
    ci_attempts: int = 1  # the runbook's local block; CI's flaky wrapper uses 3
    ci_retry_delay_s: float = 10.0
    ci_stage_timeout_s: float = 7200.0


@dataclass(frozen=True)
class HostSettings:
    """GPU-host set-up (``invoke setup``, ``invoke doctor``), as in the runbook's Setup section."""

    bench_dir: str = "/data/omni-bench"
    gpu_a: str = "0"
    gpu_b: str = "1"
    cores_per_gpu: int = 14
    skip_cores: str = "0,1"
    image: str = "hongccc/sglang-omni@sha256:ebe4239e29a764ee3a2806385c061c5fd438a26f01458e503d3822dcba5790df"
    container_name: str = "omni-bench"
    repo_url: str = "https://github.com/sgl-project/sglang-omni.git"
    commit: str = "origin/main"
    hf_cache: str = ""  # default: huggingface_hub's (HF_HOME / HF_HUB_CACHE)
    pins_file: str = ""  # default: the runbook's pins, shipped in omnibench_core/setup/pins.json
    sysfs: str = "/sys"


@dataclass(frozen=True)
class ToolSettings:
    """The commands omnibench runs (names on PATH or paths), so tests can point them at fakes."""

    nvidia_smi: str = "nvidia-smi"
    git: str = "git"
    lscpu: str = "lscpu"
    docker: str = "docker"
    bash: str = "bash"
    nvml_module: str = "pynvml"  # the NVML bindings telemetry imports (nvidia-ml-py's module)


SECTIONS: dict[str, type] = {"run": RunSettings, "ci": CiSettings, "host": HostSettings, "tools": ToolSettings}


@dataclass(frozen=True)
class Settings:
    """Every setting of this host, by section. Defaults follow the runbook."""

    run: RunSettings = field(default_factory=RunSettings)
    ci: CiSettings = field(default_factory=CiSettings)
    host: HostSettings = field(default_factory=HostSettings)
    tools: ToolSettings = field(default_factory=ToolSettings)

    @staticmethod
    def keys() -> dict[str, str]:
        """Each user-facing key and the section that holds it: ``{"port": "run", ...}``."""
        return {f.name: section for section, record in SECTIONS.items() for f in fields(record)}

    @classmethod
    def defaults(cls) -> dict[str, Any]:
        """The defaults as one flat mapping, for Invoke's configuration tree."""
        return cls().flat()

    def flat(self) -> dict[str, Any]:
        """Every setting by its user-facing key, as Invoke's configuration holds them."""
        return {key: value for section in SECTIONS for key, value in asdict(getattr(self, section)).items()}

    @classmethod
    def of(cls, **values: Any) -> Settings:
        """Settings from user-facing keys (``Settings.of(port=8001, git="/fake/git")``), checked
        like a configuration mapping."""
        return cls.from_mapping(values)

    @classmethod
    def config_defaults(cls) -> dict[str, str]:
        """The defaults as text, for Invoke's configuration tree. Invoke converts an
        ``INVOKE_OMNIBENCH_*`` variable to its default's type with a bare ``int()`` (a traceback
        for ``abc``); with text defaults every value reaches :meth:`from_mapping`, which names
        where a bad one came from."""
        return {key: str(value) for key, value in cls.defaults().items()}

    @classmethod
    def from_mapping(cls, mapping: Mapping[str, Any], origins: Mapping[str, str] | None = None) -> Settings:
        """Build settings from a flat config mapping; unknown keys and bad values raise SettingsError.

        ``origins`` says where a key's value came from (``the --port flag``, ``INVOKE_OMNIBENCH_PORT``,
        a config file); a refusal names it. Without one, the refusal names both config places.
        """
        keys = cls.keys()
        unknown = sorted(set(mapping) - set(keys))
        if unknown:
            raise SettingsError(
                f"unknown omnibench setting(s): {', '.join(unknown)}",
                hint=f"known settings: {', '.join(sorted(keys))}",
            )

        def refuse(name: str, message: str, hint: str = "") -> SettingsError:
            origin = (origins or {}).get(name, "")
            where = origin or f"omnibench.{name} in invoke.yaml or INVOKE_OMNIBENCH_{name.upper()}"
            return SettingsError(f"{message} (from {origin})" if origin else message, evidence={"setting": name},
                                 hint=f"fix {where}" + (f": {hint}" if hint else ""))

        by_section: dict[str, dict[str, Any]] = {section: {} for section in SECTIONS}
        for name, value in mapping.items():
            default = getattr(SECTIONS[keys[name]](), name)
            kind = type(default)
            try:
                by_section[keys[name]][name] = kind(value) if value is not None else default
            except (TypeError, ValueError) as exc:
                raise refuse(name, f"setting {name!r} must be {KIND_WORDS.get(kind, kind.__name__)}, got {value!r}") from exc
            number = by_section[keys[name]][name]
            # Every number setting is a time, an interval, a delay, a share or a count: a negative
            # one, nan or inf would fail late (every run of an A/B side) or wait for ever.
            if kind in (int, float) and not (math.isfinite(number) and number >= 0):
                raise refuse(name, f"setting {name!r} must be a finite number of 0 or more, got {value!r}",
                             f"e.g. {name}={default}")
            longest = MAX_SETTING_S * 1000 if name.endswith("_ms") else MAX_SETTING_S if name.endswith("_s") else None
            if longest is not None and number > longest:
                raise refuse(name, f"setting {name!r} is {number:g}, over a day ({longest:,}{name.rsplit('_', 1)[1]}): "
                             "a time longer than that bounds nothing", f"e.g. {name}={default}")
        settings = cls(**{section: SECTIONS[section](**values) for section, values in by_section.items()})
        try:
            settings.run.cpu_list()  # validate early
        except SettingsError as exc:
            raise refuse("cpus", exc.message, exc.hint) from None
        if not 0 <= settings.run.noise_max_foreign <= 1:
            raise refuse("noise_max_foreign", f"noise_max_foreign {settings.run.noise_max_foreign} is out of range",
                         "a share of the slot's CPU time from 0 to 1, e.g. 0.10")
        if not 0 <= settings.run.local_quality_flip <= 1:
            raise refuse("local_quality_flip", f"local_quality_flip {settings.run.local_quality_flip:g} is out of range",
                         "a share of the samples from 0 to 1, e.g. local_quality_flip=0.3")
        if settings.run.local_stream_delay not in STREAM_DELAYS:
            raise refuse("local_stream_delay", f"local_stream_delay {settings.run.local_stream_delay!r} is not one of "
                         "first, every or empty", "first: before a streamed answer's first audio chunk; every: "
                         "before each chunk; empty: before each request, as local_delay_ms alone")
        if settings.run.server_profile not in SERVER_PROFILES:
            raise refuse("server_profile", f"server_profile {settings.run.server_profile!r} is not one of "
                         f"{', '.join(SERVER_PROFILES)}", "runbook: the model's defaults (the runbook's server); "
                         "ci: code2wav as CI's audio stages resolve it")
        try:
            parse_percentiles(settings.run.percentiles)
        except SettingsError as exc:
            raise refuse("percentiles", exc.message, exc.hint) from None
        if not 0 < settings.run.port < 65536:
            raise refuse("port", f"port {settings.run.port} is out of range", "use 1..65535")
        for name in ("results", "checkout"):  # a path the kernel cannot take: one refusal, not an OSError
            problem = path_problem(getattr(settings.run, name))
            if problem:
                raise refuse(name, f"{name} {getattr(settings.run, name)[:60]!r}... refused: {problem}",
                             "give a shorter path")
        problem = results_problem(settings.run.results_root)
        if problem:
            raise refuse("results", problem, "name a folder (it is made if missing), or move the file away")
        return settings


def parse_percentiles(text: str) -> tuple[float, ...]:
    """``"50,90,99,99.9"`` -> (50.0, 90.0, 99.0, 99.9): each above 0 and below 100, in order, once."""
    out: list[float] = []
    for part in (p.strip() for p in text.split(",")):
        try:
            q = float(part)
        except ValueError:
            q = math.nan
        if not 0 < q < 100:
            raise SettingsError(f"percentile {part!r} is not a number above 0 and below 100",
                                evidence={"percentiles": text}, hint="e.g. --percentiles 50,90,99,99.9")
        if q not in out:
            out.append(q)
    return tuple(sorted(out))


KIND_WORDS = {int: "a whole number", float: "a number", str: "text"}
STREAM_DELAYS = {"": "request", "first": "first-chunk", "every": "every-chunk"}  # setting -> the server's --delay-on


def results_problem(root: Path) -> str:
    """Why ``root`` cannot be a results folder ("" if it can be made): it, or a folder above
    it, is a file (which ``mkdir`` would only report as ENOTDIR or EEXIST)."""
    for path in (root, *root.parents):
        if path.exists() or path.is_symlink():
            if path.is_dir():
                return ""
            what = "a file, not a folder" if path.is_file() else "not a folder"
            if path == root:
                return f"the results path {root} is {what}"
            return f"the results path {root} cannot be made: {path} is {what}"
    return ""


def parse_cpu_list(text: str) -> tuple[int, ...]:
    """Parse ``"2-4,8"`` into ``(2, 3, 4, 8)``; an empty string gives ``()``."""
    cpus: set[int] = set()
    for part in (p.strip() for p in text.split(",")):
        if not part:
            continue
        try:
            if "-" in part:
                lo, hi = (int(x) for x in part.split("-", 1))
                if hi < lo:
                    raise ValueError(part)
                cpus.update(range(lo, hi + 1))
            else:
                cpus.add(int(part))
        except ValueError as exc:
            raise SettingsError(
                f"cannot read CPU list {text!r} at {part!r}",
                hint="write CPUs as taskset does, e.g. 2-15,66-79",
            ) from exc
    return tuple(sorted(cpus))


def format_cpu_list(cpus: tuple[int, ...] | list[int]) -> str:
    """Inverse of :func:`parse_cpu_list`, compressing runs: ``(2, 3, 4, 8)`` -> ``"2-4,8"``."""
    out: list[str] = []
    ordered = sorted(set(cpus))
    i = 0
    while i < len(ordered):
        j = i
        while j + 1 < len(ordered) and ordered[j + 1] == ordered[j] + 1:
            j += 1
        out.append(str(ordered[i]) if i == j else f"{ordered[i]}-{ordered[j]}")
        i = j + 1
    return ",".join(out)

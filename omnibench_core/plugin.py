"""The public plugin API: everything a workload, target or scorer plugin imports, from one place.

This module is the stable surface, as ``pytest`` stands over ``_pytest``: the records a hook
returns, the hook marker, and the helpers clients and scorers share. omnibench's own plugins
import nothing else of the core (``tests/test_layers.py`` holds them to it), so the core's
modules can move between folders without breaking a third-party plugin. A name leaves this
module only with a release note; a name added here is a promise.

    from omnibench_core.plugin import Collected, Command, Option, RuleResult, ServeSpec, Step, Workload, hookimpl
"""

from __future__ import annotations

from .builtin.scorers import ASR_SERVER
from .errors import OmnibenchError, SettingsError
from .hooks.specs import hookimpl
from .jsonio import read_json, write_json
from .records import (
    CiStage,
    Collected,
    Command,
    Endpoint,
    EngineKind,
    EngineRequest,
    Option,
    RuleResult,
    RunCheck,
    RunContext,
    Scorer,
    ScorerUse,
    ServeSpec,
    Step,
    StepContext,
    Target,
    TargetEnv,
    TargetFacts,
    Workload,
)
from .records.options import add_argument, by_name, default_of, defaults, format_value
from .scoring import voice
from .scoring.coverage import sample_rules, zero
from .scoring.documents import field, load_doc
from .scoring.speed import round_or_none, speed_summary
from .stats.percentiles import mean, median, percentile, samples_needed
from .toolkit.arrivals import DEFAULT_ARRIVAL_SEED, lateness_summary, planned_offsets, schedule_problem, slowest_rate
from .toolkit.audio import resample, wav_data_uri, wav_duration_s
from .toolkit.clients import (
    PROGRESS_PREFIX,
    REPLY_BYTES,
    TOO_DEEP,
    ChatReply,
    Progress,
    ReplyTooLarge,
    error_text,
    mib,
    post_chat,
    read_bounded,
    token_count,
)
from .toolkit.datasets import build_once, dataset_folder, default_cache_dir, is_complete
from .toolkit.point_names import at_concurrency
from .toolkit.synthetic import LETTERS, PALETTE, SPEECH_RATE, Speaker, write_color_video

__all__ = [
    # the hook marker and the records hooks return or receive
    "hookimpl", "CiStage", "Collected", "Command", "Endpoint", "Option", "RuleResult", "RunCheck", "RunContext",
    "Scorer", "ScorerUse", "ServeSpec", "Step", "StepContext", "Target", "TargetEnv", "TargetFacts", "Workload",
    "EngineKind", "EngineRequest",  # an engine plugin's records (docs/engines.md)
    # errors a plugin raises
    "OmnibenchError", "SettingsError",
    # workload options in client programs
    "add_argument", "by_name", "default_of", "defaults", "format_value",
    # files, data sets, audio
    "read_json", "write_json", "build_once", "dataset_folder", "default_cache_dir", "is_complete", "wav_data_uri", "wav_duration_s",
    "resample", "LETTERS", "PALETTE", "SPEECH_RATE", "Speaker", "write_color_video",
    # clients and scorers
    "PROGRESS_PREFIX", "Progress", "post_chat", "ChatReply", "error_text",
    "REPLY_BYTES", "TOO_DEEP", "ReplyTooLarge", "mib", "read_bounded", "token_count", "ASR_SERVER", "voice", "sample_rules", "zero", "field", "load_doc",
    "speed_summary", "round_or_none", "mean", "median", "percentile", "samples_needed",
    # open-loop arrivals at a request rate
    "DEFAULT_ARRIVAL_SEED", "planned_offsets", "lateness_summary", "schedule_problem", "slowest_rate",
    # a metric at a load point: seedtts@c4.latency_p95_s
    "at_concurrency",
]

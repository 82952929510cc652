"""Each stage's pass mark. This commit's ``standin.json`` may override one (``ci_thresholds``)."""

from __future__ import annotations

from sglang_omni_standin import settings

DEFAULT_ACCURACY = 0.5
MAX_WER = 0.5  # stage 2 (tts_ci)


def threshold(stage: str) -> float:
    """The least accuracy (or, for tts_ci, the most WER) the stage accepts."""
    default = MAX_WER if stage == "tts_ci" else DEFAULT_ACCURACY
    return float(settings().get("ci_thresholds", {}).get(stage, default))

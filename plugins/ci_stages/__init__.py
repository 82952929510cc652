"""The ten MiniCPM-o stages of sglang-omni's model CI (``nox -s ci_stages``).

Stage 11 runs only for Qwen3-Omni and is left out, as in the runbook. A third-party plugin adds
a stage by returning a new ``CiStage``, or swaps one out with ``replaces=True``.
"""

from __future__ import annotations

from omnibench_core.plugin import CiStage, hookimpl

STAGES = (
    ("thinker_length", "HTTP contract and thinker length"),
    ("tts_ci", "seedtts-50 voice clone: WER, SIM, UTMOS"),
    ("mmmu_ci", "MMMU, text out"),
    ("mmmu_talker_ci", "MMMU with the talker, speech out"),
    ("mmsu_ci", "MMSU, text out"),
    ("mmsu_talker_ci", "MMSU with the talker, speech out"),
    ("videomme_ci", "Video-MME, text out"),
    ("videomme_talker_ci", "Video-MME with the talker, speech out"),
    ("videoamme_ci", "Video-AMME, text out"),
    ("videoamme_talker_tp2_ci", "Video-AMME with the talker, tensor parallel 2"),
)


def test_file(name: str) -> str:
    """The stage's file in the checkout, as CI names it."""
    return f"tests/test_model/test_qwen3_omni_{name}.py"


@hookimpl
def omnibench_ci_stages() -> list[CiStage]:
    """The ten MiniCPM-o stages in the order CI runs them."""
    return [CiStage(name, f"stage {i}: {text}", test_file(name), order=i)
            for i, (name, text) in enumerate(STAGES, start=1)]

"""The ci_stages plugin's hooks: what it registers with omnibench (the package's docstring says what it
is)."""

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

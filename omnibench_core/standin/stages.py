"""The ten CI stage files of the stand-in: ``tests/test_model/test_qwen3_omni_<stage>.py``.

Each is a short real pytest file: a fresh ``sgl-omni serve`` (the module fixture in the stage
folder's conftest), a few questions of the stage's kind, and an ``Accuracy:`` line (stage 1 checks
the HTTP contract and stage 2 prints its WER, as in sglang-omni's CI).
"""

from __future__ import annotations

# stage -> (server flags, what it asks, speech out)
KINDS: dict[str, tuple[tuple[str, ...], str, bool]] = {
    "thinker_length": (("--thinker.factory.max_seq_len", "256"), "contract", False),
    "tts_ci": ((), "tts", True),
    "mmmu_ci": (("--text-only",), "letters", False),
    "mmmu_talker_ci": ((), "letters", True),
    "mmsu_ci": (("--text-only",), "letters", False),
    "mmsu_talker_ci": ((), "letters", True),
    "videomme_ci": (("--text-only",), "video", False),
    "videomme_talker_ci": ((), "video", True),
    "videoamme_ci": (("--text-only",), "video", False),
    "videoamme_talker_tp2_ci": ((), "video", True),
}

BODIES = {
    "contract": "ci.contract(omni_server)",
    "tts": ("wer = ci.tts_wer(omni_server)\n    print(f\"WER: {wer:.4f}\", flush=True)\n"
            "    assert wer <= threshold(\"{name}\"), f\"WER {{wer}} above {{threshold('{name}')}}\""),
    "letters": "ci.report(\"{name}\", ci.letter_questions(omni_server, talker={talker}))",
    "video": "ci.report(\"{name}\", ci.video_questions(omni_server, talker={talker}))",
}

TEMPLATE = '''\
"""Stand-in CI stage: {name}. A fresh sgl-omni serve {flags}; {kind} questions{speech}."""

{imports}from sglang_omni_standin import ci

SERVER_ARGS = {args!r}


def test_{name}(omni_server):
    {body}
'''


def stage_files() -> dict[str, str]:
    """``{relative path: text}`` for the ten stage files."""
    out = {}
    for name, (args, kind, talker) in KINDS.items():
        body = BODIES[kind].replace("{name}", name).replace("{talker}", str(talker)).replace("{{", "{").replace("}}", "}")
        out[f"tests/test_model/test_qwen3_omni_{name}.py"] = TEMPLATE.format(
            name=name, flags=" ".join(args) or "(no extra flags)", kind=kind, speech=", speech out" if talker else "",
            args=args, body=body, imports="from omni_ci_config import threshold\n\n" if kind == "tts" else "")
    return out

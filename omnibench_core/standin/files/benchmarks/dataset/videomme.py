"""The stand-in's Video-AMME loader: ``load_videoamme_samples(max_samples, repo_id=..., split=...)``
with sglang-omni's signature and sample fields, on omnibench's local set (offline, see
``sglang_omni_standin.data``)."""

from __future__ import annotations

from dataclasses import dataclass

from sglang_omni_standin.data import VIDEO_AMME_IDS, video_amme_dir

DEFAULT_VIDEOAMME_REPO_ID = VIDEO_AMME_IDS[0]


@dataclass(frozen=True)
class VideoAMMESample:
    """One question: the video, the spoken question (``audio_path``) and the expected letter."""

    sample_id: str
    video_path: str
    audio_path: str
    answer: str
    question: str = ""
    options: tuple[str, ...] = ()
    duration: str = "short"
    domain: str = "synthetic"
    task_type: str = ""


def load_videoamme_samples(max_samples: int | None = None, *, repo_id: str | None = None, split: str = "test",
                           sample_offset: int = 0) -> list[VideoAMMESample]:
    """The first ``max_samples`` questions after ``sample_offset`` (the stand-in has one split)."""
    from omnibench_plugins.videoamme.data import load_samples

    rows = load_samples(video_amme_dir(repo_id or DEFAULT_VIDEOAMME_REPO_ID))[sample_offset:]
    return [VideoAMMESample(s.sample_id, s.video, s.audio, s.answer, s.question, s.options, s.duration, s.domain,
                            s.task_type) for s in rows[:max_samples]]

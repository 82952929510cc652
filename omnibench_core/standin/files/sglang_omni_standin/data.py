"""Hugging Face data set ids the runbook passes, mapped to omnibench's local sets (offline).

The stand-in has no network and no Hugging Face cache: ``zhaochenyang20/seed-tts-eval-arrow``
(and the CI subset ``-50-arrow``) resolve to omnibench's local seed-tts set, and
``zhaochenyang20/Video_AMME_ci`` to its local Video-AMME set, both made once under the omnibench
cache (``$OMNIBENCH_CACHE``, default ``~/.cache/omnibench``).
"""

from __future__ import annotations

from pathlib import Path

SEEDTTS_IDS = ("zhaochenyang20/seed-tts-eval-arrow", "zhaochenyang20/seed-tts-eval-50-arrow")
VIDEO_AMME_IDS = ("zhaochenyang20/Video_AMME_ci",)


class UnknownDataSet(ValueError):
    """A data set id the stand-in has no local set for."""


def seedtts_meta(source: str) -> Path:
    """A local ``meta.lst``: ``source`` itself when it is a file, else the local set for a known id."""
    if Path(source).is_file():
        return Path(source).resolve()
    if source not in SEEDTTS_IDS:
        raise UnknownDataSet(f"the stand-in has no local set for {source!r}; known: {', '.join(SEEDTTS_IDS)} "
                             "or a meta.lst path")
    from omnibench_plugins.seedtts.data import ensure_local_set, local_set_dir

    folder = local_set_dir()
    ensure_local_set(folder)
    return folder / "meta.lst"


def video_amme_dir(repo_id: str) -> Path:
    """The local Video-AMME set's folder for a known repo id (or a folder with ``samples.json``)."""
    if (Path(repo_id) / "samples.json").is_file():
        return Path(repo_id).resolve()
    if repo_id not in VIDEO_AMME_IDS:
        raise UnknownDataSet(f"the stand-in has no local set for {repo_id!r}; known: {', '.join(VIDEO_AMME_IDS)}")
    from omnibench_plugins.videoamme.data import ensure_local_set, local_set_dir

    return ensure_local_set(local_set_dir())

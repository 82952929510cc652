"""Settings from Invoke's configuration, for callers that are not Invoke tasks (the noxfile)."""

from __future__ import annotations

import logging
from pathlib import Path

from invoke import Config

from .settings import Settings


def load_settings(project_dir: str | Path) -> Settings:
    """The ``omnibench`` settings as ``invoke`` would see them in ``project_dir``: defaults, the
    system and user files, ``invoke.yaml`` there, then ``INVOKE_OMNIBENCH_*`` variables."""
    # nox logs at DEBUG on the root logger; Invoke's config loading would print its whole merge
    # (hundreds of lines) into every CI-stage session.
    logging.getLogger("invoke").setLevel(logging.WARNING)
    config = Config(defaults={**Config.global_defaults(), "omnibench": Settings.defaults()},
                    project_location=Path(project_dir))
    config.load_project()
    config.load_shell_env()
    return Settings.from_mapping(dict(config.omnibench))

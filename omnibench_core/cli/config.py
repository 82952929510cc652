"""Settings from Invoke's configuration: for the tasks (with their flags on top) and for callers
that are not Invoke tasks (the noxfile). Each value's origin is kept, so a bad one is blamed on
the flag, the ``INVOKE_OMNIBENCH_*`` variable or the config file it really came from."""

from __future__ import annotations

import logging
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from invoke import Config

from ..settings import Settings

# Invoke's levels, highest first, and how a user names each. Invoke keeps them in private
# attributes (``_env``, ``_project`` ...); tests/test_flags.py fails if that changes.
_LEVELS = (("_runtime", "_runtime_path"), ("_env", ""), ("_project", "_project_path"), ("_user", "_user_path"),
           ("_system", "_system_path"))


def origins(config: Config) -> dict[str, str]:
    """Where each ``omnibench`` key set above the defaults came from: ``INVOKE_OMNIBENCH_PORT``
    or ``omnibench.port in /path/invoke.yaml``."""
    found: dict[str, str] = {}
    for level, path_attr in _LEVELS:
        data = getattr(config, level, None) or {}
        section = data.get("omnibench") if isinstance(data, Mapping) else None
        for key in section or {}:
            if key in found:
                continue
            if level == "_env":
                found[key] = f"{getattr(config, '_env_prefix', 'INVOKE_')}OMNIBENCH_{key.upper()}"
            else:
                found[key] = f"omnibench.{key} in {getattr(config, path_attr, None) or 'a config file'}"
    return found


def settings_from(config: Config, flags: Mapping[str, Any] | None = None) -> Settings:
    """The ``omnibench`` settings of Invoke's ``config`` with a task's ``flags`` on top (None:
    not given); a bad value names its flag, variable or file."""
    given = {key: value for key, value in (flags or {}).items() if value is not None}
    where = {**origins(config), **{key: f"the --{key.replace('_', '-')} flag" for key in given}}
    return Settings.from_mapping({**dict(config.omnibench), **given}, where)


def load_settings(project_dir: str | Path) -> Settings:
    """The ``omnibench`` settings as ``invoke`` would see them in ``project_dir``: defaults, the
    system and user files, ``invoke.yaml`` there, then ``INVOKE_OMNIBENCH_*`` variables."""
    # nox logs at DEBUG on the root logger; Invoke's config loading would print its whole merge
    # (hundreds of lines) into every CI-stage session.
    logging.getLogger("invoke").setLevel(logging.WARNING)
    config = Config(defaults={**Config.global_defaults(), "omnibench": Settings.config_defaults()},
                    project_location=Path(project_dir))
    config.load_project()
    config.load_shell_env()
    return settings_from(config)

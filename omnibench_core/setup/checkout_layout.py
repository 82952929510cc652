"""An sglang-omni checkout as omnibench reads it: its root, its venv and the commit it is at.

Used by the ``sglang-omni`` target, the CI stages, ``doctor`` and the host set-up; building a
checkout or a venv is ``omnibench_core.setup``'s job.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from pathlib import Path

from ..defaults import CHECKOUT_PACKAGES
from ..errors import SettingsError
from ..settings import Settings
from .gitinfo import git_revision_or_why

# The tasks that take a setting as a flag; elsewhere (nox -s ci_stages, a setting without a flag)
# only invoke.yaml and the environment variable reach it.
_FLAGS = {"checkout": "--checkout (invoke run, measure, matrix, bisect, doctor)"}


# What marks a stand-in checkout (``invoke standin``), which doctor and the host set-up judge for
# what it is: its settings file at the root, and the folder git ignores (base python, its
# OMNI_CI_HOME, pid files). The stand-in package writes them; this module only reads a checkout.
STANDIN_SETTINGS = "standin.json"
STANDIN_STATE = ".standin"


def is_standin(root: Path) -> bool:
    """Whether ``root`` is a stand-in checkout (or a worktree of one): its package and settings file."""
    return (root / STANDIN_SETTINGS).is_file() and (root / "sglang_omni_standin" / "cli.py").is_file()


def omni_ci_home(root: Path) -> Path:
    """The stand-in's own ``OMNI_CI_HOME``, under its ignored state folder."""
    return root / STANDIN_STATE / "omni_ci"


def _setting_hint(name: str) -> str:
    hint = f"set omnibench.{name} in invoke.yaml or INVOKE_OMNIBENCH_{name.upper()} in the environment"
    return hint + (f", or pass {_FLAGS[name]}" if name in _FLAGS else "")


@dataclass(frozen=True)
class Checkout:
    """A checked sglang-omni checkout: its venv and the commit it is at."""

    root: Path
    venv: Path
    revision: str
    dirty: str

    @property
    def python(self) -> Path:
        """The venv's python."""
        return self.venv / "bin" / "python"


def check_checkout(settings: Settings) -> Checkout:
    """The checkout, its venv (``python`` and ``sgl-omni``) and commit, or a SettingsError naming
    the setting to change."""
    checkout = Path(settings.run.checkout).expanduser()
    if not checkout.is_dir():
        raise SettingsError(f"no sglang-omni checkout at {checkout}",
                            evidence={"setting": "omnibench.checkout"},
                            hint=_setting_hint("checkout") + " (clone sgl-project/sglang-omni there)")
    venv = checkout / settings.run.venv  # an absolute venv path stays absolute
    python, serve = venv / "bin" / "python", venv / "bin" / "sgl-omni"
    for path in (python, serve):
        if not os.access(path, os.X_OK):
            raise SettingsError(f"the checkout's venv has no {path.name} at {path}",
                                evidence={"setting": "omnibench.venv", "venv": str(venv)},
                                hint="build it with `OMNI_CI_HOME=/root/omni_ci bash .github/scripts/"
                                     "prepare_omni_venv.sh omni` in the checkout, or " + _setting_hint("venv"))
    rev = git_revision_or_why(checkout, settings.tools.git)
    if isinstance(rev, str) and rev:  # git itself failed (hung, missing): not the checkout's fault
        raise SettingsError(f"cannot read the commit of {checkout}: {settings.tools.git} {rev}",
                            evidence={"setting": "omnibench.git", "checkout": str(checkout)},
                            hint="check that git works there (`git -C CHECKOUT rev-parse HEAD`), or point "
                                 "omnibench.git at a working git")
    if isinstance(rev, str):
        raise SettingsError(f"{checkout} is not a git work tree", evidence={"setting": "omnibench.checkout"},
                            hint="point omnibench.checkout at a clone of sglang-omni")
    return Checkout(checkout, venv, rev[0], rev[1])


# The console script the runbook serves with, as pyproject.toml's [project.scripts] declares it
# (sgl-project/sglang-omni pyproject.toml at 19fc75479bf2949e91d66079c54c41eacdc3c309:
# `sgl-omni = "sglang_omni.cli:app"`).
SERVE_SCRIPT = "sgl-omni"
_SECTION = re.compile(r"^\[project\.scripts\]\s*$(.*?)(?=^\[|\Z)", re.M | re.S)


def console_script(checkout: Path, name: str = SERVE_SCRIPT) -> str:
    """The entry point ``module:attr`` that ``checkout``'s ``pyproject.toml`` declares for the
    console script ``name`` ("" when it declares none). Read by line, not by a TOML parser:
    python 3.10 has none, and the section is a flat list of ``name = "value"`` lines."""
    try:
        text = (checkout / "pyproject.toml").read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError):
        return ""
    section = _SECTION.search(text)
    if section is None:
        return ""
    line = re.search(rf"^\s*[\"']?{re.escape(name)}[\"']?\s*=\s*[\"']([^\"']+)[\"']", section.group(1), re.M)
    return line.group(1).strip() if line else ""


def system_package(checkout: Path) -> str:
    """The top-level python package the checkout's ``sgl-omni`` runs (``sglang_omni`` upstream,
    ``sglang_omni_standin`` in omnibench's stand-in): the REV_OK gate checks where it is imported
    from. "" when the checkout declares no ``sgl-omni`` console script."""
    target = console_script(checkout)
    return target.split(":", 1)[0].split(".", 1)[0].strip() if target else ""


def checkout_packages(checkout: Path) -> tuple[str, ...]:
    """The checkout's own packages a run imports: the one ``sgl-omni`` serves, the router, the
    clients and scorers (``benchmarks``)."""
    return tuple(p for p in (system_package(checkout), *CHECKOUT_PACKAGES) if p)


def venv_env(venv: Path) -> dict[str, str]:
    """What ``. omni/bin/activate`` sets."""
    return {"VIRTUAL_ENV": str(venv), "PATH": f"{venv / 'bin'}{os.pathsep}{os.environ.get('PATH', '')}"}



"""The built-in targets: ``sglang-omni`` (a checkout and its venv) and ``local`` (embedded CPU).

Registered through the ``omnibench`` entry point ``targets``, like any third-party target.
"""

from __future__ import annotations

import os
import sys
from dataclasses import dataclass
from pathlib import Path

from . import __version__
from .errors import SettingsError
from .gitinfo import git_revision
from .hookspecs import hookimpl
from .records import ServeSpec, Target, TargetEnv, short_revision
from .settings import Settings

# The runbook's shell block: `unset ...; export ...`.
SGLANG_OMNI_UNSET = ("SGLANG_OMNI_TORCH_COMPILE_DEFAULT", "PYTORCH_ALLOC_CONF")


def _setting_hint(name: str) -> str:
    return (f"set omnibench.{name} in invoke.yaml, INVOKE_OMNIBENCH_{name.upper()} in the environment, "
            f"or pass --{name.replace('_', '-')}")


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
    checkout = Path(settings.checkout).expanduser()
    if not checkout.is_dir():
        raise SettingsError(f"no sglang-omni checkout at {checkout}",
                            evidence={"setting": "omnibench.checkout"},
                            hint=_setting_hint("checkout") + " (clone sgl-project/sglang-omni there)")
    venv = checkout / settings.venv  # an absolute venv path stays absolute
    python, serve = venv / "bin" / "python", venv / "bin" / "sgl-omni"
    for path in (python, serve):
        if not os.access(path, os.X_OK):
            raise SettingsError(f"the checkout's venv has no {path.name} at {path}",
                                evidence={"setting": "omnibench.venv", "venv": str(venv)},
                                hint="build it with `OMNI_CI_HOME=/root/omni_ci bash .github/scripts/"
                                     "prepare_omni_venv.sh omni` in the checkout, or " + _setting_hint("venv"))
    rev = git_revision(checkout, settings.git)
    if rev is None:
        raise SettingsError(f"{checkout} is not a git work tree", evidence={"setting": "omnibench.checkout"},
                            hint="point omnibench.checkout at a clone of sglang-omni")
    return Checkout(checkout, venv, rev[0], rev[1])


def venv_env(venv: Path) -> dict[str, str]:
    """What ``. omni/bin/activate`` sets."""
    return {"VIRTUAL_ENV": str(venv), "PATH": f"{venv / 'bin'}{os.pathsep}{os.environ.get('PATH', '')}"}


def prepare_sglang_omni(settings: Settings) -> TargetEnv:
    """Check the checkout and venv and apply the runbook's shell block to everything started."""
    co = check_checkout(settings)
    checkout, venv = co.root, co.venv
    serve = venv / "bin" / "sgl-omni"
    gpus = settings.gpu_list()
    env = {
        **venv_env(venv),
        "CUDA_VISIBLE_DEVICES": ",".join(gpus),
        "HF_HUB_OFFLINE": "1",
        "SGLANG_OMNI_STRICT_PORT": "1",
        "SGLANG_OMNI_STARTUP_TIMEOUT": str(int(settings.ready_timeout_s)),
    }

    def serve_argv(spec: ServeSpec, port: int) -> list[str]:
        return [str(serve), "serve", "--model-path", spec.model_path,
                "--model-name", spec.model_name or spec.model_path, *spec.args, "--port", str(port)]

    return TargetEnv(target="sglang-omni", python=str(co.python), serve_argv=serve_argv, env=env,
                     unset=SGLANG_OMNI_UNSET, cwd=str(checkout), cpus=settings.cpu_list(), gpus=gpus,
                     revision=co.revision, dirty=co.dirty, details={"checkout": str(checkout), "venv": str(venv)})


def prepare_local(settings: Settings) -> TargetEnv:
    """The embedded CPU target: omnibench's own python and CPU speech server, no GPU.

    Results go under ``local-<omnibench commit>``.
    """
    source = Path(__file__).resolve().parent.parent
    rev = git_revision(source, settings.git)
    revision, dirty = rev if rev else (f"omnibench-{__version__}", "")

    def serve_argv(spec: ServeSpec, port: int) -> list[str]:
        # The same flags as `sgl-omni serve`; the local server ignores the GPU engine ones.
        return [sys.executable, "-m", "omnibench_core.local", "serve", "--model-path", spec.model_path,
                "--model-name", spec.model_name or spec.model_path, *spec.args, "--port", str(port)]

    return TargetEnv(target="local", python=sys.executable, serve_argv=serve_argv,
                     env={"HF_HUB_OFFLINE": "1", "SGLANG_OMNI_STRICT_PORT": "1"}, cpus=settings.cpu_list(),
                     gpus=(), revision=revision, dirty=dirty, results_folder=f"local-{short_revision(revision)}",
                     details={"omnibench": __version__})


@hookimpl
def omnibench_targets() -> list[Target]:
    """The two built-in targets."""
    return [
        Target("sglang-omni", "an sglang-omni checkout and its venv on a GPU host (the runbook's commands)",
               prepare_sglang_omni),
        Target("local", "the embedded CPU target: real server processes on loopback, no GPU",
               prepare_local),
    ]

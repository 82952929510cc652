"""The built-in targets: ``sglang-omni`` (a checkout and its venv) and ``local`` (embedded CPU).

Each describes itself with :class:`~omnibench_core.records.TargetFacts`; workloads read the facts.

Registered through the ``omnibench`` entry point ``targets``, like any third-party target.
"""

from __future__ import annotations

import sys
from dataclasses import replace
from pathlib import Path

from ..defaults import SERVER_PROFILE
from ..errors import SettingsError
from ..hooks.specs import hookimpl
from ..records import ServeSpec, Target, TargetEnv, TargetFacts, short_revision
from ..run.serve_help import serve_help
from ..settings import STREAM_DELAYS, Settings
from ..setup.checkout_layout import check_checkout, checkout_packages, system_package, venv_env
from ..setup.gitinfo import git_revision
from ..setup.tree_state import TreeState, tree_state
from ..store.serve_help_file import ServeHelp
from ..toolkit.synthetic import LOCAL_VIDEO_ANSWER_METHOD as LOCAL_VIDEO_ANSWER
from .scorers import ASR_MODEL
from .serve_flags import ERAS, ServeEra, check_serve_args, era_of

# The runbook's shell block: `unset ...; export ...`.
SGLANG_OMNI_UNSET = ("SGLANG_OMNI_TORCH_COMPILE_DEFAULT", "PYTORCH_ALLOC_CONF")

LOCAL_PACKAGES = ("omnibench_core", "plugins")  # the local target serves omnibench's own code
SGLANG_OMNI_FACTS = TargetFacts(own_clients=True, uses_gpu=True, from_checkout=True)
LOCAL_FACTS = TargetFacts(own_clients=False, uses_gpu=False, substitutes={
    "asr": "pocketsphinx 5.1.1 en-us (local substitute for Qwen3-ASR-1.7B)",
    "video_answer": LOCAL_VIDEO_ANSWER,
    "model": "hibari-tts 'heart' voice and pocketsphinx on CPU (local substitute for MiniCPM-o)",
})


def prepare_sglang_omni(settings: Settings) -> TargetEnv:
    """Check the checkout and venv and apply the runbook's shell block to everything started."""
    co = check_checkout(settings)
    checkout, venv = co.root, co.venv
    serve = venv / "bin" / "sgl-omni"
    gpus = settings.run.gpu_list()
    env = {
        **venv_env(venv),
        "CUDA_VISIBLE_DEVICES": ",".join(gpus),
        "HF_HUB_OFFLINE": "1",
        "SGLANG_OMNI_STRICT_PORT": "1",
        "SGLANG_OMNI_STARTUP_TIMEOUT": str(int(settings.run.ready_timeout_s)),
    }

    memo: dict[str, ServeHelp] = {}

    def era() -> ServeEra:
        # the checkout's own `serve --help` says its era: asked once per commit (cached in the results root)
        found = serve_help(str(serve), commit=co.revision, dirty=co.dirty, env=env, unset=SGLANG_OMNI_UNSET,
                           cwd=str(checkout), results_root=settings.run.results_root, memo=memo)
        known = era_of(found.flags)
        if known is None:
            raise SettingsError(f"the checkout at {co.revision[:12]}'s sgl-omni serve is of no serve era omnibench "
                                "knows (its --help matches none)",
                                evidence={"commit": co.revision, "flags": " ".join(found.flags)[:2000],
                                          "eras": ", ".join(e.name for e in ERAS)},
                                hint="docs/fidelity.md lists the serve eras omnibench speaks; record the new one "
                                     "in omnibench_core/builtin/serve_flags.py")
        return known

    def serve_argv(spec: ServeSpec, port: int) -> list[str]:
        # the settings in the checkout's era's spelling; what upstream's serve would refuse, or what its era
        # cannot take (UnsupportedOption), refused before it starts (the selftest model: the stand-in's own flags)
        args = check_serve_args(spec.args, model_path=spec.model_path, era=era(), commit=co.revision)
        return [str(serve), "serve", "--model-path", spec.model_path,
                "--model-name", spec.model_name or spec.model_path, *args, "--port", str(port)]

    # REV_OK's package is the one the checkout's own `sgl-omni` console script runs (sglang_omni
    # upstream, sglang_omni_standin in the stand-in), read from its pyproject.toml
    facts = replace(SGLANG_OMNI_FACTS, package=system_package(checkout))
    # an uncommitted edit is part of the revision: a dirty tree's runs go to their own folder
    state = _state(checkout, checkout_packages(checkout), settings.tools.git) if co.dirty else TreeState()
    return TargetEnv(target="sglang-omni", python=str(co.python), serve_argv=serve_argv, facts=facts, env=env,
                     unset=SGLANG_OMNI_UNSET, cwd=str(checkout), gpus=gpus, revision=co.revision, dirty=co.dirty,
                     dirty_files=state.files,
                     results_folder=short_revision(co.revision) + state.folder_suffix(),
                     details={"checkout": str(checkout), "venv": str(venv), **state.details()})


def _state(root: Path, packages: tuple[str, ...], git: str) -> TreeState:
    """The tree's state, or a clean one where git cannot say (not a work tree: nothing to diff)."""
    return tree_state(root, packages, git) or TreeState()


def prepare_local(settings: Settings) -> TargetEnv:
    """The embedded CPU target: omnibench's own python and CPU speech server, no GPU.

    Results go under ``local-<omnibench commit>``.
    """
    if settings.run.server_profile != SERVER_PROFILE:
        # The local server has no code2wav stage: a "ci" run would measure the runbook's server
        # under another name.
        raise SettingsError(f"--server-profile {settings.run.server_profile} has no effect on the local target: its "
                            "CPU server has no code2wav stage to batch, so the run would measure the runbook's "
                            "server under another name", evidence={"setting": "server_profile", "target": "local"},
                            hint="use --server-profile runbook (the default) on the local target, or "
                                 "--target sglang-omni for CI's server")
    source = Path(__file__).resolve().parent.parent
    rev = git_revision(source, settings.tools.git)
    version = omnibench_version()
    revision, dirty = rev if rev else (f"omnibench-{version}", "")
    # an empty status (git_revision's, untracked files shown) is a clean tree: no diff to read (a
    # target is prepared several times a run: a 2-round selftest A/A made 180 git calls, 72 now; issue 40)
    state = _state(source.parent, LOCAL_PACKAGES, settings.tools.git) if dirty else TreeState()
    delay = ["--delay-ms", f"{settings.run.local_delay_ms:g}"] if settings.run.local_delay_ms else []
    if delay and settings.run.local_stream_delay:
        delay += ["--delay-on", STREAM_DELAYS[settings.run.local_stream_delay]]
    if settings.run.local_quality_flip:  # the planted quality change
        delay += ["--quality-flip", f"{settings.run.local_quality_flip:g}"]

    def serve_argv(spec: ServeSpec, port: int) -> list[str]:
        # The same flags as `sgl-omni serve`; the local server ignores the GPU engine ones.
        # The scoring ASR model only transcribes: its server loads the recogniser alone.
        engines = ["--engines", "asr"] if spec.model_path == ASR_MODEL else []
        return [sys.executable, "-m", "omnibench_core.local", "serve", "--model-path", spec.model_path,
                "--model-name", spec.model_name or spec.model_path, *spec.args, "--port", str(port), *engines, *delay]

    return TargetEnv(target="local", python=sys.executable, serve_argv=serve_argv, facts=LOCAL_FACTS,
                     env={"HF_HUB_OFFLINE": "1", "SGLANG_OMNI_STRICT_PORT": "1"},
                     gpus=(), revision=revision, dirty=dirty, dirty_files=state.files,
                     results_folder=f"local-{short_revision(revision)}{state.folder_suffix()}",
                     # the repository whose commit names the folder: the history reads that commit's
                     # time and subject there (its "committed" and "subject" columns)
                     details={"omnibench": version, "checkout": str(source.parent), **state.details()})


def omnibench_version() -> str:
    """The installed omnibench's version (pyproject.toml's, through its distribution's metadata)."""
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("omnibench")
    except PackageNotFoundError:  # a source tree on sys.path, never installed
        return "unknown"


@hookimpl
def omnibench_targets() -> list[Target]:
    """The two built-in targets."""
    return [
        Target("sglang-omni", "an sglang-omni checkout and its venv on a GPU host (the runbook's commands)",
               prepare_sglang_omni, SGLANG_OMNI_FACTS),
        Target("local", "the embedded CPU target: real server processes on loopback, no GPU",
               prepare_local, LOCAL_FACTS),
    ]

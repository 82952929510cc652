"""The sglang-omni checkout at a commit, its venv built by CI's script, and VENV_OK."""

from __future__ import annotations

import os
import subprocess
from collections.abc import Callable, Sequence
from pathlib import Path

from ..errors import GateError, OmnibenchError
from ..process.processes import log_tail
from .gitinfo import refuse_option_like

REPO_URL = "https://github.com/sgl-project/sglang-omni.git"
VENV_SCRIPT = ".github/scripts/prepare_omni_venv.sh"
HASH_SCRIPT = ".github/scripts/omni_ci_deps_hash.sh"


class VenvNotOk(GateError):
    """VENV_OK: the checkout's dependency hash differs from the one the venv was built for."""

    gate = "VENV_OK"


def _git(git: str, *args: str, cwd: Path | None = None) -> str:
    try:
        done = subprocess.run([git, *args], cwd=cwd, capture_output=True, text=True, timeout=3600, check=False)
    except FileNotFoundError as exc:
        raise OmnibenchError(f"{git} was not found", hint="install git") from exc
    if done.returncode != 0:
        raise OmnibenchError(f"git {' '.join(args)} failed", evidence={"output": (done.stdout + done.stderr).strip()})
    return done.stdout.strip()


def checkout_commit(checkout: Path, commit: str, *, repo_url: str = REPO_URL, git: str = "git",
                    progress: Callable[[str], None] = print) -> str:
    """Clone (or fetch) sglang-omni and detach at ``commit``; returns the full commit."""
    refuse_option_like([commit], "--commit")
    if not (checkout / ".git").exists():
        if checkout.exists() and any(checkout.iterdir()):
            raise OmnibenchError(f"{checkout} exists and is not a git checkout", hint="empty it or choose another path")
        progress(f"cloning {repo_url} into {checkout}")
        _git(git, "clone", "--", repo_url, str(checkout))
    else:
        progress(f"fetching into {checkout}")
        _git(git, "fetch", "--tags", "origin", cwd=checkout)
    # Resolved first: `git checkout` takes no --end-of-options before git 2.43, and a full commit
    # cannot be read as an option.
    want = _git(git, "rev-parse", "--verify", "--end-of-options", f"{commit}^{{commit}}", cwd=checkout)
    _git(git, "checkout", "--detach", want, cwd=checkout)
    head = _git(git, "rev-parse", "HEAD", cwd=checkout)
    progress(f"{checkout} is at {head}")
    return head


def deps_hash(checkout: Path, bash: str = "bash") -> str:
    """``source omni_ci_deps_hash.sh && omni_ci_deps_hash`` in the checkout."""
    argv = [bash, "-c", f"source {HASH_SCRIPT} && omni_ci_deps_hash"]
    done = subprocess.run(argv, cwd=checkout, capture_output=True, text=True, timeout=300, check=False)
    if done.returncode != 0 or not done.stdout.strip():
        raise VenvNotOk(f"{HASH_SCRIPT} gave no hash (exit {done.returncode})",
                        evidence={"output": (done.stdout + done.stderr).strip() or "(none)"},
                        hint="check that the checkout is complete (git status)")
    return done.stdout.strip().split()[0]


def check_venv(checkout: Path, omni_ci_home: Path, bash: str = "bash") -> str:
    """VENV_OK: the checkout's own hash equals ``$OMNI_CI_HOME/.deps-hash``; returns the hash."""
    wanted = deps_hash(checkout, bash)
    stamp = omni_ci_home / ".deps-hash"
    try:
        built = stamp.read_text().strip()
    except OSError:
        raise VenvNotOk(f"no venv hash at {stamp}", evidence={"checkout hash": wanted},
                        hint="build the venv: invoke setup.venv") from None
    if built != wanted:
        raise VenvNotOk("the venv was built for other dependencies than this checkout's",
                        evidence={"checkout hash": wanted, f"{stamp}": built},
                        hint="rebuild it: invoke setup.venv (source-only changes need no rebuild)")
    return wanted


def build_venv(checkout: Path, omni_ci_home: Path, *, bash: str = "bash", log: Path,
               extra_args: Sequence[str] = ("omni",)) -> None:
    """Run CI's ``prepare_omni_venv.sh omni`` (it deletes and rebuilds OMNI_CI_HOME), output to ``log``."""
    log.parent.mkdir(parents=True, exist_ok=True)
    env = {**os.environ, "OMNI_CI_HOME": str(omni_ci_home)}
    with open(log, "w", encoding="utf-8") as handle:
        code = subprocess.run([bash, VENV_SCRIPT, *extra_args], cwd=checkout, env=env, stdout=handle,
                              stderr=subprocess.STDOUT, check=False).returncode
    if code != 0:
        raise OmnibenchError(f"{VENV_SCRIPT} exited with {code}", evidence={"log": str(log), "log tail": log_tail(log)},
                             hint="the log tail says why; on a real sglang-omni checkout the script needs the CI image "
                                  "and network access, a stand-in's needs a python that has omnibench (OMNIBENCH_PYTHON)")

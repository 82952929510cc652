"""Make the stand-in git repository: the checkout's files, N commits of settings, the venv."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

from ..errors import OmnibenchError, SettingsError
from .stages import KINDS, stage_files
from .venv import make_venv

FILES = Path(__file__).with_name("files")
SETTINGS_FILE = "standin.json"
UNREACHABLE = 1.01  # a pass mark no accuracy reaches: the planted failing stage


@dataclass(frozen=True)
class StandinSpec:
    """What to make: ``commits`` commits; from commit ``regress_at`` (1-based) on, every request
    takes ``delay_ms`` longer and ``fail_stage`` (if any) cannot pass."""

    commits: int = 1
    regress_at: int | None = None
    delay_ms: float = 50.0
    fail_stage: str | None = None

    def check(self) -> None:
        """A SettingsError for a spec that cannot be made."""
        if self.commits < 1:
            raise SettingsError(f"--commits must be at least 1, not {self.commits}")
        if self.regress_at is not None and not 1 <= self.regress_at <= self.commits:
            raise SettingsError(f"--regress-at {self.regress_at} is not one of the commits 1..{self.commits}")
        if self.fail_stage and self.fail_stage not in KINDS:
            raise SettingsError(f"no CI stage named {self.fail_stage!r}", hint=f"one of {', '.join(KINDS)}")

    def settings_at(self, index: int) -> dict:
        """``standin.json`` of commit ``index`` (1-based)."""
        regressed = self.regress_at is not None and index >= self.regress_at
        failing = self.fail_stage if self.fail_stage and (self.regress_at is None or regressed) else None
        return {"commit": index, "delay_ms": self.delay_ms if regressed else 0,
                "ci_thresholds": {failing: UNREACHABLE} if failing else {}}


@dataclass(frozen=True)
class Standin:
    """A made stand-in: its root, its commits (oldest first) and the spec it was made from."""

    root: Path
    commits: tuple[str, ...]
    spec: StandinSpec

    @property
    def venv(self) -> Path:
        """The ``omni`` venv."""
        return self.root / "omni"

    @property
    def head(self) -> str:
        """The newest commit."""
        return self.commits[-1]


def _git(root: Path, *args: str, git: str = "git") -> str:
    env = {**os.environ, "GIT_AUTHOR_NAME": "omnibench standin", "GIT_AUTHOR_EMAIL": "standin@omnibench.invalid",
           "GIT_COMMITTER_NAME": "omnibench standin", "GIT_COMMITTER_EMAIL": "standin@omnibench.invalid"}
    done = subprocess.run([git, "-C", str(root), *args], capture_output=True, text=True, env=env, check=False)
    if done.returncode != 0:
        raise OmnibenchError(f"git {' '.join(args)} failed in {root}", evidence={"output": (done.stdout + done.stderr).strip()},
                             hint="check that git is installed")
    return done.stdout.strip()


def _copy_files(root: Path) -> None:
    for src in FILES.rglob("*"):
        if src.is_dir() or "__pycache__" in src.parts:
            continue
        rel = src.relative_to(FILES)
        dest = root / (".gitignore" if rel.as_posix() == "gitignore" else rel)
        dest.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(src, dest)
    for name, text in stage_files().items():
        (root / name).write_text(text)


def _message(spec: StandinSpec, index: int) -> str:
    s = spec.settings_at(index)
    what = "the stand-in checkout" if index == 1 else f"commit {index}"
    planted = []
    if s["delay_ms"]:
        planted.append(f"{s['delay_ms']:g} ms added per request")
    planted += [f"CI stage {name} cannot pass" for name in s["ci_thresholds"]]
    return f"{what}: " + ("; ".join(planted) + " (planted regression)" if planted else "no regression")


def make_standin(out: Path, spec: StandinSpec | None = None, *, git: str = "git") -> Standin:
    """Make the stand-in at ``out`` (which must not exist or be empty) and return it."""
    spec = spec or StandinSpec()
    spec.check()
    out = Path(out).expanduser().resolve()
    if out.exists() and any(out.iterdir()):
        raise SettingsError(f"{out} exists and is not empty", hint="choose a new --out, or remove it")
    out.mkdir(parents=True, exist_ok=True)
    _copy_files(out)
    _git(out, "init", "-q", git=git)
    commits = []
    for index in range(1, spec.commits + 1):
        (out / SETTINGS_FILE).write_text(json.dumps(spec.settings_at(index), indent=2) + "\n")
        _git(out, "add", "-A", git=git)
        _git(out, "commit", "-q", "--allow-empty", "-m", _message(spec, index), git=git)
        commits.append(_git(out, "rev-parse", "HEAD", git=git))
    state = out / ".standin"
    state.mkdir(exist_ok=True)
    (state / "base-python").write_text(sys.executable + "\n")  # prepare_omni_venv.sh rebuilds with it
    make_venv(out, "omni")
    return Standin(out, tuple(commits), spec)


def history_text(made: Standin, spec: StandinSpec) -> str:
    """What ``invoke standin`` prints: each commit with its planted settings, then how to use it."""
    from ..report import table

    rows = ((i, sha[:12], spec.settings_at(i)["delay_ms"], ", ".join(spec.settings_at(i)["ci_thresholds"]) or "-")
            for i, sha in enumerate(made.commits, start=1))
    return (table(rows, ("commit", "sha", "delay_ms", "failing CI stage")) + f"\nSTANDIN_OK {made.root}\n"
            f"try it: invoke run --target sglang-omni --checkout {made.root} --workload videoamme --workload seedtts")

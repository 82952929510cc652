"""Make the stand-in git repository: the checkout's files, N commits of settings, the venv."""

from __future__ import annotations

import json
import math
import os
import shlex
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

from ..defaults import MAX_SETTING_S, MAX_STANDIN_COMMITS
from ..errors import OmnibenchError, SettingsError
from ..setup.checkout import build_venv
from ..setup.checkout_layout import STANDIN_SETTINGS as SETTINGS_FILE
from ..setup.checkout_layout import STANDIN_STATE as STATE
from ..setup.checkout_layout import omni_ci_home
from .gpu import DEFAULT_GPUS, write_fake_nvidia_smi
from .stages import KINDS, stage_files

FILES = Path(__file__).with_name("files")
UNREACHABLE = 1.01  # a pass mark no accuracy reaches: the planted failing stage
# The era boundary the stand-in can plant: upstream's seed-tts client gained --reference-audio-field
# around 2026-08 (sgl-project/sglang-omni benchmarks/eval/benchmark_omni_seedtts.py at 12f259e44889
# has none and sends the reference in `audios`; stevejake007/sglang-omni at 8a6fc24123ce has it).
ERA_CLIENT = "benchmarks/eval/benchmark_omni_seedtts.py"
ERA_FLAG = "--reference-audio-field"
OLD_ERA_FIELD = "audios"  # where an old-era client puts the reference: the field it had no flag for
# The serve era the stand-in can plant: upstream's legacy serve of named flags (sgl-project/sglang-omni
# sglang_omni/cli/serve.py at 1b4b3750bd76, omnibench_core.builtin.serve_flags.LEGACY_V1_SWITCH), before
# the ConfigPatch serve's dotted stage flags (stevejake007/sglang-omni at 8a6fc24123ce)
LEGACY_SERVE = "legacy-1b4b375"


@dataclass(frozen=True)
class StandinSpec:
    """What to make: ``commits`` commits; from commit ``regress_at`` (1-based) on, every request
    takes ``delay_ms`` longer and ``fail_stage`` (if any) cannot pass. Every commit adds
    ``base_delay_ms`` to each request, so a regression is measured against a latency that the
    machine's own jitter does not dwarf. With ``era_from``, the commits before it are the old era:
    their seed-tts client has no ``--reference-audio-field`` at all (argparse exits 2 on it).
    ``startup_s`` is every commit's model loading time: ``sgl-omni serve`` holds its port closed
    that long, as a GPU host loads weights for minutes (scaled down), so a campaign pays for its
    server starts as it would there. With ``serve_era_from``, the commits before it serve with
    upstream's legacy ``sgl-omni serve``: named flags only, a dotted stage flag a KeyError (exit 1).
    ``quality_flip`` (0 to 1) is a planted quality change, from ``regress_at`` on (every commit
    without it): the server answers differently for that share of samples (the local server's
    ``--quality-flip``). Real sglang-omni has no such setting: it is the stand-in's test plant."""

    commits: int = 1
    regress_at: int | None = None
    delay_ms: float = 50.0
    fail_stage: str | None = None
    base_delay_ms: float = 0.0
    era_from: int | None = None  # commits before this one (1-based) are the old era: no --reference-audio-field
    startup_s: float = 0.0
    serve_era_from: int | None = None  # commits before this one (1-based) serve with upstream's legacy serve
    quality_flip: float = 0.0  # share of samples answered differently from regress_at on (a test plant)

    def check(self) -> None:
        """A SettingsError for a spec that cannot be made."""
        if not 1 <= self.commits <= MAX_STANDIN_COMMITS:
            raise SettingsError(f"--commits must be from 1 to {MAX_STANDIN_COMMITS}, not {self.commits}",
                                hint="a stand-in's history is for bisects and matrices: a few commits to a few hundred")
        if max(self.delay_ms / 1000, self.base_delay_ms / 1000, self.startup_s) > MAX_SETTING_S:
            raise SettingsError(f"--delay-ms {self.delay_ms:g}, --base-delay-ms {self.base_delay_ms:g} and --startup-s "
                                f"{self.startup_s:g} must each be at most a day ({MAX_SETTING_S:,} s)")
        if self.regress_at is not None and not 1 <= self.regress_at <= self.commits:
            raise SettingsError(f"--regress-at {self.regress_at} is not one of the commits 1..{self.commits}")
        if not (math.isfinite(self.delay_ms) and math.isfinite(self.base_delay_ms)) or min(self.delay_ms,
                                                                                          self.base_delay_ms) < 0:
            raise SettingsError(f"--delay-ms {self.delay_ms:g} and --base-delay-ms {self.base_delay_ms:g} must be "
                                "finite and at least 0")
        if not math.isfinite(self.startup_s) or self.startup_s < 0:
            raise SettingsError(f"--startup-s {self.startup_s:g} must be finite and at least 0")
        if self.era_from is not None and not 2 <= self.era_from <= self.commits:
            raise SettingsError(f"--era-from {self.era_from} leaves no old-era commit before it, or is not one of the "
                                f"commits 1..{self.commits}", hint="e.g. --commits 4 --era-from 3: commits 1 and 2 are "
                                                                  "the old era")
        if self.serve_era_from is not None and not 2 <= self.serve_era_from <= self.commits:
            raise SettingsError(f"--serve-era-from {self.serve_era_from} leaves no legacy-serve commit before it, or "
                                f"is not one of the commits 1..{self.commits}",
                                hint="e.g. --commits 4 --serve-era-from 4: commits 1 to 3 serve with the legacy serve")
        if not (math.isfinite(self.quality_flip) and 0 <= self.quality_flip <= 1):
            raise SettingsError(f"--quality-flip {self.quality_flip:g} is not a share of samples from 0 to 1",
                                hint="e.g. --quality-flip 0.3")
        if self.fail_stage and self.fail_stage not in KINDS:
            raise SettingsError(f"no CI stage named {self.fail_stage!r}", hint=f"one of {', '.join(KINDS)}")

    def settings_at(self, index: int) -> dict:
        """``standin.json`` of commit ``index`` (1-based)."""
        regressed = self.regress_at is not None and index >= self.regress_at
        failing = self.fail_stage if self.fail_stage and (self.regress_at is None or regressed) else None
        made = {"commit": index, "delay_ms": self.base_delay_ms + (self.delay_ms if regressed else 0),
                "ci_thresholds": {failing: UNREACHABLE} if failing else {}}
        made = {**made, "startup_s": self.startup_s} if self.startup_s else made
        made = {**made, "quality_flip": self.quality_flip} if self.flipped(index) else made
        return {**made, "serve_era": LEGACY_SERVE} if self.legacy_serve(index) else made

    def legacy_serve(self, index: int) -> bool:
        """Whether commit ``index`` (1-based) serves with upstream's legacy serve (no dotted stage flags)."""
        return self.serve_era_from is not None and index < self.serve_era_from

    def old_era(self, index: int) -> bool:
        """Whether commit ``index`` (1-based) is of the old era (no --reference-audio-field)."""
        return self.era_from is not None and index < self.era_from

    def flipped(self, index: int) -> bool:
        """Whether commit ``index`` (1-based) holds the planted quality change."""
        return bool(self.quality_flip) and (self.regress_at is None or index >= self.regress_at)

    def regressed(self, index: int) -> bool:
        """Whether commit ``index`` (1-based) holds the planted latency."""
        return self.regress_at is not None and index >= self.regress_at and bool(self.delay_ms)


@dataclass(frozen=True)
class Standin:
    """A made stand-in: its root, its commits (oldest first) and the spec it was made from."""

    root: Path
    commits: tuple[str, ...]
    spec: StandinSpec
    fake_gpus: Path | None = None  # the folder of its fake nvidia-smi, when one was written

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
    if spec.regressed(index):
        planted.append(f"{spec.delay_ms:g} ms added per request")
    planted += [f"CI stage {name} cannot pass" for name in s["ci_thresholds"]]
    if spec.flipped(index):
        planted.append(f"{spec.quality_flip:g} of samples answered differently")
    era = f" (old era: its seed-tts client has no {ERA_FLAG})" if spec.old_era(index) else \
        f" (the seed-tts client gains {ERA_FLAG})" if spec.era_from == index else ""
    if spec.legacy_serve(index):
        era += f" (legacy serve {LEGACY_SERVE}: named flags, no dotted stage flags)"
    elif spec.serve_era_from == index:
        era += " (sgl-omni serve gains the dotted stage flags)"
    return f"{what}: " + ("; ".join(planted) + " (planted regression)" if planted else "no regression") + era


def old_era_client(text: str) -> str:
    """The seed-tts client's source as the old era had it: the ``--reference-audio-field``
    ``add_argument`` statement gone (argparse then exits 2 on the flag, as upstream's old client
    does), the reference going to ``audios`` as it did then. Matched by the flag's name, so the
    client's own lines stay as they are; an OmnibenchError when the statement is not found once."""
    lines = text.splitlines(keepends=True)
    # the statement's first line: the flag on the add_argument( line, or on the line after it
    hits = [i if "add_argument(" in line else i - 1 for i, line in enumerate(lines)
            if f'"{ERA_FLAG}"' in line and ("add_argument(" in line or i and lines[i - 1].rstrip().endswith("add_argument("))]
    if len(hits) != 1:
        raise OmnibenchError(f"the stand-in's {ERA_CLIENT} has {len(hits)} add_argument lines for {ERA_FLAG}, not one",
                             hint="the old era removes exactly that statement: keep it one add_argument call")
    start = end = hits[0]
    while lines[start:end + 1] and "".join(lines[start:end + 1]).count("(") > "".join(lines[start:end + 1]).count(")"):
        end += 1  # a statement over several lines: up to its closing parenthesis
    line = lines[start]
    indent, receiver = line[:len(line) - len(line.lstrip())], line.strip().split(".add_argument(")[0]
    old = f'{indent}{receiver}.set_defaults(reference_audio_field="{OLD_ERA_FIELD}")  # the old era: no {ERA_FLAG}\n'
    return "".join([*lines[:start], old, *lines[end + 1:]])


def make_standin(out: Path, spec: StandinSpec | None = None, *, git: str = "git", bash: str = "bash",
                 fake_gpus: Path | None = None, gpus: int = DEFAULT_GPUS) -> Standin:
    """Make the stand-in at ``out`` (which must not exist or be empty) and return it; with
    ``fake_gpus``, also a fake ``nvidia-smi`` of ``gpus`` GPUs in that folder for its servers."""
    spec = spec or StandinSpec()
    spec.check()
    if gpus < 1:
        raise SettingsError(f"--fake-gpu-count must be at least 1, not {gpus}", hint="e.g. --fake-gpu-count 2 (a pair)")
    out = Path(out).expanduser().resolve()
    if out.exists() and not out.is_dir():  # a file, a FIFO, a device: iterdir() said NotADirectoryError
        raise SettingsError(f"--out {out} is a file, not a folder", hint="choose a new --out (a folder that does not "
                            "exist yet, or an empty one)")
    if out.exists() and any(out.iterdir()):
        raise SettingsError(f"{out} exists and is not empty", hint="choose a new --out, or remove it")
    out.mkdir(parents=True, exist_ok=True)
    _copy_files(out)
    _git(out, "init", "-q", git=git)
    commits = []
    client = out / ERA_CLIENT
    new_era = client.read_text()
    for index in range(1, spec.commits + 1):
        (out / SETTINGS_FILE).write_text(json.dumps(spec.settings_at(index), indent=2) + "\n")
        if spec.era_from is not None:
            client.write_text(old_era_client(new_era) if spec.old_era(index) else new_era)
        _git(out, "add", "-A", git=git)
        _git(out, "commit", "-q", "--allow-empty", "-m", _message(spec, index), git=git)
        # a tag a commit: the pages (and a user) name commits c1..cN, not shas that differ each time
        _git(out, "tag", commit_tag(index), git=git)
        commits.append(_git(out, "rev-parse", "HEAD", git=git))
    state = out / STATE
    state.mkdir(exist_ok=True)
    (state / "base-python").write_text(sys.executable + "\n")  # prepare_omni_venv.sh rebuilds with it
    # the venv through its own prepare_omni_venv.sh, as CI builds one: the script is tried, VENV_OK holds
    build_venv(out, omni_ci_home(out), bash=bash, log=state / "prepare_omni_venv.log")
    if fake_gpus is not None:
        fake_gpus = write_fake_nvidia_smi(Path(fake_gpus), out, gpus=gpus).parent
    return Standin(out, tuple(commits), spec, fake_gpus)


def commit_tag(index: int) -> str:
    """The tag ``invoke standin`` puts on commit ``index`` (1-based): c1, c2, ..."""
    return f"c{index}"


def try_it(made: Standin) -> str:
    """The command ``invoke standin`` offers (run from omnibench's root): a quick One run on the
    stand-in, with its fake nvidia-smi first on PATH when it has one."""
    path = f"PATH={shlex.quote(str(made.fake_gpus))}:$PATH " if made.fake_gpus else ""
    return (f"{path}invoke run --target sglang-omni --checkout {shlex.quote(str(made.root))} --workload videoamme "
            "--workload seedtts --opt videoamme.max_samples=2 --opt seedtts.max_samples=2")


def history_text(made: Standin, spec: StandinSpec, *, nvidia_smi: str = "nvidia-smi") -> str:
    """What ``invoke standin`` prints: each commit with its planted settings, then how to use it.
    Without a fake and without ``nvidia_smi`` on PATH it says the target needs one, and how."""
    from ..tables import table

    rows = ((i, commit_tag(i), sha[:12], spec.settings_at(i)["delay_ms"], ", ".join(spec.settings_at(i)["ci_thresholds"]) or "-",
             "old (no " + ERA_FLAG + ")" if spec.old_era(i) else "new",
             LEGACY_SERVE if spec.legacy_serve(i) else "dotted")
            for i, sha in enumerate(made.commits, start=1))
    lines = [table(rows, ("commit", "tag", "sha", "delay_ms", "failing CI stage", "era", "serve")), f"STANDIN_OK {made.root}"]
    if made.fake_gpus:
        lines.append(f"fake nvidia-smi: {made.fake_gpus / 'nvidia-smi'} (memory in use while a stand-in server lives)")
    elif shutil.which(nvidia_smi) is None:
        lines.append(f"note: no {nvidia_smi} on PATH, and the sglang-omni target asks it for GPU memory (GPU_FREE): "
                     "on a machine without a GPU make the stand-in with --fake-gpus DIR, and its fake goes first on PATH")
    lines.append(f"try it: {try_it(made)}")
    lines.append("  (from omnibench's folder; 2 samples a workload: leave out the --opt flags for the whole local sets)")
    return "\n".join(lines)

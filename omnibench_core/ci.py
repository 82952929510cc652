"""The runbook's "Running the CI stages locally": prepare block, CI_READY, per-stage logs and
exit codes, GPU clean-up after each stage, optional retries, accuracy lines, summary.

``nox -s ci_stages`` (noxfile.py) drives it; each stage runs with the checkout's own venv python,
after REV_OK (:mod:`.run.rev_ok`) finds that python importing the checkout's packages from the
checkout's own files at its commit.
"""

from __future__ import annotations

import os
import re
import subprocess
import time
from collections.abc import Callable, Iterable
from dataclasses import asdict, dataclass, field
from pathlib import Path

from .errors import GateError
from .jsonio import write_json
from .process.capture import capture
from .process.processes import build_env, log_tail, start_group
from .records import CiStage, short_revision
from .run import rev_ok
from .run.gates import GateRecord
from .run.layout import ci_dir, next_run_name
from .settings import Settings
from .setup.checkout_layout import check_checkout, checkout_packages, system_package, venv_env
from .setup.tree_state import TreeState, tree_state
from .store.names import COMMIT_NAME
from .tables import table

ROUTER_SCRIPT = ".github/scripts/prepare_rust_router.sh"
CLEANUP_SCRIPT = ".github/scripts/delete_gpu_process.sh"
# The single-GPU shell block's variables: the runbook opens a new shell without it.
SHELL_BLOCK_ONLY = ("SGLANG_OMNI_STRICT_PORT", "SGLANG_OMNI_STARTUP_TIMEOUT")
_ACCURACY = re.compile(r"(?:Overall accuracy|Accuracy)\s*:\s*([-+]?\d+(?:\.\d+)?(?:[eE][-+]?\d+)?)(%?)", re.I)
TIMEOUT_EXIT = 124  # as timeout(1)
# sglang-omni's .github/scripts/run_flaky_pytest.sh (sgl-project/sglang-omni at 2e14a391fe29) runs each
# attempt with OMNI_CI_ATTEMPT=<n> (1, 2, ...) and stops retrying when the clean-up before a retry fails.
ATTEMPT_ENV = "OMNI_CI_ATTEMPT"
PYTEST_PROBE_S = 120.0  # `import pytest` on the checkout's python: a cold disk, a venv on NFS


def taskset_cpu_list(cpus: Iterable[int]) -> str:
    """A CPU set as util-linux's ``taskset -pc`` prints it: a run of three or more CPUs as
    ``a-b``, a run of two as ``a,b`` (``{0, 1}`` -> ``"0,1"``, ``{0, 1, 2}`` -> ``"0-2"``).

    sglang-omni's ``.github/scripts/pin_to_ci_cpuset.sh`` (sgl-project/sglang-omni at
    eecae7691446d1c0a8424dcf3d91056b65b6fab7) pins to ``OMNI_CI_CPUSET`` and then compares it, as a
    string, with ``taskset -pc $$ | awk '{print $NF}'``: any other spelling of the same set exits 2.
    """
    ordered = sorted(set(cpus))
    out: list[str] = []
    i = 0
    while i < len(ordered):
        j = i
        while j + 1 < len(ordered) and ordered[j + 1] == ordered[j] + 1:
            j += 1
        if j - i >= 2:
            out.append(f"{ordered[i]}-{ordered[j]}")
        else:  # a lone CPU, or two adjacent ones: util-linux lists them
            out.extend(str(c) for c in ordered[i:j + 1])
        i = j + 1
    return ",".join(out)


class CiNotReady(GateError):
    """CI_READY: the router binary is not executable, or the output directory exists."""

    gate = "CI_READY"


@dataclass
class StageResult:
    """One stage's outcome, as the summary records it."""

    stage: str
    test_file: str
    exit_code: int
    attempts: int
    duration_s: float
    accuracy: float | None
    accuracy_line: str
    timed_out: bool
    log: str
    cleanup_exit_codes: list[int] = field(default_factory=list)
    rev_ok: dict[str, str] = field(default_factory=dict)  # REV_OK's evidence for the stage's python
    retries_stopped: str = ""  # why no further attempt ran though some were left ("" when none were stopped)


def parse_accuracy(log_text: str) -> tuple[float | None, str]:
    """The last ``Accuracy:`` or ``Overall accuracy:`` value in a log (a percentage as a fraction)."""
    found = None
    for line in log_text.splitlines():
        match = _ACCURACY.search(line)
        if match:
            found = match, line.strip()
    if found is None:
        return None, ""
    match, line = found
    return float(match.group(1)) / (100 if match.group(2) else 1), line


def prepare_env(settings: Settings, checkout: Path, venv: Path, base: dict[str, str] | None = None,
                cpus: Iterable[int] | None = None) -> dict[str, str]:
    """The runbook's prepare block on top of this process's environment (router path added later).

    ``cpus``: the CPU set ``OMNI_CI_CPUSET`` names (default: this process's affinity, which is what
    the runbook's ``taskset -pc $$`` reads back), written as ``taskset`` prints it."""
    base = dict(os.environ if base is None else base)
    home = settings.ci.omni_ci_home
    if cpus is None:
        try:
            cpus = os.sched_getaffinity(0)
        except AttributeError:  # not Linux
            cpus = ()
    cpuset = taskset_cpu_list(cpus)
    return build_env(base, {
        **venv_env(venv),
        "OMNI_CI_MODEL": "minicpmo",
        "SGLANG_OMNI_TORCH_COMPILE_DEFAULT": "0",
        "CUDA_VISIBLE_DEVICES": settings.ci.ci_gpus,
        "HF_HUB_OFFLINE": "1",
        "OMNI_CI_CPUSET": cpuset,
        "OMNI_CI_HOME": home,
        "PYTHONPATH": str(checkout),
        "PYTORCH_ALLOC_CONF": "expandable_segments:True",
        "NCCL_NVLS_ENABLE": "0",
        "TORCHINDUCTOR_CACHE_DIR": f"{home}/.torchinductor",
        "FLASHINFER_WORKSPACE_BASE": os.path.expanduser("~"),
        "FLASHINFER_JIT_DEBUG": "0",
    }, SHELL_BLOCK_ONLY)


class CiRun:
    """One run of CI stages into one output directory (``<results>/<sha>/ci/runN``)."""

    def __init__(self, settings: Settings, *, out_dir: Path | None = None, bash: str = "bash",
                 progress: Callable[[str], None] = print, allowed_dirty: frozenset[str] = frozenset()):
        self.settings, self.bash, self.progress = settings, bash, progress
        co = check_checkout(settings)
        # a dirty checkout's stages go to its own folder, and REV_OK lets its recorded files differ from HEAD
        state = tree_state(co.root, checkout_packages(co.root), settings.tools.git) or TreeState()
        self.allowed_dirty = allowed_dirty | frozenset(state.files)
        self.checkout, self.python, self.revision = co.root, co.python, co.revision
        self.env = prepare_env(settings, co.root, co.venv)
        self._check_pytest()
        ci_root = ci_dir(settings.run.results_root, short_revision(co.revision) + state.folder_suffix())
        self.out_dir = out_dir or ci_root / next_run_name(ci_root)
        self.env["SGLANG_OMNI_ROUTER_BIN"] = self._router()
        if self.out_dir.exists():
            raise CiNotReady(f"CI output directory {self.out_dir} exists already",
                             hint="omnibench never overwrites a run: pass another --out or move it")
        self.out_dir.mkdir(parents=True)
        (self.out_dir / COMMIT_NAME).write_text(co.revision + "\n")
        self.results: list[StageResult] = []
        progress(f"CI_READY {self.out_dir} (router {self.env['SGLANG_OMNI_ROUTER_BIN']})")

    def _check_pytest(self) -> None:
        """Every stage is ``python -m pytest`` on the checkout's python: one without pytest is
        said once, before the router is built, not as ten stages failing with ``No module named
        pytest`` (issue 46). Asked within :data:`PYTEST_PROBE_S` (process/capture.py)."""
        argv = [str(self.python), "-c", "import pytest"]
        done = capture(argv, PYTEST_PROBE_S, env=self.env, cwd=str(self.checkout))
        if done.ok:
            return
        said = (done.stderr.strip().splitlines() or [""])[-1]
        raise CiNotReady(f"the checkout's python {self.python} cannot import pytest, and every CI stage runs "
                         f"`python -m pytest`: {done.why(PYTEST_PROBE_S)}" + (f" ({said})" if said else ""),
                         evidence={"python": str(self.python), "command": " ".join(argv)},
                         hint=f"install it there: {self.python} -m pip install pytest (the stand-in's venv is "
                              "omnibench's own python: install omnibench's test extra, python3 -m pip install -e "
                              "'.[test]'); docs/gpu-host.md")

    def _router(self) -> str:
        argv = [self.bash, ROUTER_SCRIPT, "build"]
        try:
            done = subprocess.run(argv, cwd=self.checkout, env=self.env, capture_output=True, text=True, timeout=3600)
        except (OSError, subprocess.TimeoutExpired) as exc:
            raise CiNotReady(f"{ROUTER_SCRIPT} could not run: {exc}", evidence={"command": " ".join(argv)}) from exc
        lines = [line.strip() for line in done.stdout.splitlines() if line.strip()]
        if done.returncode != 0 or not lines:
            raise CiNotReady(f"{ROUTER_SCRIPT} build exited with {done.returncode} and printed no binary path",
                             evidence={"stdout": done.stdout[-2000:] or "(none)", "stderr": done.stderr[-2000:] or "(none)"},
                             hint="the first build needs internet access to rustup and crates; see the runbook")
        path = lines[-1]  # the script prints exactly one line: the binary
        if not os.access(path, os.X_OK) or not Path(path).is_file():
            raise CiNotReady(f"the router binary {path} is not an executable file",
                             evidence={"printed": done.stdout[-2000:]}, hint=f"rebuild it: bash {ROUTER_SCRIPT} build")
        return path

    def _cleanup(self) -> int:
        """``delete_gpu_process.sh --kill-orphans`` so a crashed stage does not hold the GPUs."""
        with open(self.out_dir / "cleanup.log", "a", encoding="utf-8") as log:
            log.write(f"--- {time.strftime('%H:%M:%S')} {CLEANUP_SCRIPT} --kill-orphans\n")
            log.flush()
            try:
                return subprocess.run([self.bash, CLEANUP_SCRIPT, "--kill-orphans"], cwd=self.checkout, env=self.env,
                                      stdout=log, stderr=subprocess.STDOUT, timeout=600, check=False).returncode
            except (OSError, subprocess.TimeoutExpired) as exc:
                log.write(f"clean-up failed: {exc}\n")
                return -1

    def _before_retry(self, name: str, attempt: int, attempts: int, delay: float, log: Path,
                      cleanups: list[int]) -> str:
        """CI's wrapper before a retry: clean the GPUs (the exit code appended to ``cleanups``),
        then wait ``delay``. A clean-up that fails ends the retries: the reason is returned (and
        logged), "" when the retry may run."""
        cleanups.append(self._cleanup())
        if cleanups[-1] != 0:  # never retry on GPUs the clean-up could not free
            stopped = (f"{CLEANUP_SCRIPT} exited {cleanups[-1]} before attempt {attempt}/{attempts}: "
                       "not retried with dirty GPU state")
            self.progress(f"{name}: {stopped}")
            with open(log, "a", encoding="utf-8") as handle:
                handle.write(f"=== omnibench: {stopped}\n")
            return stopped
        self.progress(f"{name}: attempt {attempt}/{attempts} in {delay:g} s")
        time.sleep(delay)
        return ""

    def run_stage(self, stage: CiStage, *, attempts: int | None = None, retry_delay_s: float | None = None,
                  timeout_s: float | None = None) -> StageResult:
        """Run one stage, clean up, record it. Retried like CI's flaky wrapper if asked: each
        attempt sees ``OMNI_CI_ATTEMPT=<n>``; the clean-up runs before each retry, and one that
        fails ends the retries (the stage keeps its failed attempt's exit code)."""
        s = self.settings.ci
        attempts = max(1, attempts or s.ci_attempts)
        delay = s.ci_retry_delay_s if retry_delay_s is None else retry_delay_s
        limit = timeout_s or s.ci_stage_timeout_s
        log = self.out_dir / f"{stage.name}.log"
        argv = [str(self.python), "-m", "pytest", stage.test_file, *stage.pytest_args]
        checked = self.check_rev_ok(argv)  # before each stage: the tree may change between them
        t0 = time.monotonic()
        cleanups: list[int] = []
        code, timed_out, tried, stopped = 1, False, 0, ""
        for attempt in range(1, attempts + 1):
            if attempt > 1:
                stopped = self._before_retry(stage.name, attempt, attempts, delay, log, cleanups)
                if stopped:
                    break
            tried = attempt
            with open(log, "a", encoding="utf-8") as handle:
                handle.write(f"=== omnibench: {stage.name} attempt {tried}/{attempts}: {' '.join(argv)}\n")
            self.progress(f"{stage.name}: running {stage.test_file}")
            proc = start_group(argv, log_path=log, env={**self.env, ATTEMPT_ENV: str(tried)}, cwd=str(self.checkout))
            try:
                code, timed_out = proc.popen.wait(timeout=limit), False
            except subprocess.TimeoutExpired:
                proc.stop(30)
                code, timed_out = TIMEOUT_EXIT, True
                with open(log, "a", encoding="utf-8") as handle:
                    handle.write(f"\n=== omnibench: timed out after {limit:g} s; the stage's process group was stopped\n")
            except BaseException:
                proc.stop(10)
                raise
            proc.stop(10)  # anything the stage left in its group
            if code == 0:
                break
        (self.out_dir / f"{stage.name}.rc").write_text(f"{code}\n")
        cleanups.append(self._cleanup())
        accuracy, line = parse_accuracy(log.read_text(encoding="utf-8", errors="replace"))
        result = StageResult(stage.name, stage.test_file, code, tried, round(time.monotonic() - t0, 3), accuracy, line,
                             timed_out, str(log), cleanups, checked.evidence, stopped)
        self.results.append(result)
        self.write_summary()
        verdict = "passed" if code == 0 else ("timed out" if timed_out else f"failed (exit {code})")
        self.progress(f"{stage.name}: {verdict} after {tried} attempt(s), {result.duration_s:.1f} s")
        if code != 0:
            self.progress(log_tail(log, 15))
        return result

    def check_rev_ok(self, argv: list[str]) -> GateRecord:
        """REV_OK for a stage's python (``argv``, with the stage's environment and folder): it
        imports the checkout's packages from the checkout's own files at its commit. Raises
        WrongRevision (the stage does not run) otherwise."""
        launch = rev_ok.command_launch("ci stage", argv, self.env, str(self.checkout))
        record = rev_ok.check_rev_ok([launch], system_package(self.checkout), str(self.checkout), self.revision,
                                     allowed_dirty=self.allowed_dirty, git=self.settings.tools.git)
        self.progress(f"REV_OK: {record.evidence['packages']} from {self.checkout} at {self.revision[:12]}")
        return record

    def write_summary(self) -> Path:
        """``summary.json``: every stage run so far."""
        return write_json(self.out_dir / "summary.json", {"commit": self.revision, "out_dir": str(self.out_dir),
                                                          "stages": [asdict(r) for r in self.results]})

    def summary_table(self) -> str:
        """Stage, exit code, attempts, duration, accuracy."""
        return table(((r.stage, r.exit_code, r.attempts, f"{r.duration_s:.1f}",
                       "-" if r.accuracy is None else f"{r.accuracy:.4g}") for r in self.results),
                     ("stage", "exit code", "attempts", "duration s", "accuracy"))


def stages() -> list[CiStage]:
    """Every registered CI stage, in order."""
    from .registry.manager import load

    return load()[1].ordered_ci_stages()

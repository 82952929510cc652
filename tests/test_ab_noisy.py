"""`invoke ab --noisy-retries N`: a measured round whose timed window the noise guard marked is
set aside and measured again, at most N times, before it is judged as it is. Scripted runs for the
driver's rules (which attempts are set aside, the budget, resuming, the record and the report), and
a real duet with a CPU hog pinned to slot 0's CPU."""

from __future__ import annotations

import json
import math
import os
import random
import re
import signal
import subprocess
import sys
from dataclasses import replace
from pathlib import Path

import pytest
from ab_scripted import LATENCY, ScriptedRuns
from run_helpers import REPO, free_port

from omnibench_core import api
from omnibench_core.ab import execute, experiment_file, record
from omnibench_core.ab.analysis import judged
from omnibench_core.ab.writing import markdown
from omnibench_core.errors import RecordError, RunInterrupted, SettingsError
from omnibench_core.settings import Settings
from omnibench_core.statuses import AttemptStatus, RunStatus
from omnibench_core.store import manifest as manifest_file
from omnibench_core.telemetry import hostload


class NoisyRuns(ScriptedRuns):
    """Stands in for a real run: each attempt writes a run folder (B 30 % slower than A) with a
    manifest whose timed window is noisy for the labels in ``noisy`` (label -> how many of its
    attempts, from the first); a noisy run is also 3x slower, as a hog makes it."""

    def __init__(self, noisy: dict[str, int] | None = None, interrupt_at: int = 0):
        super().__init__(interrupt_at)
        self.noisy = dict(noisy or {})
        self.rng = random.Random(3)

    def write(self, folder: Path, label: str) -> str:
        """The next runN under ``folder``, as a run of ``label`` leaves it; its name."""
        base = label.split(",")[0]  # "B round 2", without ", measured again (1 noisy)"
        noisy = self.noisy.get(base, 0) > 0
        if noisy:
            self.noisy[base] -= 1
        run = folder / f"run{sum(1 for _ in folder.glob('run*')) if folder.exists() else 0}"
        run.mkdir(parents=True)
        latency = 0.1 * (1.3 if base.startswith("B") else 1.0) * (3.0 if noisy else 1.0)
        metrics = {LATENCY: latency * math.exp(self.rng.gauss(0, 0.02)), "selftest.requests": 4}
        (run / "metrics.json").write_text(json.dumps({"metrics": metrics, "complete": True}))
        load = {"window": "selftest.client", "seconds": 2.0, "cpus": [0], "busy_cpu_s": 2.0, "own_cpu_s": 0.5,
                "foreign_cpu_s": 1.5 if noisy else 0.0, "foreign_fraction": 0.75 if noisy else 0.0,
                "load_start": 1.0, "load_end": 2.0, "threshold": 0.1, "noisy": noisy}
        (run / "manifest.json").write_text(json.dumps({"steps": [{"step": "selftest.client", "phase": "generate",
                                                                    "status": "ok", "host_load": load}]}))
        return run.name


# the scripted runs' windows name CPU 0 of this host, whose real load is not theirs: no wait for it
# (the wait itself: test_a_noisy_round_waits_for_its_cpus_to_be_quiet_then_is_measured_again)
NO_WAIT = {"noise_wait_s": "0"}


def _request(tmp_path: Path, **kwargs):
    settings = Settings.from_mapping({"results": str(tmp_path), **NO_WAIT})
    return settings, execute.request_from(settings, ["selftest"], a_sets=["local_delay_ms=40"],
                                          b_sets=["local_delay_ms=52"], rounds=3, scoring="per-run", **kwargs)


def _statuses(experiment, side: str, round_: int) -> list[str]:
    return [a.status.value for a in experiment.attempts if (a.side, a.round) == (side, round_)]


def test_a_noisy_round_is_measured_again_and_judged_on_the_quiet_run_the_noisy_one_named(tmp_path, scripted):
    settings, request = _request(tmp_path, noisy_retries=2)
    # B round 2 noisy once; A's warm-up noisy too (a warm-up is never judged, so never measured again)
    runs = scripted(NoisyRuns({"B round 2": 1, "A run0 warm-up": 1}))
    said: list[str] = []
    path, experiment = execute.run_ab(settings, request, progress=said.append)
    assert _statuses(experiment, "B", 2) == ["noisy", "complete"]
    assert _statuses(experiment, "A", 0) == ["complete"] and _statuses(experiment, "A", 2) == ["complete"]
    assert runs.calls.count("B round 2") == 2 and len(runs.calls) == 9  # 8 scheduled and the one again
    assert any("] round 2 was noisy (B: run" in line and "measured again (1 of --noisy-retries 2)" in line
               for line in said), said
    made = judged(experiment, tmp_path)
    noisy_run = next(a.run for a in experiment.attempts if a.status is AttemptStatus.NOISY)
    assert all(noisy_run not in r for r in made.runs["B"])  # judged on the quiet run, not the 3x slower one
    (v,) = [v for v in made.verdicts if v.metric == LATENCY]
    assert v.verdict.value == "worse" and 0.2 < v.change < 0.4, v  # +30 %, not pulled up by the noisy run
    assert made.noisy == () and len(made.redone) == 1
    assert made.redone[0].startswith(f"B round 2 ({noisy_run}) set aside, measured again: noisy: {noisy_run} was noisy")
    md = markdown(experiment, made, path)
    assert "Set aside as noisy and measured again (`--noisy-retries 2`; kept on disk, not judged):" in md
    assert f"- B round 2 ({noisy_run}) set aside" in md
    assert experiment_file.load(path) == experiment  # the record holds it (format 5)
    assert json.loads(path.read_text())["format"] == 5


def test_a_round_noisy_past_the_budget_is_judged_as_measured_and_named(tmp_path, scripted):
    settings, request = _request(tmp_path, noisy_retries=1)
    runs = scripted(NoisyRuns({"A round 1": 5}))
    said: list[str] = []
    _, experiment = execute.run_ab(settings, request, progress=said.append)
    assert _statuses(experiment, "A", 1) == ["noisy", "complete"] and runs.calls.count("A round 1") == 2
    assert any("round 1 was noisy again" in line and "--noisy-retries 1 is spent: it is judged as measured" in line
               for line in said), said
    made = judged(experiment, tmp_path)
    assert len(made.redone) == 1 and len(made.noisy) == 1 and made.noisy[0].startswith("A round 1: run")
    # resumed, nothing is measured again: the spent round stays judged as it was
    again = scripted(NoisyRuns({"A round 1": 5}))
    _, same = execute.run_ab(settings, request, progress=said.append)
    assert again.calls == [] and same.attempts == experiment.attempts


def test_without_noisy_retries_a_noisy_round_is_judged_as_measured(tmp_path, scripted):
    settings, request = _request(tmp_path)  # the default: 0
    runs = scripted(NoisyRuns({"B round 2": 1}))
    _, experiment = execute.run_ab(settings, request, progress=lambda line: None)
    assert len(runs.calls) == 8 and not any(a.status is AttemptStatus.NOISY for a in experiment.attempts)
    made = judged(experiment, tmp_path)
    assert len(made.noisy) == 1 and made.redone == ()
    assert "or with `--noisy-retries N` to measure a noisy round again." in markdown(experiment, made, tmp_path / "x")


def test_a_round_a_verdict_has_judged_is_never_measured_again(tmp_path, scripted):
    """A finished experiment with a noisy round, repeated with --noisy-retries after its verdict was
    seen: the round stays (measured again then, it would be chosen by the verdict). The same for the
    rounds a look of --max-rounds judged."""
    settings, request = _request(tmp_path)
    scripted(NoisyRuns({"B round 2": 1}))
    _, done = execute.run_ab(settings, request, progress=lambda line: None)
    said: list[str] = []
    again = scripted(NoisyRuns())
    _, same = execute.run_ab(settings, replace(request, noisy_retries=2), progress=said.append)
    assert again.calls == [] and same.attempts == done.attempts and same.noisy_retries == 2
    assert any("round 2 was noisy (B: run" in line and "but a verdict has judged it: it stays as measured" in line
               for line in said), said
    # --max-rounds: interrupted after the first look (4 rounds), round 3 noisy and judged there
    settings = Settings.from_mapping({"results": str(tmp_path / "seq"), **NO_WAIT})
    seq = execute.request_from(settings, ["selftest"], aa=True, max_rounds=12, scoring="per-run")
    first = scripted(NoisyRuns({"A round 3": 1}, interrupt_at=2 + 2 * 4 + 1))
    with pytest.raises(RunInterrupted):
        execute.run_ab(settings, seq, progress=lambda line: None)
    path = experiment_file.experiment_path(settings.run.results_root, seq.experiment_name)
    assert [k.rounds for k in experiment_file.load(path).sequential.looks] == [4] and len(first.calls) == 11
    scripted(NoisyRuns())
    _, resumed = execute.run_ab(settings, replace(seq, noisy_retries=2), progress=lambda line: None)
    assert _statuses(resumed, "A", 3) == ["complete"]


def test_an_experiment_interrupted_after_a_noisy_round_resumes_by_measuring_it_again(tmp_path, scripted):
    settings, request = _request(tmp_path, noisy_retries=2)
    first = scripted(NoisyRuns({"B round 1": 1}, interrupt_at=0))
    order = [f"{p.side} round {p.round}" for p in record.schedule(record.Design.INTERLEAVED, 3, 0) if p.round == 1]
    # interrupted at the run after B round 1's noisy one: its redo (or A's, when A runs second)
    first.interrupt_at = 2 + order.index("B round 1") + 2
    with pytest.raises(RunInterrupted):
        execute.run_ab(settings, request, progress=lambda line: None)
    path = experiment_file.experiment_path(tmp_path, request.experiment_name)
    assert _statuses(experiment_file.load(path), "B", 1)[0] == "noisy"
    again = scripted(NoisyRuns())
    _, experiment = execute.run_ab(settings, request, progress=lambda line: None)
    assert "B round 1" in again.calls and experiment.redone(record.Position("B", 1)) == 1
    assert _statuses(experiment, "B", 1)[-1] == "complete"


def test_the_record_refuses_a_noisy_warm_up_or_a_negative_budget_and_migrates_format_4(tmp_path, scripted):
    settings, request = _request(tmp_path, noisy_retries=1)
    scripted(NoisyRuns({"A round 1": 1}))
    path, experiment = execute.run_ab(settings, request, progress=lambda line: None)
    data = json.loads(path.read_text())
    bad = tmp_path / "bad.json"
    warm = next(i for i, a in enumerate(data["attempts"]) if a["round"] == 0)
    for edit, field in ((lambda d: d["attempts"][warm].update(status="noisy"), f"attempts[{warm}].status"),
                        (lambda d: d.update(noisy_retries=-1), "noisy_retries"),
                        (lambda d: d.update(noisy_retries=21), "noisy_retries")):
        copy = json.loads(json.dumps(data))
        edit(copy)
        bad.write_text(json.dumps(copy))
        with pytest.raises(RecordError, match=field.replace("[", r"\[").replace("]", r"\]")):
            experiment_file.load(bad)
    assert data["noisy_retries"] == 1
    old = {k: v for k, v in data.items() if k != "noisy_retries"} | {"format": 4}
    old["attempts"] = [a for a in old["attempts"] if a["status"] != "noisy"]
    bad.write_text(json.dumps(old))
    assert experiment_file.load(bad).noisy_retries == 0
    bad.write_text(json.dumps(old | {"noisy_retries": 2}))  # a field no format 4 had
    with pytest.raises(RecordError, match="noisy_retries"):
        experiment_file.load(bad)


class _NoDuet:
    """In place of the duet's two worker processes (the scripted round writes the runs itself)."""

    def __init__(self, **kwargs):
        pass

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False


def test_a_duet_round_with_one_noisy_side_is_measured_again_as_a_round(tmp_path, scripted, monkeypatch):
    """A duet's unit is the round (both sides at once): when one side's slot was noisy, both runs are
    set aside and both measured again together, never the noisy side alone beside nothing."""
    runs = NoisyRuns({"B round 1": 1})
    rounds: list[list[str]] = []
    now = [0.0]  # the driver's clock: each scripted round takes 10 s of it
    monkeypatch.setattr(execute._Driver, "clock", staticmethod(lambda: now[0]))

    def scripted_round(self, r, pending):  # what _duet_attempt records of a round, without the workers
        self.progress.start_run(r + 1, f"round {r}")
        self.progress.say(f"round {r} begins")
        now[0] += 10.0
        rounds.append([p.side for p in pending])
        for p in pending:
            folder = api.revision_dir(self.sides[p.side])
            name = runs.write(folder, f"{p.side} round {r}")
            self.save(record.Attempt(p.side, r, name, folder.name, AttemptStatus.COMPLETE, record.now_iso(),
                                     where=f"slot {record.duet_slot(p.side, r)}", alone=len(pending) == 1))

    monkeypatch.setattr(execute._Driver, "_duet_attempt", scripted_round)
    monkeypatch.setattr(execute.duet, "Duet", _NoDuet)
    monkeypatch.setattr(execute.duet, "slots_share_cpus", lambda a, b: False)
    slot = type("Slot", (), {"slot": type("S", (), {"cpus": (0,)})(), "label": "slot"})()
    settings = Settings.from_mapping({"results": str(tmp_path), **NO_WAIT})
    request = execute.request_from(settings, ["selftest"], aa=True, rounds=2, scoring="per-run", design="duet",
                                   noisy_retries=1)
    said: list[str] = []
    _, experiment = execute.run_ab(settings, request, slots=(slot, slot), progress=said.append)
    assert rounds == [["A", "B"]] * 4  # warm-ups, round 1, round 1 again, round 2: always both
    # the estimate learnt round 1 as one round of 20 s (its run set aside and its run again): round 2 is
    # estimated at the mean of 10 and 20 s, not of three 10 s runs
    (line,) = [line for line in said if line.endswith("round 2 begins")]
    assert "| ~15s left]" in line, line
    assert _statuses(experiment, "A", 1) == _statuses(experiment, "B", 1) == ["noisy", "complete"]
    errors = {a.side: a.error for a in experiment.attempts if a.status is AttemptStatus.NOISY}
    assert errors["B"].startswith("noisy: run3 was noisy: ") and errors["A"] == "its partner in round 1 was noisy"
    assert not any(a.alone for a in experiment.attempts)


class _ScriptedCpu0:
    """A scripted /proc whose CPU 0 is busy with another process for the first ``busy`` looks of
    the driver's wait (each look a second of an injected clock), then quiet; the test process's
    own tree never runs."""

    def __init__(self, root: Path, busy: int):
        self.root, self.busy, self.looks, self.now, self.ticks = root, busy, 0, 1000.0, 0
        (root / str(os.getpid())).mkdir(parents=True)
        (root / str(os.getpid()) / "stat").write_text(
            f"{os.getpid()} (pytest) S 1 1 1 " + " ".join(["0"] * 40) + "\n")
        (root / "loadavg").write_text("0.5 0.5 0.5 1/100 42\n")
        self._write()

    def _write(self) -> None:
        (self.root / "stat").write_text(f"cpu  0 0 0 0 0 0 0 0 0 0\ncpu0 {self.ticks} 0 0 1000 0 0 0 0 0 0\nintr 0\n")

    def sleep(self, seconds: float) -> None:
        self.looks += 1
        self.now += seconds
        if self.looks <= self.busy:  # another process took the whole CPU this second
            self.ticks += int(seconds * hostload.clock_ticks())
        self._write()

    def clock(self) -> float:
        return self.now


@pytest.mark.parametrize("busy, said", [(2, "CPUs 0 quiet after 3 s: measuring again"),
                                        (1000, "CPUs 0 still busy after 60 s (100% to other processes): "
                                               "measuring again anyway")])
def test_a_noisy_round_waits_for_its_cpus_to_be_quiet_then_is_measured_again(tmp_path, scripted, monkeypatch, busy,
                                                                              said):
    """Measured again at once, a round fell into the same busy spell (seed-tts beside a hog 10 to 30 s
    on: its retries spent, 8.5 runs set aside an experiment). The driver first looks at the noisy
    window's CPUs a second at a time until other processes leave them, at most noise_wait_s (60),
    then measures anyway."""
    cpu0 = _ScriptedCpu0(tmp_path / "proc", busy)
    monkeypatch.setattr(execute._Driver, "proc", tmp_path / "proc")
    monkeypatch.setattr(execute._Driver, "sleep", staticmethod(cpu0.sleep))
    monkeypatch.setattr(execute._Driver, "clock", staticmethod(cpu0.clock))
    settings = Settings.from_mapping({"results": str(tmp_path / "results")})  # noise_wait_s: its default, 60
    request = execute.request_from(settings, ["selftest"], a_sets=["local_delay_ms=40"], b_sets=["local_delay_ms=52"],
                                   rounds=3, scoring="per-run", noisy_retries=1)
    runs = scripted(NoisyRuns({"B round 2": 1}))
    said_lines: list[str] = []
    _, experiment = execute.run_ab(settings, request, progress=said_lines.append)
    assert _statuses(experiment, "B", 2) == ["noisy", "complete"] and runs.calls.count("B round 2") == 2
    assert cpu0.looks == min(busy + 1, 60)  # one look past the busy ones, or up to the wait's end
    waiting = [line for line in said_lines if "waiting up to 60 s (noise_wait_s) for CPUs 0 to be quiet: 100% of them" in line]
    assert len(waiting) == 1 and any(said in line for line in said_lines), said_lines


def test_a_noisy_retries_out_of_range_is_refused_in_one_line(invoke, port):
    """`--noisy-retries 1000000` on a host busy all along would measure and wait for ever; a typo."""
    for bad, words in (("21", "a whole number from 0 to 20"), ("-1", "a whole number from 0 to 20"),
                       ("two", "a whole number from 0 to 20")):
        done = invoke("ab", "--workload", "selftest", "--aa", "--port", str(port), "--noisy-retries", bad)
        assert done.returncode == 1 and words in done.stderr and "Traceback" not in done.stderr, done.stderr
    with pytest.raises(SettingsError, match="--noisy-retries 21: from 0"):
        execute.request_from(Settings(), ["selftest"], aa=True, noisy_retries=21)


def _slot0(cpus: list[int]) -> list[int]:
    """A duet's slot 0 under `--slot-cpus rule` on the local target: the larger half of the CPUs."""
    return cpus[:(len(cpus) + 1) // 2]


# As docs/ab.md writes it ("Noisy rounds measured again")
DOCS_COMMAND = ("invoke ab --workload selftest --a-set local_delay_ms=50 --b-set local_delay_ms=250 --slots 0,1 "
                "--rounds 2 --noisy-retries 2")


@pytest.mark.slow
@pytest.mark.skipif(len(os.sched_getaffinity(0)) < 2, reason="a duet of two one-CPU slots needs two CPUs")
def test_a_duet_with_a_hog_on_slot_0_sets_both_sides_of_each_round_aside_and_measures_them_again(tmp_path):
    """The user's path: docs/ab.md's `invoke ab ... --slots 0,1 --noisy-retries 2` while a CPU hog
    that is neither side's holds slot 0's CPU all along. Every measured round is noisy (its slot-0
    side), so both sides of it are set aside and measured again, together, twice; the still-noisy
    round is then judged as measured and named. The warm-ups are never measured again."""
    assert DOCS_COMMAND in (REPO / "docs" / "ab.md").read_text()
    cpus = sorted(os.sched_getaffinity(0))
    # niced: it takes the CPU's idle time (slot 0's side mostly waits on its planted delays), which is
    # what the guard counts, and yields to the rest of a busy suite rather than burning a core from it
    hog = subprocess.Popen(["taskset", "-c", ",".join(map(str, _slot0(cpus))), "nice", "-n", "19", sys.executable,
                            "-c", "while True: pass"], start_new_session=True)
    results = tmp_path / "results"
    try:
        done = subprocess.run([sys.executable, "-m", *DOCS_COMMAND.split(), "--port", str(free_port()),
                               "--opt", "selftest.requests=4", "--opt", "selftest.delay=0.05"],
                              cwd=REPO, env={**os.environ, "INVOKE_OMNIBENCH_RESULTS": str(results),
                                             "INVOKE_OMNIBENCH_NOISE_WAIT_S": "1"},  # the hog stays: wait briefly
                              capture_output=True, text=True, timeout=600)
    finally:
        os.killpg(hog.pid, signal.SIGKILL)
        hog.wait()
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr
    (path,) = (results / "ab").glob("*.json")
    experiment = experiment_file.load(path)
    rounds = experiment.identity.rounds
    for side in "AB":
        assert _statuses(experiment, side, 0) == ["complete"]
        for r in range(1, rounds + 1):
            assert _statuses(experiment, side, r) == ["noisy", "noisy", "complete"], (side, r)
    # deferred scoring (the default): the runs set aside were finished unscored, none left half done
    aside = [a for a in experiment.attempts if a.status is AttemptStatus.NOISY]
    assert {manifest_file.run_status(results / a.revision / a.run) for a in aside} == {RunStatus.COMPLETE}
    for r in range(1, rounds + 1):  # both sides set aside at once, and measured again at once, never alone
        pair = [a for a in experiment.attempts if a.round == r]
        assert not any(a.alone for a in pair)
        on_slot0 = next(s for s in "AB" if record.duet_slot(s, r) == 0)
        aside = [a for a in pair if a.side == on_slot0 and a.status is AttemptStatus.NOISY]
        assert all(a.error.startswith(f"noisy: {a.run} was noisy: ") for a in aside), aside
        assert f"round {r} was noisy again" in done.stdout
    assert "--noisy-retries 2 is spent" in done.stdout and done.stdout.count("REDONE: ") == 4 * rounds
    # each time, the noisy windows' CPUs (slot 0's, and slot 1's when a busy host made it noisy too) looked at
    # for noise_wait_s first, then measured anyway: the hog stays
    slot0 = ",".join(map(str, _slot0(cpus)))
    assert len(re.findall(rf"CPUs {slot0}[,\d]* still busy after \d+ s \(\d+% to other processes\): measuring again "
                          "anyway", done.stdout)) == 2 * rounds, done.stdout[-3000:]
    line = next(ln for ln in done.stdout.splitlines() if ln.startswith(LATENCY))
    assert "WORSE" in line, line  # 200 ms a request planted: the hog's rounds do not hide it

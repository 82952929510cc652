"""The scale layer on CPU: slots, revisions (worktrees, venv reuse), the k-ary bisect, and a real
matrix and bisect on the local engine over a stand-in checkout (made by `invoke standin`) whose
commits add different latencies. tests/test_scale_standin.py runs the same through `invoke`."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from gpu_helpers import write_fake_nvidia_smi
from run_helpers import REPO, free_port
from scale_helpers import invoke_standin, server_pids

from omnibench_core.errors import OmnibenchError, SettingsError, WrongRevision
from omnibench_core.records import Slot
from omnibench_core.run import rev_ok
from omnibench_core.scale import front_door as commands
from omnibench_core.scale import revisions, venv_reuse
from omnibench_core.scale.bisect import kary_search, rounds_needed
from omnibench_core.scale.matrix import matrix_text, parse_sweep
from omnibench_core.scale.slots import HostSlot, SlotBusy, check_free, plan_slots
from omnibench_core.settings import Settings
from omnibench_core.setup.checkout import build_venv
from omnibench_core.setup.cpus import Topology, parse_lscpu, read_topology
from omnibench_core.standin import StandinSpec, make_standin
from omnibench_core.standin import write_fake_nvidia_smi as write_standin_fake
from omnibench_core.standin.venv import record_row
from omnibench_core.store import manifest as manifest_file

FIXTURES = Path(__file__).parent / "fixtures" / "gpu-hosts"
OPTS = ("selftest.serve_with_target=true", "selftest.delay=0.05", "selftest.requests=4", "selftest.children=0")


def _topology(host: str) -> Topology:
    folder = FIXTURES / host
    siblings, nodes = parse_lscpu((folder / "lscpu.txt").read_text())
    return Topology(siblings, nodes, [(str(i), 0) for i in range(8)])


def test_slots_follow_the_cpu_rule_pairs_and_ports():
    topo = Topology({c: [c, c + 64] for c in range(64)}, {c: 0 if c < 32 else 1 for c in range(64)},
                    [("0", 0), ("1", 0), ("2", 1), ("3", 1)])
    pairs = plan_slots(("0", "1", "2", "3"), 9000, per="pair", topology=lambda: topo)
    assert [(s.slot.port, s.slot.gpus, s.idle_gpus) for s in pairs] == [(9000, ("0",), ("1",)), (9001, ("2",), ("3",))]
    assert pairs[0].slot.cpus == tuple(sorted([*range(2, 16), *range(66, 80)]))  # the runbook's BENCH_CPUS
    gpus = plan_slots(("0", "1", "2", "3"), 9000, per="gpu", topology=lambda: topo)
    cpus = [set(s.slot.cpus) for s in gpus]
    assert all(not (a & b) for i, a in enumerate(cpus) for b in cpus[i + 1:])  # never a shared CPU
    shared = plan_slots(("0", "1"), 9000, per="gpu", cpus="shared")
    assert all(s.shared_cpus for s in shared)
    with pytest.raises(SettingsError, match="pairs"):
        plan_slots(("0", "1", "2"), 9000, per="pair", cpus="shared")
    tiny = Topology({0: [0], 1: [1], 2: [2]}, {0: 0, 1: 0, 2: 0}, [("0", 0)])
    with pytest.raises(SettingsError, match="slot-cpus shared"):
        plan_slots(("0",), 9000, per="gpu", topology=lambda: tiny)


def test_a_pair_slot_of_one_gpu_is_that_gpu_alone_with_a_note():
    (slot,) = plan_slots(("0",), 9000, per="pair", cpus="shared")
    assert (slot.slot.gpus, slot.idle_gpus) == (("0",), ()) and "alone" in slot.note
    assert all(not s.note for s in plan_slots(("0", "1"), 9000, per="pair", cpus="shared"))
    with pytest.raises(SettingsError, match="pairs"):  # three GPUs: which to leave out is the user's choice
        plan_slots(("0", "1", "2"), 9000, per="pair", cpus="shared")


def _tripwire(folder: Path) -> Path:
    """An nvidia-smi that records that it was asked."""
    folder.mkdir(parents=True, exist_ok=True)
    script = folder / "nvidia-smi"
    script.write_text(f"#!/bin/sh\ntouch {folder / 'asked'}\necho 0\n")
    script.chmod(0o755)
    return script


def test_slots_of_a_target_without_gpus_are_ports_and_cpu_groups(tmp_path):
    mine = sorted(os.sched_getaffinity(0))
    slots = plan_slots(("0", "1"), 9000, per="pair", cpus="rule", uses_gpu=False,
                       topology=lambda: pytest.fail("the rule read the GPU topology"))
    assert [(s.slot.port, s.slot.gpus, s.idle_gpus) for s in slots] == [(9000, (), ()), (9001, (), ())]
    if len(mine) >= 2:  # disjoint groups that cover the process's CPUs
        a, b = slots[0].slot.cpus, slots[1].slot.cpus
        assert not set(a) & set(b) and sorted(a + b) == mine
    shared = plan_slots(("0", "1"), 9000, cpus="shared", uses_gpu=False)
    assert all(s.shared_cpus and list(s.slot.cpus) == mine for s in shared)
    with pytest.raises(SettingsError, match="slot-cpus shared"):
        plan_slots(tuple(str(i) for i in range(len(mine) + 1)), 9000, uses_gpu=False)
    wire = _tripwire(tmp_path / "wire")
    check_free(slots[0], nvidia_smi=str(wire), timeout_s=0.3)
    assert not (tmp_path / "wire" / "asked").exists()  # SLOT_FREE asked no nvidia-smi


@pytest.mark.parametrize("var", ["", "COVERAGE_PROCESS_START", "COVERAGE_PROCESS_CONFIG"])
def test_the_standins_fake_starts_python_without_site_unless_coverage_measures_it(tmp_path, var):
    """The fake answers some 700 calls a suite run from the standard library alone: -S, as the
    watchdog; where coverage.py's .pth hook must measure it, with site (python -v names site's import)."""
    fake = write_standin_fake(tmp_path / "fake", tmp_path / "co")
    env = {k: v for k, v in os.environ.items() if not k.startswith("COVERAGE_")}
    env.update({"PYTHONVERBOSE": "1", **({var: str(tmp_path / "nothing.toml")} if var else {})})
    done = subprocess.run([str(fake), "-L"], env=env, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0 and done.stdout.startswith("GPU 0: Stand-in GPU"), done.stderr[-2000:]
    assert ("import 'site'" in done.stderr) == bool(var)


def test_topology_from_the_standins_fake_and_a_malformed_one_is_typed(tmp_path):
    lscpu = tmp_path / "lscpu"
    lscpu.write_text("#!/bin/sh\necho '# CPU,Core,Node'\n" + "".join(f"echo {c},{c},0\n" for c in range(32)))
    lscpu.chmod(0o755)
    sysfs = tmp_path / "sys"
    for bus in ("0000:01:00.0", "0000:02:00.0"):  # the fake's two GPUs, both on node 0
        (sysfs / "bus" / "pci" / "devices" / bus).mkdir(parents=True)
        (sysfs / "bus" / "pci" / "devices" / bus / "numa_node").write_text("0\n")
    fake = write_standin_fake(tmp_path / "fake", tmp_path / "co")
    topo = read_topology(lscpu=str(lscpu), nvidia_smi=str(fake), sysfs=sysfs)
    assert topo.gpu_nodes == [("0", 0), ("1", 0)]
    slots = plan_slots(("0", "1"), 9000, per="gpu", topology=lambda: topo)
    assert slots[0].slot.cpus == tuple(range(2, 16)) and slots[1].slot.cpus == tuple(range(16, 30))
    with pytest.raises(SettingsError, match="cannot read the NUMA node") as refused:  # no such device: typed
        plan_slots(("0",), 9000, per="gpu", topology=lambda: read_topology(lscpu=str(lscpu), nvidia_smi=str(fake),
                                                                           sysfs=tmp_path / "nothing"))
    assert "--slot-cpus shared" in refused.value.hint
    with pytest.raises(OmnibenchError, match="cannot read the NUMA node") as direct:  # invoke setup.cpus's own path
        read_topology(lscpu=str(lscpu), nvidia_smi=str(fake), sysfs=tmp_path / "nothing")
    assert "fake nvidia-smi" in direct.value.hint  # the stand-in's fakes name no real device: says so (issue 46)
    old = tmp_path / "old" / "nvidia-smi"  # the stand-in's old fake: five fields whatever was asked
    old.parent.mkdir()
    old.write_text(f"#!{sys.executable}\nprint('0, Stand-in GPU, 0.0, 143771 MiB, 00000000:00:00.0')\n")
    old.chmod(0o755)
    with pytest.raises(OmnibenchError, match="not 'index, pci.bus_id'") as err:
        read_topology(lscpu=str(lscpu), nvidia_smi=str(old), sysfs=sysfs)
    assert "Stand-in GPU" in err.value.evidence["line"]
    with pytest.raises(OmnibenchError, match="cpu,core,node"):
        parse_lscpu("0,0\n")


def test_a_busy_slot_is_refused_with_evidence(tmp_path):
    import socket
    fake = write_fake_nvidia_smi(tmp_path / "bin", [30000])
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        sock.listen()
        port = sock.getsockname()[1]
        with pytest.raises(SlotBusy) as err:
            check_free(HostSlot(0, Slot(port, ("0",))), nvidia_smi=str(fake), timeout_s=0.3)
    assert "port" in err.value.evidence and "GPU 0: 30000 MiB" in err.value.evidence["GPU memory"]
    check_free(HostSlot(0, Slot(free_port(), ("0",))), nvidia_smi=str(write_fake_nvidia_smi(tmp_path / "b2", [10])))


def test_sweep_is_every_combination():
    assert parse_sweep(["w.a=1,4", "w.b=x,y"]) == [("w.a=1", "w.b=x"), ("w.a=1", "w.b=y"), ("w.a=4", "w.b=x"),
                                                   ("w.a=4", "w.b=y")]
    assert parse_sweep([]) == [()]


def test_a_matrix_of_more_campaigns_than_the_cap_is_refused_before_it_is_planned():
    """Second hostile round: 2,000 --sweep values (or 27,000 combinations) were planned and measured
    one after another; now refused in one line, as many as the cap still planned."""
    import subprocess
    import sys

    from omnibench_core import defaults
    from omnibench_core.errors import SettingsError
    from omnibench_core.scale.matrix import check_size

    values = ",".join(str(i) for i in range(30))
    with pytest.raises(SettingsError, match="27,000 campaigns, over the 1,000"):
        parse_sweep([f"w.a={values}", f"w.b={values}", f"w.c={values}"])
    assert len(parse_sweep([f"w.a={','.join(str(i) for i in range(defaults.MAX_MATRIX_CAMPAIGNS))}"])) == 1000
    check_size(defaults.MAX_MATRIX_CAMPAIGNS, "x")
    with pytest.raises(SettingsError, match="1,001 campaigns"):
        check_size(defaults.MAX_MATRIX_CAMPAIGNS + 1, "the revisions x option sets")
    done = subprocess.run([sys.executable, "-m", "invoke", "matrix", "--workload", "selftest", "--revisions", "HEAD",
                           "--sweep", "selftest.requests=" + ",".join(str(i) for i in range(1, 2001))],
                          cwd=REPO, capture_output=True, text=True, timeout=600)
    assert done.returncode == 1 and "2,000 campaigns, over the 1,000" in done.stderr, done.stderr
    assert len(done.stderr.strip().splitlines()) <= 3 and "Traceback" not in done.stderr


@pytest.mark.parametrize("k", [1, 2, 3, 4])
def test_kary_search_finds_every_planted_commit_within_its_rounds(k):
    n = 8
    for planted in range(1, n):
        asked: list[int] = []

        def judge(batch, planted=planted, asked=asked):
            assert len(batch) <= k or len(asked) == 0 and len(batch) <= max(k, 2)
            asked.extend(batch)
            return {i: i >= planted for i in batch}

        found = kary_search(n, k, judge)
        assert found.first_bad == planted
        assert len(found.rounds) <= rounds_needed(n, k), (planted, found.rounds)
        assert len(asked) == len(set(asked))  # nothing measured twice
    assert rounds_needed(8, 1) == 4 and rounds_needed(8, 2) == 3


def test_kary_search_refuses_a_bad_end_that_is_not_worse():
    with pytest.raises(OmnibenchError, match="not worse"):
        kary_search(5, 2, lambda batch: {i: False for i in batch})


@pytest.mark.slow
def test_revision_worktrees_share_a_venv_by_deps_hash(tmp_path):
    co = invoke_standin(tmp_path / "co", "--commits", "2").root
    # a third commit changes a dependency, as a developer's would: its venv must be rebuilt
    (co / "pyproject.toml").write_text((co / "pyproject.toml").read_text().replace('["omnibench"]', '["omnibench", "numpy"]'))
    git = ["git", "-C", str(co), "-c", "user.name=t", "-c", "user.email=t@t"]
    subprocess.run([*git, "commit", "-qam", "add numpy"], check=True)
    commits = subprocess.run([*git, "rev-list", "--reverse", "HEAD"], capture_output=True, text=True,
                             check=True).stdout.split()
    assert revisions.resolve(co, f"{commits[0]}..{commits[2]}") == commits[1:]
    assert revisions.resolve(co, ",".join(c[:8] for c in commits)) == commits
    root = tmp_path / "wt"  # worktrees have no .standin/: prepare_omni_venv.sh finds omnibench's python anyway
    got = [revisions.prepare(co, c, root, progress=lambda s: None) for c in commits]
    assert [g.venv_from for g in got[:2]] == ["built", str(got[0].worktree)]  # same hash: copied, not rebuilt
    assert got[2].venv_from == "built"  # deps changed: its own build
    assert len(list((root / "venvs").glob("*.log"))) == 2
    # upstream's layout in every worktree: <tree>/omni links into that revision's own OMNI_CI_HOME
    h = got[1].deps_hash
    homes = [root / "venvs" / h, root / "venvs" / f"{h}-{commits[1][:12]}"]
    for g, home in zip(got[:2], homes, strict=True):
        assert g.venv.is_symlink() and g.venv.resolve() == (home / "omni").resolve()
    # the copy names B alone: #! line, editable .pth, direct_url.json, RECORD's hashes
    venv_b, tree_a, tree_b = homes[1] / "omni", str(got[0].worktree), str(got[1].worktree)
    assert (venv_b / "bin" / "sgl-omni").read_text().startswith(f"#!{venv_b}/bin/python") or \
        f'"{venv_b}/bin/python"' in (venv_b / "bin" / "sgl-omni").read_text()
    (pth,) = venv_b.glob("lib/python*/site-packages/__editable__.*.pth")
    assert pth.read_text().strip() == tree_b
    (info,) = venv_b.glob("lib/python*/site-packages/*.dist-info")
    assert json.loads((info / "direct_url.json").read_text()) == {"dir_info": {"editable": True},
                                                                  "url": got[1].worktree.as_uri()}
    site = pth.parent
    for row in (info / "RECORD").read_text().split():
        name, digest, _ = row.split(",")
        if digest:
            assert row == record_row(site, Path(os.path.normpath(site / name)))
    assert venv_reuse.leftovers(venv_b, [tree_a, str(homes[0])]) == []
    # REV_OK's probe: B's console script imports B's package
    launch = rev_ok.script_launch([str(got[1].venv / "bin" / "sgl-omni")], dict(os.environ), tree_b)
    assert launch is not None
    assert rev_ok.check_rev_ok([launch], "sglang_omni_standin", tree_b, commits[1]).status == "passed"
    assert revisions.prepare(co, commits[1], root, progress=lambda s: None).venv_from == "kept"


def test_the_old_copy_and_rewrite_reuse_would_serve_the_other_revision(tmp_path):
    """The old reuse copied <treeA>/omni (upstream's link, followed) and rewrote tree A's path to
    tree B's: B's python imports B, but B's sgl-omni keeps A's venv python on its #! line (A's
    OMNI_CI_HOME is outside tree A), whose editable install serves A. REV_OK names both trees."""
    made = make_standin(tmp_path / "co", StandinSpec(commits=2))
    root = tmp_path / "wt"
    tree_a, tree_b = (revisions.worktree(made.root, c, root) for c in made.commits)
    home_a = root / "venvs" / "a"
    build_venv(tree_a, home_a, log=root / "a.log")
    shutil.copytree(tree_a / "omni", tree_b / "omni", symlinks=True)  # the old revisions.prepare ...
    for path in venv_reuse.path_files(tree_b / "omni"):  # ... and its _relocate
        path.write_text(path.read_text().replace(str(tree_a), str(tree_b)))
    client = rev_ok.command_launch("client", [str(tree_b / "omni" / "bin" / "python"), "-m", "x"], dict(os.environ),
                                   str(tree_b))
    assert rev_ok.check_rev_ok([client], "sglang_omni_standin", str(tree_b), made.commits[1]).status == "passed"
    launch = rev_ok.script_launch([str(tree_b / "omni" / "bin" / "sgl-omni")], dict(os.environ), str(tree_b))
    assert launch is not None and launch.interpreter.startswith(str(home_a))
    with pytest.raises(WrongRevision) as caught:
        rev_ok.check_rev_ok([launch], "sglang_omni_standin", str(tree_b), made.commits[1])
    assert str(tree_a) in caught.value.message and str(tree_b) in caught.value.message
    assert caught.value.evidence["its work tree"] == str(tree_a)


def _standin(tmp_path: Path, commits: int, regress_at: int, delay_ms: int) -> tuple[list[str], Settings]:
    """A stand-in made by `invoke standin` (every commit 100 ms a request, the planted ones more) and
    settings that use its fake nvidia-smi. 100 ms, because a busy machine adds milliseconds to every
    request, and campaigns side by side share the cores: the noise stays far below the 30% threshold."""
    made = invoke_standin(tmp_path / "co", "--commits", str(commits), "--regress-at", str(regress_at), "--base-delay-ms",
                          "100", "--delay-ms", str(delay_ms), "--fake-gpus", str(tmp_path / "fakegpu"))
    settings = Settings.of(target="sglang-omni", checkout=str(made.root), results=str(tmp_path / "results"),
                           port=free_port(), nvidia_smi=str(tmp_path / "fakegpu" / "nvidia-smi"))
    return list(made.commits), settings


@pytest.mark.slow
def test_matrix_of_three_revisions_on_two_local_slots(tmp_path):
    # three runs a side: with two, one run slowed by a busy machine left Welch one degree of
    # freedom and the planted step "inconclusive" (seen once with three test workers on two cores)
    commits, settings = _standin(tmp_path, 3, 3, 200)  # 100, 100, 300 ms a request
    lines: list[str] = []

    def run(resume: bool):
        engine = commands.make_engine(settings, engine="local", slots="0,1", slot_per="gpu", slot_cpus="shared",
                                      progress=lines.append)
        return commands.matrix(settings, revisions_spec=",".join(commits), workloads=["selftest"], options=OPTS,
                               runs=3, engine=engine, resume=resume, threshold=0.3, progress=lines.append)

    result = run(False)
    text = matrix_text(result)
    assert all(o.status == "complete" for o in result.outcomes.values()), "\n".join(lines[-40:])
    keys = [j.key for j in result.jobs]
    slots_used = {result.outcomes[k].slot["index"] for k in keys}
    assert slots_used == {0, 1}  # both slots worked
    for commit in commits:  # run directories stay <results>/<short sha>/runN
        runs = sorted(p.name for p in (tmp_path / "results" / commit[:7]).glob("run*"))
        assert runs == ["run0", "run1", "run2", "run3"]
        manifest = manifest_file.read(tmp_path / "results" / commit[:7] / "run1")
        assert manifest.slot["gpus"] in (["0"], ["1"])  # the manifest records the slot
    v = {x.metric: x.verdict for x in result.verdicts[keys[2]]}
    assert v["selftest.latency_mean_s"] == "worse"  # the planted 20 -> 80 ms
    assert {x.metric: x.verdict for x in result.verdicts[keys[1]]}["selftest.latency_mean_s"] != "worse"
    assert "shared CPUs" in text and "base" in text
    assert not server_pids(tmp_path)
    # resume: every campaign is kept, nothing is measured again
    again = run(True)
    assert all(o.reused for o in again.outcomes.values())
    assert sorted(p.name for p in (tmp_path / "results" / commits[0][:7]).glob("run*")) == ["run0", "run1", "run2", "run3"]
    with pytest.raises(SettingsError, match="--resume"):
        run(False)


@pytest.mark.slow
def test_bisect_names_the_planted_commit_on_two_slots(tmp_path):
    commits, settings = _standin(tmp_path, 4, 3, 200)  # 100, 100, 300, 300 ms a request
    engine = commands.make_engine(settings, slots="0,1", slot_per="gpu", slot_cpus="shared", progress=lambda s: None)
    lines: list[str] = []  # three runs a commit: verdicts that a busy machine cannot turn inconclusive
    result = commands.bisect(settings, good=commits[0], bad=commits[-1], metric="selftest.latency_mean_s",
                             workloads=["selftest"], options=OPTS, runs=3, threshold=0.3, engine=engine,
                             progress=lines.append)
    assert result.first_bad == commits[2], "\n".join(line for line in lines if "bisect" in line or ": " in line[:12])
    assert result.against_parent.verdict == "worse"
    assert len(result.rounds) <= rounds_needed(4, 2)
    assert all(len(r) <= 2 for r in result.rounds)
    assert not server_pids(tmp_path)


def _rev_ok(run: Path) -> dict:
    (gate,) = [g for g in manifest_file.read(run).gates if g["gate"] == "REV_OK" and g["context"] == "selftest"]
    return gate


@pytest.mark.slow
def test_matrix_on_upstreams_layout_serves_each_commits_own_code_and_rev_ok_stops_a_tampered_venv(tmp_path):
    """Two commits of one dependency hash (B's venv a relocated copy of A's): each run's server
    runs its own commit's code (its planted latency, REV_OK in every manifest). Then the same
    matrix over worktrees whose B venv's editable install names A's tree: B stops at REV_OK."""
    commits, settings = _standin(tmp_path, 2, 2, 200)  # 100, then 300 ms a request
    engine = commands.make_engine(settings, slots="0,1", slot_per="gpu", slot_cpus="shared", progress=lambda s: None)
    lines: list[str] = []
    result = commands.matrix(settings, revisions_spec=",".join(commits), workloads=["selftest"], options=OPTS, runs=2,
                             engine=engine, threshold=0.3, progress=lines.append)
    assert all(o.status == "complete" for o in result.outcomes.values()), "\n".join(lines[-40:])
    trees = [tmp_path / "results" / ".worktrees" / c for c in commits]
    venvs = tmp_path / "results" / ".worktrees" / "venvs"
    assert len(list(venvs.glob("*.log"))) == 1 and len(list(venvs.glob("*/for-worktree"))) == 1  # built once, copied once
    for commit, tree, delay in zip(commits, trees, ("100", "300"), strict=True):
        for run in ("run0", "run1", "run2"):
            folder = tmp_path / "results" / commit[:7] / run
            gate = _rev_ok(folder)
            assert gate["status"] == "passed" and gate["evidence"]["commit"] == commit
            for role in ("server launch", "server process"):
                assert gate["evidence"][f"{role}: module"] == str(tree / "sglang_omni_standin" / "__init__.py")
                assert gate["evidence"][f"{role}: commit"] == commit
            assert f"--delay-ms {delay}" in (folder / "selftest.log").read_text()  # its own standin.json
    means = [result.outcomes[j.key].means["selftest.latency_mean_s"] for j in result.jobs]
    assert means[1] > means[0]  # the planted 200 ms, measured on B's own server
    assert not server_pids(tmp_path)

    # the same matrix, B's venv tampered with: its editable install names A's tree
    again = Settings.of(target="sglang-omni", checkout=settings.run.checkout, results=str(tmp_path / "results2"),
                        port=free_port(), nvidia_smi=settings.tools.nvidia_smi)
    root = tmp_path / "results2" / ".worktrees"
    a, b = (revisions.prepare(Path(settings.run.checkout), c, root, progress=lambda s: None) for c in commits)
    (pth,) = b.venv.glob("lib/python*/site-packages/__editable__.*.pth")
    pth.write_text(f"{a.worktree}\n")
    engine = commands.make_engine(again, slots="0,1", slot_per="gpu", slot_cpus="shared", progress=lambda s: None)
    tampered = commands.matrix(again, revisions_spec=",".join(commits), workloads=["selftest"], options=OPTS, runs=2,
                               engine=engine, threshold=0.3, progress=lambda s: None)
    first, second = (tampered.outcomes[j.key] for j in tampered.jobs)
    assert first.status == "complete" and second.status == "failed"
    assert str(a.worktree) in second.error and str(b.worktree) in second.error and "REV_OK" in second.error
    (run,) = (tmp_path / "results2" / commits[1][:7]).glob("run0*")
    failed = [g for g in manifest_file.read(run).gates if g["gate"] == "REV_OK"]
    assert [g["status"] for g in failed] == ["failed"]  # selftest's client is omnibench's: the server alone
    assert failed[0]["error"]["evidence"]["its work tree"] == str(a.worktree)
    assert failed[0]["error"]["evidence"]["asked worktree"] == str(b.worktree)
    assert not server_pids(tmp_path)


@pytest.mark.slow
def test_matrix_task_is_thin_and_says_what_is_wrong(invoke):
    done = invoke("matrix", "--workload", "selftest", "--revisions", "HEAD", "--slots", "0", "--slot-per", "gpu", "--slot-cpus", "shared")
    assert done.returncode == 1 and "local target measures omnibench's own commit" in done.stderr


# -- --score for a scale command's campaigns (issue 43: a speed question needs no quality scoring) ----------
def test_a_job_scored_less_than_every_run_is_a_campaign_of_its_own_name_and_the_default_keeps_measures():
    from omnibench_core.records import ScorePolicy
    from omnibench_core.scale.jobs import CampaignJob
    from omnibench_core.scale.matrix import MatrixSpec, matrix_path

    settings = Settings.from_mapping({"target": "local"})
    every = CampaignJob("", ("seedtts",), ("seedtts.max_samples=2",), 2)
    speed = CampaignJob("", ("seedtts",), ("seedtts.max_samples=2",), 2, score=ScorePolicy.NONE)
    # the default is measure's campaign, by name and in the matrix file (whose name hashes the jobs)
    assert every.campaign_name(settings) is None and "score" not in every.as_dict()
    named = speed.campaign_name(settings)
    assert named is not None and named.startswith(every.identity(settings).name()) and named.endswith("score-none")
    assert speed.as_dict()["score"] == "none" and CampaignJob.from_dict(speed.as_dict()) == speed
    assert CampaignJob.from_dict(every.as_dict()) == every
    assert matrix_path(settings, MatrixSpec(("",), ("seedtts",)).jobs()) != \
        matrix_path(settings, MatrixSpec(("",), ("seedtts",), score=ScorePolicy.NONE).jobs())
    engine = CampaignJob("", ("seedtts",), (), 2, engine="acme", score=ScorePolicy.LAST).campaign_name(settings)
    assert engine is not None and engine.endswith("engine-acme_score-last")
    # an outcome carries its campaign's own policy (to workers and Ray and back): one a worker of an
    # older omnibench sent, without it, is measure's
    from omnibench_core.scale.jobs import CampaignOutcome
    from omnibench_core.statuses import JobStatus
    outcome = CampaignOutcome("k", JobStatus.COMPLETE, score=ScorePolicy.NONE)
    assert json.loads(json.dumps(outcome.as_dict()))["score"] == "none"
    assert CampaignOutcome.from_dict(json.loads(json.dumps(outcome.as_dict()))) == outcome
    older = {k: v for k, v in outcome.as_dict().items() if k != "score"}
    assert CampaignOutcome.from_dict(older).score is ScorePolicy.EVERY_ROUND


def test_scale_scoring_is_every_run_unless_asked_and_a_quality_metric_needs_every_run():
    from omnibench_core.records import ScorePolicy

    assert commands.campaign_score(["seedtts"], None) is ScorePolicy.EVERY_ROUND
    assert commands.campaign_score(["seedtts"], "none", "seedtts.latency_mean_s") is ScorePolicy.NONE
    with pytest.raises(SettingsError, match="--metric seedtts.wer.wer_corpus: a quality metric") as refused:
        commands.campaign_score(["seedtts"], "none", "seedtts.wer.wer_corpus")
    assert "every-round" in refused.value.hint and "--decide" not in refused.value.hint
    with pytest.raises(SettingsError, match="unknown --score 'al'"):
        commands.campaign_score(["seedtts"], "al")


@pytest.mark.slow
def test_a_speed_matrix_with_score_none_scores_nothing_and_names_its_campaign_apart(invoke, tmp_path):
    """`invoke matrix --score none` of seed-tts: no run is scored (no WER in its metrics, no score
    step), its campaign is named score-none, and the matrix table and the report say so."""
    results = tmp_path / "results"
    done = invoke("matrix", "-w", "seedtts", "--opt", "seedtts.max_samples=2", "--opt", "seedtts.warmup=0",
                  "--runs", "2", "--slots", "0", "--score", "none", "--port", str(free_port()))
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    (campaign,) = results.glob("*/campaigns/*.json")
    assert campaign.stem.endswith("score-none") and json.loads(campaign.read_text())["asked"]["score"] == "none"
    runs = sorted(p for p in campaign.parent.parent.glob("run*") if p.is_dir())
    assert len(runs) == 3
    for run in runs:
        metrics = json.loads((run / "metrics.json").read_text())["metrics"]
        assert "seedtts.latency_mean_s" in metrics and not any(k.startswith("seedtts.wer") for k in metrics), run
        assert not [s for s in manifest_file.read(run).steps if s.phase == "score"], run
    # the matrix table, the report (console and header) say quality was not scored, not just leave its rows out
    assert "note: quality scored on no run (--score none): speed only in the campaigns of own" in done.stdout, done.stdout
    report = invoke("report", "--name", campaign.stem)
    assert report.returncode == 0, report.stdout[-3000:] + report.stderr[-3000:]
    assert "note: quality not scored: no run of this set was scored (--score left out" in report.stdout, report.stdout
    md = next(campaign.parent.glob(f"{campaign.stem}/report*.md")).read_text()
    assert "- quality scored on: no run (--score none): speed only" in md, md


@pytest.mark.slow
def test_a_score_none_matrix_keeps_measures_campaign_and_a_quality_bisect_metric_is_refused(invoke, tmp_path):
    """Measure's campaign of the same measurement (scored on every run) answers a speed question too:
    `--score none --resume` keeps it rather than measuring again; `invoke bisect --score none` with a
    quality metric is refused before anything starts. (Apart from the test above: one test of both
    took 52 to 64 s in the suite, issue 40's minute.)"""
    opts = ("--opt", "seedtts.max_samples=2", "--opt", "seedtts.warmup=0", "--runs", "2")
    env = {"INVOKE_OMNIBENCH_RESULTS": str(tmp_path / "measured")}
    measured = invoke("measure", "-w", "seedtts", *opts, "--port", str(free_port()), env=env)
    assert measured.returncode == 0, measured.stdout[-3000:] + measured.stderr[-3000:]
    kept = invoke("matrix", "-w", "seedtts", *opts, "--slots", "0", "--score", "none", "--resume",
                  "--port", str(free_port()), env=env)
    assert kept.returncode == 0 and "complete already, kept" in kept.stdout, kept.stdout[-3000:] + kept.stderr
    assert "quality scored on" not in kept.stdout, kept.stdout  # the kept campaign is scored on every run
    (only,) = (tmp_path / "measured").glob("*/campaigns/*.json")  # no score-none campaign was made
    assert not only.stem.endswith("score-none")
    refused = invoke("bisect", "--target", "sglang-omni", "--checkout", str(tmp_path), "-w", "seedtts",
                     "--good", "HEAD~1", "--bad", "HEAD", "--metric", "seedtts@c4.wer.wer_corpus", "--score", "none",
                     "--slots", "0", "--slot-cpus", "shared")
    assert refused.returncode == 1 and "--metric seedtts.wer.wer_corpus: a quality metric, made only when a run is " \
        "scored" in refused.stderr and "--decide" not in refused.stderr, refused.stderr


@pytest.mark.parametrize(("field_name", "word"), [("score", "every-sample"), ("status", "paused")])
def test_an_outcome_with_a_word_this_omnibench_does_not_know_fails_the_campaign_and_says_why(tmp_path, field_name, word):
    """A worker of another omnibench version wrote a score (or status) word this driver does not know:
    from_dict raised a bare ValueError, which Ray's engine let through (the whole matrix died) and the
    local engine read as a lost slot (measured again elsewhere, saying "no outcome"). Now the campaign
    is failed with the word, the field and what to do (jobs.received_outcome, which both engines call). The
    local engine's worker is a fake interpreter that writes such an outcome where the real worker writes
    its own."""
    from omnibench_core.scale.jobs import CampaignJob, CampaignOutcome, OutcomeUnreadable
    from omnibench_core.scale.local import LocalEngine
    from omnibench_core.scale.worker import WorkerSpec
    from omnibench_core.statuses import JobStatus

    written = CampaignOutcome("rev_selftest", JobStatus.COMPLETE).as_dict() | {field_name: word}
    with pytest.raises(OutcomeUnreadable, match=f"says {field_name} '{word}', which this omnibench does not know"):
        CampaignOutcome.from_dict(written)
    # what is no outcome at all stays what it was (the local engine's lost slot), not "another version"
    for broken in ({"key": "k"}, [], None):
        with pytest.raises((KeyError, ValueError)) as caught:
            CampaignOutcome.from_dict(broken)
        assert not isinstance(caught.value, OutcomeUnreadable)
    fake = tmp_path / "python-of-another-version"
    fake.write_text(f"#!{sys.executable}\nimport sys\n"
                    f"open(sys.argv[-1], 'w').write({json.dumps(json.dumps(written))})\n")
    fake.chmod(0o755)
    settings = Settings.of(target="local", results=str(tmp_path / "results"), port=free_port())
    engine = LocalEngine([HostSlot(0, Slot(settings.run.port), shared_cpus=True)], progress=lambda line: None,
                         python=str(fake), workdir=tmp_path / "work")
    (tmp_path / "work").mkdir()
    spec = WorkerSpec(CampaignJob("", ("selftest",), (), runs=2), engine.slots()[0], settings.flat(),
                      str(tmp_path / "worktrees"))
    engine.start(spec)
    done: list = []
    while not done:
        done = engine.wait(60.0)
    ((_, outcome),) = done
    assert outcome.status is JobStatus.FAILED, outcome
    assert f"its worker's outcome says {field_name} '{word}'" in outcome.error
    assert "another omnibench version" in outcome.error and "same omnibench on every node" in outcome.error

"""GPU-host set-up: CPU groups against the runbook's own block on captured hosts, the container
command, checkout and VENV_OK, REVISIONS_OK on a real Hugging Face cache tree, and the doctor."""

from __future__ import annotations

import json
import os
import shlex
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from checkout_helpers import make_fake_checkout
from run_helpers import FIXTURES, free_port

from omnibench_core.setup import pins as pins_mod
from omnibench_core.setup.checkout import VenvNotOk, check_venv
from omnibench_core.setup.container import plan_container
from omnibench_core.setup.cpus import CpusNotOk, cpu_groups, read_topology
from omnibench_core.setup.pins import Pin, Pins, RevisionsNotOk, download, load_pins, verify, write_ref

HOSTS = FIXTURES / "gpu-hosts"
TESTS = Path(__file__).resolve().parent


def fake_host(tmp: Path, host: str, lscpu_text: str | None = None) -> tuple[Path, Path]:
    """Fake lscpu and nvidia-smi that print a captured host, and a sysfs tree of its NUMA nodes."""
    bin_dir, sysfs = tmp / "bin", tmp / "sys"
    bin_dir.mkdir(parents=True)
    lscpu_file = tmp / "lscpu_p.txt"
    lscpu_file.write_text(lscpu_text if lscpu_text is not None else (HOSTS / host / "lscpu_p.txt").read_text())
    (bin_dir / "lscpu").write_text(f"#!/bin/sh\ncat {lscpu_file}\n")
    (bin_dir / "nvidia-smi").write_text(textwrap.dedent(f"""\
        #!/bin/sh
        case "$*" in
          *index,pci.bus_id*) cat {HOSTS / host / 'nvidia_smi_bus.csv'} ;;
          *memory.used*) for g in $(echo "$2" | tr , ' '); do echo 3; done ;;
          *) exit 6 ;;
        esac
        """))
    for tool in ("lscpu", "nvidia-smi"):
        (bin_dir / tool).chmod(0o755)
    for line in (HOSTS / host / "numa_node.txt").read_text().splitlines():
        bus, node = line.split()
        folder = sysfs / "bus" / "pci" / "devices" / bus
        folder.mkdir(parents=True)
        (folder / "numa_node").write_text(node + "\n")
    return bin_dir, sysfs


def runbook_block(bin_dir: Path, sysfs: Path, gpu_a: str, gpu_b: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "PATH": f"{bin_dir}{os.pathsep}{os.environ['PATH']}"}
    return subprocess.run([sys.executable, str(TESTS / "runbook_cpus.py"), str(sysfs), gpu_a, gpu_b], env=env,
                          capture_output=True, text=True)


def setup_env(bin_dir: Path, sysfs: Path, **extra: str) -> dict[str, str]:
    return {"PATH": f"{bin_dir}{os.pathsep}{os.environ['PATH']}", "INVOKE_OMNIBENCH_SYSFS": str(sysfs), **extra}


@pytest.mark.slow
@pytest.mark.parametrize(("host", "gpu_a", "gpu_b"), [
    ("h200x2-vm", "0", "1"), ("h200x2-vm", "1", "0"),
    ("dgx-h200-2s112c-8gpu", "0", "1"), ("dgx-h200-2s112c-8gpu", "2", "4"),
    ("dgx-h200-2s112c-8gpu", "4", "5"), ("dgx-h200-2s112c-8gpu", "6", "0"),
])
def test_cpu_groups_match_the_runbooks_block(invoke, tmp_path, host, gpu_a, gpu_b):
    bin_dir, sysfs = fake_host(tmp_path, host)
    oracle = runbook_block(bin_dir, sysfs, gpu_a, gpu_b)
    assert oracle.returncode == 0, oracle.stderr
    out = tmp_path / "cpus.env"
    done = invoke("setup.cpus", "--gpu-a", gpu_a, "--gpu-b", gpu_b, "--out", str(out), env=setup_env(bin_dir, sysfs))
    assert done.returncode == 0, done.stderr
    assert done.stdout == oracle.stdout + "CPUS_OK\n"
    assert out.read_text() == oracle.stdout


def test_h200_vm_groups_by_hand(tmp_path):
    bin_dir, sysfs = fake_host(tmp_path, "h200x2-vm")
    topo = read_topology(lscpu=str(bin_dir / "lscpu"), nvidia_smi=str(bin_dir / "nvidia-smi"), sysfs=sysfs)
    assert topo.gpu_nodes == [("0", 0), ("1", 0)]  # numa_node -1 reads as 0
    groups = cpu_groups(topo, "0", "1")
    assert groups.bench_cpus == list(range(2, 16)) and groups.ci_cpus == list(range(2, 30))


def test_empty_node_column_reads_as_node_zero(tmp_path):
    text = "\n".join(line.rsplit(",", 1)[0] + "," if not line.startswith("#") else line
                     for line in (HOSTS / "h200x2-vm" / "lscpu_p.txt").read_text().splitlines())
    bin_dir, sysfs = fake_host(tmp_path, "h200x2-vm", lscpu_text=text)
    topo = read_topology(lscpu=str(bin_dir / "lscpu"), nvidia_smi=str(bin_dir / "nvidia-smi"), sysfs=sysfs)
    assert set(topo.core_node.values()) == {0}
    assert cpu_groups(topo, "0", "1").bench_cpus == list(range(2, 16))


def test_smt_siblings_join_their_core(tmp_path):
    bin_dir, sysfs = fake_host(tmp_path, "dgx-h200-2s112c-8gpu")
    topo = read_topology(lscpu=str(bin_dir / "lscpu"), nvidia_smi=str(bin_dir / "nvidia-smi"), sysfs=sysfs)
    groups = cpu_groups(topo, "0", "4")
    assert groups.bench_cpus == list(range(2, 16)) + list(range(114, 128))
    assert groups.groups["4"] == list(range(56, 70)) + list(range(168, 182))


def test_a_gpu_without_a_group_says_which_pairs_work(invoke, tmp_path):
    bin_dir, sysfs = fake_host(tmp_path, "dgx-h200-2s112c-8gpu")
    assert "KeyError" in runbook_block(bin_dir, sysfs, "2", "3").stderr  # where the runbook dies
    done = invoke("setup.cpus", "--gpu-a", "2", "--gpu-b", "3", env=setup_env(bin_dir, sysfs))
    assert done.returncode == 1
    assert "GPU 3 gets no CPU group of 14 cores" in done.stderr
    assert "GPUs with a group: 0, 1, 2, 4, 5, 6" in done.stderr
    assert "0,1 0,2 0,4" in done.stderr and "CPUS_OK" not in done.stdout


def test_cores_per_gpu_and_skipped_cores_are_options(invoke, tmp_path):
    bin_dir, sysfs = fake_host(tmp_path, "dgx-h200-2s112c-8gpu")
    done = invoke("setup.cpus", "--gpu-a", "3", "--gpu-b", "7", "--cores-per-gpu", "13", env=setup_env(bin_dir, sysfs))
    assert done.returncode == 0, done.stderr
    topo = read_topology(lscpu=str(bin_dir / "lscpu"), nvidia_smi=str(bin_dir / "nvidia-smi"), sysfs=sysfs)
    with pytest.raises(CpusNotOk):
        cpu_groups(topo, "3", "7")
    assert cpu_groups(topo, "0", "1", skip_cores=()).bench_cpus[:2] == [0, 1]


RUNBOOK_DOCKER = (
    'docker run -d --init --ipc host --cap-add=SYS_PTRACE --gpus "\\"device=0,1\\"" --cpuset-cpus "2-29" '
    '--env-file "/data/omni-bench/cpus.env" -v "/data/omni-bench/hf:/root/.cache/huggingface" '
    '-v "/data/omni-bench/omni-cache:/root/.cache/sglang-omni" -v "/data/omni-bench/results:/results" '
    '-v "/data/omni-bench/sglang-omni:/sglang-omni" --name omni-bench '
    'hongccc/sglang-omni@sha256:ebe4239e29a764ee3a2806385c061c5fd438a26f01458e503d3822dcba5790df sleep infinity')


def test_container_command_is_the_runbooks():
    plan = plan_container(bench_dir="/data/omni-bench", gpu_a="0", gpu_b="1", ci_cpus="2-29",
                          env_file="/data/omni-bench/cpus.env")
    assert list(plan.run_argv) == shlex.split(RUNBOOK_DOCKER)
    assert list(plan.exec_argv) == ["docker", "exec", "-it", "omni-bench", "bash"]
    assert shlex.split(plan.shell_lines().splitlines()[1]) == shlex.split(RUNBOOK_DOCKER)


@pytest.mark.slow
def test_container_task_reads_ci_cpus_and_executes_docker(invoke, tmp_path):
    bench = tmp_path / "bench"
    bench.mkdir()
    (bench / "cpus.env").write_text("BENCH_CPUS=2,3\nCI_CPUS=2,3,4,5\n")
    docker = tmp_path / "docker"
    docker.write_text(f"#!/bin/sh\necho \"$@\" > {tmp_path / 'docker.args'}\necho 0123456789abcdef\n")
    docker.chmod(0o755)
    env = {"INVOKE_OMNIBENCH_BENCH_DIR": str(bench), "INVOKE_OMNIBENCH_DOCKER": str(docker)}
    shown = invoke("setup.container", env=env)
    assert shown.returncode == 0 and "--cpuset-cpus 2,3,4,5" in shown.stdout and not (tmp_path / "docker.args").exists()
    done = invoke("setup.container", "--execute", env=env)
    assert done.returncode == 0, done.stderr
    assert "started 0123456789ab" in done.stdout
    assert "--cpuset-cpus 2,3,4,5" in (tmp_path / "docker.args").read_text()
    assert all((bench / f).is_dir() for f in ("hf", "omni-cache", "results", "sglang-omni"))
    missing = invoke("setup.container", env={**env, "INVOKE_OMNIBENCH_BENCH_DIR": str(tmp_path / "none")})
    assert missing.returncode == 1 and "invoke setup.cpus" in missing.stderr


def _git(*args, cwd=None):
    subprocess.run(["git", "-c", "user.name=t", "-c", "user.email=t@t", *args], cwd=cwd, check=True,
                   capture_output=True)


def test_checkout_clones_then_fetches_and_detaches(invoke, tmp_path):
    upstream = tmp_path / "upstream"
    upstream.mkdir()
    _git("init", "-q", cwd=upstream)
    (upstream / "a.txt").write_text("1")
    _git("add", "a.txt", cwd=upstream)
    _git("commit", "-qm", "one", cwd=upstream)
    _git("tag", "v1", cwd=upstream)
    checkout = tmp_path / "sglang-omni"
    env = {"INVOKE_OMNIBENCH_CHECKOUT": str(checkout), "INVOKE_OMNIBENCH_REPO_URL": str(upstream)}
    assert invoke("setup.checkout", "--commit", "v1", env=env).returncode == 0
    (upstream / "a.txt").write_text("2")
    _git("commit", "-qam", "two", cwd=upstream)
    done = invoke("setup.checkout", "--commit", "origin/HEAD", env=env)
    assert done.returncode == 0, done.stderr
    head = subprocess.run(["git", "-C", str(checkout), "rev-parse", "HEAD"], capture_output=True, text=True).stdout
    upstream_head = subprocess.run(["git", "-C", str(upstream), "rev-parse", "HEAD"], capture_output=True, text=True)
    assert head == upstream_head.stdout
    branch = subprocess.run(["git", "-C", str(checkout), "symbolic-ref", "-q", "HEAD"], capture_output=True)
    assert branch.returncode != 0  # detached


def venv_checkout(tmp_path: Path) -> Path:
    checkout = make_fake_checkout(tmp_path / "co")
    scripts = checkout / ".github" / "scripts"
    scripts.mkdir(parents=True)
    (checkout / "pyproject.toml").write_text("[project]\nname='x'\n")
    (scripts / "omni_ci_deps_hash.sh").write_text(
        "omni_ci_deps_hash() { cat pyproject.toml | sha256sum | cut -d' ' -f1; }\n")
    (scripts / "prepare_omni_venv.sh").write_text(textwrap.dedent("""\
        set -e
        source .github/scripts/omni_ci_deps_hash.sh
        rm -rf "$OMNI_CI_HOME"; mkdir -p "$OMNI_CI_HOME"
        echo "installing $1"; omni_ci_deps_hash > "$OMNI_CI_HOME/.deps-hash"; echo "Fresh environment ready"
        """))
    return checkout


def test_venv_ok_with_a_real_hash_script(tmp_path):
    checkout, home = venv_checkout(tmp_path), tmp_path / "omni_ci"
    with pytest.raises(VenvNotOk, match="no venv hash"):
        check_venv(checkout, home)
    home.mkdir()
    (home / ".deps-hash").write_text("0" * 64 + "\n")
    with pytest.raises(VenvNotOk) as err:
        check_venv(checkout, home)
    assert "rebuild" in err.value.hint and err.value.gate == "VENV_OK"
    import hashlib

    (home / ".deps-hash").write_text(hashlib.sha256((checkout / "pyproject.toml").read_bytes()).hexdigest())
    assert check_venv(checkout, home) == (home / ".deps-hash").read_text()


def test_setup_venv_runs_the_ci_script_then_checks(invoke, tmp_path):
    checkout = venv_checkout(tmp_path)
    env = {"INVOKE_OMNIBENCH_CHECKOUT": str(checkout), "INVOKE_OMNIBENCH_OMNI_CI_HOME": str(tmp_path / "omni_ci"),
           "INVOKE_OMNIBENCH_BENCH_DIR": str(tmp_path / "bench")}
    done = invoke("setup.venv", env=env)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip().endswith(check_venv(checkout, tmp_path / "omni_ci"))
    assert "Fresh environment ready" in (tmp_path / "bench" / "logs" / "prepare_omni_venv.log").read_text()


def hub_tree(cache: Path, pins: Pins, *, skip: str = "", wrong_ref: str = "") -> None:
    """A real hub cache layout: <type>s--org--name/snapshots/<sha>/..., refs/main."""
    for pin in pins.pins:
        if pin.repo == skip:
            continue
        snap = cache / pin.cache_folder / "snapshots" / pin.revision
        snap.mkdir(parents=True)
        (snap / "README.md").write_text(pin.repo)
        if pin.repo == wrong_ref:
            other = cache / pin.cache_folder / "snapshots" / ("f" * 40)
            other.mkdir()
            (cache / pin.cache_folder / "refs").mkdir()
            (cache / pin.cache_folder / "refs" / "main").write_text("f" * 40)
        else:
            write_ref(cache, pin)


def test_revisions_ok_resolved_by_huggingface_hub_offline(tmp_path):
    pins = load_pins()
    assert [p.repo for p in pins.pins][-1] == "zhaochenyang20/seed-tts-eval-arrow"
    hub_tree(tmp_path, pins)
    lines = verify(pins, cache_dir=str(tmp_path), progress=lambda m: None)
    assert lines[0] == "openbmb/MiniCPM-o-4_5 503e754207c94da6bb26850b4469f367c9ea3582"


def test_wrong_ref_and_missing_snapshot_fail(tmp_path):
    pins = load_pins()
    hub_tree(tmp_path / "a", pins, wrong_ref="Qwen/Qwen3-ASR-1.7B")
    with pytest.raises(RevisionsNotOk, match="resolves to ffff"):
        verify(pins, cache_dir=str(tmp_path / "a"), progress=lambda m: None)
    hub_tree(tmp_path / "b", pins, skip="zhaochenyang20/Video_MME_ci")
    with pytest.raises(RevisionsNotOk, match="Video_MME_ci has no snapshot offline") as err:
        verify(pins, cache_dir=str(tmp_path / "b"), progress=lambda m: None)
    assert err.value.gate == "REVISIONS_OK" and "setup.download" in err.value.hint


def test_seedtts_count_comes_from_the_checkouts_loader(tmp_path):
    pins = Pins((Pin("zhaochenyang20/seed-tts-eval-arrow", "dataset", "a" * 40, "en", 3),), ())
    hub_tree(tmp_path / "hub", pins)
    checkout = make_fake_checkout(tmp_path / "co")
    pkg = checkout / "benchmarks" / "dataset"
    pkg.mkdir(parents=True)
    (checkout / "benchmarks" / "__init__.py").write_text("")
    (pkg / "__init__.py").write_text("")
    (pkg / "seedtts.py").write_text(textwrap.dedent("""\
        import os
        def load_seedtts_samples(source, max_samples, split="en"):
            assert os.environ["HF_HUB_OFFLINE"] == "1"
            return list(range(int(open("count.txt").read())))
        """))
    (checkout / "count.txt").write_text("3")
    python = checkout / "omni" / "bin" / "python"
    assert verify(pins, cache_dir=str(tmp_path / "hub"), python=python, checkout=checkout, progress=lambda m: None)
    (checkout / "count.txt").write_text("2")
    with pytest.raises(RevisionsNotOk, match="has 2 samples, not 3"):
        verify(pins, cache_dir=str(tmp_path / "hub"), python=python, checkout=checkout, progress=lambda m: None)


def test_download_writes_refs_main_for_each_pin(tmp_path):
    pins = load_pins()
    calls = []

    def fake_snapshot_download(repo_id, repo_type, revision, cache_dir):
        calls.append((repo_id, repo_type, revision))
        pin = next(p for p in pins.pins if p.repo == repo_id)
        snap = Path(cache_dir) / pin.cache_folder / "snapshots" / revision
        snap.mkdir(parents=True)
        return str(snap)

    download(pins, cache_dir=str(tmp_path), downloader=fake_snapshot_download, progress=lambda m: None)
    assert [c[2] for c in calls] == [p.revision for p in pins.pins]
    assert (tmp_path / "models--openbmb--MiniCPM-o-4_5" / "refs" / "main").read_text() == pins.pins[0].revision
    assert len(verify(pins, cache_dir=str(tmp_path), progress=lambda m: None)) == 5


def test_pins_file_is_a_setting(tmp_path):
    path = tmp_path / "pins.json"
    path.write_text(json.dumps({"pins": [{"repo": "a/b", "type": "model", "revision": "c" * 40}]}))
    assert pins_mod.load_pins(path).pins == (Pin("a/b", "model", "c" * 40),)
    path.write_text("{")
    with pytest.raises(Exception, match="cannot read the pins file"):
        pins_mod.load_pins(path)


def test_doctor_prints_ok_and_fail_with_fixes(invoke, tmp_path):
    bin_dir, sysfs = fake_host(tmp_path, "h200x2-vm")
    checkout = venv_checkout(tmp_path)
    (tmp_path / "omni_ci").mkdir()
    (tmp_path / "omni_ci" / ".deps-hash").write_text("stale")
    env = setup_env(bin_dir, sysfs, INVOKE_OMNIBENCH_CHECKOUT=str(checkout),
                    INVOKE_OMNIBENCH_OMNI_CI_HOME=str(tmp_path / "omni_ci"),
                    INVOKE_OMNIBENCH_HF_CACHE=str(tmp_path / "hub"), INVOKE_OMNIBENCH_DOCKER="no-such-docker",
                    INVOKE_OMNIBENCH_CPUS=str(min(os.sched_getaffinity(0))),
                    INVOKE_OMNIBENCH_PORT=str(free_port()))  # 8000 may be another run's: its row is not the point
    done = invoke("doctor", "--target", "sglang-omni", env=env)
    assert done.returncode == 1
    rows = {line.split("  ")[0].strip(): line for line in done.stdout.splitlines()[2:]}
    assert " OK " in rows["lscpu"] and " OK " in rows["nvidia-smi"] and " OK " in rows["GPU memory free"]
    assert " OK " in rows["checkout and commit"] and " OK " in rows["CPU set (BENCH_CPUS)"]
    assert "FAIL" in rows["docker"] and "install Docker" in rows["docker"]
    assert "FAIL" in rows["venv hash (VENV_OK)"] and "invoke setup.venv" in rows["venv hash (VENV_OK)"]
    assert "FAIL" in rows["model and data pins (REVISIONS_OK)"] and "setup.download" in rows["model and data pins (REVISIONS_OK)"]
    assert "3 check(s) failed" in done.stderr


@pytest.mark.slow
def test_doctor_on_the_local_target_marks_gpu_host_checks_not_needed(invoke, tmp_path):
    bin_dir, sysfs = fake_host(tmp_path, "h200x2-vm")
    env = setup_env(bin_dir, sysfs, INVOKE_OMNIBENCH_CHECKOUT=str(tmp_path / "nowhere"),
                    INVOKE_OMNIBENCH_DOCKER="no-such-docker", INVOKE_OMNIBENCH_PORT=str(free_port()))
    done = invoke("doctor", env=env)  # the default target: local
    assert done.returncode == 0, done.stdout + done.stderr
    assert done.stderr.startswith("doctor: checking")  # said at once, on stderr: stdout is the table
    rows = {line.split("  ")[0].strip(): line for line in done.stdout.splitlines()[2:]}
    for name in ("docker", "checkout and commit", "GPU memory free", "CPU set (BENCH_CPUS)"):
        assert " n/a " in rows[name] and "not needed for the local target" in rows[name], rows[name]
    assert " OK " in rows["python3"]


@pytest.mark.slow
def test_setup_all_on_the_host_skips_what_is_done(invoke, tmp_path):
    bin_dir, sysfs = fake_host(tmp_path, "h200x2-vm")
    state = tmp_path / "running"
    docker = bin_dir / "docker"
    docker.write_text(textwrap.dedent(f"""\
        #!/bin/sh
        echo "$@" >> {tmp_path / 'docker.log'}
        if [ "$1" = inspect ]; then [ -e {state} ] && echo true || exit 1; exit 0; fi
        touch {state}; echo cafe0123456789
        """))
    docker.chmod(0o755)
    env = setup_env(bin_dir, sysfs, INVOKE_OMNIBENCH_BENCH_DIR=str(tmp_path / "bench"))
    first = invoke("setup", "--where", "host", env=env)
    assert first.returncode == 0, first.stderr
    assert "CPUS_OK" in first.stdout and "container cafe01234567 started" in first.stdout
    assert (tmp_path / "bench" / "cpus.env").read_text().startswith("BENCH_CPUS=2,3,")
    second = invoke("setup", "--where", "host", env=env)
    assert "CPUS_OK (kept" in second.stdout and "is running" in second.stdout
    assert sum(line.startswith("run ") for line in (tmp_path / "docker.log").read_text().splitlines()) == 1


@pytest.mark.slow
def test_setup_all_in_the_container_skips_what_is_done(invoke, tmp_path):
    checkout = venv_checkout(tmp_path)
    home = tmp_path / "omni_ci"
    home.mkdir()
    import hashlib

    (home / ".deps-hash").write_text(hashlib.sha256((checkout / "pyproject.toml").read_bytes()).hexdigest())
    pins = Pins((Pin("openbmb/MiniCPM-o-4_5", "model", "503e754207c94da6bb26850b4469f367c9ea3582"),), ())
    hub_tree(tmp_path / "hub", pins)
    (tmp_path / "pins.json").write_text(json.dumps({"pins": [{"repo": "openbmb/MiniCPM-o-4_5", "type": "model",
                                                             "revision": pins.pins[0].revision}]}))
    env = {"INVOKE_OMNIBENCH_CHECKOUT": str(checkout), "INVOKE_OMNIBENCH_COMMIT": "HEAD",
           "INVOKE_OMNIBENCH_OMNI_CI_HOME": str(home), "INVOKE_OMNIBENCH_HF_CACHE": str(tmp_path / "hub"),
           "INVOKE_OMNIBENCH_PINS_FILE": str(tmp_path / "pins.json")}
    done = invoke("setup", "--where", "container", env=env)
    assert done.returncode == 0, done.stderr
    assert "checkout at HEAD already" in done.stdout and "VENV_OK" in done.stdout
    assert "REVISIONS_OK (everything was downloaded already)" in done.stdout


@pytest.mark.slow
def test_doctor_names_the_campaign_whose_run_holds_the_port(invoke, tmp_path):
    """`invoke doctor --port P` while a campaign's run holds P's lock: the port is held, by that
    process and campaign (as `invoke run --port P` is refused then), never "free"."""
    from run_helpers import REPO

    port, locks = free_port(), tmp_path / "locks"
    env = {**os.environ, "INVOKE_OMNIBENCH_RESULTS": str(tmp_path / "results"), "OMNIBENCH_LOCK_DIR": str(locks)}
    measure = subprocess.Popen([sys.executable, "-m", "invoke", "measure", "--workload", "selftest", "--runs", "2",
                                "--port", str(port), "--opt", "selftest.client_seconds=600", "--name", "held"], cwd=REPO, env=env,
                               stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, start_new_session=True)
    try:
        assert measure.stdout is not None
        seen = []
        for line in measure.stdout:  # the run holds the port's lock from its start to its end
            seen.append(line)
            if "selftest.client: running" in line:
                break
        else:
            raise AssertionError("".join(seen))
        done = invoke("doctor", "--port", str(port), env={"OMNIBENCH_LOCK_DIR": str(locks)})
        row = next(line for line in done.stdout.splitlines() if line.startswith(f"port {port} free"))
        assert " FAIL " in row and f"held by an omnibench run: pid {measure.pid} on " in row, done.stdout
        assert "run " in row and "/run0" in row and "campaign held (" in row, row
        refused = invoke("run", "--workload", "selftest", "--port", str(port), env={"OMNIBENCH_LOCK_DIR": str(locks)})
        assert refused.returncode == 1 and f"port {port} is held by another omnibench run" in refused.stderr
        assert "campaign held (" in refused.stderr, refused.stderr
    finally:
        os.killpg(measure.pid, signal.SIGINT)
        measure.communicate(timeout=600)
    free = invoke("doctor", "--port", str(port), env={"OMNIBENCH_LOCK_DIR": str(locks)})
    row = next(line for line in free.stdout.splitlines() if line.startswith(f"port {port} free"))
    assert " OK " in row and "free" in row  # the lock file stays; nobody holds it


def test_setup_venv_without_a_checkout_is_one_error_line_and_makes_no_folder(invoke, tmp_path):
    """A new user's trial (2026-12-06): `invoke setup.venv` with no checkout at omnibench.checkout
    ended in a FileNotFoundError traceback, after making the bench folder's logs/."""
    bench = tmp_path / "bench"
    done = invoke("setup.venv", env={"INVOKE_OMNIBENCH_CHECKOUT": str(tmp_path / "no-checkout"),
                                     "INVOKE_OMNIBENCH_BENCH_DIR": str(bench)})
    assert done.returncode == 1 and "Traceback" not in done.stderr, done.stderr
    assert done.stderr.startswith(f"error: no sglang-omni checkout with .github/scripts/prepare_omni_venv.sh at "
                                  f"{tmp_path / 'no-checkout'}") and "INVOKE_OMNIBENCH_CHECKOUT" in done.stderr
    assert not bench.exists()

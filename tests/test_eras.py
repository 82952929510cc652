"""Eras told apart: the capability probe, the typed refusal before any server starts, "not
measurable" in matrix and bisect, and the stand-in's two eras (before and after the seed-tts
client's --reference-audio-field). The slow tests run real stand-in checkouts made by `invoke
standin --era-from`, with the user's commands."""

from __future__ import annotations

import json
import os
import shlex
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest
from run_helpers import REPO, free_port
from scale_helpers import MadeStandin, invoke_standin, path_without_nvidia_smi, server_pids
from test_docs import page_command, run_page_command

from omnibench_core import api
from omnibench_core.builtin.targets import SGLANG_OMNI_FACTS
from omnibench_core.errors import OmnibenchError, ProbeFailed, SettingsError, UnsupportedOption
from omnibench_core.records import Endpoint, RunContext, TargetEnv
from omnibench_core.registry.manager import load
from omnibench_core.run import capabilities as caps
from omnibench_core.scale.bisect import kary_search
from omnibench_core.scale.jobs import CampaignJob, CampaignOutcome
from omnibench_core.scale.matrix import MatrixResult, matrix_text
from omnibench_core.settings import Settings
from omnibench_core.standin.repo import ERA_CLIENT, ERA_FLAG, FILES, LEGACY_SERVE, StandinSpec, old_era_client
from omnibench_core.statuses import JobStatus
from omnibench_core.store import capabilities_file
from omnibench_core.store.capabilities_file import Capabilities

COMMIT = "c0ffee" * 6 + "beef"
SEEDTTS = "-m benchmarks.eval.benchmark_omni_seedtts"


def _target(tmp_path: Path, dirty: str = "") -> TargetEnv:
    return TargetEnv("sglang-omni", str(tmp_path / "omni" / "bin" / "python"), lambda spec, port: [],
                     facts=SGLANG_OMNI_FACTS, cwd=str(tmp_path), revision=COMMIT, dirty=dirty,
                     details={"checkout": str(tmp_path)})


def _steps(tmp_path: Path, target: TargetEnv, workload: str) -> dict:
    _, registry = load()
    w = registry.get("workload", workload)
    opts = api.parse_options([], [w])[workload]
    settings = Settings.from_mapping({"target": "sglang-omni", "results": str(tmp_path / "results")})
    ctx = RunContext(tmp_path / "run0", workload, Endpoint(8000), opts, target, settings.run)
    return {workload: api.plan_steps(registry, w, ctx)}


# -- the stand-in's old era -----------------------------------------------------------------------------

def test_the_old_era_client_loses_exactly_the_flags_statement():
    new = (FILES / ERA_CLIENT).read_text()
    old = old_era_client(new)
    gone = [line for line in new.splitlines() if line not in old.splitlines()]
    assert len(gone) == 1 and f'"{ERA_FLAG}"' in gone[0]
    assert f'"{ERA_FLAG}"' not in old and 'set_defaults(reference_audio_field="audios")' in old
    assert len(old.splitlines()) == len(new.splitlines())


def test_a_statement_over_several_lines_goes_whole_and_a_missing_one_is_refused():
    text = ('def build_parser():\n    parser.add_argument(\n        "--reference-audio-field",\n'
            '        choices=["audios", "audio.ref_audio"],\n    )\n    parser.add_argument("--port")\n')
    old = old_era_client(text)
    assert old == ('def build_parser():\n    parser.set_defaults(reference_audio_field="audios")  # the old era: no '
                   '--reference-audio-field\n    parser.add_argument("--port")\n')
    with pytest.raises(OmnibenchError, match="0 add_argument lines"):
        old_era_client('p.add_argument("--port")\n')


def test_era_from_must_leave_an_old_era_commit():
    StandinSpec(commits=3, era_from=2).check()
    for bad in (1, 4):
        with pytest.raises(SettingsError, match="--era-from"):
            StandinSpec(commits=3, era_from=bad).check()
    assert [StandinSpec(commits=3, era_from=3).old_era(i) for i in (1, 2, 3)] == [True, True, False]


# -- what a plan needs, and the probe ---------------------------------------------------------------------

def test_needs_are_read_from_the_planned_steps(tmp_path):
    target = _target(tmp_path)
    needs, clients = caps.needs_of({**_steps(tmp_path, target, "seedtts"), **_steps(tmp_path, target, "videoamme")},
                                   target)
    flags = {(n.of, n.name) for n in needs if n.kind == "flag"}
    assert (SEEDTTS, "--reference-audio-field") in flags and (SEEDTTS, "--voice-clone") in flags
    keywords = {(n.of.rsplit(".", 1)[-1], n.name) for n in needs if n.kind == "keyword"}
    assert ("run_videoamme_eval", "compute_wer") in keywords
    assert ("compute_text_audio_consistency_from_records", "asr_router_port") in keywords
    assert clients[SEEDTTS].help_argv == (target.python, "-m", "benchmarks.eval.benchmark_omni_seedtts", "--help")
    # the Video-AMME client block parses its flags: its --help is asked too, with the same code
    video = next(c for k, c in clients.items() if k.startswith("-c "))
    assert video.help_argv[1] == "-c" and video.help_argv[-1] == "--help"


def test_help_flags_are_the_options_not_the_prose():
    text = ("usage: client [-h] [--meta META] [--port PORT]\n\noptions:\n  -h, --help   show this\n"
            "  --meta META, --testset META\n                 see --other for more\n  --port PORT  a port\n")
    assert caps.help_flags(text) == ("--meta", "--port", "--help", "--testset")


def _answers(flags, params=None):
    """A probe runner that answers each client's --help with ``flags`` and each function's
    signature from ``params`` (by its last name; any keyword for the rest)."""
    calls: list[tuple[str, ...]] = []

    def runner(argv, env, cwd, timeout_s):
        calls.append(tuple(argv))
        if argv[-1] == "--help":
            return 0, "usage: x " + " ".join(f"[{f} X]" for f in flags) + "\n"
        keys = json.loads(argv[-1])
        return 0, json.dumps({"signatures": {k: list((params or {}).get(k.rsplit(".", 1)[-1], ["**"])) for k in keys},
                              "errors": {}})

    return runner, calls


def _flags_but(steps, target, *lacking):
    return tuple(n.name for n in caps.needs_of(steps, target)[0] if n.kind == "flag" and n.name not in lacking)


def test_a_missing_flag_is_refused_in_one_line_naming_option_commit_and_what_to_do(tmp_path):
    target = _target(tmp_path)
    steps = _steps(tmp_path, target, "seedtts")
    runner, calls = _answers(flags=_flags_but(steps, target, ERA_FLAG))
    with pytest.raises(UnsupportedOption) as err:
        caps.check_plan(steps, target, tmp_path / "results", runner=runner, progress=lambda line: None)
    assert err.value.option == ERA_FLAG and err.value.commit == COMMIT
    first = str(err.value).splitlines()[0]
    assert ERA_FLAG in first and COMMIT[:12] in first and "not measurable with these options" in first
    assert "seedtts.client=native" in err.value.hint and isinstance(err.value, SettingsError)


def test_a_missing_keyword_is_refused_naming_the_function(tmp_path):
    target = _target(tmp_path)
    steps = _steps(tmp_path, target, "videoamme")
    runner, _ = _answers(flags=_flags_but(steps, target), params={"run_videoamme_eval": ["cfg"]})
    with pytest.raises(UnsupportedOption) as err:
        caps.check_plan(steps, target, tmp_path / "results", runner=runner, progress=lambda line: None)
    assert err.value.option == "run_videoamme_eval(compute_wer=...)"
    assert "run_videoamme_eval(cfg) takes no compute_wer (a TypeError)" in str(err.value)
    # **kwargs takes any keyword
    assert not caps.missing([caps.Need("w", "s", "keyword", "m.f", "k")],
                            Capabilities(COMMIT, signatures={"m.f": ("cfg", "**")}))


def test_answers_are_cached_per_clean_commit_and_probed_again_for_more(tmp_path):
    target, results = _target(tmp_path), tmp_path / "results"
    steps = _steps(tmp_path, target, "seedtts")
    runner, calls = _answers(flags=_flags_but(steps, target))
    for _ in range(2):
        caps.check_plan(steps, target, results, runner=runner, progress=lambda line: None)
    assert len(calls) == 1  # the second plan read the cache
    assert ERA_FLAG in capabilities_file.load(results, COMMIT, target.python).client_flags[SEEDTTS]
    caps.check_plan(steps, _target(tmp_path, dirty=" M x.py"), results, runner=runner, progress=lambda line: None)
    assert len(calls) == 2  # a dirty checkout is never answered from the cache
    capabilities_file.path_for(results, COMMIT, target.python).write_text("{not json")
    caps.check_plan(steps, target, results, runner=runner, progress=lambda line: None)
    assert len(calls) == 3  # a broken cache file is probed again, not trusted


def test_the_probe_runs_the_checkouts_python_in_its_folder_with_its_environment(tmp_path):
    # a real program: the probe's argv, working directory and environment, as omnibench runs clients
    python = tmp_path / "omni" / "bin" / "python"
    python.parent.mkdir(parents=True)
    python.write_text("#!/bin/sh\nprintf 'usage: c [--in-%s] [--env-%s X]\\n' \"$(basename \"$(pwd)\")\" \"$STANDIN_ERA\"\n")
    python.chmod(0o755)
    target = TargetEnv("sglang-omni", str(python), lambda spec, port: [], cwd=str(tmp_path), revision=COMMIT,
                       env={"STANDIN_ERA": "old"})
    found = caps.probe(target, {"c": caps.Client("c", (str(python), "-m", "x", "--help"))}, ())
    assert found.client_flags["c"] == (f"--in-{tmp_path.name}", "--env-old")


# -- bisect, matrix ------------------------------------------------------------------------------------------

def test_bisect_skips_not_measurable_commits_and_names_what_it_could_not_split():
    # 0 good, 5 bad from index 4; 2 and 3 cannot be measured: the first bad is one of 2, 3, 4
    def judge(batch):
        return {i: None if i in (2, 3) else i >= 4 for i in batch}

    found = kary_search(6, 1, judge)
    assert found.first_bad == 4 and found.candidates == (2, 3, 4)
    assert all(found.known[i] is None for i in (2, 3))
    # a skipped commit never splits a range it does not bound: with 3 measurable the answer is exact
    found = kary_search(6, 1, lambda batch: {i: None if i == 2 else i >= 4 for i in batch})
    assert found.first_bad == 4 and found.candidates == (4,)


def test_matrix_lists_a_not_measurable_commit_as_such(tmp_path):
    old, new = CampaignJob("a" * 40, ("seedtts",)), CampaignJob("b" * 40, ("seedtts",))
    why = f"the checkout at aaaaaaaaaaaa does not support {ERA_FLAG} (seedtts.generate): not measurable with these options"
    result = MatrixResult((old, new), {old.key: CampaignOutcome(old.key, JobStatus.NOT_MEASURABLE, error=why + "\n  x"),
                                       new.key: CampaignOutcome(new.key, JobStatus.COMPLETE, runs=("run1", "run2"))},
                          {}, False, tmp_path / "m.json")
    rows = {line.split()[0]: line for line in matrix_text(result).splitlines() if line.strip()}
    assert "not-measurable" in rows["aaaaaaa"] and why in rows["aaaaaaa"]
    assert "no compare: the first revision is not-measurable" in rows["bbbbbbb"]
    assert JobStatus("not-measurable") is JobStatus.NOT_MEASURABLE


# -- serve's era, asked of the checkout -------------------------------------------------------------------

LEGACY_HELP = ("Usage: sgl-omni serve [OPTIONS]\n│ --model-path TEXT │\n│ --port INTEGER │\n│ --model-name TEXT │\n"
               "│ --thinker-mem-fraction-static FLOAT │\n│ --talker-mem-fraction-static FLOAT │\n"
               "│ --thinker-max-seq-len INTEGER │\n│ --version [legacy|v1] │\n")


def _legacy_checkout(tmp_path: Path, help_text: str = LEGACY_HELP, code: int = 0) -> Path:
    """A fake checkout whose `sgl-omni serve --help` prints ``help_text`` (and counts its calls)."""
    from checkout_helpers import make_fake_checkout

    root = make_fake_checkout(tmp_path / "co")
    (root / ".git" / "info" / "exclude").write_text("omni\n")  # a clean commit: its answers are cached
    serve = root / "omni" / "bin" / "sgl-omni"
    (tmp_path / "help.txt").write_text(help_text)
    (tmp_path / "code.txt").write_text(f"{code}\n")
    serve.write_text(f"#!/bin/sh\necho asked >> {tmp_path / 'asked.log'}\ncat {tmp_path / 'help.txt'}\n"
                     f"exit $(cat {tmp_path / 'code.txt'})\n")
    return root


def _asked(tmp_path: Path) -> int:
    log = tmp_path / "asked.log"
    return len(log.read_text().splitlines()) if log.exists() else 0


def test_the_target_speaks_the_era_its_checkouts_serve_help_names_and_caches_it_per_commit(tmp_path):
    from omnibench_core.builtin.targets import prepare_sglang_omni
    from omnibench_core.records import ServeSpec
    from omnibench_core.store import serve_help_file

    root, results = _legacy_checkout(tmp_path), tmp_path / "results"
    results.mkdir()
    settings = Settings.of(checkout=str(root), results=str(results))
    spec = ServeSpec("seedtts", model_path="openbmb/MiniCPM-o-4_5", model_name="minicpmo", args=(
        "--thinker.engine.mem_fraction_static", "0.55", "--thinker.factory.max_seq_len", "8192"))
    env = prepare_sglang_omni(settings)
    argv = env.serve_argv(spec, 8000)
    assert argv[2:] == ["--model-path", "openbmb/MiniCPM-o-4_5", "--model-name", "minicpmo",
                        "--thinker-mem-fraction-static", "0.55", "--thinker-max-seq-len", "8192", "--port", "8000"]
    assert _asked(tmp_path) == 1
    cached = serve_help_file.load(results, env.revision)
    assert cached is not None and "--thinker-max-seq-len" in cached.flags
    prepare_sglang_omni(settings).serve_argv(spec, 8001)  # another run of the commit: from the cache
    assert _asked(tmp_path) == 1
    # the doctored case: the same checkout whose serve is of the ConfigPatch era passes the flags as written
    serve_help_file.path_for(results, env.revision).unlink()
    (tmp_path / "help.txt").write_text("Usage: sgl-omni serve [OPTIONS]\n  --model-path TEXT  --port INTEGER\n")
    assert prepare_sglang_omni(settings).serve_argv(spec, 8000)[6:-2] == list(spec.args)


def test_a_serve_help_that_fails_is_refused_naming_it_and_asked_again_next_time(tmp_path):
    from omnibench_core.builtin.targets import prepare_sglang_omni
    from omnibench_core.records import ServeSpec
    from omnibench_core.store import serve_help_file

    root, results = _legacy_checkout(tmp_path, "Traceback...\nImportError: no module named typer\n", code=1), \
        tmp_path / "results"
    results.mkdir()
    settings = Settings.of(checkout=str(root), results=str(results))
    spec = ServeSpec("seedtts", model_path="m", args=("--thinker.factory.max_seq_len", "8192"))
    for attempt in (1, 2):
        with pytest.raises(ProbeFailed, match="did not say which flags its sgl-omni serve takes") as caught:
            prepare_sglang_omni(settings).serve_argv(spec, 8000)
        assert "exited 1: Traceback... | ImportError: no module named typer" in caught.value.message
        assert "nothing was cached" in caught.value.hint and _asked(tmp_path) == attempt
    assert serve_help_file.load(results, prepare_sglang_omni(settings).revision) is None  # a failure is never cached
    (tmp_path / "help.txt").write_text("Usage: sgl-omni serve\n  --port INTEGER\n")  # no era's help
    (tmp_path / "code.txt").write_text("0\n")
    with pytest.raises(SettingsError, match="of no serve era omnibench knows"):
        prepare_sglang_omni(settings).serve_argv(spec, 8000)


def test_an_era_without_a_spelling_is_refused_by_the_run_before_its_directory_or_server_exists(tmp_path):
    help_0726 = LEGACY_HELP.replace("│ --thinker-max-seq-len INTEGER │\n", "│ --decode-mode TEXT │\n")
    root, results = _legacy_checkout(tmp_path, help_0726), tmp_path / "results"
    settings = Settings.of(target="sglang-omni", checkout=str(root), results=str(results), port=free_port())
    with pytest.raises(UnsupportedOption) as caught:
        api.run(settings, ["seedtts"], options=["seedtts.max_samples=1", "seedtts.client=native"], progress=lambda _: None)
    assert caught.value.option == "--thinker.factory.max_seq_len" and "legacy-03b5a6e" in str(caught.value)
    assert not list(results.glob("*/run*"))  # the claimed run directory released, no server log


# -- real stand-in checkouts -------------------------------------------------------------------------------

@pytest.mark.slow
def test_a_checkout_without_the_flag_is_refused_before_any_server_starts(invoke, tmp_path):
    made = invoke_standin(tmp_path / "co", "--commits", "2", "--era-from", "2", "--fake-gpus", str(tmp_path / "gpu"))
    assert "old (no --reference-audio-field)" in made.output
    subprocess.run(["git", "-C", str(made.root), "checkout", "-q", made.commits[0]], check=True)
    # the old commit's own client exits 2 on the flag, as upstream's old one does
    old = subprocess.run([str(made.venv / "bin" / "python"), "-m", "benchmarks.eval.benchmark_omni_seedtts",
                          "--generate-only", "--meta", "m", "--output-dir", str(tmp_path / "o"), ERA_FLAG, "audios"],
                         cwd=made.root, capture_output=True, text=True, timeout=600)
    assert old.returncode == 2 and "unrecognized arguments: --reference-audio-field" in old.stderr
    assert made.fake_gpus is not None
    port = free_port()
    argv = ("run", "--target", "sglang-omni", "--checkout", str(made.root), "--workload", "seedtts",
            "--opt", "seedtts.max_samples=2", "--port", str(port))
    env = {"PATH": path_without_nvidia_smi(made.fake_gpus)}
    done = invoke(*argv, env=env)
    assert done.returncode == 1, done.stdout + done.stderr
    first = done.stderr.strip().splitlines()[0]
    assert first == (f"error: the checkout at {made.commits[0][:12]} does not support {ERA_FLAG} (seedtts.generate): "
                     "not measurable with these options"), done.stderr
    assert f"commit: {made.commits[0]}" in done.stderr and "what to do:" in done.stderr
    results = tmp_path / "results"
    # no server started: no run directory, no server log, no server process, no GPU_FREE query, the port never held
    assert not list(results.glob("*/run*")) and not list(results.rglob("*.log"))
    assert not server_pids(tmp_path) and not list((made.root / ".standin" / "gpu").glob("*.pid"))
    calls = made.fake_gpus / "calls.log"
    assert not calls.exists() or "memory.used" not in calls.read_text()
    assert list((results / capabilities_file.CAPABILITIES).glob(f"{made.commits[0]}-*.json"))  # cached
    again = invoke(*argv, env=env)  # the same commit is not probed twice
    assert again.returncode == 1 and "asking the checkout" not in again.stdout and ERA_FLAG in again.stderr
    # the native client is omnibench's own: the hint's way out asks nothing of the old client
    assert "--opt seedtts.client=native" in done.stderr


def _rows(text: str) -> dict[str, str]:
    return {line.split()[0]: line for line in text.splitlines() if line.strip()}


@dataclass(frozen=True)
class TwoEras:
    """The module's stand-in of two eras, its results root, and the flags every command shares."""

    made: MadeStandin
    results: Path
    env: dict[str, str]
    common: tuple[str, ...]

    def page(self, *needles: str) -> subprocess.CompletedProcess:
        """docs/scale.md's command holding ``needles``, run as the page writes it, on this story's
        stand-in and fake GPUs (the page's /tmp folders), results root and a free port."""
        return run_page_command(page_command("scale.md", *needles),
                                paths={"/tmp/standin-eras": str(self.made.root), "/tmp/fakegpu": str(self.made.fake_gpus)},
                                env={"INVOKE_OMNIBENCH_RESULTS": str(self.results), "INVOKE_OMNIBENCH_PORT": str(free_port()),
                                     "PATH": path_without_nvidia_smi()})

    def invoke(self, *args: str) -> subprocess.CompletedProcess:
        """`invoke ARGS` from the repository root with this story's results root and PATH."""
        env = {**os.environ, "INVOKE_OMNIBENCH_RESULTS": str(self.results), **self.env}
        return subprocess.run([sys.executable, "-m", "invoke", *args], cwd=REPO, env=env, capture_output=True,
                              text=True, timeout=900)


@pytest.fixture(scope="module")
def two_eras(tmp_path_factory) -> TwoEras:
    """commits 1 and 2 are the old era; 3 is the first with --reference-audio-field; 1 to 3 serve with
    upstream's legacy sgl-omni serve (named flags, a dotted stage flag a KeyError), 4 with the dotted
    stage flags; 4 plants +2.5 s a request. Two runs a commit: a planted +1 s once needed three (+171 % [-1 %, +344 %] at two, the
    local synthesizer's spread on a busy host); +2.5 s is sleep, not CPU, and far outside that spread
    (+4 s on two requests made the bisect the suite's longest test: issue 40).
    The matrix, the bisect and the history below run one after another on one results root, as a
    user runs them (one test each, so none takes over a minute: issue 40)."""
    tmp = tmp_path_factory.mktemp("eras")
    # docs/scale.md's own `invoke standin` (its --out and --fake-gpus in this test's folder)
    words = shlex.split(page_command("scale.md", "invoke standin", "--era-from"))
    assert words[:4] == ["invoke", "standin", "--out", "/tmp/standin-eras"], words
    flags = [str(tmp / "gpu") if w == "/tmp/fakegpu" else w for w in words[4:]]
    made = invoke_standin(tmp / "co", *flags)
    assert made.fake_gpus is not None
    # its commits tagged c1..c4 oldest first, as the page's --revisions c1,c3 and --good c1 name them
    tagged = subprocess.run(["git", "-C", str(made.root), "rev-parse", "c1", "c2", "c3", "c4"], capture_output=True,
                            text=True, check=True).stdout.split()
    assert tagged == list(made.commits) and " c3 " in made.output
    # One sample a run and no warm-up request: the runs are the verdict's samples, and each run's
    # deferred scoring (an ASR server, SIM, UTMOS) of two took the bisect over a minute beside the
    # suite; c4's warm-up request slept 2.6 s more a run and kept it at 62 s (issue 40)
    common = ("--target", "sglang-omni", "--checkout", str(made.root), "--workload", "seedtts", "--opt",
              "seedtts.max_samples=1", "--opt", "seedtts.warmup=0", "--runs", "2", "--threshold", "30%",
              "--slot-cpus", "shared")
    return TwoEras(made, tmp / "results", {"PATH": path_without_nvidia_smi(made.fake_gpus)}, common)


LEGACY_SPELLING = ["--thinker-mem-fraction-static", "0.55", "--talker-mem-fraction-static", "0.15",
                   "--thinker-max-seq-len", "8192"]
DOTTED_SPELLING = ["--thinker.engine.mem_fraction_static", "0.55", "--talker.engine.mem_fraction_static", "0.15",
                   "--thinker.factory.max_seq_len", "8192"]


def _model_servers(results: Path, commit: str) -> list[dict]:
    """The seed-tts model server of every run of ``commit`` (moved-aside runs too), as its manifest records it."""
    return [server for manifest in sorted((results / commit[:7]).glob("run*/manifest.json"))
            for server in json.loads(manifest.read_text())["servers"] if server["label"] == "seedtts"]


def _served_in(results: Path, commit: str, spelling: list[str]) -> None:
    """Every run of ``commit`` served the runbook's settings in ``spelling``, and every server started came up."""
    servers = _model_servers(results, commit)
    assert servers, commit
    for server in servers:
        argv = server["argv"]
        assert argv[argv.index("--model-name") + 2:-2] == spelling, argv
        assert server["ready"], server  # no server was started that could not start
    assert not list((results / commit[:7]).glob("run*-incomplete"))


@pytest.mark.slow
def test_a_matrix_across_two_eras_marks_the_old_one_not_measurable_and_measures_the_new(two_eras):
    c1, _, c3, _ = two_eras.made.commits
    matrix = two_eras.page("invoke matrix", "--revisions c1,c3")  # docs/scale.md's, as written
    assert matrix.returncode == 0, matrix.stdout[-4000:] + matrix.stderr[-2000:]
    rows = _rows(matrix.stdout)
    assert "not-measurable" in rows[c1[:7]] and f"does not support {ERA_FLAG}" in rows[c1[:7]], matrix.stdout
    assert " complete " in rows[c3[:7]] and "no compare: the first revision is not-measurable" in rows[c3[:7]]
    assert not list((two_eras.results / c1[:7]).glob("run*"))  # nothing of it ran
    _served_in(two_eras.results, c3, LEGACY_SPELLING)  # the legacy serve, with its own named flags


@pytest.mark.slow
def test_a_bisect_across_two_eras_names_the_planted_commit_from_the_first_measurable_base(two_eras):
    c1, c2, c3, c4 = two_eras.made.commits
    bisect = two_eras.page("invoke bisect", "--good c1 --bad c4")  # docs/scale.md's, as written
    assert bisect.returncode == 0, bisect.stdout[-4000:] + bisect.stderr[-2000:]
    assert f"first bad commit: {c4}" in bisect.stdout
    assert f"the base is {c3[:7]}" in bisect.stdout and "2 commit(s)" in bisect.stdout
    table = _rows(bisect.stdout)
    assert "not measurable with these options" in table["-2"] and c1[:7] in table["-2"]
    assert "not measurable with these options" in table["-1"] and c2[:7] in table["-1"]
    saved = json.loads(next((two_eras.results / "bisects").glob("*.json")).read_text())
    assert saved["first_bad"] == c4 and set(saved["not_measurable"]) == {c1, c2} and saved["skipped_ends"] == [c1, c2]
    # both serve eras measured across the boundary, each with its own flags
    _served_in(two_eras.results, c3, LEGACY_SPELLING)
    _served_in(two_eras.results, c4, DOTTED_SPELLING)


@pytest.mark.slow
def test_history_across_two_eras_draws_the_measured_commits_only(two_eras, tmp_path):
    # a point for each measured commit and none for the old era's (the bisect measured commits 3 and 4)
    _, _, c3, c4 = two_eras.made.commits
    if not list((two_eras.results / c4[:7]).glob("run*")):  # alone (-k): measure them as the bisect did
        done = two_eras.invoke("matrix", *two_eras.common, "--revisions", f"{c3},{c4}", "--port", str(free_port()))
        assert done.returncode == 0, done.stdout[-4000:] + done.stderr[-2000:]
    history = two_eras.invoke("history", "--checkout", str(two_eras.made.root), "--metric", "seedtts.latency_mean_s",
                              "--workload", "seedtts", "--json", str(tmp_path / "history.json"))
    assert history.returncode == 0, history.stdout[-4000:] + history.stderr[-2000:]
    (series,) = json.loads((tmp_path / "history.json").read_text())["series"]
    assert [p["revision"] for p in series["points"]] == [c3, c4]
    assert not server_pids(two_eras.results.parent)


def test_the_standin_task_offers_era_from():
    done = subprocess.run([sys.executable, "-m", "invoke", "--help", "standin"], cwd=Path(__file__).parent.parent,
                          capture_output=True, text=True, timeout=600)
    assert "--era-from" in done.stdout and "reference-audio-field" in done.stdout
    assert "--serve-era-from" in done.stdout and "legacy sgl-omni serve" in done.stdout


def test_serve_era_from_must_leave_a_legacy_serve_commit():
    StandinSpec(commits=3, serve_era_from=2).check()
    for bad in (1, 4):
        with pytest.raises(SettingsError, match="--serve-era-from"):
            StandinSpec(commits=3, serve_era_from=bad).check()
    spec = StandinSpec(commits=3, serve_era_from=3)
    assert [spec.settings_at(i).get("serve_era") for i in (1, 2, 3)] == [LEGACY_SERVE, LEGACY_SERVE, None]


def _standin_serve(root: Path, *args: str) -> subprocess.CompletedProcess:
    """The stand-in's ``sgl-omni serve`` of ``root``'s commit, parsing only (a taken port: it stops before serving)."""
    code = ("import json, sys\nfrom sglang_omni_standin.cli import parse\n"
            "a, engine = parse(sys.argv[1:])\nprint(json.dumps(engine))")
    return subprocess.run([sys.executable, "-c", code, "serve", *args], cwd=root, capture_output=True, text=True,
                          timeout=600, env={**os.environ, "PYTHONPATH": f"{root}:{REPO}"})


def test_the_standins_legacy_serve_takes_only_the_legacy_flags(tmp_path):
    from omnibench_core.standin.files.sglang_omni_standin import SETTINGS_FILE

    root = tmp_path / "co"
    shutil.copytree(FILES, root)
    (root / SETTINGS_FILE).write_text(json.dumps({"serve_era": LEGACY_SERVE}))
    ok = _standin_serve(root, "--model-path", "m", *LEGACY_SPELLING)
    assert ok.returncode == 0, ok.stderr
    # the CPU server gets the same settings, in the form it reads
    assert json.loads(ok.stdout) == ["--thinker.engine.mem_fraction_static=0.55",
                                     "--talker.engine.mem_fraction_static=0.15", "--thinker.factory.max_seq_len=8192"]
    dotted = _standin_serve(root, "--model-path", "m", *DOTTED_SPELLING)
    assert dotted.returncode == 1 and "KeyError: 'thinker'" in dotted.stderr  # upstream's manager's KeyError
    (root / SETTINGS_FILE).write_text("{}")  # the same files of the ConfigPatch era: dotted in, named refused
    assert _standin_serve(root, "--model-path", "m", *DOTTED_SPELLING).returncode == 0
    named = _standin_serve(root, "--model-path", "m", *LEGACY_SPELLING)
    assert named.returncode == 2 and "--thinker-mem-fraction-static" in named.stderr

"""Every flag of every task is checked before anything starts (issue 17 item 4, issue 19's flag,
revision and name rows): the real `invoke` command with a bad value exits 1 with one line naming
the flag, the value and what is allowed, no traceback, and nothing made."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from checkout_helpers import make_fake_checkout
from gpu_helpers import write_fake_nvidia_smi
from run_helpers import REPO, load_tasks
from scale_helpers import server_pids

from omnibench_core.campaign.compare import VERDICTS
from omnibench_core.cli import flags as f
from omnibench_core.cli.flags import FlagTask
from omnibench_core.errors import SettingsError
from omnibench_core.scale import revisions
from omnibench_core.setup.checkout import checkout_commit


def every_task():
    ns = load_tasks().ns
    return [(name, ns[name]) for name in ns.task_names]


def test_every_flag_of_every_task_has_a_check_and_none_shadows_h():
    tasks = every_task()
    assert {"run", "measure", "report", "compare", "matrix", "bisect", "standin", "doctor", "setup.cpus"} <= \
        {name for name, _ in tasks}
    for name, task in tasks:
        assert isinstance(task, FlagTask), f"{name} is not a FlagTask: its flags are not checked"
        args = task.get_arguments()
        flags = {a.attr_name or a.name for a in args}
        assert flags == set(task.checks), f"{name}: flags without a check {sorted(flags - set(task.checks))}, " \
                                          f"checks without a flag {sorted(set(task.checks) - flags)}"
        for arg in args:
            assert "h" not in arg.names, f"{name}: --{arg.name} takes -h, the task's help"
            assert arg.kind in (str, bool, list), f"{name}: Invoke would convert --{arg.name} itself"


def test_o_is_opt_in_every_task_that_has_opt():
    """`-o` was --opt in run and measure but --a-opt in ab (Invoke gives short flags in the order of
    the signature): a test's `-o selftest.x=1` made an "A/A" whose sides differed."""
    has_opt = {name: {alias for arg in task.get_arguments() if arg.name == "opt" for alias in arg.names}
               for name, task in every_task() if any(arg.name == "opt" for arg in task.get_arguments())}
    assert {"run", "measure", "ab", "matrix", "sweep"} <= set(has_opt)
    assert {name: names for name, names in has_opt.items() if "o" not in names} == {}


# `invoke ab`'s short flags as users type them (-n NAME, -m 10, -f worse in docs and scripts)
AB_SHORT = {"w": "workload", "o": "opt", "a": "a_rev", "b": "b_rev", "r": "rounds", "d": "design", "p": "a_opt",
            "t": "b_opt", "s": "a_set", "e": "b_set", "l": "allow_dirty", "i": "retries", "c": "scoring", "n": "name",
            "m": "min_effect", "f": "fail_on", "x": "max_rounds", "u": "slot_cpus", "g": "target", "k": "checkout",
            "v": "server_profile", "j": "json"}


def test_a_flag_added_later_moves_no_short_flag_of_ab():
    """--noisy-retries, added in ab's signature before --name, took -n from --name (and -m, -f moved
    down the line): Invoke gives short flags in the order of the signature. It is long-only."""
    task = load_tasks().ns["ab"]
    short = {n: arg.name for arg in task.get_arguments() for n in arg.names if len(n) == 1}
    assert short == AB_SHORT
    assert [arg.names for arg in task.get_arguments() if arg.name == "noisy_retries"] == [("noisy-retries",)]


def no_traceback(done: subprocess.CompletedProcess) -> None:
    assert "Traceback" not in done.stdout + done.stderr, done.stderr


# One task of each kind (the structural test above covers every task's flags): positional
# arguments that ate -h (compare, bisect), an auto short flag -h (matrix --threshold, bisect
# --checkout), a task named apart from its function (report), one in a sub-collection.
@pytest.mark.slow
@pytest.mark.parametrize("name", ["compare", "bisect", "matrix", "report", "setup.cpus"])
def test_h_is_the_help_of_every_kind_of_task(invoke, name):
    done = invoke(name, "-h")
    assert done.returncode == 0, done.stdout + done.stderr
    assert f"[--core-opts] {name} " in done.stdout and "Options:" in done.stdout
    no_traceback(done)


def refused(invoke, tmp_path, *argv: str, env: dict[str, str] | None = None) -> str:
    """Run the real command; it must exit 1 with a message, no traceback, and make no results."""
    done = invoke(*argv, env=env, timeout=600)
    assert done.returncode == 1, (done.returncode, done.stdout, done.stderr)
    no_traceback(done)
    assert not (tmp_path / "results").exists(), "a refused command made the results folder"
    assert done.stderr.startswith("error: "), done.stderr
    return done.stderr


@pytest.mark.parametrize("word", ["wrose", "worst"])
def test_fail_on_a_verdict_that_does_not_exist_is_refused_with_the_verdict_words(invoke, tmp_path, word):
    err = refused(invoke, tmp_path, "compare", "A", "B", "--fail-on", word)
    assert f"--fail-on {word!r} refused" in err
    assert all(v in err for v in VERDICTS)


@pytest.mark.slow
@pytest.mark.parametrize(("argv", "lines"), [
    (["--alpha", "2"], ["--alpha '2' refused (out of range): expected a number between 0 and 1"]),
    (["--alpha", "0", "--min-effect", "-5"], ["--alpha '0' refused (out of range)",
                                               "--min-effect '-5' refused (negative): expected a percentage >= 0"]),
    (["--alpha", "nan", "--min-effect", "abc"], ["--alpha 'nan' refused (not a finite number)",
                                                  "--min-effect 'abc' refused: expected a percentage >= 0"]),
    (["--alpha", "abc"], ["--alpha 'abc' refused: expected a number between 0 and 1"]),
])
def test_compare_alpha_and_min_effect_are_checked_before_a_campaign_is_read(invoke, tmp_path, argv, lines):
    err = refused(invoke, tmp_path, "compare", "A", "B", *argv)
    for line in lines:
        assert line in err
    assert "no campaign" not in err  # refused before the campaigns were looked for
    assert len(err.strip().splitlines()) == len(lines)  # one line per bad flag


def test_measure_runs_abc_is_refused_before_any_run(invoke, tmp_path, port):
    err = refused(invoke, tmp_path, "measure", "-w", "selftest", "--runs", "abc", "--port", str(port))
    assert err.strip() == "error: --runs 'abc' refused: expected a whole number >= 2"


def test_matrix_revisions_naming_none_says_no_revision_given(invoke, tmp_path):
    err = refused(invoke, tmp_path, "matrix", "-w", "selftest", "--revisions", ",,")
    assert "no revision given" in err and "--revisions ',,'" in err


@pytest.mark.slow
def test_a_revision_that_is_a_git_option_never_reaches_git(invoke, tmp_path):
    checkout = make_fake_checkout(tmp_path / "co")
    planted = tmp_path / "FILE..HEAD"
    err = refused(invoke, tmp_path, "matrix", "-w", "selftest", "--target", "sglang-omni", "--checkout", str(checkout),
                  "--revisions", f"--output={planted}")
    assert "starts with '-', which git would read as an option" in err
    err = refused(invoke, tmp_path, "bisect", "-w", "selftest", "--target", "sglang-omni", "--checkout", str(checkout),
                  "--good", f"--output={planted}", "--bad", "HEAD", "--metric", "selftest.x")
    assert "--good" in err and "which git would read as an option" in err
    assert not planted.exists() and not list(tmp_path.glob("FILE*"))


def test_every_git_call_separates_options_from_revisions(tmp_path):
    """The library refuses an option-like revision, and where one got through (a caller that
    skips the check) git reads it as a revision: no file is made."""
    checkout = make_fake_checkout(tmp_path / "co")
    git = ["git", "-C", str(checkout), "-c", "user.name=t", "-c", "user.email=t@t"]
    subprocess.run([*git, "commit", "-q", "--allow-empty", "-m", "two"], check=True)
    log = tmp_path / "git.log"
    wrapper = tmp_path / "git"
    wrapper.write_text(f'#!/bin/sh\nprintf "%s\\n" "$*" >> {log}\nexec git "$@"\n')
    wrapper.chmod(0o755)
    head = revisions.resolve(checkout, "HEAD~1..HEAD", str(wrapper))
    assert revisions.resolve(checkout, "HEAD~1,HEAD", str(wrapper))[1] == head[0]
    assert revisions.commits_between(checkout, "HEAD~1", "HEAD", str(wrapper))[1] == head[0]
    revisions.worktree(checkout, head[0], tmp_path / "wt", str(wrapper))
    clone = tmp_path / "clone"
    checkout_commit(clone, "HEAD~1", repo_url=str(checkout), git=str(wrapper), progress=lambda s: None)
    for line in log.read_text().splitlines():
        words = line.split()
        words = words[2:] if words[0] == "-C" else words  # checkout_commit's calls run in the checkout, no -C
        if words[0] in ("rev-parse", "rev-list") and words[1:] != ["HEAD"]:
            assert "--end-of-options" in words, line
        if words[:2] == ["worktree", "add"]:
            assert "--" in words, line
        if words[0] == "clone":
            assert words[1] == "--", line
        if words[0] == "checkout":
            assert len(words[-1]) == 40, line  # a resolved commit, never the user's text
    planted = tmp_path / "planted"
    for bad in (f"--output={planted}..HEAD", f"--output={planted}"):
        with pytest.raises(SettingsError, match="would read as an option"):
            revisions.resolve(checkout, bad, str(wrapper))
        with pytest.raises(SettingsError, match="would read as an option"):
            checkout_commit(clone, bad, git=str(wrapper), progress=lambda s: None)
    with pytest.raises(Exception, match="failed"):  # --end-of-options: git reads it as a revision
        revisions.commit_of(checkout, f"--output={planted}", str(wrapper))
    assert not planted.exists() and not list(tmp_path.glob("planted*"))


def test_report_runs_must_be_distinct(invoke, tmp_path):
    err = refused(invoke, tmp_path, "report", "--runs", "run1,run1")
    assert "--runs 'run1,run1' refused (run1 given twice)" in err


@pytest.mark.parametrize("value", [",", "a,,b", "selftest.latency_mean_s,"])
def test_an_empty_item_of_a_list_flag_is_refused_not_dropped(value, monkeypatch, capsys, tmp_path):
    """`--decide ,` ran a whole experiment on the default metrics (review of d26bf27): an empty
    item between commas is a typo, refused in one line (in this process, as test_ab's bad input)."""
    monkeypatch.chdir(REPO)
    monkeypatch.setenv("INVOKE_OMNIBENCH_RESULTS", str(tmp_path / "results"))
    code, err = in_process(["ab", "--workload", "selftest", "--b-set", "local_delay_ms=5", "--decide", value], capsys)
    assert code == 1 and f"--decide {value!r} refused (an empty item between commas)" in err, err
    assert not (tmp_path / "results").exists()


@pytest.mark.slow
def test_port_abc_is_blamed_on_the_flag_and_a_bad_config_value_on_where_it_came_from(invoke, tmp_path, port):
    err = refused(invoke, tmp_path, "run", "-w", "selftest", "--port", "abc")
    assert "--port 'abc' refused" in err and "1 to 65535" in err and "invoke.yaml" not in err
    err = refused(invoke, tmp_path, "run", "-w", "selftest", env={"INVOKE_OMNIBENCH_PORT": "abc"})
    assert "(from INVOKE_OMNIBENCH_PORT)" in err and "fix INVOKE_OMNIBENCH_PORT" in err and "invoke.yaml" not in err
    config = tmp_path / "bench.yaml"
    config.write_text("omnibench:\n  port: 70000\n")
    err = refused(invoke, tmp_path, "-f", str(config), "run", "-w", "selftest")
    assert f"port 70000 is out of range (from omnibench.port in {config})" in err
    assert "INVOKE_OMNIBENCH" not in err


def test_a_results_path_that_is_a_file_is_named(invoke, tmp_path):
    file = tmp_path / "results-file"
    file.write_text("not a folder\n")
    for argv, env, blamed in ((["--results", str(file)], None, "the --results flag"),
                              ([], {"INVOKE_OMNIBENCH_RESULTS": str(file / "sub")}, "INVOKE_OMNIBENCH_RESULTS")):
        err = refused(invoke, tmp_path, "run", "-w", "selftest", *argv, env=env)
        assert f"{file} is a file, not a folder" in err and blamed in err
        assert "ENOTDIR" not in err and "df -h" not in err
    assert file.read_text() == "not a folder\n"


@pytest.mark.slow
def test_every_numeric_and_choice_flag_of_the_other_tasks_is_checked(invoke, tmp_path):
    out = tmp_path / "standin"
    err = refused(invoke, tmp_path, "standin", "--out", str(out), "--commits", "0", "--delay-ms", "-1",
                  "--fail-stage", "nope", "--regress-at", "x")
    for flag in ("--commits '0'", "--delay-ms '-1'", "--fail-stage 'nope'", "--regress-at 'x'"):
        assert flag in err
    assert not out.exists()
    err = refused(invoke, tmp_path, "matrix", "-w", "selftest", "--runs", "1", "--slot-per", "gpus", "--slot-cpus", "x",
                  "--engine", "dask", "--threshold", "0", "--slots", "0,0", "--sweep", "nokey")
    for flag in ("--runs '1'", "--slot-per 'gpus'", "--slot-cpus 'x'", "--engine 'dask'", "--threshold '0'",
                 "--slots '0,0'", "--sweep 'nokey'"):
        assert flag in err
    err = refused(invoke, tmp_path, "measure", "-w", "selftest", "--retries", "-1", "--scoring", "later",
                  "--target", "nowhere", "--gpus", "x", "--cpus", "2-a", "--percentiles", "50,100")
    for flag in ("--retries '-1'", "--scoring 'later'", "--target 'nowhere'", "--gpus 'x'", "--cpus '2-a'",
                 "--percentiles '50,100' refused (percentile '100' is not a number above 0 and below 100)"):
        assert flag in err
    assert "local, sglang-omni" in err  # the targets the plugins provide
    err = refused(invoke, tmp_path, "setup.cpus", "--cores-per-gpu", "0", "--gpu-a", "-1")
    assert "--cores-per-gpu '0'" in err and "--gpu-a '-1'" in err
    err = refused(invoke, tmp_path, "setup", "--where", "moon")
    assert "--where 'moon' refused: expected one of: auto, host, container" in err


def test_the_settings_of_a_task_keep_the_types_invoke_would_have_cast(tmp_path):
    """Invoke's defaults are text (so it never casts an INVOKE_OMNIBENCH_* variable itself);
    the settings still come out typed."""
    env = {**os.environ, "INVOKE_OMNIBENCH_PORT": "8123", "INVOKE_OMNIBENCH_STOP_GRACE_S": "2.5"}
    code = f"from omnibench_core.cli.config import load_settings; s = load_settings({str(tmp_path)!r}); " \
           "print(repr(s.run.port), repr(s.run.stop_grace_s), repr(s.run.ready_timeout_s))"
    done = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True)
    assert done.stdout.split() == ["8123", "2.5", "1800.0"]


@pytest.mark.slow
def test_a_matrix_of_two_long_option_sets_measures_both_under_their_own_names(invoke, tmp_path, port):
    """Two --sweep values that agree in the first 100 characters of their campaign names: each gets
    a name of its own (cut and hashed), never one name and "measured something else"."""
    fake = write_fake_nvidia_smi(tmp_path / "fakebin", [0])
    long = tmp_path / ("x" * 130)
    for end in "ab":  # selftest's fail_once finds its file there: no run fails
        Path(f"{long}{end}").write_text("")
    done = invoke("matrix", "-w", "selftest", "--runs", "2", "--slots", "0,1", "--slot-per", "gpu", "--slot-cpus", "shared",
                  "--port", str(port), "--opt", "selftest.delay=0", "--opt", "selftest.requests=2",
                  "--opt", "selftest.children=0", "--sweep", f"selftest.fail_once={long}a,{long}b",
                  env={"INVOKE_OMNIBENCH_NVIDIA_SMI": str(fake)}, timeout=300)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr
    names = sorted(p.name for p in (tmp_path / "results").glob("*/campaigns/*.json"))
    assert len(names) == 2 and names[0][:80] == names[1][:80] and all(len(n) <= 100 + 5 for n in names)
    assert not server_pids(tmp_path)


def test_a_bad_value_in_a_projects_invoke_yaml_is_blamed_on_that_file(tmp_path):
    """The noxfile's path (load_settings), which reads invoke.yaml the way `invoke` does."""
    (tmp_path / "invoke.yaml").write_text("omnibench:\n  gpu_free_mib: lots\n")
    code = f"from omnibench_core.cli.config import load_settings; load_settings({str(tmp_path)!r})"
    env = {k: v for k, v in os.environ.items() if not k.startswith("INVOKE_OMNIBENCH_")}
    done = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True)
    assert done.returncode == 1
    assert f"setting 'gpu_free_mib' must be a whole number, got 'lots' (from omnibench.gpu_free_mib in " \
           f"{tmp_path / 'invoke.yaml'})" in done.stderr


def test_every_short_flag_is_a_letter_or_digit():
    """`invoke --help history` once showed `--=STRING, --slot-cpus=STRING`: Invoke had given
    slot_cpus the short flag "_" (its s, l, o and t were taken)."""
    tasks = load_tasks().ns
    bad = [f"{name}: -{n}" for name in tasks.task_names for arg in tasks[name].get_arguments()
           for n in arg.names if len(n) == 1 and not n.isalnum()]
    assert bad == []



BAD_NAMES = ["a/b", "../../../X", "/tmp/X", "..", ".", "a\nb", "a\\b", "x..y", "tab\there", ""]


@pytest.mark.slow  # one command per name
def test_every_name_a_user_gives_measure_is_refused_in_one_line_by_the_one_rule(invoke, tmp_path, port):
    """Issue 31, item 4: `measure -n a/b` repeated its warm-up forever; `-n ../../../X` wrote X.json
    and X.lock outside the results root. Now each is one line, exit 1, nothing made."""
    for bad in BAD_NAMES:
        err = refused(invoke, tmp_path, "measure", "-w", "selftest", "-n", bad, "--port", str(port))
        assert len(err.strip().splitlines()) == 1 and "refused" in err and repr(bad) in err, err
    assert not (tmp_path / "X.json").exists() and not (tmp_path / "X.lock").exists()


@pytest.mark.parametrize("argv", [("ab", "-w", "selftest", "--name", "../../X"), ("run", "-w", "selftest", "--run-name", "a/b")])
def test_ab_and_run_names_are_held_to_the_same_rule(invoke, tmp_path, port, argv):
    err = refused(invoke, tmp_path, *argv, "--port", str(port))
    assert len(err.strip().splitlines()) == 1 and f"{argv[-1]!r} refused" in err, err
    assert not (tmp_path / "X.json").exists() and not (tmp_path / "X.lock").exists()


@pytest.mark.slow
def test_slot_cpus_this_host_does_not_have_are_refused_up_front_naming_them(invoke, tmp_path, port):
    """Issue 31, item 6: CPUs not on this host ended in "the watchdog for .../python exited with 1
    (log PATH)", PATH moved aside since. Now the flag (and a configured value, in measure before
    its campaign file) is refused naming the CPUs, before a run folder exists."""
    err = refused(invoke, tmp_path, "run", "-w", "selftest", "--target", "local", "--cpus", "0,900-901", "--port", str(port))
    assert "900-901" in err and len(err.strip().splitlines()) == 1 and "watchdog" not in err
    done = invoke("measure", "-w", "selftest", "--target", "local", "--port", str(port), env={"INVOKE_OMNIBENCH_CPUS": "900"})
    assert done.returncode == 1 and "Traceback" not in done.stderr, done.stderr
    assert "names CPUs this host does not have" in done.stderr and "not here: 900" in done.stderr
    assert not (tmp_path / "results").exists()


def test_a_data_dir_that_is_the_file_systems_root_is_refused_naming_the_option(invoke, tmp_path, port):
    """`-o seedtts.data_dir=/` said "PosixPath('/') has an empty name" from inside a step."""
    done = invoke("run", "-w", "seedtts", "--target", "local", "-o", "seedtts.data_dir=/", "--port", str(port))
    assert done.returncode == 1 and "Traceback" not in done.stderr and "empty name" not in done.stderr, done.stderr
    assert done.stderr.startswith("error: -o seedtts.data_dir=/ refused: / is the file system's root")
    assert not list((tmp_path / "results").rglob("run*"))  # refused while planning: no run folder left


@pytest.mark.slow
def test_invokes_bare_parse_errors_get_hints_that_lead_somewhere(invoke):
    """Invoke's "No idea what 'X' is!" on the user's command line gains a hint: a workload option
    given as a flag points to --opt, a misspelt flag or task to the close one, a campaign name
    given as a positional word to --name."""
    done = invoke("run", "--workload", "seedtts", "--max-samples", "3")
    # one error prefix (issue 46): Invoke's own parse errors begin as omnibench's do
    assert done.returncode == 1 and done.stderr.startswith("error: No idea what '--max-samples' is!")
    assert "--opt seedtts.max_samples=VALUE" in done.stderr and "invoke plugins --options" in done.stderr
    done = invoke("measure", "--runz", "3")
    assert done.returncode == 1 and "did you mean --runs?" in done.stderr, done.stderr
    done = invoke("mesure", "--workload", "selftest")
    assert done.returncode == 1 and "did you mean `invoke measure`?" in done.stderr, done.stderr
    done = invoke("report", "run3")
    assert done.returncode == 1 and "`invoke report --name run3`" in done.stderr, done.stderr
    # the hinted command is one Invoke parses: it gets as far as looking for the campaign
    hinted = invoke("report", "--name", "run3")
    assert hinted.returncode == 1 and "No idea" not in hinted.stderr and "campaign" in hinted.stderr, hinted.stderr


def test_parse_hints_stay_quiet_on_other_parse_errors():
    assert f.parse_hints("'--port' needs a value", "run", ["--port"], ["run"], lambda: []) == []
    assert f.parse_hints("No idea what 'zzzz' is!", None, [], ["run", "measure"], lambda: []) == \
        ["`invoke --list` lists the tasks"]


def in_process(argv: list[str], capsys) -> tuple[int, str]:
    """The user's command through Invoke's own parser and omnibench's flag checks, in this process
    (a subprocess per name would cost a second each): its exit code and standard error."""
    from invoke import Program

    from omnibench_core.cli import output

    code, program = 0, Program(namespace=load_tasks().ns)
    f.explain_parse_errors(program, lambda: [])  # as tasks.py does to the running program
    try:
        program.run(["invoke", *argv])
    except SystemExit as exc:
        code = int(exc.code or 0)
    err = capsys.readouterr().err
    assert "Traceback" not in err and err.startswith(output.ERROR_PREFIX), err
    return code, err


def test_every_command_that_takes_a_name_refuses_each_hostile_one_in_one_line_before_anything_starts(
        tmp_path, monkeypatch, capsys):
    """Issue 46, item 4: a leading -, spaces, an RTL override, a zero-width space, U+0085, U+2028, a
    fullwidth / and foo.lock (which measured every run, then could not write its report) were
    accepted. Now each command that takes a name refuses each in one line, naming the character,
    before a folder exists; a folder a user has them make (standin, publish) too, by the characters'
    rule (the names omnibench keeps beside its own names are no concern there)."""
    from test_store import HOSTILE_NAMES

    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("INVOKE_OMNIBENCH_RESULTS", str(tmp_path / "results"))
    commands = {"measure": ["measure", "-w", "selftest", "--name={}"], "ab": ["ab", "-w", "selftest", "--name={}"],
                "run": ["run", "-w", "selftest", "--run-name={}"], "sweep": ["sweep", "selftest", "--name={}"],
                "standin": ["standin", "--out={}"], "publish": ["publish", "--out=site/{}"]}
    kept = ("ends in '.lock'", "ends in '.json'", "a folder omnibench keeps")  # beside a name omnibench makes
    for name, why in HOSTILE_NAMES.items():
        for task, argv in commands.items():
            if task in ("standin", "publish") and why in kept:
                continue  # a folder a user places lies beside nothing omnibench keeps (test_flags' file flags)
            code, err = in_process([a.format(name) for a in argv], capsys)
            assert code == 1 and len(err.strip().splitlines()) == 1, (task, name, err)
            if name == "-x" and "needed value" in err:
                continue  # Invoke's own parser took -x for the task's flag -x (ab has one): refused too
            assert "refused" in err and repr(name)[1:-1] in err and why.split(", ")[0] in err, (task, name, err)
    assert sorted(p.name for p in tmp_path.iterdir()) == [], "a refused command made a folder"


def test_history_and_publish_refuse_a_checkout_that_does_not_exist_as_run_does(tmp_path, monkeypatch, capsys):
    """Issue 46, item 5: `history --checkout /no/such` was silently ignored (the series fell back to
    their own order); run refused it. Now all three say the same, before anything is written."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("INVOKE_OMNIBENCH_RESULTS", str(tmp_path / "results"))
    missing = str(tmp_path / "no-such-checkout")
    (tmp_path / "results").mkdir()  # publish refuses a results folder that does not exist, before the checkout
    said = {}
    for task, argv in {"run": ["run", "-w", "selftest", "--target", "sglang-omni"], "history": ["history"],
                       "publish": ["publish", "--out", "site"]}.items():
        code, err = in_process([*argv, "--checkout", missing], capsys)
        said[task] = err.splitlines()[0]
        assert code == 1, (task, err)
    assert set(said.values()) == {f"error: no sglang-omni checkout at {missing}"}, said
    assert not list((tmp_path / "results").iterdir()) and not (tmp_path / "site").exists()


@pytest.mark.parametrize("task, flag, file", [("HISTORY", "json", "history.json"), ("HISTORY", "summary", "pr.md"),
                                              ("REPORT", "csv", "rows.csv"), ("REPORT", "json", "rows.json"),
                                              ("HISTORY", "json", "ab.json"), ("REPORT", "csv", "ci.csv")])
def test_a_file_a_flag_writes_may_end_in_its_own_suffix(tmp_path, task, flag, file):
    """`history --json history.json` was refused ("ends in .json, the suffix of a file omnibench keeps
    beside a name"), and `ab.json` ("'ab' is a folder omnibench keeps"): a file the user places is
    beside nothing omnibench keeps; its stem and new folders follow the characters' rule."""
    from omnibench_core.cli import declared

    check = getattr(declared, task)[flag].check
    assert check.convert(str(tmp_path / "new" / file)) == str(tmp_path / "new" / file)
    assert check.convert(str(tmp_path / "reports" / file))  # a folder name omnibench keeps, but not here
    with pytest.raises(f.Refused, match="U\\+202E"):
        check.convert(str(tmp_path / "n\u202ew" / file))

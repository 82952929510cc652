"""The store owns the files omnibench keeps: no other module names them, every file's format is
checked on load (older migrated, newer refused naming file and version), statuses stay the JSON's
words, and a run's outcome (where it was moved) is a typed field, not text to parse."""

from __future__ import annotations

import ast
import json
import shutil
from pathlib import Path

import pytest
from run_helpers import REPO

from omnibench_core import api
from omnibench_core.ab import experiment_file
from omnibench_core.campaign import campaign_file, telemetry_view
from omnibench_core.errors import CampaignFileError, RecordError, RunFileError, StepFailed
from omnibench_core.settings import Settings
from omnibench_core.statuses import AttemptStatus, CampaignStatus, GateStatus, RunOutcome, RunStatus, StepStatus
from omnibench_core.store import manifest as manifest_file
from omnibench_core.store import metrics as metrics_file
from omnibench_core.store import names, telemetry_file, versions
from omnibench_core.store.run_entries import OutputFile, ServerEntry, StepEntry
from omnibench_core.telemetry.run_summary import run_warnings

FIXTURE = REPO / "tests" / "fixtures" / "campaign-format1-f844481.json"
# Two runs made by main d2456c2 (gpu-sim target, fake NVML; generated, then scored together):
# manifests with untyped steps and servers, telemetry files without a format field.
OLD_RUNS = REPO / "tests" / "fixtures" / "runs-format1-d2456c2"
STORE = REPO / "omnibench_core" / "store"
STANDIN_FILES = REPO / "omnibench_core" / "standin" / "files"  # another repository's files (package data)
# What names a stored file: a run file's name, or a path into a revision's campaigns folder.
FILE_WORDS = (*names.RUN_FILES, f"{names.CAMPAIGNS}/")


def _docstrings(tree: ast.AST) -> set[int]:
    """The ids of every docstring node: prose may name a file; code may not."""
    out = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)) and node.body:
            first = node.body[0]
            if isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant):
                out.add(id(first.value))
    return out


def _file_names(path: Path, root: Path = REPO) -> list[str]:
    tree = ast.parse(path.read_text(), filename=str(path))
    skip = _docstrings(tree)
    return [f"{path.relative_to(root)}:{node.lineno}: {node.value!r}" for node in ast.walk(tree)
            if isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in skip
            and any(word in node.value for word in FILE_WORDS)]


def _sources() -> list[Path]:
    core = [p for p in (REPO / "omnibench_core").rglob("*.py") if STORE not in p.parents and STANDIN_FILES not in p.parents]
    return [*core, *(REPO / "plugins").rglob("*.py"), REPO / "tasks.py"]


@pytest.mark.slow
def test_no_module_but_the_store_names_a_run_file():
    offenders = [hit for path in _sources() for hit in _file_names(path)]
    assert offenders == []


def test_the_scan_finds_a_file_name_in_code_but_not_in_a_docstring(tmp_path):
    # the scan above must be able to fail: a literal in code is found, the same words in prose are not
    probe = tmp_path / "probe.py"
    probe.write_text('"""Reads ``manifest.json``."""\n\nPATH = "run0/manifest.json"\n')
    assert [h.split(": ", 1)[1] for h in _file_names(probe, tmp_path)] == ["'run0/manifest.json'"]


# -- formats --------------------------------------------------------------------------------------
def test_a_campaign_file_of_format_1_from_main_f844481_loads_and_is_saved_as_the_current_format(tmp_path):
    path = tmp_path / "selftest_local.json"
    shutil.copy(FIXTURE, path)
    c = campaign_file.load(path)
    assert c.name == "selftest_local" and c.revision == "local-f844481"
    assert [(a.slot, a.run, a.status) for a in c.attempts] == [(0, "run0", "complete"), (1, "run1", "complete"),
                                                               (2, "run2", "complete")]
    assert c.status is CampaignStatus.COMPLETE and all(a.status is AttemptStatus.COMPLETE for a in c.attempts)
    campaign_file.save(path, c)
    data = json.loads(path.read_text())
    assert data["format"] == campaign_file.FORMAT
    assert campaign_file.load(path).attempts == c.attempts


@pytest.mark.parametrize("version", [campaign_file.FORMAT + 1, "1", 0, None])
def test_a_campaign_file_of_a_newer_or_unknown_format_is_refused_naming_file_and_version(tmp_path, version):
    path = tmp_path / "c.json"
    data = json.loads(FIXTURE.read_text()) | {"format": version}
    path.write_text(json.dumps(data))
    with pytest.raises(CampaignFileError) as err:
        campaign_file.load(path)
    assert isinstance(err.value, RunFileError)
    assert str(path) in str(err.value) and f"has format {version!r}" in err.value.message
    assert err.value.evidence["field"] == "format" and err.value.hint
    if version == campaign_file.FORMAT + 1:
        assert "newer omnibench" in err.value.hint


def test_an_a_b_record_of_a_newer_format_is_refused(tmp_path):
    path = tmp_path / "ab.json"
    path.write_text(json.dumps({"format": experiment_file.FORMAT + 1}))
    with pytest.raises(RecordError) as err:
        experiment_file.load(path)
    assert str(path) in err.value.message and f"format {experiment_file.FORMAT + 1}" in err.value.message


def _run(results: Path, port: int, *opts: str):
    return api.run(Settings.of(results=str(results), port=port), ["selftest"], options=list(opts),
                   progress=lambda m: None)


@pytest.mark.slow
def test_a_run_reads_back_typed_and_a_manifest_without_format_is_format_1(tmp_path, port):
    result = _run(tmp_path / "r", port, "selftest.requests=2")
    assert result.status is RunStatus.COMPLETE and result.outcome == RunOutcome("run0", RunStatus.COMPLETE,
                                                                                result.run_dir)
    raw = json.loads(names.manifest_path(result.run_dir).read_text())
    assert raw["format"] == manifest_file.FORMAT and raw["status"] == "complete"  # the JSON keeps the word
    m = manifest_file.read(result.run_dir)
    assert m.status is RunStatus.COMPLETE and m.run == "run0" and m.workloads == ("selftest",)
    assert [g["status"] for g in m.gates][:1] == [GateStatus.PASSED] and m.server_starts >= 1
    assert m.coverage and all(c.ok for c in m.coverage) and m.broken_rules == ""
    metrics = metrics_file.read(result.run_dir)
    assert metrics.complete and metrics.metrics == dict(result.metrics) and metrics.broken_rules == ()
    # a manifest written before the format field existed is format 1, read the same
    names.manifest_path(result.run_dir).write_text(json.dumps({k: v for k, v in raw.items() if k != "format"}))
    assert manifest_file.read(result.run_dir).status is RunStatus.COMPLETE


@pytest.mark.parametrize("which", ["manifest", "metrics"])
def test_a_run_file_of_a_newer_format_is_refused_naming_file_and_version(tmp_path, which):
    run = tmp_path / "run0"
    run.mkdir()
    path = names.manifest_path(run) if which == "manifest" else names.metrics_path(run)
    path.write_text(json.dumps({"format": 2, "status": "complete", "metrics": {}, "complete": True}))
    reader = manifest_file.read if which == "manifest" else metrics_file.read
    with pytest.raises(RunFileError) as err:
        reader(run)
    assert str(path) in err.value.message and "format 2" in err.value.message and "newer" in err.value.hint
    assert manifest_file.run_status(run) is None  # a status nobody can trust is no status


def test_an_older_format_is_migrated_step_by_step_and_a_gap_is_refused(tmp_path):
    steps = {1: lambda d: {**d, "b": d["a"] * 2}, 2: lambda d: {**d, "c": d["b"] + 1}}
    got = versions.current(tmp_path / "f.json", "file", {"a": 1}, version=1, reads=3, migrations=steps)
    assert got == {"a": 1, "b": 2, "c": 3, "format": 3}
    with pytest.raises(RunFileError, match="has format 1; this omnibench reads format 3"):
        versions.current(tmp_path / "f.json", "file", {"a": 1}, version=1, reads=3, migrations={2: steps[2]})


def test_statuses_are_their_words_in_json_and_in_text():
    assert json.dumps({"status": RunStatus.INCOMPLETE}) == '{"status": "incomplete"}'
    assert f"{RunStatus.COMPLETE}" == str(RunStatus.COMPLETE) == "complete" == RunStatus.COMPLETE
    assert AttemptStatus("failed") == RunStatus.FAILED and f"{GateStatus.NOT_APPLICABLE:>16}".strip() == "not_applicable"


# -- the outcome ----------------------------------------------------------------------------------
@pytest.mark.slow
def test_a_failed_run_says_where_it_was_moved_as_a_typed_outcome(tmp_path, port):
    marker = tmp_path / "failed-once"
    with pytest.raises(StepFailed) as err:
        _run(tmp_path / "r", port, "selftest.requests=2", f"selftest.fail_once={marker}")
    (out,) = err.value.outcomes
    assert out.run == "run0" and out.status is RunStatus.FAILED and out.why == err.value.message
    assert out.moved_to == out.run_dir == tmp_path / "r" / out.run_dir.parent.name / "run0-incomplete"
    assert out.moved_to.is_dir() and manifest_file.read(out.moved_to).status is RunStatus.FAILED


# -- typed steps and servers ----------------------------------------------------------------------
def _old_run(tmp_path: Path, name: str, *, strip_format: bool = False) -> tuple[Path, dict]:
    run = tmp_path / name
    shutil.copytree(OLD_RUNS / name, run)
    raw = json.loads(names.manifest_path(run).read_text())
    if strip_format:  # as written before the format field existed
        raw.pop("format")
        names.manifest_path(run).write_text(json.dumps(raw))
    return run, raw


@pytest.mark.parametrize("strip_format", [False, True])
def test_an_old_manifests_steps_and_servers_read_typed_and_write_back_the_same_json(tmp_path, strip_format):
    run, raw = _old_run(tmp_path, "run1", strip_format=strip_format)
    m = manifest_file.read(run)
    assert all(isinstance(s, StepEntry) for s in m.steps) and all(isinstance(s, ServerEntry) for s in m.servers)
    assert [(s.step, s.phase, s.status) for s in m.steps] == [("selftest.client", "generate", StepStatus.OK),
                                                              ("selftest.echo-check", "score", StepStatus.OK)]
    client = m.steps[0]
    assert client.server == "selftest" and client.exit_code == 0 and client.pgid and client.log.endswith(".log")
    assert isinstance(client.command, tuple) and client.command[0].endswith("python")
    assert client.host_load is not None and client.host_load["window"] == "selftest.client"
    assert client.outputs and all(isinstance(o, OutputFile) and len(o.sha256) == 64 for o in client.outputs.values())
    own, shared = m.servers
    assert own.started_here and own.pid and own.tree_token and own.stop == "terminated" and own.telemetry
    assert not shared.started_here and shared.started_in == "run0" and m.server_starts == 1
    # the typed entries are the JSON: nothing lost, nothing added
    assert [s.as_record() for s in m.steps] == raw["steps"] and [s.as_record() for s in m.servers] == raw["servers"]


def test_a_reopened_old_manifest_keeps_its_entries_and_a_dead_scorings_steps_are_interrupted(tmp_path):
    run, raw = _old_run(tmp_path, "run0")
    writer = manifest_file.Manifest.reopen(run, {"host": "here", "pid": 1}, ("score", "collect"))
    writer.step(StepEntry("selftest.echo-check", "score", StepStatus.RUNNING, server="echo-scorer", started="t"))
    again = json.loads(names.manifest_path(run).read_text())
    assert again["steps"][:-1] == raw["steps"] and again["servers"] == raw["servers"]
    assert again["steps"][-1] == {"step": "selftest.echo-check", "phase": "score", "server": "echo-scorer",
                                  "command": [], "status": "running", "started": "t", "ended": None,
                                  "exit_code": None, "log": ""}
    manifest_file.back_to_generated(run, "its owner died")
    m = manifest_file.read(run)
    assert m.status is RunStatus.GENERATED and m.steps[-1].status is StepStatus.INTERRUPTED
    assert [s.status for s in m.steps[:-1]] == [s.status for s in manifest_file.read(OLD_RUNS / "run0").steps]


def test_a_skipped_step_is_written_with_its_reason_only():
    entry = StepEntry("w.s", "score", StepStatus.SKIPPED, reason="done already")
    assert entry.as_record() == {"step": "w.s", "phase": "score", "status": "skipped", "reason": "done already"}
    assert StepEntry.from_record(Path("m.json"), "steps[0]", entry.as_record()) == entry


@pytest.mark.parametrize(("key", "where", "value", "field"), [
    ("steps", 1, {"status": "bogus"}, "steps[1].status"),
    ("steps", 0, {"step": None}, "steps[0].step"),
    ("steps", 0, {"outputs": {"a.wav": {"size": "12"}}}, "steps[0].outputs.a.wav"),
    ("servers", 0, {"pid": "12"}, "servers[0].pid"),
    ("servers", 1, {"label": 3}, "servers[1].label"),
])
def test_a_malformed_step_or_server_is_refused_naming_the_file_and_field(tmp_path, key, where, value, field):
    run, raw = _old_run(tmp_path, "run1")
    raw[key][where].update(value)
    names.manifest_path(run).write_text(json.dumps(raw))
    with pytest.raises(RunFileError) as err:
        manifest_file.read(run)
    assert err.value.evidence == {"file": str(names.manifest_path(run)), "field": field}
    assert field in err.value.message and err.value.hint


# -- telemetry.json -------------------------------------------------------------------------------
def test_an_old_telemetry_file_reads_typed_and_is_written_back_with_its_format(tmp_path):
    run, _ = _old_run(tmp_path, "run0")
    raw = json.loads(names.telemetry_path(run).read_text())
    assert "format" not in raw  # main d2456c2 wrote none
    t = telemetry_file.read(run)
    assert t.applies and t.workloads["selftest"].window == "selftest.client" and t.workloads["selftest"].energy_j > 0
    assert t.warnings == tuple(raw["warnings"]) and any("throttled during the timed window" in w for w in t.warnings)
    assert run_warnings(run) == raw["warnings"]
    telemetry_file.write(run, t)
    assert json.loads(names.telemetry_path(run).read_text()) == {"format": telemetry_file.FORMAT, **raw}
    assert telemetry_file.read(run) == t


@pytest.mark.parametrize(("change", "field"), [
    ({"format": telemetry_file.FORMAT + 1}, "format"),
    ({"warnings": "throttled"}, "warnings"),
    ({"applies": "yes"}, "applies"),
    ({"workloads": {"selftest": {"window": "w", "energy_j": "a lot", "speech_seconds": 1}}}, "workloads.selftest.energy_j"),
])
def test_a_malformed_or_newer_telemetry_file_is_an_error_naming_it_and_a_reports_stated_reason(tmp_path, change, field):
    good, _ = _old_run(tmp_path, "run0")
    bad, _ = _old_run(tmp_path, "run1")
    path = names.telemetry_path(bad)
    path.write_text(json.dumps(json.loads(path.read_text()) | change))
    with pytest.raises(RunFileError) as err:
        run_warnings(bad)
    assert err.value.evidence["file"] == str(path) and err.value.evidence["field"] == field and err.value.hint
    if field == "format":
        assert "newer omnibench" in err.value.hint
    both = telemetry_view.view([good, bad])  # the report still shows the run it could read, and says why not the other
    assert both.applies and [r[0] for r in both.rows] == ["selftest"]
    assert both.warnings[0].startswith(f"run1: its {names.TELEMETRY_NAME} was not read: ") and field in both.warnings[0]
    alone = telemetry_view.view([bad])
    assert not alone.applies and str(path) in alone.reason and field in alone.reason


def test_one_name_rule_and_every_path_built_from_a_name_stays_under_its_root(tmp_path):
    """Issue 31, item 4: the rule (store.names.check_name), typed, and under_root for paths."""
    from omnibench_core.errors import BadName, OutsideRoot, SettingsError
    from omnibench_core.store.names import campaign_path, check_name, experiment_path, under_root

    for bad in ("", ".", "..", "a/b", "a\\b", "..x", "a\nb", "a\x00b", "a\x7f"):
        with pytest.raises(BadName) as caught:
            check_name(bad, "campaign name")
        assert isinstance(caught.value, SettingsError) and caught.value.hint and "\n" not in caught.value.message
    assert check_name("selftest_a.b-1+2", "run name") == "selftest_a.b-1+2"
    # a name omnibench made from an identity may hold a..b inside (an option's value); never a path
    assert campaign_path(tmp_path, "seedtts.data_dir_..x").name == "seedtts.data_dir_..x.json"
    for bad in ("..", "a/b", "/etc/x"):
        with pytest.raises(BadName):
            campaign_path(tmp_path, bad)
        with pytest.raises(BadName):
            experiment_path(tmp_path, bad)
    assert under_root(tmp_path, tmp_path / "a" / "b") == tmp_path / "a" / "b"
    for out in (tmp_path / ".." / "x", Path("/etc/passwd"), Path("../x")):
        with pytest.raises(OutsideRoot):
            under_root(tmp_path, out)


def test_a_campaign_file_whose_name_or_revision_is_a_path_is_refused_naming_the_field(tmp_path):
    """A hand-edited campaign name `../../../x` would put its report (campaigns/<name>/) and its
    comparison folder outside the results root: the campaign file's owner refuses it on load."""
    from omnibench_core.campaign import campaign_file as cf

    good = json.loads((REPO / "tests" / "fixtures" / "campaign-format1-f844481.json").read_text())
    for field, bad in (("name", "../../../x"), ("revision", "/etc"), ("name", "a\nb")):
        path = tmp_path / f"{field}.json"
        path.write_text(json.dumps({**good, field: bad}))
        with pytest.raises(CampaignFileError) as caught:
            cf.load(path)
        assert caught.value.evidence["field"] == field and repr(bad) in caught.value.message


# Issue 46, item 4: names a person would not type, each with what its refusal must name.
HOSTILE_NAMES = {
    "-x": "starts with '-'",
    " x": "starts with U+0020 SPACE",
    "x ": "ends with U+0020 SPACE",
    "   ": "U+0020 SPACE",
    "ab\u202ecd": "U+202E RIGHT-TO-LEFT OVERRIDE, a bidi control",
    "ab\u200bcd": "U+200B ZERO WIDTH SPACE, a format character",
    "ab\x85cd": "U+0085 NEXT LINE, a control character",
    "ab\u2028cd": "U+2028 LINE SEPARATOR, a separator",
    "ab\uff0fcd": "U+FF0F FULLWIDTH SOLIDUS, a compatibility form of '/'",
    "foo.lock": "ends in '.lock'",
    "foo.JSON": "ends in '.json'",
    ".x": "starts with '.'",
    "x.": "ends with '.'",
    "a,b": "U+002C COMMA",
    "campaigns": "a folder omnibench keeps",
    "e\u0301": "not in NFKC form",
    "x" * 121: "at most 120",
}


def test_the_one_name_rule_is_an_allow_list_and_names_the_character_and_why(tmp_path):
    """Issue 46, item 4: each hostile name is refused by the library's rule, naming the character by
    code point and Unicode name (or the file it would meet); names a person types pass."""
    from omnibench_core.errors import BadName
    from omnibench_core.store.names import campaign_path, check_name, lock_path, name_problem

    for bad, why in HOSTILE_NAMES.items():
        with pytest.raises(BadName) as caught:
            check_name(bad, "campaign name")
        message = caught.value.message
        assert all(part in message for part in why.split(", ")) and "\n" not in message, (bad, message)
        assert caught.value.hint.startswith("give a plain name")
    for good in ("seedtts-c1-2-4", "run_1+2.x@y=z", "café", "測試", "A1"):
        assert name_problem(good) == "", good
    # why a name may not end in .lock: foo.lock's report folder (campaigns/foo.lock/) is foo's lock file
    foo, foo_lock = campaign_path(tmp_path, "foo"), campaign_path(tmp_path, "foo.lock")
    assert lock_path(foo) == foo_lock.parent / "foo.lock"
    # names omnibench made and keeps on disk are still found (a lookup is not a new name)
    assert campaign_path(tmp_path, "seedtts_seedtts.data_dir-_a_b.lock").name.endswith(".lock.json")

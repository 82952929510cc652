"""Issue 29, problem 6: `--server-profile runbook|ci`. CI's audio stages resolve code2wav batch 16
with a 100 ms wait; the runbook's single-GPU server keeps the model's defaults. The profile is part
of what a run measured: its server's flags, its identity and name, its manifest and reports."""

from __future__ import annotations

import json

import pytest
from checkout_helpers import make_fake_checkout
from run_helpers import free_port

from omnibench_core.builtin.targets import prepare_local, prepare_sglang_omni
from omnibench_core.errors import SettingsError
from omnibench_core.identity import Identity, planted
from omnibench_core.records import Endpoint, RunContext
from omnibench_core.settings import RunSettings, Settings
from omnibench_core.store import manifest as manifest_file
from omnibench_plugins.seedtts import hooks as seedtts
from omnibench_plugins.videoamme import hooks as videoamme

CI_FLAGS = "--code2wav.factory.max_batch_size 16 --code2wav.factory.max_batch_wait_ms 100"
RUNBOOK_SERVERS = {
    "seedtts": "sgl-omni serve --model-path openbmb/MiniCPM-o-4_5 --model-name minicpmo "
               "--thinker.engine.mem_fraction_static 0.55 --talker.engine.mem_fraction_static 0.15 "
               "--thinker.factory.max_seq_len 8192",
    "videoamme": "sgl-omni serve --model-path openbmb/MiniCPM-o-4_5 --model-name minicpmo "
                 "--thinker.engine.mem_fraction_static 0.55 --talker.engine.mem_fraction_static 0.15 "
                 "--thinker.factory.max_seq_len 32768",
}


def _servers(tmp_path, workload, profile):
    env = prepare_sglang_omni(Settings.of(checkout=str(make_fake_checkout(tmp_path / "co"))))
    module = {"seedtts": seedtts, "videoamme": videoamme}[workload]
    ctx = RunContext(tmp_path / "run0", workload, Endpoint(8000), dict(module.DEFAULTS), env,
                     RunSettings(server_profile=profile))
    steps = module.plan(ctx)
    return {s.name: "sgl-omni " + " ".join(env.serve_argv(s.server, 8000)[1:]) for s in steps if s.server}


@pytest.mark.parametrize("workload", ["seedtts", "videoamme"])
def test_the_ci_profile_adds_cis_code2wav_flags_to_the_speech_server_only(tmp_path, workload):
    runbook = _servers(tmp_path / "a", workload, "runbook")
    ci = _servers(tmp_path / "b", workload, "ci")
    speech = "generate"
    assert runbook[speech] == f"{RUNBOOK_SERVERS[workload]} --port 8000"  # the model's defaults: nothing added
    assert ci[speech] == f"{RUNBOOK_SERVERS[workload]} {CI_FLAGS} --port 8000"
    others = {k for k in ci if k != speech}
    assert others and all(ci[k] == runbook[k] and "code2wav" not in ci[k] for k in others)  # the ASR server


def test_the_local_target_refuses_the_ci_profile():
    with pytest.raises(SettingsError, match="no effect on the local target") as caught:
        prepare_local(Settings.of(server_profile="ci"))
    assert "--server-profile runbook" in caught.value.hint


def test_an_unknown_profile_is_a_setting_error():
    with pytest.raises(SettingsError, match="server_profile 'nightly' is not one of runbook, ci"):
        Settings.of(server_profile="nightly")


def test_the_profile_is_identity_and_old_records_are_the_runbooks():
    runbook = Identity.from_settings(Settings(), ["seedtts"], [], None)
    ci = Identity.from_settings(Settings.of(server_profile="ci"), ["seedtts"], [], None)
    old = Identity.of(["seedtts"], [], None, {"target": "local", "venv": "omni", "local_delay_ms": "0.0"})
    assert runbook == old and runbook.name() == old.name()  # campaigns recorded before the profile
    assert ci != runbook and ci.differences(runbook) == ["setting server_profile: 'ci' != None"]
    assert ci.name() == "seedtts_local_profile-ci" and runbook.name() == "seedtts_local"
    assert planted({"server_profile": "ci"}) == (("server_profile", "ci"),)  # its own history series
    assert planted({"server_profile": "runbook"}) == planted({}) == ()


def test_a_bad_profile_flag_is_refused_before_anything_starts(invoke, tmp_path):
    done = invoke("run", "--workload", "selftest", "--server-profile", "nightly")
    assert done.returncode == 1
    assert "--server-profile 'nightly' refused: expected one of: runbook, ci" in done.stderr
    assert not (tmp_path / "results").exists()


@pytest.mark.slow
def test_every_manifest_says_which_profile_it_measured(invoke, tmp_path):
    """A local run records the runbook's profile; the ci profile is refused there before a run
    directory exists."""
    done = invoke("run", "--workload", "selftest", "--port", str(free_port()))  # 8000 may be another run's
    assert done.returncode == 0, done.stdout + done.stderr
    (run,) = (tmp_path / "results").glob("*/run0")
    assert manifest_file.read(run).settings["server_profile"] == "runbook"
    assert json.loads((run / "manifest.json").read_text())["settings"]["server_profile"] == "runbook"
    refused = invoke("run", "--workload", "selftest", "--server-profile", "ci")
    assert refused.returncode == 1 and "no effect on the local target" in refused.stderr
    assert sorted(p.name for p in run.parent.iterdir() if p.name.startswith("run")) == ["run0"]

"""The built-in targets: the sglang-omni checkout (runbook shell block) and the local target."""

from __future__ import annotations

import sys

import pytest
from checkout_helpers import make_fake_checkout

from omnibench_core.builtin.scorers import ASR_MODEL
from omnibench_core.builtin.targets import prepare_local, prepare_sglang_omni
from omnibench_core.errors import SettingsError
from omnibench_core.records import ServeSpec
from omnibench_core.settings import Settings


def test_missing_checkout_names_the_setting(tmp_path):
    with pytest.raises(SettingsError) as err:
        prepare_sglang_omni(Settings.of(checkout=str(tmp_path / "nope")))
    assert err.value.evidence["setting"] == "omnibench.checkout"
    assert "INVOKE_OMNIBENCH_CHECKOUT" in err.value.hint


def test_missing_venv_says_how_to_build_it(tmp_path):
    checkout = make_fake_checkout(tmp_path / "co")
    with pytest.raises(SettingsError) as err:
        prepare_sglang_omni(Settings.of(checkout=str(checkout), venv="other"))
    assert err.value.evidence["setting"] == "omnibench.venv"
    assert "prepare_omni_venv.sh omni" in err.value.hint


def test_checkout_must_be_a_git_work_tree(tmp_path):
    checkout = make_fake_checkout(tmp_path / "co")
    (checkout / ".git").rename(tmp_path / "moved-git")
    with pytest.raises(SettingsError, match="not a git work tree"):
        prepare_sglang_omni(Settings.of(checkout=str(checkout)))


def test_sglang_omni_applies_the_runbook_shell_block(tmp_path):
    checkout = make_fake_checkout(tmp_path / "co")
    (checkout / "dirty.txt").write_text("x")
    env = prepare_sglang_omni(Settings.of(checkout=str(checkout), gpus="0", cpus="2-15,66-79"))
    assert env.python == str(checkout / "omni" / "bin" / "python")
    assert env.cwd == str(checkout)
    assert env.unset == ("SGLANG_OMNI_TORCH_COMPILE_DEFAULT", "PYTORCH_ALLOC_CONF")
    assert {k: env.env[k] for k in ("CUDA_VISIBLE_DEVICES", "HF_HUB_OFFLINE", "SGLANG_OMNI_STRICT_PORT",
                                    "SGLANG_OMNI_STARTUP_TIMEOUT")} == {
        "CUDA_VISIBLE_DEVICES": "0", "HF_HUB_OFFLINE": "1", "SGLANG_OMNI_STRICT_PORT": "1",
        "SGLANG_OMNI_STARTUP_TIMEOUT": "1800"}
    assert env.env["PATH"].startswith(str(checkout / "omni" / "bin"))
    # the CPUs a run pins to are its Slot's (the manifests' "slot", tests/test_scale_standin.py), not the target's
    assert not hasattr(env, "cpus")
    assert env.gpus == ("0",)
    assert len(env.revision) == 40 and env.folder == env.revision[:7]
    assert "?? dirty.txt" in env.dirty


def test_sglang_omni_serve_argv_is_the_runbooks(tmp_path):
    checkout = make_fake_checkout(tmp_path / "co")
    env = prepare_sglang_omni(Settings.of(checkout=str(checkout)))
    spec = ServeSpec("videoamme", model_path="openbmb/MiniCPM-o-4_5", model_name="minicpmo",
                     args=("--thinker.engine.mem_fraction_static", "0.55", "--talker.engine.mem_fraction_static",
                           "0.15", "--thinker.factory.max_seq_len", "32768"))
    runbook = ("sgl-omni serve --model-path openbmb/MiniCPM-o-4_5 --model-name minicpmo "
               "--thinker.engine.mem_fraction_static 0.55 --talker.engine.mem_fraction_static 0.15 "
               "--thinker.factory.max_seq_len 32768 --port 8000").split()
    argv = env.serve_argv(spec, 8000)
    assert argv[0] == str(checkout / "omni" / "bin" / "sgl-omni")
    assert ["sgl-omni", *argv[1:]] == runbook
    asr = ServeSpec("asr", model_path="Qwen/Qwen3-ASR-1.7B", model_name="Qwen/Qwen3-ASR-1.7B")
    assert env.serve_argv(asr, 8000)[1:] == (
        "serve --model-path Qwen/Qwen3-ASR-1.7B --model-name Qwen/Qwen3-ASR-1.7B --port 8000").split()


def test_local_target_uses_no_gpu_and_serves_with_the_same_flags():
    env = prepare_local(Settings.of(gpus="0,1"))
    assert env.gpus == () and env.python == sys.executable
    assert env.folder.startswith("local-")
    spec = ServeSpec("seedtts", model_path="openbmb/MiniCPM-o-4_5", model_name="minicpmo",
                     args=("--thinker.factory.max_seq_len", "8192"))
    assert env.serve_argv(spec, 8123) == [
        sys.executable, "-m", "omnibench_core.local", "serve", "--model-path", "openbmb/MiniCPM-o-4_5",
        "--model-name", "minicpmo", "--thinker.factory.max_seq_len", "8192", "--port", "8123"]
    # the scoring ASR model only transcribes: its server loads the recogniser alone
    asr = env.serve_argv(ServeSpec("asr", model_path=ASR_MODEL, model_name=ASR_MODEL), 8124)
    assert asr[-2:] == ["--engines", "asr"]

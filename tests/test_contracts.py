"""omnibench's command builders, native clients and stand-in held to upstream sglang-omni's recorded
contracts (``tests/fixtures/upstream/``: facts read from upstream's files at named commits)."""

from __future__ import annotations

import asyncio
import base64
import io
import json
import re
import shutil
import subprocess
import sys
import threading
import wave
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest
from checkout_helpers import make_fake_checkout
from upstream_contracts import FIXTURES, argv_problems, flags, load, provenance

from omnibench_core.builtin import serve_flags
from omnibench_core.builtin.targets import prepare_sglang_omni
from omnibench_core.errors import SettingsError, UnsupportedOption
from omnibench_core.records import Command, Endpoint, RunContext, ServeSpec
from omnibench_core.settings import RunSettings, Settings
from omnibench_plugins.seedtts import hooks as seedtts
from omnibench_plugins.videoamme import hooks as videoamme

STANDIN_FILES = Path(serve_flags.__file__).resolve().parents[1] / "standin" / "files"
SEEDTTS, VIDEOAMME, SERVE = load("benchmark_omni_seedtts"), load("benchmark_omni_videoamme"), load("sgl-omni-serve")


# -- the fixtures themselves ------------------------------------------------------------------------
def test_every_fixture_names_its_upstream_file_at_a_commit():
    names = sorted(p.stem for p in FIXTURES.glob("*.json"))
    assert names == ["benchmark_omni_seedtts", "benchmark_omni_videoamme", "chat-stream", "ci-scripts", "output-keys",
                     "sgl-omni-serve", "sgl-omni-serve-legacy", "signatures", "taskset-cpulist"]
    for name in names:
        found = provenance(load(name))
        assert found, name
        for repository, path, commit in found:
            assert re.fullmatch(r"[\w.-]+/[\w.-]+", repository) and path and not path.startswith("/"), name
            assert re.fullmatch(r"[0-9a-f]{40}", commit), (name, path, commit)
        assert "read" in json.dumps(load(name)), name


# -- builders: every flag passed exists upstream with a value of its type ---------------------------
def _sglang_env(tmp_path):
    return prepare_sglang_omni(Settings.of(checkout=str(make_fake_checkout(tmp_path / "co"))))


def _ctx(env, tmp_path, workload, module, **options):
    return RunContext(tmp_path / "run0", workload, Endpoint(8000), {**module.DEFAULTS, **options}, env, RunSettings())


def _module_argv(argv, module):
    """The program's own flags: after ``python -m <module>``."""
    return list(argv[list(argv).index(module) + 1:])


@pytest.mark.parametrize("options", [{}, {"seed": 7, "warmup": 2, "max_samples": 5, "stream": True,
                                          "temperature": 0.5, "max_new_tokens": 64, "max_concurrency": 4,
                                          "request_rate": 2.5, "warmup_meta": "/data/zh/meta.lst"}])
def test_seedtts_sglang_commands_pass_only_upstream_flags(tmp_path, options):
    env = _sglang_env(tmp_path)
    steps = seedtts.plan(_ctx(env, tmp_path, "seedtts", seedtts, client="sglang", **options))
    runs = [s.run.argv for s in steps if isinstance(s.run, Command) and seedtts.SGLANG_CLIENT in s.run.argv]
    assert len(runs) == 4  # generate, transcribe, similarity, utmos
    for argv in runs:
        own = _module_argv(argv, seedtts.SGLANG_CLIENT)
        assert argv_problems(own, SEEDTTS) == [], own
    generate = _module_argv(runs[0], seedtts.SGLANG_CLIENT)
    # upstream's defaults are Qwen3-Omni's: omnibench names MiniCPM-o's model and reference field itself
    assert generate[generate.index("--model") + 1] == "minicpmo"
    assert generate[generate.index("--reference-audio-field") + 1] == "audio.ref_audio"


@pytest.mark.parametrize("options", [{}, {"video_min_pixels": 3136, "video_total_pixels": 2000000, "timeout_s": 30.0,
                                          "warmup": 4}])
def test_videoamme_sglang_command_passes_only_upstream_flags(tmp_path, options):
    env = _sglang_env(tmp_path)
    steps = {s.name: s for s in videoamme.plan(_ctx(env, tmp_path, "videoamme", videoamme, client="sglang",
                                                    **options))}
    own = list(steps["generate"].run.argv[3:])  # python -c <the runbook's block> <flags>
    assert argv_problems(own, VIDEOAMME) == [], own
    assert own[own.index("--model") + 1] == "minicpmo"


def test_videoamme_stream_is_the_native_clients_and_upstreams_stream_is_its_contract(tmp_path):
    """sglang-omni's Video-AMME client has no --stream (its recorded flags): stream on with it is
    refused before a server starts, and the native client gets --stream only when asked; the
    stream's end and usage are upstream's, as recorded."""
    assert "--stream" not in flags(VIDEOAMME)
    env = _sglang_env(tmp_path)
    with pytest.raises(SettingsError, match="no stream mode") as refused:
        videoamme.plan(_ctx(env, tmp_path, "videoamme", videoamme, client="sglang", stream=True))
    assert "videoamme.client=native" in refused.value.hint
    native = {s.name: s for s in videoamme.plan(_ctx(env, tmp_path, "videoamme", videoamme, client="native",
                                                     stream=True))}
    plain = {s.name: s for s in videoamme.plan(_ctx(env, tmp_path, "videoamme", videoamme, client="native"))}
    assert native["generate"].run.argv[-1] == "--stream" and "--stream" not in plain["generate"].run.argv
    assert list(native["generate"].run.argv[:-1]) == list(plain["generate"].run.argv)
    stream = load("chat-stream")["facts"]
    assert "[DONE]" in stream["done"] and "completion_tokens" in stream["usage_fields"]
    assert "delta.content" in stream["text"]


def test_the_runbook_blocks_call_upstreams_signatures(tmp_path):
    """The ``python -c`` blocks call functions with arguments the recorded signatures take."""
    functions = {f["name"]: f for f in load("signatures")["functions"]}
    run_eval = functions["benchmarks.eval.benchmark_omni_videoamme.run_videoamme_eval"]
    assert "compute_wer" in run_eval["keyword_only"]
    assert "repo_help" in functions["benchmarks.eval.benchmark_omni_videomme.add_video_eval_args"]["keyword_only"]
    wer = functions["benchmarks.tasks.asr.compute_text_audio_consistency_from_records"]
    called = {"compute_wer": videoamme.RUNBOOK_CLIENT, "repo_help": videoamme.RUNBOOK_CLIENT,
              "asr_router_port": videoamme.RUNBOOK_WER, "asr_concurrency": videoamme.RUNBOOK_WER}
    for keyword, block in called.items():
        assert f"{keyword}=" in block
    assert {"asr_router_port", "asr_concurrency"} <= set(wer["keyword_only"])
    assert len(wer["positional"]) == 3  # records, "en", "cuda:0" in the block
    assert 'records, "en", "cuda:0", asr_router_port=' in videoamme.RUNBOOK_WER


@pytest.mark.parametrize("workload", [seedtts, videoamme])
def test_sgl_omni_serve_argv_passes_only_upstream_flags(tmp_path, workload):
    env = _sglang_env(tmp_path)
    ctx = _ctx(env, tmp_path, workload.NAME, workload, client="sglang")
    servers = {s.server for s in workload.plan(ctx) if s.server is not None}
    assert len(servers) == 2  # the model's and the ASR server
    for spec in servers:
        argv = env.serve_argv(spec, 8000)
        assert argv[1] == "serve"
        assert argv_problems(argv[2:], SERVE) == [], argv


def test_the_check_can_fail_on_a_doctored_contract(tmp_path):
    """A builder flag the recorded upstream lacks is caught: the era before --reference-audio-field,
    and a pipeline without the talker's engine."""
    env = _sglang_env(tmp_path)
    steps = seedtts.plan(_ctx(env, tmp_path, "seedtts", seedtts, client="sglang"))
    generate = _module_argv(next(s.run.argv for s in steps if s.name == "generate"), seedtts.SGLANG_CLIENT)
    older = {**SEEDTTS, "flags": [f for f in SEEDTTS["flags"] if f["name"] != "--reference-audio-field"]}
    assert argv_problems(generate, older) == ["--reference-audio-field: upstream has no such flag",
                                              "'audio.ref_audio': not a flag"]
    narrower = {**SEEDTTS, "flags": [{**f, "choices": ["audios"]} if f["name"] == "--reference-audio-field" else f
                                     for f in SEEDTTS["flags"]]}
    assert argv_problems(generate, narrower) == ["--reference-audio-field 'audio.ref_audio': upstream's choices "
                                                 "are ['audios']"]
    server = env.serve_argv(next(s.server for s in steps if s.name == "generate"), 8000)
    no_talker = {**SERVE, "dotted_flags": {**SERVE["dotted_flags"], "engine_stages": ["thinker"]}}
    assert [p.split(":")[0] for p in argv_problems(server[2:], no_talker)] == ["--talker.engine.mem_fraction_static"]
    int_timeout = [f for f in VIDEOAMME["flags"] if f["name"] == "--timeout-s"]
    assert int_timeout and int_timeout[0]["type"] == "int"
    assert argv_problems(["--timeout-s", "2.5"], VIDEOAMME) == ["--timeout-s '2.5': upstream types it int"]


def videoamme_warmup_problems(record: dict) -> list[str]:
    """Where the native Video-AMME client's warmup differs from the recorded upstream client's."""
    from omnibench_plugins.videoamme.client import VideoClientConfig
    from omnibench_plugins.videoamme.hooks import DEFAULTS as VIDEO_DEFAULTS

    problems = []
    if VIDEO_DEFAULTS["warmup"] != record["flag_default"]:
        problems.append(f"videoamme.warmup defaults to {VIDEO_DEFAULTS['warmup']!r}, upstream's --warmup to "
                        f"{record['flag_default']!r}")
    for concurrency in (1, 16):
        cfg = VideoClientConfig(data=Path("set"), output_dir=Path("out"), max_concurrency=concurrency)
        want = concurrency if record.get("unset_means") == "max_concurrency" else record["flag_default"]
        if cfg.warmup_requests != want:
            problems.append(f"at concurrency {concurrency} the native client sends {cfg.warmup_requests} warmup "
                            f"requests, upstream's {want}")
    explicit = VideoClientConfig(data=Path("set"), output_dir=Path("out"), max_concurrency=16, warmup=0)
    if explicit.warmup_requests != 0:
        problems.append("warmup=0 does not turn the warmup off")
    return problems


def test_the_native_videoamme_warmup_is_upstreams_of_the_runbooks_era():
    assert videoamme_warmup_problems(VIDEOAMME["warmup"]) == []
    # the era before 8a6fc24 sent none: the native client is not that era's, and the check says so
    assert VIDEOAMME["warmup_before"]["flag_default"] == 0
    assert videoamme_warmup_problems(VIDEOAMME["warmup_before"]) == [
        "videoamme.warmup defaults to None, upstream's --warmup to 0",
        "at concurrency 1 the native client sends 1 warmup requests, upstream's 0",
        "at concurrency 16 the native client sends 16 warmup requests, upstream's 0"]
    doctored = {**VIDEOAMME["warmup"], "unset_means": "nothing"}  # a record that says unset sends none
    assert len(videoamme_warmup_problems(doctored)) == 2


# -- serve's rules in omnibench are the recorded ones ------------------------------------------------
def test_serve_flags_module_is_the_recorded_upstream():
    dotted = SERVE["dotted_flags"]
    assert list(serve_flags.STAGES) == dotted["stages"]
    assert list(serve_flags.TEXT_ONLY_STAGES) == dotted["text_only_stages"]
    assert list(serve_flags.ENGINE_STAGES) == dotted["engine_stages"]
    assert serve_flags.ENGINE_KEYS.keys() == dotted["engine_keys_declared"].keys()
    assert serve_flags.FACTORY_KEYS.keys() == dotted["factory_keys_declared"].keys()
    assert set(serve_flags.STAGE_FIELDS) | set(serve_flags.GROUPS) == set(dotted["stage_fields"])
    recorded = flags(SERVE)
    assert set(serve_flags.TOP_FLAGS) == set(recorded)
    for name, kind in serve_flags.TOP_FLAGS.items():
        assert (kind or "bool") == recorded[name].type, name


# -- serve's eras: the legacy serves, recorded, and the runbook's settings in their spelling ----------
LEGACY = load("sgl-omni-serve-legacy")
RUNBOOK_SERVE = ("--thinker.engine.mem_fraction_static", "0.55", "--talker.engine.mem_fraction_static", "0.15",
                 "--thinker.factory.max_seq_len", "8192")


def _era_contracts():
    """Each legacy era of serve_flags with the record it is held to."""
    return [(serve_flags.LEGACY_0726, LEGACY), (serve_flags.LEGACY_V1_SWITCH, LEGACY["older"])]


def _help_of(contract) -> str:
    """A ``serve --help`` as typer draws it, from a record's flags."""
    return "Usage: sgl-omni serve [OPTIONS]\n" + "\n".join(
        f"│ {', '.join([f['name'], *f.get('aliases', ())])}  {f['type'].upper()} │" for f in contract["flags"])


def test_the_legacy_serve_eras_are_the_recorded_ones():
    for era, contract in _era_contracts():
        assert era.name == contract["era"] and not era.dotted
        assert era.read_at == f"{contract['repository']} {contract['path']} at {contract['commit']}"
        recorded = flags(contract)
        assert set(era.top_flags) == set(recorded), era.name
        for name, kind in era.top_flags.items():
            assert (kind or "bool") == recorded[name].type, (era.name, name)
        assert dict(era.spellings) == contract["spellings"]
        assert all(flag in recorded for flag in era.spellings.values())
    assert set(LEGACY["no_spelling"]).isdisjoint(serve_flags.LEGACY_0726.spellings)
    assert serve_flags.CONFIGPATCH.read_at.endswith(SERVE["commit"]) and serve_flags.CONFIGPATCH.dotted


def test_each_eras_help_names_its_era_and_a_doctored_one_names_none():
    from omnibench_core.run.serve_help import option_strings

    configpatch_help = "\n".join(f"  {f['name']}  {f['type']}" for f in SERVE["flags"])
    assert serve_flags.era_of(option_strings(configpatch_help)) is serve_flags.CONFIGPATCH
    for era, contract in _era_contracts():
        assert serve_flags.era_of(option_strings(_help_of(contract))) is era
    older = LEGACY["older"]
    doctored = {**older, "flags": [f for f in older["flags"] if f["name"] != "--thinker-max-seq-len"]}
    assert serve_flags.era_of(option_strings(_help_of(doctored))) is None


def test_the_runbooks_settings_are_spelled_in_each_era_or_refused_naming_setting_commit_and_era():
    older = serve_flags.LEGACY_V1_SWITCH
    spelled = serve_flags.check_serve_args(RUNBOOK_SERVE, era=older, commit="1" * 40)
    assert spelled == ["--thinker-mem-fraction-static", "0.55", "--talker-mem-fraction-static", "0.15",
                       "--thinker-max-seq-len", "8192"]
    assert argv_problems(spelled, LEGACY["older"]) == []
    assert serve_flags.check_serve_args(RUNBOOK_SERVE) == list(RUNBOOK_SERVE)  # the ConfigPatch era: as written
    with pytest.raises(UnsupportedOption) as caught:
        serve_flags.check_serve_args(RUNBOOK_SERVE, era=serve_flags.LEGACY_0726, commit="3" * 40)
    refused = caught.value
    assert refused.option == "--thinker.factory.max_seq_len" and refused.commit == "3" * 40
    assert "legacy-03b5a6e" in str(refused) and "333333333333" in str(refused)
    assert refused.evidence["era"] == "legacy-03b5a6e" and LEGACY["commit"] in refused.evidence["read at"]
    # a serve flag of the newer era that the older lacks is refused the same way, not passed
    with pytest.raises(UnsupportedOption, match="has no flag --allowed-local-media-path"):
        serve_flags.check_serve_args(("--allowed-local-media-path", "/data"), era=older, commit="1" * 40)
    # a setting no era has is still a plain refusal, whatever the era
    with pytest.raises(SettingsError, match="no stage 'vocoder'"):
        serve_flags.check_serve_args(("--vocoder.gpu", "0"), era=older)


@pytest.mark.parametrize("args, refused", [
    (("--thinker.engine.mem_fraction_static", "0.55"), None),
    (("--code2wav.factory.max_batch_size", "16", "--code2wav.factory.max_batch_wait_ms=100"), None),
    (("--preprocessing.gpu", "0", "--thinker.engine.some_server_arg", "x"), None),  # engine keys are free-form
    (("--vocoder.factory.max_batch_size", "8"), "no stage 'vocoder'"),
    (("--thinker.bogus", "1"), "has no setting 'bogus'"),
    (("--code2wav.engine.mem_fraction_static", "0.1"), "engine.* exists only on engine stages"),
    (("--thinker.factory.max_seq_len", "8192.5"), "expects int"),
    (("--stages.thinker.gpu", "0"), "the stages. prefix is implied"),
    (("--thinker.factory", "1"), "a settings group"),
    (("--text-only", "--talker.engine.mem_fraction_static", "0.1"), "no stage 'talker'"),
    (("--thinker.gpu",), "missing value"),
    (("--timeout-s", "5"), "no flag '--timeout-s'"),
])
def test_unknown_stage_settings_are_refused_before_any_server_starts(tmp_path, args, refused):
    env = _sglang_env(tmp_path)
    spec = ServeSpec("seedtts", model_path="openbmb/MiniCPM-o-4_5", model_name="minicpmo", args=args)
    if refused is None:
        assert env.serve_argv(spec, 8000)[-2:] == ["--port", "8000"]
        return
    with pytest.raises(SettingsError, match=re.escape(refused)) as caught:
        env.serve_argv(spec, 8000)
    assert "MiniCPM-o's pipeline" in caught.value.hint


def test_the_selftest_models_loading_delay_passes_only_for_the_selftest_model(tmp_path):
    """selftest.serve_with_target asks the stand-in's `sgl-omni serve --model-path selftest --delay S`
    (upstream never serves that model): accepted for it, still refused for a real model."""
    env = _sglang_env(tmp_path)
    own = ServeSpec("selftest", model_path="selftest", args=("--delay", "0.05"))
    assert env.serve_argv(own, 8000)[-4:] == ["--delay", "0.05", "--port", "8000"]
    with pytest.raises(SettingsError, match="expects float"):
        env.serve_argv(ServeSpec("selftest", model_path="selftest", args=("--delay", "soon")), 8000)
    with pytest.raises(SettingsError, match="no flag '--delay'"):
        env.serve_argv(ServeSpec("seedtts", model_path="openbmb/MiniCPM-o-4_5", args=("--delay", "0.05")), 8000)


# -- options typed as the client that receives them ---------------------------------------------------
def test_seedtts_timeout_is_refused_with_the_sglang_client_not_dropped(tmp_path):
    env = _sglang_env(tmp_path)
    with pytest.raises(SettingsError, match="does not reach sglang-omni's seed-tts client") as caught:
        seedtts.plan(_ctx(env, tmp_path, "seedtts", seedtts, client="sglang", timeout_s=60.0))
    assert "seedtts.client=native" in caught.value.hint
    assert seedtts.plan(_ctx(env, tmp_path, "seedtts", seedtts, client="native", timeout_s=60.0))  # native takes it
    # at upstream's own fixed 300 s nothing is lost
    assert seedtts.DEFAULTS["timeout_s"] == SEEDTTS["request_timeout_s"]["value"]
    assert seedtts.plan(_ctx(env, tmp_path, "seedtts", seedtts, client="sglang"))


def test_an_arrival_seed_is_refused_with_the_sglang_client_whose_schedule_is_unseeded(tmp_path):
    env = _sglang_env(tmp_path)
    with pytest.raises(SettingsError, match="arrival_seed=3 does not reach") as caught:
        seedtts.plan(_ctx(env, tmp_path, "seedtts", seedtts, client="sglang", request_rate=2.0, arrival_seed=3))
    assert "seedtts.client=native" in caught.value.hint
    steps = {s.name: s for s in seedtts.plan(_ctx(env, tmp_path, "seedtts", seedtts, client="native",
                                                   request_rate=2.0, arrival_seed=3))}
    argv = steps["generate"].run.argv
    assert argv[argv.index("--request-rate") + 1] == "2" and argv[argv.index("--arrival-seed") + 1] == "3"


def test_videoamme_timeout_is_an_int_for_the_sglang_client(tmp_path):
    env = _sglang_env(tmp_path)
    with pytest.raises(SettingsError, match="takes --timeout-s as a whole number") as caught:
        videoamme.plan(_ctx(env, tmp_path, "videoamme", videoamme, client="sglang", timeout_s=2.5))
    assert "videoamme.timeout_s=2" in caught.value.hint
    steps = {s.name: s for s in videoamme.plan(_ctx(env, tmp_path, "videoamme", videoamme, client="native",
                                                    timeout_s=2.5))}
    argv = steps["generate"].run.argv
    assert argv[argv.index("--timeout-s") + 1] == "2.5"  # omnibench's client takes fractions


# -- the stand-in's programs take upstream's flags --------------------------------------------------
DUMP = """
import argparse, json, sys
def dump(p):
    out = {}
    for a in p._actions:
        for name in a.option_strings:
            if name in ("-h", "--help"):
                continue
            t = "bool" if a.nargs == 0 else {int: "int", float: "float"}.get(a.type, "str")
            d = a.default if a.default is None or isinstance(a.default, (int, float, str, bool)) else str(a.default)
            out[name] = {"type": t, "default": d, "choices": list(a.choices) if a.choices else None,
                         "required": a.required}
    return out
"""


def _standin_flags(program: str) -> dict[str, dict]:
    code = DUMP + {
        "seedtts": "from benchmarks.eval.benchmark_omni_seedtts import build_parser\nprint(json.dumps(dump(build_parser())))",
        "videoamme": "from benchmarks.eval import benchmark_omni_videoamme as m\n"
                     "print(json.dumps(dump(m.add_video_eval_args(argparse.ArgumentParser(), repo_help=''))))",
    }[program]
    done = subprocess.run([sys.executable, "-c", code], cwd=STANDIN_FILES, capture_output=True, text=True, timeout=600,
                          env={"PYTHONPATH": str(STANDIN_FILES), "PATH": "/usr/bin:/bin"})
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


@pytest.mark.parametrize("program, contract", [("seedtts", SEEDTTS), ("videoamme", VIDEOAMME)])
def test_standin_clients_take_upstreams_flags_types_and_defaults(program, contract):
    theirs, ours = flags(contract), _standin_flags(program)
    for name, got in ours.items():
        assert name in theirs, f"the stand-in's {name} is not upstream's"
        want = theirs[name]
        assert got["type"] == want.type, name
        default = float("inf") if want.default == "inf" else want.default  # upstream's --request-rate
        if name != "--output-dir" or default is None:  # upstream's path default, ours a Path of it
            assert got["default"] == default or str(got["default"]) == str(default), name
        assert (got["choices"] or None) == (list(want.choices) if want.choices else None), name
        assert not got["required"], name  # upstream requires none of its client flags
    for absent in contract.get("absent_flags", ()):
        assert absent not in ours
    for name in ("--timeout-s",):  # the Video-AMME client's is an int, the seed-tts client has none
        assert (name in ours) == (name in theirs)


def test_the_reference_audio_field_flag_is_one_recognisable_line():
    """Another change (the eras of the stand-in) drops this line in early commits: it stays one line."""
    text = (STANDIN_FILES / "benchmarks" / "eval" / "benchmark_omni_seedtts.py").read_text()
    lines = [line for line in text.splitlines() if "--reference-audio-field" in line and "add_argument" in line]
    assert len(lines) == 1 and lines[0].strip().startswith('p.add_argument("--reference-audio-field", ')


def _standin_serve(args: list[str], tmp_path) -> subprocess.CompletedProcess:
    code = ("import json, sys\nfrom sglang_omni_standin.cli import parse\n"
            "a, engine = parse(sys.argv[1:])\nprint(json.dumps({'model_path': a.model_path, 'engine': engine, "
            "'media': a.allowed_local_media_path}))")
    return subprocess.run([sys.executable, "-c", code, *args], cwd=tmp_path, capture_output=True, text=True,
                          timeout=600, env={"PYTHONPATH": f"{STANDIN_FILES}:{Path.cwd()}", "PATH": "/usr/bin:/bin"})


def test_standin_serve_takes_upstreams_flags_and_refuses_unknown_stage_keys(tmp_path):
    config = tmp_path / "omni.yaml"
    config.write_text("config_cls: MiniCPMOSpeechPipelineConfig\nmodel_path: openbmb/MiniCPM-o-4_5\n")
    ok = _standin_serve(["serve", "--config", str(config), "--allowed-local-media-path", str(tmp_path),
                         "--code2wav.factory.max_batch_size", "16", "--preprocessing.gpu=0",
                         "--thinker.factory.max_seq_len", "256", "--mem-fraction-static", "0.8"], tmp_path)
    assert ok.returncode == 0, ok.stderr
    got = json.loads(ok.stdout)
    assert got == {"model_path": "openbmb/MiniCPM-o-4_5", "engine": ["--thinker.factory.max_seq_len=256"],
                   "media": str(tmp_path)}
    for args, says in ((["--thinker.nonsense", "1"], "has no setting 'nonsense'"),
                       (["--vocoder.gpu", "0"], "no stage 'vocoder'"),
                       (["--thinker.gpu"], "Missing value"),
                       (["--text-only", "--code2wav.factory.max_batch_size", "16"], "no stage 'code2wav'")):
        bad = _standin_serve(["serve", "--model-path", "m", *args], tmp_path)
        assert bad.returncode == 2 and says in bad.stderr, (args, bad.stderr)  # as upstream: a usage error
    assert _standin_serve(["serve"], tmp_path).returncode == 2  # --model-path required unless --config


# -- the JSON keys the native clients write, held to upstream's ----------------------------------------
def _wav(seconds: float = 0.2, rate: int = 24000) -> bytes:
    buffer = io.BytesIO()
    with wave.open(buffer, "wb") as w:
        w.setnchannels(1), w.setsampwidth(2), w.setframerate(rate)
        w.writeframes(b"\x00\x01" * int(seconds * rate))
    return buffer.getvalue()


class _Chat(BaseHTTPRequestHandler):
    """A loopback chat server: every answer is "Answer: A" with a short WAV."""

    def log_message(self, *args):
        pass

    def _json(self, body: dict) -> None:
        data = json.dumps(body).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def do_GET(self):
        self._json({"status": "healthy"})

    def do_POST(self):
        self.rfile.read(int(self.headers.get("Content-Length", 0)))
        if self.path.endswith("/audio/transcriptions"):  # the ASR server of scoring
            self._json({"text": "Read this."})
            return
        audio = base64.b64encode(_wav()).decode()
        self._json({"id": "chatcmpl-1", "object": "chat.completion", "model": "minicpmo", "choices": [
            {"index": 0, "message": {"role": "assistant", "content": "Answer: A",
                                     "audio": {"id": "a", "data": audio, "transcript": "Answer: A"}},
             "finish_reason": "stop"}], "usage": {"prompt_tokens": 10, "completion_tokens": 5, "total_tokens": 15}})


@pytest.fixture(scope="module")
def native_results(tmp_path_factory):
    """What the native clients write, each run once against a loopback chat server."""
    from omnibench_plugins.seedtts.client import ClientConfig, SeedTtsClient, write_outputs
    from omnibench_plugins.seedtts.data import Sample
    from omnibench_plugins.videoamme.client import VideoClientConfig
    from omnibench_plugins.videoamme.client import run as run_video
    from omnibench_plugins.videoamme.data import VideoSample

    tmp = tmp_path_factory.mktemp("native")
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Chat)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    port = server.server_address[1]
    try:
        ref = tmp / "ref.wav"
        ref.write_bytes(_wav())
        samples = [Sample(f"s{i}", "a reference", str(ref), "Read this.") for i in range(2)]
        out = tmp / "seedtts"
        out.mkdir()
        speed = asyncio.run(SeedTtsClient(ClientConfig(meta="meta.lst", output_dir=out, port=port, warmup=0,
                                                       max_concurrency=2)).run(samples))
        write_outputs(out, samples, speed)
        videos = [VideoSample(f"v{i}", str(tmp / "v.mp4"), str(tmp / "q.wav"), "?", ("a", "b", "c", "d"), "A")
                  for i in range(2)]
        video = asyncio.run(run_video(VideoClientConfig(data=tmp, output_dir=tmp / "videoamme", port=port,
                                                        max_concurrency=2), videos))
    finally:
        server.shutdown()
    return json.loads((out / "speed_results.json").read_text()), video


def test_native_seedtts_speed_summary_has_upstreams_core_keys(native_results):
    speed, _ = native_results
    keys = load("output-keys")["speed_summary"]
    assert set(keys["always"]) - {"client_slot_waits"} <= set(speed["summary"])
    assert {"summary", "config", "per_request"} <= set(speed)


def test_native_seedtts_speed_summary_has_every_upstream_key(native_results):
    speed, _ = native_results
    keys = load("output-keys")["speed_summary"]
    want = {*keys["always"], *keys["when_tokens"], *keys["when_audio"]}
    assert want <= set(speed["summary"]), sorted(want - set(speed["summary"]))


def test_native_videoamme_results_have_upstreams_top_level_and_core_keys(native_results):
    _, video = native_results
    keys = load("output-keys")["videoamme_results"]
    assert set(keys["top_level"]) <= set(video)
    assert {"total_samples", "correct", "accuracy", "failed", "mc_fallback"} <= set(video["summary"])


def test_native_videoamme_summary_keys_are_upstreams(native_results):
    _, video = native_results
    assert set(video["summary"]) == set(load("output-keys")["videoamme_results"]["summary"])


def test_native_videoamme_per_sample_keys_are_upstreams(native_results):
    """Every key of upstream's records, in its order; omnibench's engine_time_s and waited_for_slot after."""
    _, video = native_results
    for row in video["per_sample"]:
        assert key_order_problems(list(row), load("output-keys")["videoamme_per_sample"]["keys"],
                                  ("engine_time_s", "waited_for_slot")) == []
    assert "mc_fallback" not in video["per_sample"][0]  # upstream's name is is_mc_fallback


def test_native_videoamme_config_keys_are_upstreams(native_results):
    """run_video_eval's config keys in its order, omnibench's own after them; every setting of the
    native client is one or the other (a new one must be named)."""
    from dataclasses import fields

    from omnibench_plugins.videoamme.client import ONLY_WHEN_ON_CONFIG_KEYS, OWN_CONFIG_KEYS, VideoClientConfig

    _, video = native_results
    record = load("output-keys")["videoamme_config"]
    assert key_order_problems(list(video["config"]), record["config"], OWN_CONFIG_KEYS) == []
    assert video["config"]["base_url"] == f"http://127.0.0.1:{video['config']['port']}"
    assert video["config"]["warmup"] == video["config"]["max_concurrency"] == 2  # resolve_warmup: the count sent
    assert video["config"]["request_rate"] is None and video["config"]["seed"] is None
    assert [f.name for f in fields(VideoClientConfig)
            if f.name not in (*record["config"], *OWN_CONFIG_KEYS, *ONLY_WHEN_ON_CONFIG_KEYS)] == []
    # a doctored record: upstream writing a key the native client does not
    assert key_order_problems(list(video["config"]), [*record["config"], "record_fingerprint"], OWN_CONFIG_KEYS) == [
        "record_fingerprint: upstream writes it, omnibench does not"]


# -- seed-tts files, key for key and column for column -------------------------------------------------
@pytest.fixture(scope="module")
def seedtts_files(tmp_path_factory):
    """The native seed-tts client's folder after generation (a separate warm-up set too; one sample's
    reference unreadable, so one request fails) and the asr-wer scorer's transcription, against a
    loopback server that answers chat and transcription."""
    from omnibench_core.scoring.asr_wer import WerJob, score
    from omnibench_plugins.seedtts import score as voice_scores
    from omnibench_plugins.seedtts.client import ClientConfig, SeedTtsClient, write_outputs
    from omnibench_plugins.seedtts.data import load_meta
    from omnibench_plugins.seedtts.hooks import WER

    tmp = tmp_path_factory.mktemp("seedtts-files")
    (tmp / "ref.wav").write_bytes(_wav())
    (tmp / "meta.lst").write_text("s0|a reference|ref.wav|Read this.\ns1|a reference|ref.wav|Read this too.\n"
                                  "s2|a reference|gone.wav|Never read.\n")
    (tmp / "warm.lst").write_text("w0|a reference|ref.wav|Warm up.\n")
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Chat)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    port = server.server_address[1]
    out = tmp / "seedtts"
    out.mkdir()
    try:
        samples = load_meta(str(tmp / "meta.lst"))
        cfg = ClientConfig(meta=str(tmp / "meta.lst"), output_dir=out, port=port, warmup=1,
                           warmup_meta=str(tmp / "warm.lst"), max_concurrency=2)
        write_outputs(out, samples, asyncio.run(SeedTtsClient(cfg).run(samples)))
        job = WerJob.from_params({k: v for k, v in WER.params.items()})
        score(job, out, endpoint=Endpoint(port), model="asr", concurrency=2)
    finally:
        server.shutdown()
    voice_scores.similarity(out, meta=str(tmp / "meta.lst"))  # the SIM and UTMOS substitutes need no server
    voice_scores.utmos(out)
    return out


def key_order_problems(written: list[str], upstream: list[str], own: tuple[str, ...] = (),
                       only_when_set: tuple[str, ...] = ()) -> list[str]:
    """Why ``written`` is not upstream's keys in upstream's order followed by omnibench's own (each
    named in docs/fidelity.md): a key missing, a key neither upstream's nor named, the order."""
    missing = [k for k in upstream if k not in written and k not in only_when_set]
    unnamed = [k for k in written if k not in upstream and k not in own]
    problems = [f"{k}: upstream writes it, omnibench does not" for k in missing]
    problems += [f"{k}: neither upstream's nor one of omnibench's named keys" for k in unnamed]
    want = [k for k in upstream if k in written] + [k for k in own if k in written]
    if not problems and written != want:
        problems.append(f"the order {written} is not upstream's {want}")
    return problems


def _csv_header(path: Path) -> list[str]:
    return path.read_text(encoding="utf-8").splitlines()[0].split(",")


def test_seedtts_speed_results_top_level_and_config_are_upstreams(seedtts_files):
    from omnibench_plugins.seedtts.files import OWN_CONFIG_KEYS

    record = load("output-keys")["seedtts_speed_results"]
    speed = json.loads((seedtts_files / "speed_results.json").read_text())
    assert key_order_problems(list(speed), record["top_level"]) == []
    assert key_order_problems(list(speed["config"]), record["config"], OWN_CONFIG_KEYS) == []
    assert speed["config"]["base_url"] == f"http://127.0.0.1:{speed['config']['port']}"


def test_seedtts_per_request_rows_are_upstreams_with_its_nulls(seedtts_files):
    from omnibench_plugins.seedtts.files import OWN_PER_REQUEST_KEYS

    record = load("output-keys")["seedtts_per_request"]
    rows = json.loads((seedtts_files / "speed_results.json").read_text())["per_request"]
    for row in rows:
        assert key_order_problems(list(row), record["keys"], OWN_PER_REQUEST_KEYS) == [], row
        for key in (*record["null_when_not_streaming"], *record["null_when_closed_loop"]):
            assert row[key] is None, key  # not streaming, closed loop
    failed = next(r for r in rows if not r["is_success"])
    assert {k: failed[k] for k in record["failed_request"]} == record["failed_request"]


def test_seedtts_results_csv_columns_are_upstreams(seedtts_files):
    record = load("output-keys")["seedtts_results_csv"]
    header = _csv_header(seedtts_files / "results.csv")
    assert key_order_problems(header, record["columns"]) == []
    failed = next(line for line in (seedtts_files / "results.csv").read_text().splitlines() if ",False," in line)
    assert failed.split(",")[2:5] == ["0.0000", "0.0000", "0.0000"]  # a failed request's latency, audio, RTF


def test_seedtts_generated_entries_are_upstreams(seedtts_files):
    from omnibench_plugins.seedtts.files import OWN_GENERATED_KEYS

    record = load("output-keys")["seedtts_generated"]
    for entry in json.loads((seedtts_files / "generated.json").read_text()):
        assert key_order_problems(list(entry), record["keys"], OWN_GENERATED_KEYS, tuple(record["only_when_set"])) == []
        assert ("error" in entry) == (not entry["is_success"])
        if not entry["is_success"]:
            assert entry["wav_path"] == record["wav_path_when_failed"]


def test_seedtts_warmup_results_are_upstreams(seedtts_files):
    from omnibench_plugins.seedtts.files import OWN_RAW_RESULT_KEYS

    record = load("output-keys")["seedtts_warmup_results"]
    warm = json.loads((seedtts_files / "warmup" / "results.json").read_text())
    assert key_order_problems(list(warm), record["top_level"]) == []
    assert warm["completed"] == warm["requested"] == 1
    (result,) = warm["results"]
    assert key_order_problems(list(result), record["result_keys"], OWN_RAW_RESULT_KEYS) == []
    assert result["request_id"] == "w0" and result["inter_chunk_s"] == [] and result["audio_chunk_count"] == 0


def test_seedtts_wer_results_are_upstreams(seedtts_files):
    from omnibench_core.scoring.tts_wer_files import OWN_CONFIG_KEYS

    record = load("output-keys")["seedtts_wer_results"]
    wer = json.loads((seedtts_files / "wer_results.json").read_text())
    assert key_order_problems(list(wer), record["top_level"]) == []
    assert key_order_problems(list(wer["config"]), record["config"], OWN_CONFIG_KEYS) == []
    assert wer["config"]["tts_model"] == wer["config"]["model"] == "minicpmo"  # from the client's config
    for row in wer["per_sample"]:
        assert key_order_problems(list(row), record["per_sample"]) == [], row
    by_id = {r["id"]: r for r in wer["per_sample"]}
    assert by_id["s0"]["is_success"] is True and by_id["s0"]["error"] is None and by_id["s0"]["wer"] == 0.0
    failed = by_id["s2"]
    assert failed["is_success"] is False and failed["error"].startswith("Generation failed: ")
    assert failed["wer"] is None and failed["hits"] is None and failed["whisper_text"] == ""


def test_seedtts_wer_csv_and_asr_speed_are_upstreams(seedtts_files):
    keys = load("output-keys")
    assert key_order_problems(_csv_header(seedtts_files / "wer_results.csv"), keys["seedtts_wer_csv"]["columns"]) == []
    speed = json.loads((seedtts_files / "asr_speed_results.json").read_text())
    assert key_order_problems(list(speed), keys["seedtts_asr_speed"]["keys"]) == []
    assert speed["total_samples"] == 3 and speed["evaluated"] == 2 and speed["skipped"] == 1
    assert speed["asr_latency_sum_s"] > 0 and speed["asr_model"] == "asr" and speed["asr_concurrency"] == 2


def test_seedtts_similarity_results_are_upstreams(seedtts_files):
    """sglang-omni's --similarity-only file: its keys in its order, the substitute's method after
    them; scored rows first with absolute paths, the failed generation skipped with its error."""
    from omnibench_plugins.seedtts.voice_files import OWN_CONFIG_KEYS, OWN_SUMMARY_KEYS

    record = load("output-keys")["seedtts_similarity_results"]
    sim = json.loads((seedtts_files / "similarity_results.json").read_text())
    assert key_order_problems(list(sim), record["top_level"]) == []
    assert key_order_problems(list(sim["summary"]), record["summary"], OWN_SUMMARY_KEYS) == []
    assert key_order_problems(list(sim["config"]), record["config"], OWN_CONFIG_KEYS) == []
    for row in sim["per_sample"]:
        assert key_order_problems(list(row), record["per_sample"]) == [], row
    assert [r["id"] for r in sim["per_sample"]] == ["s0", "s1", "s2"]  # scored, then skipped
    scored, failed = sim["per_sample"][0], sim["per_sample"][2]
    assert scored["is_success"] is True and scored["error"] is None and scored["speaker_similarity"] is not None
    assert scored["ref_audio"] == str((seedtts_files.parent / "ref.wav").resolve())
    assert scored["wav_path"] == str((seedtts_files / "audio" / "s0.wav").resolve())
    generated = {e["sample_id"]: e for e in json.loads((seedtts_files / "generated.json").read_text())}
    assert failed["is_success"] is False and failed["speaker_similarity"] is None
    assert failed["error"] == generated["s2"]["error"] and failed["wav_path"] == generated["s2"]["wav_path"]
    assert (sim["summary"]["total_samples"], sim["summary"]["evaluated"], sim["summary"]["skipped"]) == (3, 2, 1)
    assert sim["config"]["model"] == "minicpmo" and sim["config"]["similarity_checkpoint"] is None


def test_seedtts_utmos_results_are_upstreams(seedtts_files):
    """sglang-omni's --utmos-only file: its keys in its order, rows in generated.json's order, the
    score and the summary to 4 places."""
    from omnibench_plugins.seedtts.voice_files import OWN_CONFIG_KEYS, OWN_SUMMARY_KEYS

    record = load("output-keys")["seedtts_utmos_results"]
    utmos = json.loads((seedtts_files / "utmos_results.json").read_text())
    assert key_order_problems(list(utmos), record["top_level"]) == []
    assert key_order_problems(list(utmos["summary"]), record["summary"], OWN_SUMMARY_KEYS) == []
    assert key_order_problems(list(utmos["config"]), record["config"], OWN_CONFIG_KEYS) == []
    for row in utmos["per_sample"]:
        assert key_order_problems(list(row), record["per_sample"]) == [], row
    by_id = {r["id"]: r for r in utmos["per_sample"]}
    assert [r["id"] for r in utmos["per_sample"]] == ["s0", "s1", "s2"]
    assert by_id["s0"]["is_success"] is True and by_id["s0"]["error"] is None
    assert by_id["s0"]["utmos_score"] == round(by_id["s0"]["utmos_score"], record["rounding"]["utmos_score"])
    generated = {e["sample_id"]: e for e in json.loads((seedtts_files / "generated.json").read_text())}
    assert by_id["s2"]["is_success"] is False and by_id["s2"]["utmos_score"] is None
    assert by_id["s2"]["error"] == generated["s2"]["error"] and by_id["s2"]["wav_path"] == generated["s2"]["wav_path"]
    assert utmos["summary"]["skipped"] == 1 and utmos["config"]["model"] == "minicpmo"


def test_the_voice_files_skip_entries_with_upstreams_reasons(tmp_path):
    """Each reason upstream's scorers give for an entry they do not score, in their order; an entry
    that passes every check has none."""
    from omnibench_plugins.seedtts.voice_files import similarity_skip_reason, utmos_skip_reason

    ref, wav = tmp_path / "ref.wav", tmp_path / "s0.wav"
    ref.write_bytes(_wav())
    wav.write_bytes(_wav())
    ok = {"sample_id": "s0", "wav_path": str(wav), "is_success": True}
    refs = {"s0": str(ref)}
    assert similarity_skip_reason(ok, wav, refs) is None and utmos_skip_reason(ok, wav) is None
    for row, found, meta, says in (
            ({**ok, "is_success": False}, wav, refs, "generation reported is_success=False"),
            ({**ok, "is_success": False, "error": "HTTP 500"}, wav, refs, "HTTP 500"),
            ({**ok, "wav_path": ""}, None, refs, "wav_path missing from generated.json entry"),
            ({**ok, "wav_path": "/gone.wav"}, None, refs, "wav file not on disk: /gone.wav"),
            (ok, wav, {}, "no reference audio in meta for sample_id 's0'"),
            (ok, wav, {"s0": "/gone-ref.wav"}, "reference audio not on disk: /gone-ref.wav")):
        assert similarity_skip_reason(row, found, meta) == says
    assert utmos_skip_reason({**ok, "sample_id": ""}, wav) == "sample_id missing from generated.json entry"
    assert utmos_skip_reason({**ok, "wav_path": "/gone.wav"}, None) == "wav file not on disk: /gone.wav"


def test_the_key_check_fails_on_a_missing_misplaced_or_unnamed_key(seedtts_files):
    from omnibench_plugins.seedtts.files import OWN_PER_REQUEST_KEYS

    keys = load("output-keys")["seedtts_per_request"]["keys"]
    row = list(json.loads((seedtts_files / "speed_results.json").read_text())["per_request"][0])
    assert key_order_problems([k for k in row if k != "audio_ttfp_s"], keys, OWN_PER_REQUEST_KEYS) == [
        "audio_ttfp_s: upstream writes it, omnibench does not"]
    swapped = [row[1], row[0], *row[2:]]
    assert key_order_problems(swapped, keys, OWN_PER_REQUEST_KEYS)[0].startswith("the order ['text', 'id'")
    assert key_order_problems([*row, "mystery"], keys, OWN_PER_REQUEST_KEYS) == [
        "mystery: neither upstream's nor one of omnibench's named keys"]
    # a doctored record: upstream writing one more key than omnibench does
    assert key_order_problems(row, [*keys, "tok_per_s"], OWN_PER_REQUEST_KEYS) == [
        "tok_per_s: upstream writes it, omnibench does not"]


def test_omnibenchs_own_keys_are_named_in_the_fidelity_page():
    from omnibench_core.scoring import tts_wer_files
    from omnibench_plugins.seedtts import files

    page = (Path(__file__).resolve().parents[1] / "docs" / "fidelity.md").read_text()
    from omnibench_plugins.seedtts import voice_files
    from omnibench_plugins.videoamme import client as videoamme_client

    own = {*videoamme_client.OWN_CONFIG_KEYS, *files.OWN_PER_REQUEST_KEYS, *files.OWN_GENERATED_KEYS, *files.OWN_RAW_RESULT_KEYS, *files.OWN_CONFIG_KEYS,
           *tts_wer_files.OWN_CONFIG_KEYS, *voice_files.OWN_SUMMARY_KEYS, *voice_files.OWN_CONFIG_KEYS}
    assert [k for k in sorted(own) if f"`{k}`" not in page] == []


# -- taskset's list format --------------------------------------------------------------------------
def _cpulist(cpus: list[int]) -> str:
    """util-linux's rule as recorded: two adjacent CPUs stay a pair, three or more become a range."""
    out, i, ordered = [], 0, sorted(set(cpus))
    while i < len(ordered):
        j = i
        while j + 1 < len(ordered) and ordered[j + 1] == ordered[j] + 1:
            j += 1
        out += [f"{ordered[i]}-{ordered[j]}"] if j - i >= 2 else [str(c) for c in ordered[i:j + 1]]
        i = j + 1
    return ",".join(out)


def test_the_recorded_taskset_examples_follow_the_recorded_rule():
    record = load("taskset-cpulist")
    for text, cpus in record["examples"].items():
        assert _cpulist(cpus) == text


@pytest.mark.skipif(shutil.which("taskset") is None, reason="needs util-linux's taskset")
def test_the_recorded_rule_is_what_this_hosts_taskset_prints():
    done = subprocess.run(["taskset", "-c", "0", "bash", "-c", "taskset -pc $$"], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    assert done.stdout.split()[-1] == _cpulist([0])


def test_omni_ci_cpuset_is_written_as_taskset_prints_it():
    from omnibench_core.ci import taskset_cpu_list

    for cpus in ([0, 1], [0, 1, 2], [0, 2, 3, 4, 7, 8]):
        assert taskset_cpu_list(cpus) == _cpulist(cpus)
    assert taskset_cpu_list([0, 1]) == "0,1"


CLEANUP_SCRIPT_PATH = ".github/scripts/delete_gpu_process.sh"


def ci_script_problems(scripts: dict[str, dict]) -> list[str]:
    """Where omnibench's CI stages and the stand-in's clean-up disagree with the recorded facts of
    upstream's ``delete_gpu_process.sh`` and ``run_flaky_pytest.sh`` (each at its recorded commit)."""
    import inspect

    from omnibench_core import ci
    from omnibench_core.settings import Settings

    problems = []
    cleanup = scripts[ci.CLEANUP_SCRIPT]
    called = f'[self.bash, CLEANUP_SCRIPT, {", ".join(json.dumps(a) for a in cleanup["args"])}]'
    if called not in inspect.getsource(ci):
        problems.append(f"ci.py does not call {ci.CLEANUP_SCRIPT} with {cleanup['args']}")
    # upstream refuses an unscoped clean-up: omnibench's stage environment always names the GPUs
    env = ci.prepare_env(Settings.of(), Path("/co"), Path("/co/omni"), base={}, cpus=[0])
    scope = env.get(cleanup["scope_env"], "")
    if not re.fullmatch(r"\d+(,\d+)*", scope) or scope in cleanup["unscoped_allowed_by"].values():
        problems.append(f"the stages' {cleanup['scope_env']}={scope!r} is not a GPU list: upstream exits "
                        f"{cleanup['unscoped_exit']}")
    standin = (STANDIN_FILES / CLEANUP_SCRIPT_PATH).read_text()
    for name, pattern in (("OMNI_CI_GPU_MEMORY_CLEAN_THRESHOLD_MB", r'"\$used" -lt (\d+)'),
                          ("OMNI_CI_GPU_CLEAN_WAIT_SECONDS", r'"\$i" -lt (\d+)')):
        found = re.search(pattern, standin)
        if not found or int(found.group(1)) != cleanup["env"][name]:
            problems.append(f"the stand-in's clean-up waits with {name}={found and found.group(1)}, upstream's "
                            f"default is {cleanup['env'][name]}")
    flaky = scripts[".github/scripts/run_flaky_pytest.sh"]
    if flaky["cleanup_between_attempts"] != [ci.CLEANUP_SCRIPT, *cleanup["args"]]:
        problems.append(f"upstream's retries clean up with {flaky['cleanup_between_attempts']}, omnibench's with "
                        f"{[ci.CLEANUP_SCRIPT, *cleanup['args']]}")
    if flaky["sets"] != [ci.ATTEMPT_ENV]:
        problems.append(f"upstream's retries set {flaky['sets']} on each attempt, omnibench's {[ci.ATTEMPT_ENV]}")
    delay = Settings.of().ci.ci_retry_delay_s
    if delay != flaky["env"]["OMNI_CI_RETRY_DELAY_SECONDS"]:
        problems.append(f"ci_retry_delay_s={delay:g}, upstream's OMNI_CI_RETRY_DELAY_SECONDS defaults to "
                        f"{flaky['env']['OMNI_CI_RETRY_DELAY_SECONDS']}")
    return problems


def test_ci_script_facts_are_recorded_at_the_commits_that_hold_them():
    """delete_gpu_process.sh's facts at 0a77a57 (its first version, 339ff0ad, took no --kill-orphans)
    and run_flaky_pytest.sh's at 2e14a39; omnibench's stages and the stand-in follow them."""
    scripts = {s["path"]: s for s in load("ci-scripts")["scripts"]}
    cleanup, flaky = scripts[CLEANUP_SCRIPT_PATH], scripts[".github/scripts/run_flaky_pytest.sh"]
    assert cleanup["commit"] == "0a77a57d7db411afef185bbdc8ce6fec7db67d6e"
    assert cleanup["earlier"]["commit"].startswith("339ff0ad") and "--kill-orphans" in cleanup["args"]
    assert flaky["commit"] == "2e14a391fe29d26ae75c10cf020664ea9636cdc3"
    assert ci_script_problems(scripts) == []


@pytest.mark.parametrize("path, key, value, says", [
    (CLEANUP_SCRIPT_PATH, "args", [], "ci.py does not call"),
    (CLEANUP_SCRIPT_PATH, "scope_env", "NVIDIA_VISIBLE_DEVICES", "is not a GPU list"),
    (CLEANUP_SCRIPT_PATH, "env", {"OMNI_CI_GPU_MEMORY_CLEAN_THRESHOLD_MB": 2048, "OMNI_CI_GPU_CLEAN_WAIT_SECONDS": 120},
     "OMNI_CI_GPU_MEMORY_CLEAN_THRESHOLD_MB=1024"),
    (CLEANUP_SCRIPT_PATH, "env", {"OMNI_CI_GPU_MEMORY_CLEAN_THRESHOLD_MB": 1024, "OMNI_CI_GPU_CLEAN_WAIT_SECONDS": 300},
     "OMNI_CI_GPU_CLEAN_WAIT_SECONDS=120"),
    (".github/scripts/run_flaky_pytest.sh", "cleanup_between_attempts", [CLEANUP_SCRIPT_PATH],
     "upstream's retries clean up with"),
    (".github/scripts/run_flaky_pytest.sh", "env", {"OMNI_CI_MAX_ATTEMPTS": 3, "OMNI_CI_RETRY_DELAY_SECONDS": 5},
     "OMNI_CI_RETRY_DELAY_SECONDS defaults to 5"),
    (".github/scripts/run_flaky_pytest.sh", "sets", ["OMNI_CI_RETRY"], "upstream's retries set ['OMNI_CI_RETRY']"),
])
def test_the_ci_script_check_fails_on_a_doctored_fact(path, key, value, says):
    scripts = {s["path"]: dict(s) for s in load("ci-scripts")["scripts"]}
    if key == "args":  # the flaky wrapper's clean-up follows the doctored arguments: only ci.py's call differs
        scripts[".github/scripts/run_flaky_pytest.sh"]["cleanup_between_attempts"] = [CLEANUP_SCRIPT_PATH]
    scripts[path][key] = value
    problems = ci_script_problems(scripts)
    assert len(problems) == 1 and says in problems[0], problems


def test_ci_script_arguments_are_upstreams():
    from omnibench_core import ci
    from omnibench_core.setup import checkout

    scripts = {s["path"]: s for s in load("ci-scripts")["scripts"]}
    assert scripts[checkout.VENV_SCRIPT]["args"] == ["omni"]
    assert scripts[ci.ROUTER_SCRIPT]["args"] == ["build"]
    assert scripts[ci.CLEANUP_SCRIPT]["args"] == ["--kill-orphans"]
    assert scripts[checkout.HASH_SCRIPT]["sourced"] and scripts[checkout.HASH_SCRIPT]["defines"] == "omni_ci_deps_hash"
    import inspect

    assert inspect.signature(checkout.build_venv).parameters["extra_args"].default == ("omni",)
    source = inspect.getsource(ci)
    assert '[self.bash, ROUTER_SCRIPT, "build"]' in source and '[self.bash, CLEANUP_SCRIPT, "--kill-orphans"]' in source

"""Issue 46 item 1: every input bounded in size and time before any server starts. A file a user
names as an option (regular, within a size bound, UTF-8), a request rate whose schedule outlasts
a run, a warm-up set too small for the warm-up, and `ab --max-rounds` past its cap: each is
refused in one line naming the option, while the run is planned (no run folder, no server)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from omnibench_core import api
from omnibench_core.errors import SettingsError
from omnibench_core.records import user_files
from omnibench_core.registry import manager as plugin_manager
from omnibench_core.settings import Settings
from omnibench_core.toolkit.arrivals import MAX_SCHEDULE_S, planned_offsets, schedule_problem

META_LINE = "utt_{i}|ref text|wavs/ref.wav|target text {i}\n"


def seedtts():
    _, registry = plugin_manager.load()
    return registry.get("workload", "seedtts")


def meta(path: Path, samples: int) -> Path:
    path.write_text("".join(META_LINE.format(i=i) for i in range(samples)), encoding="utf-8")
    return path


def test_a_named_file_must_be_a_regular_utf8_file_within_its_bound(tmp_path):
    """`seedtts.warmup_meta` (and `seedtts.meta`) that is missing, a folder, a FIFO (its reader
    waited for a writer for ever), /dev/zero (3.5 GB read in 30 s), a link to a FIFO, bytes that are
    not UTF-8, or over the bound: refused when the options are read, naming the option and why;
    a good list passes."""
    good = meta(tmp_path / "meta.lst", 3)
    os.mkfifo(tmp_path / "fifo")
    (tmp_path / "link").symlink_to(tmp_path / "fifo")
    (tmp_path / "latin1.lst").write_bytes("caf\xe9|x|y|z\n".encode("latin-1"))
    with open(tmp_path / "huge.lst", "wb") as out:  # sparse: its size alone is over the bound
        out.truncate(user_files.MAX_BYTES + 1)
    bad = {str(tmp_path / "missing.lst"): "no such file", str(tmp_path): "is a folder, not a regular file",
           str(tmp_path / "fifo"): "is a FIFO (a named pipe), not a regular file",
           "/dev/zero": "is a character device, not a regular file",
           str(tmp_path / "link"): "is a FIFO (a named pipe), not a regular file",
           str(tmp_path / "latin1.lst"): "is not UTF-8 text (byte 3",
           str(tmp_path / "huge.lst"): f"over the {user_files.MAX_BYTES:,} a named file may hold"}
    workload = seedtts()
    for option in ("warmup_meta", "meta"):
        assert api.parse_options([f"seedtts.{option}={good}"], [workload])["seedtts"][option] == str(good)
        for path, why in bad.items():
            with pytest.raises(SettingsError) as err:
                api.parse_options([f"seedtts.{option}={path}"], [workload])
            assert err.value.message.startswith(f"option seedtts.{option}={path} is refused: "), err.value.message
            assert why in err.value.message, err.value.message
            assert err.value.evidence["option"] == f"seedtts.{option}"


def test_a_fifo_as_warmup_meta_is_refused_by_invoke_run_before_anything_starts(invoke, tmp_path, port):
    """The hostile case end to end: it hung the run; now one line, exit 1, no run folder."""
    os.mkfifo(tmp_path / "fifo")
    done = invoke("run", "-w", "seedtts", "-o", f"seedtts.warmup_meta={tmp_path / 'fifo'}", "--port", str(port))
    assert done.returncode == 1 and "Traceback" not in done.stderr, done.stderr
    assert done.stderr.startswith(f"error: option seedtts.warmup_meta={tmp_path / 'fifo'} is refused: "), done.stderr
    assert "is a FIFO" in done.stderr
    assert not list((tmp_path / "results").rglob("run*"))


def _run(tmp_path: Path, port: int, *options: str) -> SettingsError:
    settings = Settings.of(results=str(tmp_path / "results"), port=port)
    with pytest.raises(SettingsError) as err:
        api.run(settings, ["seedtts"], options=list(options), progress=lambda line: None)
    assert not list((tmp_path / "results").rglob("run*"))  # refused while planning: the claimed name released
    return err.value


def test_a_request_rate_whose_schedule_outlasts_a_run_is_refused_while_planning(tmp_path, port):
    """`seedtts.request_rate=1e-9` was accepted and the client waited for a request due in about
    1e9 s. The schedule's expected length, requests / rate, is held to MAX_SCHEDULE_S (a day)."""
    err = _run(tmp_path, port, "seedtts.request_rate=1e-9", "seedtts.max_samples=2")
    assert err.message.startswith("seedtts.request_rate=1e-09 is refused: 2 requests at 1e-09 per second are due "
                                  "over 2,000,000,000 s, longer than the 86,400 s"), err.message
    assert "at least 2.31e-05 per second" in err.hint
    # the bound's edge, and the native client refuses what planning refuses (a client run by hand)
    assert schedule_problem(2 / MAX_SCHEDULE_S, 2) == "" and schedule_problem(1.9 / MAX_SCHEDULE_S, 2) != ""
    assert len(planned_offsets(2 / MAX_SCHEDULE_S, 2, seed=0) or []) == 2
    with pytest.raises(ValueError, match="longer than the 86,400 s"):
        planned_offsets(1e-9, 2, seed=0)


def test_a_warmup_set_smaller_than_the_warmup_is_refused_while_planning(tmp_path, port):
    """Both clients stop when the warm-up set holds fewer samples than the warm-up sends: that was
    found only once the server was up; now while planning, naming the option."""
    small = meta(tmp_path / "warm.lst", 2)
    err = _run(tmp_path, port, f"seedtts.warmup_meta={small}", "seedtts.warmup=3")
    assert err.message.startswith(f"seedtts.warmup_meta={small} holds 2 samples; the warm-up sends 3"), err.message
    err = _run(tmp_path, port, f"seedtts.warmup_meta={small}")  # warmup unset: max_concurrency's 16
    assert "holds 2 samples; the warm-up sends 16" in err.message, err.message


def test_a_meta_whose_reference_audio_is_missing_is_refused_naming_the_file_and_line(tmp_path, port):
    """A meta.lst naming reference audio that is not there failed each of its requests, found only
    once the server was up; now while planning, by option, file and line (issue 46). Only the
    lines the run sends count, and a meta whose references are all there passes."""
    from omnibench_plugins.seedtts.hooks import _check_references

    (tmp_path / "wavs").mkdir()
    (tmp_path / "wavs" / "ref.wav").write_bytes(b"RIFF")  # the check is for presence, not content
    (tmp_path / "wavs" / "dir.wav").mkdir()
    lines = ["# a comment line: fewer than four fields, skipped as upstream does",
             "a|ref text|wavs/ref.wav|one", "b|ref text|wavs/ref.wav|two", "c|ref text|wavs/gone.wav|three",
             "d|ref text|wavs/dir.wav|four"]
    listed = tmp_path / "meta.lst"
    listed.write_text("\n".join(lines) + "\n", encoding="utf-8")
    err = _run(tmp_path, port, f"seedtts.meta={listed}")
    assert err.message == (f"seedtts.meta={listed} line 4 names reference audio {tmp_path / 'wavs' / 'gone.wav'}, "
                           "which is not a regular file (and 1 more line(s): 5)"), err.message
    assert err.evidence["line"] == "4" and err.evidence["file"] == str(listed)
    err = _run(tmp_path, port, f"seedtts.warmup_meta={listed}", "seedtts.warmup=4")
    assert err.message.startswith(f"seedtts.warmup_meta={listed} line 4 names reference audio"), err.message
    _check_references("seedtts.meta", listed, 2)  # the first two samples' references are there: no refusal
    with pytest.raises(SettingsError, match="line 4 "):
        _check_references("seedtts.meta", listed, 3)


@pytest.mark.slow  # 2.5 to 8 s in the fast tier (issue 40: that tier within a minute)
def test_a_path_the_kernel_cannot_take_is_one_refusal_by_every_command_that_takes_one(invoke, tmp_path, port):
    """Second hostile round: a path with a part over 255 bytes (or over 4095 in all) made every
    command that looks at it end in an OSError traceback (ENAMETOOLONG from Path.is_dir() or
    exists()): --results, --checkout (run, history, doctor), report --name, --json, standin and
    publish --out, -o seedtts.data_dir. Now `store.names.path_problem` refuses it in one line."""
    from omnibench_core.store.names import PART_BYTES, PATH_BYTES, path_problem

    long_part = str(tmp_path / ("a" * (PART_BYTES + 1)))
    assert "over the 255 a file name may be" in path_problem(long_part)
    assert "over the 4,095 a path may be" in path_problem("/" + "b/" * (PATH_BYTES // 2 + 1))
    assert "NUL" in path_problem("a\0b") and path_problem(str(tmp_path / ("a" * PART_BYTES))) == ""
    cases = [("report", "--results", long_part), ("report", "--name", f"{long_part}/x.json"),
             ("history", "--checkout", long_part), ("history", "--json", long_part),
             ("standin", "--out", long_part),
             ("run", "-w", "seedtts", "-t", "sglang-omni", "--checkout", long_part, "--port", str(port)),
             ("run", "-w", "seedtts", "-o", f"seedtts.data_dir={long_part}", "--port", str(port))]
    for args in cases:
        done = invoke(*args)
        assert done.returncode == 1 and "Traceback" not in done.stderr, (args, done.stderr)
        assert done.stderr.startswith("error: ") and f"is {PART_BYTES + 1} bytes long, over the 255" in done.stderr, (args, done.stderr)
    assert not list((tmp_path / "results").rglob("run*"))

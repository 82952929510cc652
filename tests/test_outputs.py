"""Outputs never replace anything but a regular file (issue 31, item 2): as root, `invoke history
--json /dev/full` (and `--summary`) renamed a temporary file onto the device, which became a
regular file. A target that is a device is written to directly: /dev/full's ENOSPC is the typed
storage error of that flag, and the device stays a device; /dev/null takes the output. The
devices are real ones, made with mknod in a temporary folder (root only)."""

from __future__ import annotations

import os
import stat
import subprocess
import sys
from pathlib import Path

import pytest
from run_helpers import REPO

from omnibench_core.jsonio import write_json, write_text

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="mknod of a character device needs root")


def _device(folder: Path, name: str, minor: int) -> Path:
    """A character device of the memory driver (major 1): minor 3 is null, 7 is full."""
    path = folder / name
    os.mknod(path, stat.S_IFCHR | 0o666, os.makedev(1, minor))
    return path


def _is_device(path: Path, minor: int) -> bool:
    st = os.lstat(path)
    return stat.S_ISCHR(st.st_mode) and os.major(st.st_rdev) == 1 and os.minor(st.st_rdev) == minor


def _history(tmp_path: Path, *flags: str) -> subprocess.CompletedProcess[str]:
    checkout = tmp_path / "checkout"
    if not checkout.exists():
        checkout.mkdir()
        subprocess.run(["git", "-C", str(checkout), "init", "-q"], check=True)
        subprocess.run(["git", "-C", str(checkout), "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-q",
                        "--allow-empty", "-m", "one"], check=True)
    return subprocess.run([sys.executable, "-m", "invoke", "history", "--checkout", str(checkout), *flags], cwd=REPO,
                          env={**os.environ, "INVOKE_OMNIBENCH_RESULTS": str(tmp_path / "results")},
                          capture_output=True, text=True, timeout=300)


@pytest.mark.slow
def test_history_json_and_summary_to_a_full_device_fail_typed_and_leave_it_a_device(tmp_path):
    dev = tmp_path / "dev"
    dev.mkdir()
    full, null = _device(dev, "full", 7), _device(dev, "null", 3)
    for flag, flags in (("--json", ("--json", str(full))), ("--summary", ("--json", str(null), "--summary", str(full)))):
        done = _history(tmp_path, *flags)
        assert done.returncode == 1 and "Traceback" not in done.stderr, done.stderr
        assert done.stderr.startswith(f"error: cannot write the results while writing {flag}") and "ENOSPC" in done.stderr
        assert _is_device(full, 7) and _is_device(null, 3)
    done = _history(tmp_path, "--json", str(null), "--summary", str(null))
    assert done.returncode == 0 and f"history saved: {null}" in done.stdout, done.stderr
    assert _is_device(null, 3) and sorted(p.name for p in dev.iterdir()) == ["full", "null"]  # no temporary left


def test_the_atomic_writers_write_a_device_directly_and_refuse_a_folder(tmp_path):
    null = _device(tmp_path, "null", 3)
    write_json(null, {"a": 1})
    write_text(null, "text")
    assert _is_device(null, 3)
    with pytest.raises(OSError) as caught:
        write_text(_device(tmp_path, "full", 7), "x")
    assert caught.value.errno == 28  # ENOSPC, the device's own answer
    with pytest.raises(IsADirectoryError):
        write_json(tmp_path, {})
    # a regular file is still replaced whole, and a link to a device writes through to it
    (tmp_path / "out.json").write_text("old")
    write_json(tmp_path / "out.json", [1])
    assert (tmp_path / "out.json").read_text() == "[\n  1\n]\n"
    (tmp_path / "link").symlink_to(null)
    write_text(tmp_path / "link", "x")
    assert (tmp_path / "link").is_symlink() and _is_device(null, 3)


def test_a_reports_fixed_temporary_name_never_follows_a_link(tmp_path):
    """The report's temporary file has a fixed name (its folder is held while it is written): a
    link planted under that name is refused, and the file it points to is left as it was."""
    from omnibench_core.campaign.writing import write_atomic

    outside = tmp_path / "outside.txt"
    outside.write_text("keep")
    folder = tmp_path / "campaigns" / "base"
    folder.mkdir(parents=True)
    (folder / ".report.md.partial").symlink_to(outside)
    with pytest.raises(OSError):
        write_atomic(folder / "report.md", "# report\n")
    assert outside.read_text() == "keep" and not (folder / "report.md").exists()

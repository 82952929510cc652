"""Issue 42 item 2: the checkout's state is part of the revision. Its uncommitted edits (``git diff
HEAD``) and the untracked files under the packages a run imports name a folder of their own
(``<commit>-dirty-<digest>``) and are recorded; matrix, bisect, ab and sweep refuse a dirty checkout
unless --allow-dirty. Real git repositories and the user's commands throughout."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from checkout_helpers import commit_all
from gpu_helpers import write_fake_nvidia_smi
from run_helpers import REPO, free_port
from scale_helpers import make_revisions_checkout

from omnibench_core.setup.gitinfo import git_revision
from omnibench_core.setup.tree_state import TreeState, dirty_base, tree_state
from omnibench_core.store import manifest as manifest_file


def _repo(root: Path) -> Path:
    (root / "pkg").mkdir(parents=True)
    (root / "pkg" / "mod.py").write_text("X = 1\n")
    (root / "README").write_text("hi\n")
    (root / ".gitignore").write_text("*.log\n")
    return commit_all(root)


def test_a_clean_tree_has_no_state_and_each_kind_of_change_has_its_own(tmp_path):
    root = _repo(tmp_path / "co")
    assert tree_state(root, ["pkg"]) == TreeState()
    (root / "notes.txt").write_text("untracked outside the packages\n")
    (root / "pkg" / "run.log").write_text("ignored\n")
    assert tree_state(root, ["pkg"]) == TreeState()  # neither is imported as the package's code
    (root / "pkg" / "stray.py").write_text("Y = 2\n")  # an untracked module the import can find
    stray = tree_state(root, ["pkg"])
    assert stray is not None and stray.dirty and stray.files == ("pkg/stray.py",)
    (root / "pkg" / "stray.py").write_text("Y = 3\n")
    assert tree_state(root, ["pkg"]).digest != stray.digest  # its content counts, not its name alone
    (root / "pkg" / "stray.py").unlink()
    (root / "pkg" / "mod.py").write_text("X = 2\n")  # an edit of a tracked file
    edited = tree_state(root, ["pkg"])
    assert edited.files == ("pkg/mod.py",) and edited.folder_suffix() == f"-dirty-{edited.digest[:8]}"
    assert dirty_base("abc1234" + edited.folder_suffix()) == "abc1234"
    assert tree_state(tmp_path / "nowhere", ["pkg"]) is None


def test_an_edit_inside_a_nested_repository_under_a_package_moves_the_digest(tmp_path):
    """git lists an untracked nested repository as one entry (``pkg/vendored/``) and names none of its
    files: its content was read as a file, failed, and hashed as a constant, so an edit inside it (or
    a new commit there) left the digest, and so the revision folder, unchanged. An import that writes
    compiled files inside it must not move it (its own rules need not ignore them)."""
    root = _repo(tmp_path / "co")
    nested = _repo(root / "pkg" / "vendored")  # a repository of its own inside the package
    (nested / ".gitignore").unlink()
    commit_all(nested)
    first = tree_state(root, ["pkg"])
    assert first is not None and first.dirty and first.files == ("pkg/vendored/",)
    (nested / "pkg" / "__pycache__").mkdir()
    (nested / "pkg" / "__pycache__" / "mod.cpython-312.pyc").write_bytes(b"\0compiled")
    assert tree_state(root, ["pkg"]) == first  # an import's compiled files: the same digest
    (nested / "pkg" / "mod.py").write_text("X = 2\n")  # an uncommitted edit inside it
    edited = tree_state(root, ["pkg"])
    assert edited is not None and edited.digest != first.digest
    commit_all(nested)  # the same edit committed there: its commit counts too
    committed = tree_state(root, ["pkg"])
    assert committed is not None and committed.digest not in (first.digest, edited.digest)
    (nested / "pkg" / "new.py").write_text("Z = 1\n")  # an untracked module inside it
    assert tree_state(root, ["pkg"]).digest != committed.digest
    # a nested repository with no commit yet: its files count all the same
    unborn = root / "pkg" / "unborn"
    unborn.mkdir()
    subprocess.run(["git", "init", "-q", str(unborn)], check=True)
    (unborn / "m.py").write_text("A = 1\n")
    before = tree_state(root, ["pkg"])
    (unborn / "m.py").write_text("A = 2\n")
    assert before is not None and tree_state(root, ["pkg"]).digest != before.digest


def test_an_untracked_link_counts_by_its_targets_content_and_a_link_to_a_folder_is_not_walked(tmp_path):
    root = _repo(tmp_path / "co")
    (root / "elsewhere.py").write_text("E = 1\n")
    (root / "pkg" / "extra.py").symlink_to(root / "elsewhere.py")  # an importable module through a link
    linked = tree_state(root, ["pkg"])
    assert linked is not None and linked.files == ("pkg/extra.py",)  # its target lies outside the packages
    (root / "elsewhere.py").write_text("E = 2\n")
    assert tree_state(root, ["pkg"]).digest != linked.digest  # the module it imports changed
    (root / "pkg" / "loop").symlink_to("..")  # back to the tree's root: named, never walked
    looped = tree_state(root, ["pkg"])
    assert looped is not None and "pkg/loop" in looped.files
    (root / "pkg" / "loop").unlink()
    (root / "pkg" / "loop").symlink_to("../pkg")  # another folder: another name, another digest
    assert tree_state(root, ["pkg"]).digest != looped.digest


def test_a_clean_tree_costs_one_git_call_and_a_config_hiding_untracked_files_hides_none(tmp_path):
    """A target is prepared several times a run: a clean tree's state is one `git status`, and the
    diff is read only when it lists something. That status shows untracked files whatever
    status.showUntrackedFiles says, or an untracked module would pass for a clean tree."""
    root = _repo(tmp_path / "co")
    calls = tmp_path / "calls"
    git = tmp_path / "git"
    git.write_text(f"#!/bin/sh\necho \"$*\" >> {calls}\nexec git \"$@\"\n")
    git.chmod(0o755)
    assert tree_state(root, ["pkg"], git=str(git)) == TreeState()
    assert len(calls.read_text().splitlines()) == 1 and " status " in calls.read_text()
    subprocess.run(["git", "-C", str(root), "config", "status.showUntrackedFiles", "no"], check=True)
    (root / "pkg" / "stray.py").write_text("Y = 2\n")
    assert tree_state(root, ["pkg"], git=str(git)).files == ("pkg/stray.py",)
    revision = git_revision(root, str(git))
    assert revision is not None and "pkg/" in revision[1]  # the target's status: not clean, so its state is read


def _two_calls(root: Path) -> tuple[str, str] | None:
    """What git_revision answered before it became one call: `rev-parse HEAD`, then `status --porcelain`."""
    head = subprocess.run(["git", "-C", str(root), "rev-parse", "HEAD"], capture_output=True, text=True, check=False)
    if head.returncode:
        return None
    status = subprocess.run(["git", "-C", str(root), "status", "--porcelain", "--untracked-files=normal"],
                            capture_output=True, text=True, check=True)
    return head.stdout.strip(), status.stdout


def test_one_git_call_gives_the_commit_and_the_status_the_two_calls_gave(tmp_path):
    """git_revision reads `git status --porcelain=v2 --branch` once (issue 40: two calls a revision
    check, some 7,000 checks a suite run) and writes its entries as version 1, dirty.txt's format:
    held here to git's own `rev-parse HEAD` and `status --porcelain`, byte for byte, over names that
    version 1 quotes differently (a space) or escapes (quotes, tabs, newlines, backslashes, non-ASCII),
    a rename, a staged and unstaged edit, a deletion, a conflict, with core.quotePath off, detached,
    clean, and on a branch with no commit yet (None both ways)."""
    root = tmp_path / "co"
    root.mkdir()
    assert git_revision(root) is None and _two_calls(tmp_path) is None  # no work tree
    subprocess.run(["git", "init", "-q", str(root)], check=True)
    (root / "first.txt").write_text("1\n")
    assert git_revision(root) is None and _two_calls(root) is None  # a branch with no commit yet
    names = ["plain.txt", "b c.txt", 'qu"ote.txt', "\u00fc.txt", "sp \u00fc.txt", "t\tab.txt", "a -> b.txt",
             '"lead.txt', "back\\slash.txt", "new\nline.txt", "r 1.txt", "gone.txt", "both.txt"]
    for name in names:
        (root / name).write_text(f"{name}\n")
    commit_all(root)
    assert git_revision(root) == _two_calls(root) and git_revision(root)[1] == ""  # clean
    for name in names[:10]:
        (root / name).write_text("edited\n")
    subprocess.run(["git", "-C", str(root), "mv", "r 1.txt", "r 2.txt"], check=True)
    subprocess.run(["git", "-C", str(root), "rm", "-q", "gone.txt"], check=True)
    (root / "both.txt").write_text("staged\n")
    subprocess.run(["git", "-C", str(root), "add", "both.txt"], check=True)
    (root / "both.txt").write_text("staged, then edited\n")
    for name in ("new file.txt", "un\u00efcode \"q\".txt", "plain-new.txt"):
        (root / name).write_text("untracked\n")
    (root / "folder with space").mkdir()
    (root / "folder with space" / "f").write_text("x\n")
    found = git_revision(root)
    assert found == _two_calls(root), (found, _two_calls(root))
    assert '"b c.txt"' in found[1] and 'R  "r 1.txt" -> "r 2.txt"' in found[1]
    subprocess.run(["git", "-C", str(root), "config", "core.quotePath", "false"], check=True)
    assert git_revision(root) == _two_calls(root)
    commit_all(root)
    # a conflict: the same line changed on two branches, merged
    git = ["git", "-C", str(root), "-c", "user.email=t@t", "-c", "user.name=t"]
    subprocess.run([*git, "checkout", "-q", "-b", "other"], check=True)
    (root / "plain.txt").write_text("other\n")
    (root / "b c.txt").write_text("other\n")
    subprocess.run([*git, "commit", "-qam", "other"], check=True)
    subprocess.run([*git, "checkout", "-q", "-"], check=True)
    (root / "plain.txt").write_text("mine\n")
    (root / "b c.txt").write_text("mine\n")
    subprocess.run([*git, "commit", "-qam", "mine"], check=True)
    subprocess.run([*git, "merge", "-q", "other"], capture_output=True, check=False)
    found = git_revision(root)
    assert found == _two_calls(root) and "UU plain.txt" in found[1], found
    subprocess.run([*git, "merge", "--abort"], check=True)
    subprocess.run([*git, "checkout", "-q", "--detach", "HEAD~1"], check=True)
    assert git_revision(root) == _two_calls(root)


def _invoke(results: Path, *args: str, **env: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "invoke", *args], cwd=REPO, capture_output=True, text=True,
                          env={**os.environ, "INVOKE_OMNIBENCH_RESULTS": str(results), **env}, timeout=600)


@pytest.fixture
def dirty_checkout(tmp_path):
    co = tmp_path / "co"
    (first,) = make_revisions_checkout(co, [0])
    subprocess.run(["sh", str(co / ".github" / "scripts" / "prepare_omni_venv.sh")], check=True, capture_output=True,
                   env={**os.environ, "OMNI_CI_HOME": str(tmp_path / "ci")})
    with (co / "standin.json").open("a") as fh:
        fh.write("\n")
    return co, first


@pytest.mark.parametrize("argv", [
    ("matrix", "-w", "selftest", "--revisions", "HEAD"),
    ("bisect", "-w", "selftest", "--good", "HEAD", "--bad", "HEAD", "--metric", "selftest.latency_mean_s"),
    ("ab", "-w", "selftest", "--aa"),
    ("sweep", "-w", "seedtts", "--concurrency", "1,2"),
])
def test_matrix_bisect_ab_and_sweep_refuse_a_dirty_checkout_before_anything_starts(tmp_path, dirty_checkout, argv):
    co, _ = dirty_checkout
    results = tmp_path / "results"
    done = _invoke(results, *argv, "--target", "sglang-omni", "--checkout", str(co))
    assert done.returncode == 1, done.stdout + done.stderr
    first = done.stderr.splitlines()[0]
    assert first == f"error: the checkout {co} has uncommitted changes; `invoke {argv[0]}` measures committed code: " \
                    "standin.json", done.stderr
    assert "--allow-dirty" in done.stderr and "git stash -u" in done.stderr and "Traceback" not in done.stderr
    assert not results.exists()


@pytest.mark.slow
def test_a_dirty_trees_run_goes_to_its_own_folder_and_records_the_digest_and_files(tmp_path, dirty_checkout):
    co, first = dirty_checkout
    results = tmp_path / "results"
    smi = write_fake_nvidia_smi(tmp_path / "bin", [10])
    done = _invoke(results, "run", "-w", "selftest", "--target", "sglang-omni", "--checkout", str(co),
                   "--port", str(free_port()), "-o", "selftest.serve_with_target=true", "-o", "selftest.children=0",
                   "-o", "selftest.requests=2", "-o", "selftest.delay=0.05", INVOKE_OMNIBENCH_NVIDIA_SMI=str(smi))
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    (folder,) = results.glob(f"{first[:7]}-dirty-*")
    state = tree_state(co, ["benchmarks"])
    assert folder.name == first[:7] + state.folder_suffix()
    details = manifest_file.read(folder / "run0").target_details
    assert details["dirty_digest"] == state.digest and details["dirty_files"] == "standin.json"
    assert json.loads((folder / "run0" / "manifest.json").read_text())["dirty"] is True

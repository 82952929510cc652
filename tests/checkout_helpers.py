"""A minimal git work tree shaped like an sglang-omni checkout (for targets and set-up tests)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path


def make_fake_checkout(root: Path) -> Path:
    """A git work tree shaped like an sglang-omni checkout with an `omni` venv in upstream's layout:
    the venv at `<root>-omni_ci/omni` (its OMNI_CI_HOME) and `<root>/omni` a symlink to it. It
    declares no `sgl-omni` console script (no pyproject.toml), so REV_OK has no package to find."""
    root.mkdir(parents=True)
    venv = root.parent / f"{root.name}-omni_ci" / "omni"
    bin_dir = venv / "bin"
    bin_dir.mkdir(parents=True)
    (root / "omni").symlink_to(venv, target_is_directory=True)
    (bin_dir / "python").symlink_to(sys.executable)
    serve = bin_dir / "sgl-omni"
    # its --help is the ConfigPatch era's (named flags, no --thinker-mem-fraction-static): the target asks it
    serve.write_text("#!/bin/sh\ncase \"$*\" in *--help*) echo 'Usage: sgl-omni serve [OPTIONS]'; "
                     "echo '  --model-path TEXT  --model-name TEXT  --port INTEGER  --mem-fraction-static FLOAT';; "
                     "*) echo fake sgl-omni \"$@\";; esac\n")
    serve.chmod(0o755)
    (root / "README.md").write_text("fake checkout\n")
    return commit_all(root, "README.md")


def commit_all(root: Path, *paths: str) -> Path:
    """``git init`` at ``root`` and one commit of ``paths`` (everything when none is named)."""
    git = ["git", "-C", str(root), "-c", "user.name=t", "-c", "user.email=t@t"]
    subprocess.run(["git", "init", "-q", str(root)], check=True)
    subprocess.run([*git, "add", *(paths or ("-A",))], check=True)
    subprocess.run([*git, "commit", "-qm", "init"], check=True)
    return root

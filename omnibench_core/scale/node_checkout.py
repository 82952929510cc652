"""A node's own copy of the checkout: a bare clone, under the node's folder, of the checkout path
or git URL the driver passes, fetched again when it lacks a revision. Worktrees and venvs are
then made from it on the node (:func:`.revisions.prepare`, with its deps-hash reuse per node)."""

from __future__ import annotations

import hashlib
import subprocess
from pathlib import Path

from ..errors import OmnibenchError
from .revisions import locked

CHECKOUTS = "checkouts"  # under the node's folder: checkouts/<hash of the source>.git


class RevisionMissing(OmnibenchError):
    """The node's checkout lacks a revision the driver asked for, even after a fetch."""


def _git(git: str, *args: str, timeout_s: float = 600) -> subprocess.CompletedProcess[str]:
    try:
        return subprocess.run([git, *args], capture_output=True, text=True, timeout=timeout_s, check=False)
    except FileNotFoundError as exc:
        raise OmnibenchError(f"{git} was not found on this node", hint="install git on every node") from exc
    except subprocess.TimeoutExpired as exc:
        raise OmnibenchError(f"git {args[0]} took longer than {timeout_s:.0f} s on this node",
                             hint="check the node reaches the checkout URL") from exc


def _has(git: str, clone: Path, revision: str) -> bool:
    done = _git(git, "-C", str(clone), "cat-file", "-e", "--end-of-options", f"{revision}^{{commit}}")
    return done.returncode == 0


def node_checkout(source: str, root: Path, revision: str, *, node: str = "", git: str = "git") -> Path:
    """``root/checkouts/<hash>.git``, a bare clone of ``source`` (a path or URL) that has
    ``revision``: cloned the first time, fetched when the revision is new to it; a revision the
    source lacks is a :class:`RevisionMissing` naming the node, the clone and the source."""
    folder = root / CHECKOUTS
    clone = folder / f"{hashlib.sha256(source.encode()).hexdigest()[:16]}.git"
    with locked(folder):
        if not (clone / "HEAD").exists():
            done = _git(git, "clone", "--quiet", "--bare", "--", source, str(clone))
            if done.returncode != 0:
                raise OmnibenchError(f"this node cannot clone the checkout {source}",
                                     evidence={"node": node, "git": (done.stdout + done.stderr).strip()[-2000:]},
                                     hint="pass --checkout-url with a git URL every node can reach")
        fetched = ""
        if not _has(git, clone, revision):
            done = _git(git, "-C", str(clone), "fetch", "--quiet", "--", source, "+refs/heads/*:refs/heads/*",
                        "+refs/tags/*:refs/tags/*")
            fetched = (done.stdout + done.stderr).strip()[-2000:]
        if not _has(git, clone, revision):
            raise RevisionMissing(f"revision {revision} is not in this node's checkout", evidence={
                "node": node, "checkout": str(clone), "fetched from": source, "git fetch said": fetched or "nothing"},
                hint="push the revision to that repository (or pass --checkout-url of one that has it), then "
                     "repeat the command with --resume")
    return clone

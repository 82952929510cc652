"""A venv of one revision made into another revision's own: a real copy in its own
``OMNI_CI_HOME``, relocated, and proven to import that revision's code.

Upstream's ``prepare_omni_venv.sh omni`` builds the venv at ``$OMNI_CI_HOME/omni`` and makes
``<tree>/omni`` a symlink to it; the editable install's ``.pth``/finder, ``direct_url.json`` and
``RECORD`` name the tree, the console scripts' ``#!`` lines and ``pyvenv.cfg`` the venv. Copying
``<treeA>/omni`` as a link would hand revision B revision A's venv (and code); so the copy
dereferences it into B's own home, rewrites A's tree and venv paths to B's in those files (and
their ``RECORD`` hashes), drops the compiled finders that still hold A's paths, links
``<treeB>/omni`` to it, and then proves it: no relocated file names A any more, and B's console
script imports the package from B's tree (REV_OK's probe). Anything unproven is removed and the
caller prepares the venv afresh.
"""

from __future__ import annotations

import base64
import hashlib
import os
import re
import shutil
from collections.abc import Iterable, Mapping
from pathlib import Path

from ..errors import OmnibenchError
from ..run import rev_ok
from ..setup.checkout_layout import SERVE_SCRIPT, system_package

MAX_FILE = 1 << 20  # the files that hold paths are small; a large one is no script or .pth


class NotRelocated(OmnibenchError):
    """A copied venv could not be proven to be the new revision's own (the caller builds afresh)."""


def path_files(venv: Path) -> list[Path]:
    """The venv's small text files that hold absolute paths of its venv or its tree."""
    site = "lib/python*/site-packages"
    found = [*venv.glob("bin/*"), venv / "pyvenv.cfg", *venv.glob(f"{site}/*.pth"), *venv.glob(f"{site}/__editable__*"),
             *venv.glob(f"{site}/*.egg-link"), *venv.glob(f"{site}/*.dist-info/direct_url.json"),
             *venv.glob(f"{site}/*.dist-info/RECORD")]
    return [p for p in found if not p.is_symlink() and p.is_file() and p.stat().st_size <= MAX_FILE]


def _pattern(olds: Iterable[str]) -> re.Pattern[str]:
    """Any of ``olds`` (longest first), as a whole path: not followed by more of a file name."""
    return re.compile("(" + "|".join(re.escape(o) for o in sorted(set(olds), key=len, reverse=True)) + r")(?![\w.-])")


def _text(path: Path) -> str | None:
    data = path.read_bytes()
    if b"\0" in data:
        return None  # a binary (a copied interpreter): no path of ours is rewritten in it
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        return None


def _mapping(moves: Mapping[str, str]) -> dict[str, str]:
    """Each move as a path and as a ``file://`` URL (``direct_url.json``)."""
    out = dict(moves)
    out.update({Path(old).as_uri(): Path(new).as_uri() for old, new in moves.items()})
    return out


def _rehash_records(venv: Path, changed: set[Path]) -> None:
    """``RECORD`` rows of rewritten files get their new sha256 and size, as pip would write them."""
    for record in venv.glob("lib/python*/site-packages/*.dist-info/RECORD"):
        site = record.parent.parent
        rows = []
        for row in record.read_text().splitlines():
            name, _, rest = row.partition(",")
            path = Path(os.path.normpath(site / name))
            if path in changed and rest and path.is_file():
                data = path.read_bytes()
                digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
                row = f"{name},sha256={digest},{len(data)}"
            rows.append(row)
        record.write_text("\n".join(rows) + "\n")


def relocate(venv: Path, moves: Mapping[str, str]) -> list[Path]:
    """Rewrite each old path of ``moves`` to its new one in the venv's path files; returns the
    files changed. Compiled copies of a rewritten module (an editable finder's ``.pyc``) are
    removed: one of equal size and second could be loaded with the old paths still in it."""
    mapping = _mapping(moves)
    pattern = _pattern(mapping)
    changed: set[Path] = set()
    for path in path_files(venv):
        text = _text(path)
        if text is None or not pattern.search(text):
            continue
        path.write_text(pattern.sub(lambda m: mapping[m.group(1)], text))
        changed.add(Path(os.path.normpath(path)))
        if path.suffix == ".py":
            for compiled in path.parent.glob(f"__pycache__/{path.stem}.*.pyc"):
                compiled.unlink()
    _rehash_records(venv, changed)
    return sorted(changed)


def leftovers(venv: Path, olds: Iterable[str]) -> list[str]:
    """The venv's path files that still name one of ``olds`` (as a path or a URL)."""
    olds = list(olds)
    if not olds:
        return []
    pattern = _pattern(_mapping({o: o for o in olds}))
    return [str(p) for p in path_files(venv) if (t := _text(p)) is not None and pattern.search(t)]


def prove(venv: Path, tree: Path, commit: str, olds: Iterable[str], *, git: str = "git") -> None:
    """Raise :class:`NotRelocated` unless no path file of ``venv`` names an old path and its
    ``sgl-omni`` console script imports the checkout's package from ``tree`` at ``commit``
    (where the checkout declares a package: a checkout without one is held to the first test)."""
    left = leftovers(venv, olds)
    if left:
        raise NotRelocated("the copied venv still names the other revision", evidence={"files": ", ".join(left[:5])})
    package = system_package(tree)
    if not package:
        return
    script = venv / "bin" / SERVE_SCRIPT
    launch = rev_ok.script_launch([str(tree / venv.name / "bin" / SERVE_SCRIPT)], dict(os.environ), str(tree))
    if launch is None:
        raise NotRelocated(f"{script} is no python console script, so its code cannot be proven")
    try:
        rev_ok.check_rev_ok([launch], package, str(tree), commit, git=git)
    except OmnibenchError as exc:
        raise NotRelocated(exc.message, evidence=dict(exc.evidence)) from exc


def remove(path: Path) -> None:
    """Remove ``path``: a link itself (never what it points to), a file, or a folder."""
    if path.is_symlink() or path.is_file():
        path.unlink()
    elif path.exists():
        shutil.rmtree(path)


def link(tree: Path, name: str, venv: Path) -> None:
    """``<tree>/<name>`` a symlink to ``venv`` (whatever was there removed), as upstream's script makes it."""
    remove(tree / name)
    (tree / name).symlink_to(venv, target_is_directory=True)


def copy_venv(source_tree: Path, source_home: Path, tree: Path, home: Path, name: str, commit: str, *,
              git: str = "git") -> Path:
    """Make ``home/<name>`` a relocated real copy of ``source_tree``'s venv (a link is followed:
    never copied), link ``tree/<name>`` to it and prove it; returns it. On NotRelocated the
    copy and the link are removed before it is raised."""
    source_venv = Path(os.path.realpath(source_tree / name))
    if home.exists():
        shutil.rmtree(home)
    venv = home / name
    home.mkdir(parents=True)
    try:
        # symlinks=True for links inside the venv (bin/python -> the base interpreter), which name no tree
        shutil.copytree(source_venv, venv, symlinks=True)
        stamp = source_home / ".deps-hash"
        if stamp.is_file():
            shutil.copy2(stamp, home / ".deps-hash")
        moves = {str(source_venv): str(venv), str(source_tree): str(tree), str(source_home): str(home)}
        if os.path.realpath(source_home) != str(source_home):
            moves[os.path.realpath(source_home)] = str(home)
        relocate(venv, moves)
        link(tree, name, venv)
        prove(venv, tree, commit, moves, git=git)
    except (NotRelocated, OSError) as exc:
        if (tree / name).is_symlink():
            (tree / name).unlink()
        shutil.rmtree(home, ignore_errors=True)
        if isinstance(exc, NotRelocated):
            raise
        raise NotRelocated(f"copying the venv failed: {type(exc).__name__}: {exc}") from exc
    return venv

"""The architecture's import rules, checked on the source: data flows one way, and plugins use
only the public surface of the core."""

from __future__ import annotations

import ast
import functools
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent


@functools.cache
def _tree(path: Path) -> ast.Module:
    """A file's syntax tree, parsed once for all the tests here (each walked the whole core: 2 s a
    test, issue 40's fast tier); nothing here changes a file it has read."""
    return ast.parse(path.read_text(), filename=str(path))


def _imports(path: Path) -> list[tuple[str, tuple[str, ...]]]:
    """(module, imported names) of every import in a file, relative imports made absolute."""
    tree = _tree(path)
    package = ".".join(path.relative_to(REPO).with_suffix("").parts[:-1]).replace("plugins", "omnibench_plugins", 1)
    out = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            out += [(alias.name, ()) for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parts = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join([*parts, base] if base else parts)
            out.append((base, tuple(alias.name for alias in node.names)))
    return out


@pytest.mark.slow
def test_no_core_module_imports_a_plugin():
    # standin/files/ are the files of another repository (the stand-in checkout, whose programs
    # run omnibench's clients as sglang-omni's would): package data, not modules of the library.
    standin_files = REPO / "omnibench_core" / "standin" / "files"
    offenders = [f"{p.relative_to(REPO)}: {mod}" for p in (REPO / "omnibench_core").rglob("*.py")
                 if standin_files not in p.parents
                 for mod, _ in _imports(p) if mod.startswith("omnibench_plugins")]
    assert offenders == []


def test_plugins_import_the_core_only_through_the_plugin_api():
    """omnibench_core.plugin is the stable surface: the built-in plugins use nothing else of the
    core, so the core's modules can move without breaking a plugin written against it."""
    offenders = [f"{path.relative_to(REPO)}: imports {mod}" for path in (REPO / "plugins").rglob("*.py")
                 for mod, _ in _imports(path)
                 if mod.startswith("omnibench_core") and mod != "omnibench_core.plugin"]
    assert offenders == []


def test_the_plugin_api_exports_what_it_names_and_the_docs_example_uses_it():
    from omnibench_core import plugin

    missing = [name for name in plugin.__all__ if not hasattr(plugin, name)]
    assert missing == [] and len(set(plugin.__all__)) == len(plugin.__all__)
    # every name a built-in plugin takes from the API is there (lazy imports inside functions too)
    unknown = [f"{path.relative_to(REPO)}: {n}" for path in (REPO / "plugins").rglob("*.py")
               for mod, names in _imports(path) if mod == "omnibench_core.plugin"
               for n in names if n not in plugin.__all__]
    assert unknown == []
    example = (REPO / "docs" / "plugins.md").read_text()
    assert "from omnibench_core.plugin import" in example and "from omnibench_core.records" not in example


def test_plugins_use_no_private_name_of_the_core_and_nothing_of_the_local_server():
    offenders = []
    for path in (REPO / "plugins").rglob("*.py"):
        for mod, names in _imports(path):
            if mod.startswith("omnibench_core.local"):
                offenders.append(f"{path.relative_to(REPO)}: imports {mod}")
            if mod.startswith("omnibench_core"):
                offenders += [f"{path.relative_to(REPO)}: {mod}.{n}" for n in names if n.startswith("_")]
    assert offenders == []


def _core_modules(root: Path = REPO / "omnibench_core") -> list[tuple[Path, str]]:
    """(path, dotted name) of every module of the package at ``root`` (a package is named by its
    ``__init__.py``), the stand-in checkout's files left out."""
    standin_files = REPO / "omnibench_core" / "standin" / "files"
    out = []
    for path in sorted(root.rglob("*.py")):
        if standin_files in path.parents:
            continue
        parts = path.relative_to(root.parent).with_suffix("").parts
        out.append((path, ".".join(parts[:-1] if path.name == "__init__.py" else parts)))
    return out


def test_every_core_module_is_in_one_layer():
    from omnibench_core.layers import LAYERS, layer_of

    homeless = [module for _, module in _core_modules() if layer_of(module) is None]
    assert homeless == []
    named = [m for layer in LAYERS for m in layer.modules]
    assert len(named) == len(set(named))
    # each named module or package exists (a renamed one must be renamed here too)
    core = REPO / "omnibench_core"
    missing = [m for m in named if not ((core / f"{m.replace('.', '/')}.py").is_file() or (core / m).is_dir())]
    assert missing == []


def test_no_layer_imports_a_layer_above_it():
    """tasks -> studies -> front door -> plugins -> toolkit -> host -> run -> process -> shared:
    each module imports its own layer and those below, never one above (omnibench_core/layers.py)."""
    from omnibench_core.layers import layer_of, rank

    offenders = []
    for path, module in _core_modules():
        mine = layer_of(module)
        assert mine is not None
        for imported, names in _imports(path):
            targets = [f"{imported}.{n}" for n in names] if imported == "omnibench_core" else [imported]
            for target in targets:
                theirs = layer_of(target)
                if theirs is not None and rank(theirs) < rank(mine):
                    offenders.append(f"{module} ({mine.name}) imports {target} ({theirs.name})")
    assert offenders == []


def test_the_strict_type_check_follows_the_layers():
    """pyproject.toml's strict mypy override lists exactly the modules of the layers marked strict."""
    import tomllib

    from omnibench_core.layers import strict_modules

    config = tomllib.loads((REPO / "pyproject.toml").read_text())
    strict = [o for o in config["tool"]["mypy"]["overrides"] if o.get("disallow_untyped_defs")]
    assert len(strict) == 1
    listed = sorted(m for m in strict[0]["module"] if not m.endswith(".*"))
    assert listed == strict_modules()
    core = REPO / "omnibench_core"
    packages = [m for m in listed if m != "omnibench_core" and (core / m.split(".", 1)[1]).is_dir()]
    assert sorted(m[:-2] for m in strict[0]["module"] if m.endswith(".*")) == packages


def test_the_architecture_page_shows_each_layer_with_its_modules():
    from omnibench_core.layers import LAYERS

    page = (REPO / "docs" / "architecture.md").read_text()
    table = page[page.index("<!-- layers -->"):page.index("<!-- /layers -->")]
    rows = [line for line in table.splitlines() if line.startswith("| ") and not line.startswith(("| layer", "| ---"))]
    assert [r.split("|")[1].strip() for r in rows] == [layer.name for layer in LAYERS]
    for row, layer in zip(rows, LAYERS, strict=True):
        assert [m.strip(" `") for m in row.split("|")[2].split(",")] == list(layer.modules)


@functools.cache
def _module_graph(root: Path = REPO / "omnibench_core") -> dict[str, set[str]]:
    """Module -> the core modules it imports (every import, a late one inside a function too: a
    circle closed by a late import is a circle all the same). Made once a root (the tests only
    read it)."""
    modules = {module: path for path, module in _core_modules(root)}
    graph: dict[str, set[str]] = {}
    for module, path in modules.items():
        package = module if path.name == "__init__.py" else module.rpartition(".")[0]
        tree = _tree(path)
        found: set[str] = set()
        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                names = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level:
                    parts = package.split(".")[: len(package.split(".")) - node.level + 1]
                    base = ".".join([*parts, base] if base else parts)
                # `from . import store` imports the module store; `from .store import x` the module
                names = [f"{base}.{a.name}" if f"{base}.{a.name}" in modules else base for a in node.names]
            else:
                continue
            for name in names:
                while name and name not in modules:
                    name = name.rpartition(".")[0]
                if name and name != module:
                    found.add(name)
        graph[module] = found
    return graph


def _circles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan's algorithm, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    out: list[list[str]] = []
    for root in sorted(graph):
        if root in index:
            continue
        work = [(root, iter(sorted(graph[root])))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on_stack.add(root)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = len(index)
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(graph.get(child, ())))))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                component = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == node:
                        break
                if len(component) > 1:
                    out.append(sorted(component))
    return out


def _with_faces(graph: dict[str, set[str]]) -> dict[str, set[str]]:
    """The graph with the edges Python adds: importing ``a.b.c`` runs ``a/__init__.py`` and
    ``a/b/__init__.py`` first, so a module that imports ``a.b.c`` imports those faces too (all but
    the packages it sits in itself, which ran before it did)."""
    out = {module: set(targets) for module, targets in graph.items()}
    for module, targets in graph.items():
        mine = module.split(".")
        for target in targets:
            parts = target.split(".")
            for n in range(1, len(parts)):
                face = ".".join(parts[:n])
                if face in graph and parts[:n] != mine[:n]:
                    out[module].add(face)
    return out


def test_the_import_graph_of_the_core_has_no_circle():
    """No module of omnibench_core imports, through any chain (late imports included, and the
    package faces Python runs first), a module that imports it back: each circle is named with its
    members and the edges inside it."""
    graph = _with_faces(_module_graph())
    named = [" <-> ".join(c) + ": " + "; ".join(f"{m} -> {', '.join(sorted(graph[m] & set(c)))}" for m in c)
             for c in _circles(graph)]
    assert named == []


def test_the_circle_finder_finds_a_circle():
    """The finder itself: a planted circle (and a late-import one) is found, a chain is not."""
    assert _circles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
    assert _circles({"a": {"b"}, "b": {"c"}, "c": set()}) == []
    graph = _module_graph()
    assert "omnibench_core.history.store" in graph["omnibench_core.history.inbox"]  # `from . import store as st`
    assert "omnibench_core.history.rebuild" in graph["omnibench_core.history.inbox"]  # `from .rebuild import ensure`


def test_a_circle_through_a_package_face_is_found(tmp_path):
    """Issue 41: a planted circle that closes only through a package's ``__init__.py`` (what a face
    re-exporting its package's logic makes) fails the graph test; module edges alone miss it."""
    files = {
        "core/__init__.py": "",
        "core/ab/__init__.py": "from .execute import run\n",  # a face re-exporting logic
        "core/ab/execute.py": "from ..history.summary import line\n",
        "core/ab/record.py": "",
        "core/history/__init__.py": "",
        "core/history/summary.py": "from ..ab.record import Record\n",  # ab/__init__ runs first
    }
    for name, text in files.items():
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text(text)
    graph = _module_graph(tmp_path / "core")
    assert _circles(graph) == []  # the module edges alone: ab.execute -> history.summary -> ab.record
    assert _circles(_with_faces(graph)) == [["core.ab", "core.ab.execute", "core.history.summary"]]


def _face_statements(path: Path) -> list[str]:
    """What an ``__init__.py`` holds besides its docstring, imports and ``__all__``."""
    tree = ast.parse(path.read_text(), filename=str(path))
    out = []
    for i, node in enumerate(tree.body):
        if i == 0 and isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant):
            continue
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            continue
        targets = node.targets if isinstance(node, ast.Assign) else [node.target] if isinstance(node, ast.AnnAssign) else []
        if targets and all(isinstance(t, ast.Name) and t.id == "__all__" for t in targets):
            continue
        out.append(f"{path}:{node.lineno}: {type(node).__name__}")
    return out


def test_every_package_face_is_a_docstring_and_imports(tmp_path):
    """Issue 41: an ``__init__.py`` is a docstring and re-exports at most; logic lives in named
    modules (importing ``a.b.c`` runs ``a/__init__.py``, so logic there is paid by every module of
    the package and closes circles)."""
    faces = [p for root in ("omnibench_core", "plugins") for p in sorted((REPO / root).rglob("__init__.py"))
             if REPO / "omnibench_core" / "standin" / "files" not in p.parents]
    assert len(faces) > 20
    assert [line for face in faces for line in _face_statements(face)] == []
    planted = tmp_path / "__init__.py"  # the check itself: a face with logic is named, line by line
    planted.write_text('"""Doc."""\nfrom .a import b\n__all__ = ["b"]\n__version__ = "1"\n\ndef f():\n    pass\n')
    assert _face_statements(planted) == [f"{planted}:4: Assign", f"{planted}:6: FunctionDef"]


def _room(module: str) -> str:
    """A module's top-level module or package under omnibench_core (``omnibench_core`` itself: ``__init__``)."""
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else "__init__"


def _mutual_rooms(graph: dict[str, set[str]]) -> dict[tuple[str, str], list[str]]:
    """Pairs of rooms that import each other, each with the module edges that make it."""
    edges: dict[tuple[str, str], list[str]] = {}
    for module, targets in graph.items():
        for target in targets:
            a, b = _room(module), _room(target)
            if a != b:
                edges.setdefault((a, b), []).append(f"{module} -> {target}")
    return {(a, b): sorted(edges[(a, b)] + edges[(b, a)]) for a, b in edges if a < b and (b, a) in edges}


def test_no_two_packages_import_each_other_but_the_pairs_the_architecture_page_justifies():
    """Issue 41: each top-level module or package is one room; two rooms importing each other are
    one knot in disguise. The few pairs allowed are named, with why, in docs/architecture.md."""
    page = (REPO / "docs" / "architecture.md").read_text()
    table = page[page.index("<!-- mutual -->"):page.index("<!-- /mutual -->")]
    named = {tuple(sorted(r.strip(" `") for r in line.split("|")[1].split("<->")))
             for line in table.splitlines() if line.startswith("| ") and not line.startswith(("| rooms", "| ---"))}
    assert len(named) <= 3
    found = _mutual_rooms(_module_graph())
    assert {pair: found[pair] for pair in found if pair not in named} == {}
    assert named <= set(found), "a pair the page names no longer imports each other: take it off the page"
    # the check itself: a planted pair is found with its edges
    planted = {"omnibench_core.a.x": {"omnibench_core.b.y"}, "omnibench_core.b.y": set(),
               "omnibench_core.b.z": {"omnibench_core.a"}, "omnibench_core.a": set()}
    assert _mutual_rooms(planted) == {("a", "b"): ["omnibench_core.a.x -> omnibench_core.b.y",
                                                   "omnibench_core.b.z -> omnibench_core.a"]}


def test_no_module_outside_the_history_imports_it():
    """Issue 41: the history reads campaigns and is told of new ones through the plugin hooks it
    implements as a built-in plugin (``omnibench_campaign_done`` and the others), so no measuring
    layer (campaign, A/B, sweep, scale) imports it, and a library caller gets it indexed too."""
    graph = _module_graph()
    offenders = [f"{m} -> {t}" for m, targets in graph.items() if not m.startswith("omnibench_core.history")
                 for t in targets if t.startswith("omnibench_core.history")]
    assert offenders == []


_IMPORT_EACH = r"""
import os, sys
# A first child imports every module and names the outside ones it pulled in (numpy, scipy, jiwer,
# the standard library's...); the parent imports those once, so that each later child pays for the
# core's own modules alone, which are the point (the suite spent 36-83 s re-importing scipy et al.).
read, write = os.pipe()
if os.fork() == 0:
    os.close(read)
    for module in sys.argv[1:]:
        try:
            __import__(module)
        except BaseException:
            pass
    outside = [m for m in list(sys.modules) if not m.startswith(("omnibench_core", "plugins"))]
    os.write(write, "\n".join(outside).encode())
    os._exit(0)
os.close(write)
with os.fdopen(read) as pipe:
    outside = pipe.read().split()
os.wait()
for name in outside:
    try:
        __import__(name)
    except BaseException:
        pass
for name in [m for m in sys.modules if m.startswith(("omnibench_core", "plugins"))]:
    del sys.modules[name]  # an outside module that imported the core must not spoil the first import
failed = []
for module in sys.argv[1:]:
    pid = os.fork()
    if pid == 0:  # a child with no module of omnibench imported yet: the import order a user's command has
        try:
            __import__(module)
        except BaseException as exc:
            print(f"{module}: {type(exc).__name__}: {exc}", flush=True)
            os._exit(1)
        os._exit(0)
    _, status = os.waitpid(pid, 0)
    if status:
        failed.append(module)
sys.exit(1 if failed else 0)
"""


@pytest.mark.slow
def test_every_core_module_imports_first_in_a_fresh_process():
    """Each module imported before any other of the core (as `python -m omnibench_core.ab.worker`
    or a matrix's worker is): a circle through a package's ``__init__`` fails here with
    "partially initialized module", which the module graph above does not see."""
    import subprocess
    import sys

    # seedtts_count runs inside a sglang-omni checkout's venv, importing that checkout's `benchmarks`
    modules = [m for _, m in _core_modules() if not m.endswith(("__main__", "setup.seedtts_count"))]
    done = subprocess.run([sys.executable, "-c", _IMPORT_EACH, *modules], cwd=REPO, capture_output=True, text=True,
                          timeout=900)
    assert done.returncode == 0, done.stdout[-4000:] + done.stderr[-2000:]


def test_the_core_keeps_about_a_dozen_modules_at_its_top_level():
    """Issue 32: a module that belongs to a layer's folder goes there; the top level keeps the
    front door (api), the public plugin API and the shared records every layer uses."""
    top = sorted(p.name for p in (REPO / "omnibench_core").glob("*.py"))
    assert len(top) <= 12, top


def test_the_command_line_is_thin():
    """Issue 41: tasks.py is a few lines a task over the library, its flags declared once in
    omnibench_core/cli/declared.py (every task is made from them by cli.command), never restated."""
    text = (REPO / "tasks.py").read_text()
    assert len(text.splitlines()) <= 350
    tree = ast.parse(text)
    tasks = [n for n in tree.body if isinstance(n, ast.FunctionDef)
             and [getattr(d, "id", "") for d in n.decorator_list] not in ([], ["contextmanager"])]
    assert len(tasks) >= 20
    for node in tasks:
        (decorator,) = node.decorator_list
        assert isinstance(decorator, ast.Call) and getattr(decorator.func, "id", "") == "command", node.name
        assert [a.arg for a in node.args.args] == ["c", "given"], f"{node.name} restates its flags"

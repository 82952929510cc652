"""The architecture's import rules, checked on the source: data flows one way, and plugins use
only the public surface of the core."""

from __future__ import annotations

import ast
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent


def _imports(path: Path) -> list[tuple[str, tuple[str, ...]]]:
    """(module, imported names) of every import in a file, relative imports made absolute."""
    tree = ast.parse(path.read_text(), filename=str(path))
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


def test_the_run_layer_does_not_reach_up():
    """tasks -> api -> records -> runner: the runner and its helpers never import the front door."""
    run_layer = ["runner", "step_exec", "planning", "collection", "gates", "processes", "store/manifest", "store/metrics", "layout",
                 "ownership", "records", "hookspecs"]
    offenders = [f"{name}: {mod}" for name in run_layer for mod, _ in _imports(REPO / "omnibench_core" / f"{name}.py")
                 if mod in ("omnibench_core.api", "omnibench_core.plugin_manager", "tasks")]
    assert offenders == []

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


def _core_modules() -> list[tuple[Path, str]]:
    standin_files = REPO / "omnibench_core" / "standin" / "files"
    out = []
    for path in sorted((REPO / "omnibench_core").rglob("*.py")):
        if standin_files in path.parents:
            continue
        parts = path.relative_to(REPO).with_suffix("").parts
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
    missing = [m for m in named if not ((core / f"{m}.py").is_file() or (core / m).is_dir())]
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

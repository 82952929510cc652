"""The layers of ``omnibench_core``, top to bottom: the one list that the import-rule test
(``tests/test_layers.py``), the strict type check (``[tool.mypy]`` in ``pyproject.toml``, held to
this list by a test) and the architecture page (``docs/architecture.md``) follow.

A module may import its own layer and the layers below it, never one above: data flows one way,
tasks -> cli -> studies -> front door -> plugins -> ... -> shared records. Each entry is a top-level
module or a whole package: a package never straddles two layers (``tests/test_layers.py``).
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Layer:
    """One layer: the top-level modules and packages of ``omnibench_core`` it holds, what it is
    for, and whether mypy checks it strictly."""

    name: str
    modules: tuple[str, ...]
    holds: str
    strict: bool = False


LAYERS: tuple[Layer, ...] = (
    Layer("cli", ("cli",), "what tasks.py is built from: every flag's typed check, the shared flags declared once, "
          "settings from Invoke's configuration", strict=True),
    Layer("studies", ("campaign", "ab", "scale", "sweep", "history", "ci", "quality"),
          "many runs and what they say: campaigns, A/B experiments, matrices and bisect, load sweeps, history, "
          "CI stages, outputs matched by sample"),
    Layer("front door", ("api", "registry"),
          "what tasks.py calls: one run, plugins loaded once and their hooks called", strict=True),
    Layer("plugins", ("plugin", "builtin"),
          "the public plugin API and the built-in plugins (targets, scorers, selftest)", strict=True),
    Layer("toolkit", ("toolkit", "scoring", "local"),
          "what workload plugins use: WAV, clients, data sets, scoring pieces, the embedded local server"),
    Layer("host", ("setup", "standin"),
          "the GPU host and the checkout: set-up, doctor, the stand-in checkout, git facts"),
    Layer("run", ("run", "telemetry"),
          "one run: plan, steps, gates, collection, manifest, results layout, ownership; GPU and host telemetry",
          strict=True),
    Layer("process", ("process",),
          "programs: start under a watchdog, stop a whole tree, strays, ports, nvidia-smi", strict=True),
    Layer("stats", ("stats",),
          "statistics: percentiles, estimators, the verdict rule; nothing of the studies that call it", strict=True),
    Layer("shared", ("records", "hooks", "settings", "identity", "defaults", "errors", "statuses", "jsonio",
                     "heartbeat", "tables", "units", "layers", "store", "__init__"),
          "typed records and the hook contract, settings, which runs are the same measurement, the measurement "
          "defaults, errors, JSON files, progress lines, terminal tables",
          strict=True),
)


def layer_of(module: str) -> Layer | None:
    """The layer holding a dotted module name (``omnibench_core.run.runner`` -> run): the layer that
    names its top-level module or package."""
    parts = module.split(".")
    if parts[0] != "omnibench_core":
        return None
    top = parts[1] if len(parts) > 1 else "__init__"
    return next((layer for layer in LAYERS if top in layer.modules), None)


def rank(layer: Layer) -> int:
    """0 for the top layer; a module may import layers of its own rank or higher numbers."""
    return LAYERS.index(layer)


def strict_modules() -> list[str]:
    """The mypy module patterns checked strictly, as ``pyproject.toml`` must list them."""
    out = []
    for layer in LAYERS:
        if layer.strict:
            out += [f"omnibench_core.{m}" if m != "__init__" else "omnibench_core" for m in layer.modules]
    return sorted(out)

"""The plugin hooks' contract (:mod:`.specs`), shared by every layer: what a plugin implements.
The loader that calls them is :mod:`omnibench_core.registry`."""

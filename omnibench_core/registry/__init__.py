"""The plugin registry: :mod:`.manager` loads the entry points once per process, checks what the
plugins register and calls their hooks through pluggy. The hooks' contract is :mod:`omnibench_core.hooks`."""

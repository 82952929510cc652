"""omnibench's built-in workload plugins (installed as the ``omnibench_plugins`` package).

Each module here is registered through the ``omnibench`` entry-point group in pyproject.toml,
the same way a third-party plugin is.
"""

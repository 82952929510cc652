"""omnibench: a benchmark harness for omni-model serving.

The library does the work; ``tasks.py`` (Invoke) and ``noxfile.py`` are thin surfaces over it.

Its version is the installed distribution's (``pyproject.toml``; ``importlib.metadata.version("omnibench")``).
"""

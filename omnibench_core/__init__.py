"""omnibench: a benchmark harness for omni-model serving.

The library does the work; ``tasks.py`` (Invoke) and ``noxfile.py`` are thin surfaces over it.
"""

__version__ = "0.1.0"

"""GPU telemetry while each server of a run is up: NVML samples to CSV, summaries per server and
per step window, energy per request, and the warnings that say two runs are not comparable.

``nvml`` reads one sample through NVIDIA's ``nvidia-ml-py`` (the ``pynvml`` module; an optional
extra), ``sampler`` samples in a thread, ``summary`` turns samples into figures, ``run_summary``
makes a run's telemetry summary and its warnings (``store.telemetry_file`` writes and reads
``telemetry.json``).
"""

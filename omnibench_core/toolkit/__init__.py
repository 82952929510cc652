"""Helpers that workload plugins use (WAV files, client pieces, cached data sets, synthetic
media). Plugins reach them only through :mod:`omnibench_core.plugin`."""

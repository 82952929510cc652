"""The run layer: one run of one workload, from plan to results (steps, gates, servers, the
manifest, the results layout, who owns a run directory)."""

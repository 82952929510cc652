"""GPU-host set-up as functions: CPU groups, container, checkout and venv, pinned downloads,
revision check, doctor. Each ends in the runbook's gate (CPUS_OK, VENV_OK, REVISIONS_OK)."""

# Sourced: defines omni_ci_deps_hash, a sha256 over the files the venv is built from.
# VENV_OK compares it with "$OMNI_CI_HOME/.deps-hash", written by prepare_omni_venv.sh.
omni_ci_deps_hash() {
    cat pyproject.toml .github/scripts/prepare_omni_venv.sh | sha256sum | cut -d' ' -f1
}

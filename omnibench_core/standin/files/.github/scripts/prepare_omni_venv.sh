#!/bin/sh
# prepare_omni_venv.sh VENV: delete and rebuild $OMNI_CI_HOME, rebuild the venv VENV (default omni)
# in the checkout (a venv that sees omnibench and this checkout), record the dependency hash.
set -eu
venv="${1:-omni}"
: "${OMNI_CI_HOME:?OMNI_CI_HOME must be set}"
cd "$(dirname "$0")/../.."
rm -rf "$OMNI_CI_HOME"
mkdir -p "$OMNI_CI_HOME"
python="$(cat .standin/base-python)"  # the python that has omnibench, recorded when the stand-in was made
"$python" -m omnibench_core.standin.venv --checkout . --name "$venv"
. .github/scripts/omni_ci_deps_hash.sh
omni_ci_deps_hash > "$OMNI_CI_HOME/.deps-hash"
echo "Fresh environment ready"

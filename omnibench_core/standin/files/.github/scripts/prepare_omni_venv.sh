#!/bin/sh
# prepare_omni_venv.sh VENV: delete and rebuild $OMNI_CI_HOME, build the venv $OMNI_CI_HOME/VENV
# (default omni), make ./VENV a symlink to it and install this checkout editable (sgl-omni a
# console script), as upstream's script does; record the dependency hash.
set -eu
venv="${1:-omni}"
: "${OMNI_CI_HOME:?OMNI_CI_HOME must be set}"
cd "$(dirname "$0")/../.."
# The python that has omnibench: $OMNIBENCH_PYTHON, else the one recorded when the stand-in was
# made (.standin/ is not committed, so a git worktree reads its main checkout's), else python3.
python="${OMNIBENCH_PYTHON:-}"
if [ -z "$python" ]; then
    common="$(git rev-parse --path-format=absolute --git-common-dir 2>/dev/null || true)"
    for recorded in .standin/base-python "${common%/.git}/.standin/base-python"; do
        if [ -f "$recorded" ]; then python="$(cat "$recorded")"; break; fi
    done
fi
python="${python:-python3}"
if ! "$python" -c "import omnibench_core" 2>/dev/null; then
    echo "prepare_omni_venv.sh: $python cannot import omnibench_core; set OMNIBENCH_PYTHON to the python" \
         "that has omnibench installed (the stand-in's venv is built on it)" >&2
    exit 1
fi
rm -rf "$OMNI_CI_HOME"
mkdir -p "$OMNI_CI_HOME"
"$python" -m omnibench_core.standin.venv --checkout . --name "$venv" --home "$OMNI_CI_HOME"
. .github/scripts/omni_ci_deps_hash.sh
omni_ci_deps_hash > "$OMNI_CI_HOME/.deps-hash"
echo "Fresh environment ready"

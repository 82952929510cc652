#!/bin/sh
# prepare_rust_router.sh build: make the router and print exactly one line, its path.
# The stand-in's router is a small round-robin HTTP proxy (sglang_omni_standin/router.py), not Rust.
set -eu
cd "$(dirname "$0")/../.."
bin="$PWD/.standin/router/sgl-router"
mkdir -p "$(dirname "$bin")"
printf '#!/bin/sh\nexec "%s" -m sglang_omni_standin.router "$@"\n' "$PWD/omni/bin/python" > "$bin"
chmod +x "$bin"
echo "built the stand-in router" >&2
echo "$bin"

#!/usr/bin/env bash
# Builds the Worker (build/index.js, the main module, and its wasm) with local wasm-bindgen
# and wasm-opt.
# worker-build would otherwise download both from GitHub, which this network cannot reach.
# Used by `make build` and by wrangler.toml's [build] command.
set -euo pipefail
cd "$(dirname "$0")/.."
bin="${CARGO_HOME:-$HOME/.cargo}/bin"
export PATH="$bin:$PATH"
export WASM_BINDGEN_BIN="${WASM_BINDGEN_BIN:-$bin/wasm-bindgen}"
export WASM_OPT_BIN="${WASM_OPT_BIN:-$PWD/node_modules/.bin/wasm-opt}"
worker-build --release "$@"

#!/usr/bin/env bash
# Builds the Worker (wasm + JS shim into build/, main module build/entry.mjs) with local
# wasm-bindgen and wasm-opt.
# worker-build would otherwise download both from GitHub, which this network cannot reach.
# Used by `make build` and by wrangler.toml's [build] command.
set -euo pipefail
cd "$(dirname "$0")/.."
bin="${CARGO_HOME:-$HOME/.cargo}/bin"
export PATH="$bin:$PATH"
export WASM_BINDGEN_BIN="${WASM_BINDGEN_BIN:-$bin/wasm-bindgen}"
export WASM_OPT_BIN="${WASM_OPT_BIN:-$PWD/node_modules/.bin/wasm-opt}"
worker-build --release "$@"
# The main module: worker-build's handler exported as a plain object (see src/entry.mjs).
cp src/entry.mjs build/entry.mjs

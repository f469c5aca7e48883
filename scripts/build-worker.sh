#!/usr/bin/env bash
# Builds a Worker (build/index.js, the main module, and its wasm) with local wasm-bindgen
# and wasm-opt, in Cargo.toml's `worker` profile (release, optimised for size).
# worker-build would otherwise download both from GitHub, which this network cannot reach.
# Used by `make build` / `make build-rollout` and by each wrangler.toml's [build] command.
# `--crate DIR` builds the Worker crate in DIR (default: the serving Worker, the root crate),
# into DIR/build; the other arguments go to worker-build (`--out-dir DIR`, `--no-opt`).
set -euo pipefail
cd "$(dirname "$0")/.."
bin="${CARGO_HOME:-$HOME/.cargo}/bin"
export PATH="$bin:$PATH"
export WASM_BINDGEN_BIN="${WASM_BINDGEN_BIN:-$bin/wasm-bindgen}"
export WASM_OPT_BIN="${WASM_OPT_BIN:-$PWD/node_modules/.bin/wasm-opt}"
if [[ "${1:-}" == --crate ]]; then
  cd "$2"
  shift 2
fi
worker-build --profile worker "$@"

out=build no_opt=false
while (($#)); do
  case $1 in
    --out-dir | -d) out=$2 && shift ;;
    --no-opt | --no-optimization) no_opt=true ;;
  esac
  shift
done
# worker-build has wasm-opt keep the function names section (with --debuginfo, whatever the
# profile says); a second pass without it drops the names and the producers section, which
# the runtime never reads. The feature list is worker-build's: the same wasm features stay
# allowed.
if ! $no_opt; then
  wasm="$out/index_bg.wasm"
  "$WASM_OPT_BIN" "$wasm" -o "$wasm.stripped" --strip-debug --strip-producers \
    --enable-mutable-globals --enable-sign-ext --enable-nontrapping-float-to-int \
    --enable-bulk-memory --enable-multivalue --enable-reference-types --enable-exception-handling
  mv "$wasm.stripped" "$wasm"
fi

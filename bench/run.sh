#!/usr/bin/env bash
# `make bench`: builds everything the benchmarks need (each step skipped when up to date),
# runs them, and regenerates BENCHMARKS.md from the results. Loopback only; bounded.
#
#   BENCH_QUICK=1 bash bench/run.sh   short runs, for checking the pipeline (noisier numbers)
#
# Steps: the Worker (make build), the floor Worker, the plain-wasm decision module, the load
# generator, oha (pinned, for the agreement check), then criterion (native), the V8
# micro-benchmark, the side-by-side run in workerd, the agreement check, the garbage
# collections behind the tail (bench/gc_probe.mjs), and the report.
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
bin="${CARGO_HOME:-$HOME/.cargo}/bin"
export PATH="$bin:$PATH"
export WRANGLER_SEND_METRICS=false
TARGET="${CARGO_TARGET_DIR:-$ROOT/target}"
RESULTS=bench/results
OHA_VERSION=1.16.0
mkdir -p "$RESULTS" .tools
say() { printf '\n== %s\n' "$*" >&2; }
commands=()
cmd() { commands+=("$*"); "$@"; }

if [[ "${BENCH_QUICK:-}" == 1 ]]; then
  export BENCH_RATES="${BENCH_RATES:-200,800}" BENCH_DURATION="${BENCH_DURATION:-2s}" BENCH_WARMUP="${BENCH_WARMUP:-500ms}"
  export BENCH_ROUNDS="${BENCH_ROUNDS:-1}" BENCH_STEP="${BENCH_STEP:-500:2000:500}" BENCH_STEP_DURATION="${BENCH_STEP_DURATION:-1s}"
  export BENCH_PREWARM="${BENCH_PREWARM:-10s}" BENCH_TOGETHER_DURATION="${BENCH_TOGETHER_DURATION:-3s}"
  export BENCH_COLD="${BENCH_COLD:-2}" AGREE_ROUNDS="${AGREE_ROUNDS:-2}" AGREE_DURATION="${AGREE_DURATION:-2}"
  gc_args=(--rounds 1 --seconds 3 --prewarm 10s)
  micro_args=(--runs 5 --iters 5000 --cold 3)
  crit_args=(--warm-up-time 1 --measurement-time 2)
else
  gc_args=(--rounds 6 --seconds 10 --prewarm 40s)
  micro_args=(--runs 21 --iters 20000 --cold 9)
  crit_args=(--warm-up-time 2 --measurement-time 5)
fi

say "machine"
load_start=$(cut -d' ' -f1-3 /proc/loadavg)
# What is measured: the commit, and whether the measured code differs from it, at the start
# and again at the end (this run's own result files under bench/results do not count).
commit=$(git rev-parse --short HEAD)
measured_paths=(src crates model rules bench ':(exclude)bench/results')
dirty=false
git diff --quiet HEAD -- "${measured_paths[@]}" 2>/dev/null || dirty=true

say "builds"
make --no-print-directory build
(
  cd bench/floor-worker
  WASM_BINDGEN_BIN="${WASM_BINDGEN_BIN:-$bin/wasm-bindgen}" WASM_OPT_BIN="${WASM_OPT_BIN:-$ROOT/node_modules/.bin/wasm-opt}" \
    CARGO_TARGET_DIR="$TARGET/bench-floor" worker-build --release
)
CARGO_TARGET_DIR="$TARGET/bench-wasm-micro" cargo build --release --target wasm32-unknown-unknown \
  --manifest-path bench/wasm-micro/Cargo.toml
MICRO_WASM="$TARGET/bench-wasm-micro/wasm32-unknown-unknown/release/decider_wasm_micro.wasm"

# The load generator: `decider loadtest`. The scripts below take one executable, so a
# two-line wrapper (bench/.loadtest, not committed) supplies the subcommand.
cargo build --release -p decider-cli
LOADTEST="$ROOT/bench/.loadtest"
printf '#!/bin/sh\nexec "%s" loadtest "$@"\n' "$TARGET/release/decider" > "$LOADTEST"
chmod +x "$LOADTEST"
loadtest_cmd="decider loadtest"

OHA=.tools/bin/oha
if [[ "$("$OHA" --version 2>/dev/null)" != *"$OHA_VERSION"* ]]; then
  say "installing oha $OHA_VERSION (pinned, into .tools/)"
  cargo install oha --version "$OHA_VERSION" --locked --root .tools
fi

say "criterion (native)"
cmd cargo bench -p decider-core --bench decision -- "${crit_args[@]}"

say "micro-benchmark in V8"
cmd node bench/micro.mjs --wasm "$MICRO_WASM" "${micro_args[@]}" --out "$RESULTS/micro.json" >/dev/null

say "side by side in workerd"
cmd node bench/side_by_side.mjs --loadtest "$LOADTEST" --out "$RESULTS/side.json" >/dev/null

say "load generator agreement with oha"
cmd node bench/agreement.mjs --loadtest "$LOADTEST" --oha "$OHA" --out "$RESULTS/agreement.json" >/dev/null

say "garbage collections (V8 --trace-gc, new processes; explains the tail, not a claim)"
# A failure here leaves the claims standing: the page then says this section was not measured.
cmd node bench/gc_probe.mjs --loadtest "$LOADTEST" --only ours,js,floor,js_bounded --rates "${BENCH_TOGETHER_RATES:-100,200}" "${gc_args[@]}" --out "$RESULTS/gc.json" >/dev/null ||
  printf '{"skipped": "bench/gc_probe.mjs failed (exit %s); its output is in the make bench log"}\n' "$?" > "$RESULTS/gc.json"

say "report"
load_end=$(cut -d' ' -f1-3 /proc/loadavg)
git diff --quiet "$commit" -- "${measured_paths[@]}" 2>/dev/null || dirty=true
node -e '
const [, out, ...kv] = process.argv;
const o = Object.fromEntries(kv.map((s) => { const i = s.indexOf("="); return [s.slice(0, i), s.slice(i + 1)]; }));
o.dirty = o.dirty === "true";
o.commands = JSON.parse(o.commands);
require("fs").writeFileSync(out, JSON.stringify(o, null, 2) + "\n");
' "$RESULTS/machine.json" \
  "date=$(date -u +%Y-%m-%dT%H:%MZ)" "commit=$commit" "dirty=$dirty" \
  "cpu=$(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ *//')" "nproc=$(nproc)" \
  "mem=$(free -h | awk '/^Mem:/{print $2}')" "kernel=$(uname -sr)" "rustc=$(rustc --version)" "node=$(node --version)" \
  "load_start=$load_start" "load_end=$load_end" \
  "commands=$(node -e 'console.log(JSON.stringify(process.argv.slice(1)))' "make bench   # = bash bench/run.sh" \
     "${commands[@]/#/  }" "  (load generator: $loadtest_cmd)")"
node bench/report.mjs --results "$RESULTS" --criterion "$TARGET/criterion" --out BENCHMARKS.md
say "done: BENCHMARKS.md"

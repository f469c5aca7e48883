#!/usr/bin/env bash
# `make bench`: builds what the benchmarks need (each build skipped when up to date), runs each
# measurement once into bench/results/*.json, and renders docs/reports/BENCHMARKS.md from those files.
# Steps: micro (the decision in V8), inturn (workerd CPU and latency at 200/s), cold (cold
# starts), agreement (`decider loadtest` against oha), knee (the control plane's flush batches/s
# before its latency climbs), report (`decider report` on a large log), sizes (the wasm files). Loopback only. BENCH_QUICK=1: short runs, to check the pipeline.
# BENCH_AGAINST="REV ...": also builds edge-decider at each of those commits (from its own tree,
# with its own build script) and runs it beside this one in the in-turn CPU and cold-start
# runs, so a change is judged against the code before it in one run, not across runs.
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD bin="${CARGO_HOME:-$HOME/.cargo}/bin" RESULTS=bench/results OHA=.tools/bin/oha OHA_VERSION=1.16.0
TARGET="${CARGO_TARGET_DIR:-$ROOT/target}"
export PATH="$bin:$PATH" WRANGLER_SEND_METRICS=false
say() { printf '\n== %s\n' "$*" >&2; }

quick=false micro_args=(--runs 21 --iters 20000) cold_args=(--rounds 41) report_args=(--lines 1000000)
if [[ "${BENCH_QUICK:-}" == 1 ]]; then
  quick=true micro_args=(--runs 5 --iters 5000) cold_args=(--rounds 2) report_args=(--lines 100000)
  export BENCH_ROUNDS="${BENCH_ROUNDS:-2}" BENCH_PREWARM="${BENCH_PREWARM:-3s}" BENCH_DURATION="${BENCH_DURATION:-3s}"
  export AGREE_ROUNDS="${AGREE_ROUNDS:-1}" AGREE_DURATION="${AGREE_DURATION:-2}"
  export KNEE_STEP="${KNEE_STEP:-100:300:100}" KNEE_DURATION="${KNEE_DURATION:-2s}"
fi
start_s=$(date +%s) load_start=$(cut -d' ' -f1-3 /proc/loadavg) commit=$(git rev-parse --short HEAD)
# Whether the measured code differs from the commit, at the start or the end (results excluded).
measured=(src crates workers model rules build.rs Cargo.toml Cargo.lock bench ':(exclude)bench/results')
dirty=false
git diff --quiet HEAD -- "${measured[@]}" || dirty=true

say "builds"
make --no-print-directory build
floor() { (cd bench/floor-worker && WASM_BINDGEN_BIN="$bin/wasm-bindgen" WASM_OPT_BIN="$ROOT/node_modules/.bin/wasm-opt" worker-build --release "$@"); }
CARGO_TARGET_DIR="$TARGET/bench-floor" floor
CARGO_TARGET_DIR="$TARGET/bench-floor-record" floor --out-dir build-record --features record-io
# Not --locked: this lock file follows decider-core's dependencies, which change without it.
CARGO_TARGET_DIR="$TARGET/bench-wasm-micro" cargo build --release --target wasm32-unknown-unknown --manifest-path bench/wasm-micro/Cargo.toml
cargo build --release --locked -p decider-cli
against=()
for rev in ${BENCH_AGAINST:-}; do
  sha=$(git rev-parse --short "$rev^{commit}") dir="$TARGET/bench-against/$sha"
  if [[ ! -f "$dir/build/index.js" ]]; then
    rm -rf "$dir" && mkdir -p "$dir/src"
    git archive "$sha" | tar -x -C "$dir/src"
    # A target directory per commit: git archive gives files their commit's time, and cargo,
    # which judges a path crate fresh by mtime, would take another commit's build for it.
    (cd "$dir/src" && CARGO_TARGET_DIR="$dir/target" WASM_OPT_BIN="$ROOT/node_modules/.bin/wasm-opt" \
      bash scripts/build-worker.sh --out-dir ../build) >&2
  fi
  against+=("$sha=$dir/build")
done
# Read by bench/lib.mjs: "sha=build-dir ...".
export BENCH_AGAINST_BUILDS="${against[*]}"
[[ "$("$OHA" --version 2>/dev/null)" == *"$OHA_VERSION"* ]] || cargo install oha --version "$OHA_VERSION" --locked --root .tools

# This run's result files; value.json is `make value`'s, which the page renders beside them.
mkdir -p "$RESULTS" && (cd "$RESULTS" && rm -f micro.json inturn.json cold.json agreement.json knee.json report.json sizes.json machine.json)
steps=()
step() {
  local name=$1 t0=$(date +%s)
  say "$name"
  "${@:2}"
  steps+=("\"$name\": $(($(date +%s) - t0))")
}
DECIDER="$TARGET/release/decider"
step micro node bench/micro.mjs --wasm "$TARGET/bench-wasm-micro/wasm32-unknown-unknown/release/decider_wasm_micro.wasm" "${micro_args[@]}" --out "$RESULTS/micro.json"
step inturn node bench/inturn.mjs --decider "$DECIDER" --out "$RESULTS/inturn.json"
step cold node bench/cold.mjs "${cold_args[@]}" --out "$RESULTS/cold.json"
step agreement node bench/agreement.mjs --decider "$DECIDER" --oha "$OHA" --out "$RESULTS/agreement.json"
step knee node bench/knee.mjs --decider "$DECIDER" --out "$RESULTS/knee.json"
step report node bench/report_cli.mjs --decider "$DECIDER" "${report_args[@]}" --out "$RESULTS/report.json"
size() { printf '{"raw": %s, "gzip9": %s}' "$(stat -c %s "$1")" "$(gzip -9 -c "$1" | wc -c)"; }
# The same Worker embedding the model the shipped recipe (model/regenerate.sh) trains with the
# trees alone (--base priors): what the network base adds to the upload. Built into a folder
# of its own; build/ keeps the shipped model.
say "size of the trees-only model's Worker"
priors="$TARGET/bench-priors"
mkdir -p "$priors"
"$DECIDER" simulate --rows 40000 --seed 20261130 --out "$priors/train.jsonl"
"$DECIDER" train --data "$priors/train.jsonl" --seed 42 --learning-rate 0.5 --max-leaves 127 --max-rounds 16 --base priors --quiet --out "$priors/model.json"
DECIDER_MODEL="$priors/model.json" bash scripts/build-worker.sh --out-dir "$priors/build" >&2
against_sizes=$(for a in "${against[@]}"; do printf '"%s": %s,' "${a%%=*}" "$(size "${a#*=}/index_bg.wasm")"; done)
printf '{"ours": %s, "control_plane": %s, "floor": %s, "priors_model": %s, "against": {%s}}\n' "$(size build/index_bg.wasm)" \
  "$(size workers/rollout/build/index_bg.wasm)" "$(size bench/floor-worker/build/index_bg.wasm)" \
  "$(size "$priors/build/index_bg.wasm")" "${against_sizes%,}" > "$RESULTS/sizes.json"

git diff --quiet "$commit" -- "${measured[@]}" || dirty=true
version() { node -p "require('./node_modules/$1/package.json').version"; }
str() { node -p 'JSON.stringify(process.argv[1])' "$1"; }
cat > "$RESULTS/machine.json" <<JSON
{"date": "$(date -u +%Y-%m-%dT%H:%MZ)", "commit": "$commit", "dirty": $dirty, "quick": $quick, "total_s": $(($(date +%s) - start_s)),
 "cpu": $(str "$(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ *//')"), "nproc": $(nproc), "mem": "$(free -h | awk '/^Mem:/{print $2}')",
 "kernel": "$(uname -sr)", "rustc": "$(rustc --version)", "node": "$(node --version)", "wrangler": "$(version wrangler)",
 "miniflare": "$(version miniflare)", "workerd": "$(version workerd)", "load_start": "$load_start", "load_end": "$(cut -d' ' -f1-3 /proc/loadavg)",
 "steps_s": {$(IFS=,; echo "${steps[*]}")}}
JSON
node bench/render.mjs --results "$RESULTS" --out docs/reports/BENCHMARKS.md
say "done: docs/reports/BENCHMARKS.md ($(($(date +%s) - start_s)) s)"

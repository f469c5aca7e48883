#!/usr/bin/env bash
# Runs every cargo-fuzz target of decider-core for FUZZ_SECONDS each, one after another on
# one core, and prints executions and coverage per target.
#
#   FUZZ_SECONDS=600 scripts/fuzz.sh            # all targets, 10 minutes each
#   FUZZ_TARGETS="state_json" scripts/fuzz.sh   # a subset
#
# Environment:
#   FUZZ_SECONDS   seconds per target (default 60)
#   FUZZ_TARGETS   space-separated targets (default: every target in fuzz/Cargo.toml)
#   FUZZ_SUMMARY   summary file (default fuzz/target/fuzz-summary.md)
#
# Seeds are read from fuzz/corpus/<target>/ (committed, never written); inputs libFuzzer
# finds go to fuzz/target/corpus/<target>/ and crashes to fuzz/artifacts/<target>/. Inputs
# are capped at 16 KiB, the Worker's request body limit. Exits non-zero when any target
# crashes; a crash becomes a regression test in decider-core.
set -euo pipefail

cd "$(dirname "$0")/.."
root=$(pwd)
seconds=${FUZZ_SECONDS:-60}
summary=${FUZZ_SUMMARY:-$root/fuzz/target/fuzz-summary.md}
cargo_fuzz_version=0.13.2

if ! [[ $seconds =~ ^[0-9]+$ ]] || [ "$seconds" -lt 1 ]; then
  echo "fuzz.sh: FUZZ_SECONDS must be a positive integer, got '$seconds'" >&2
  exit 2
fi
if ! cargo +nightly --version >/dev/null 2>&1; then
  echo "fuzz.sh: the nightly toolchain is required (rustup toolchain install nightly)" >&2
  exit 2
fi
if ! cargo fuzz --version 2>/dev/null | grep -q "$cargo_fuzz_version"; then
  echo "fuzz.sh: installing cargo-fuzz $cargo_fuzz_version" >&2
  cargo install cargo-fuzz --version "$cargo_fuzz_version" --locked
fi

cd "$root/fuzz"
targets=${FUZZ_TARGETS:-$(cargo +nightly fuzz list)}
logs="$root/fuzz/target/logs"
mkdir -p "$logs" "$(dirname "$summary")"

echo "fuzz.sh: building $(echo $targets | wc -w) targets" >&2
CARGO_BUILD_JOBS=1 nice -n 19 cargo +nightly fuzz build -O >&2

{
  echo "| target | seconds | executions | exec/s | cov | ft | corpus | slowest input (s) | peak RSS (MB) | result |"
  echo "|---|---:|---:|---:|---:|---:|---:|---:|---:|---|"
} >"$summary"

failed=0
for t in $targets; do
  work="$root/fuzz/target/corpus/$t"
  mkdir -p "$work" "$root/fuzz/corpus/$t"
  log="$logs/$t.log"
  echo "fuzz.sh: $t for ${seconds}s (log: $log)" >&2
  start=$(date +%s)
  # The first corpus directory receives new inputs; the committed seeds stay read-only.
  if nice -n 19 cargo +nightly fuzz run -O "$t" "$work" "$root/fuzz/corpus/$t" -- \
      -max_total_time="$seconds" -max_len=16384 -timeout=10 -rss_limit_mb=2048 \
      -dict="$root/fuzz/dicts/json.dict" -print_final_stats=1 >"$log" 2>&1; then
    result=ok
  else
    result="CRASH (see $log and fuzz/artifacts/$t/)"
    failed=1
  fi
  elapsed=$(($(date +%s) - start))
  execs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -1)
  rate=$(sed -n 's/^stat::average_exec_per_sec: *//p' "$log" | tail -1)
  slowest=$(sed -n 's/^stat::slowest_unit_time_sec: *//p' "$log" | tail -1)
  rss=$(sed -n 's/^stat::peak_rss_mb: *//p' "$log" | tail -1)
  last=$(grep -E '^#[0-9]+' "$log" | grep ' cov: ' | tail -1 || true)
  cov=$(sed -n 's/.* cov: \([0-9]*\).*/\1/p' <<<"$last")
  ft=$(sed -n 's/.* ft: \([0-9]*\).*/\1/p' <<<"$last")
  corp=$(sed -n 's/.* corp: \([0-9]*\/[0-9a-zA-Z]*\).*/\1/p' <<<"$last")
  printf '%-14s %5ss  execs %-10s exec/s %-7s cov %-5s ft %-6s corpus %-12s %s\n' \
    "$t" "$elapsed" "${execs:-?}" "${rate:-?}" "${cov:-?}" "${ft:-?}" "${corp:-?}" "$result"
  echo "| $t | $elapsed | ${execs:-?} | ${rate:-?} | ${cov:-?} | ${ft:-?} | ${corp:-?} | ${slowest:-?} | ${rss:-?} | $result |" >>"$summary"
done

echo "fuzz.sh: summary in $summary" >&2
exit $failed

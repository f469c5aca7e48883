// workerd CPU per request and latency at a fixed rate: edge-decider (without and with the
// ROLLOUT object bound: its live counters off and on), the empty workers-rs Worker
// (bench/floor-worker), a second copy of the empty Worker (the A/A control) and the empty
// Worker doing a decision's I/O (its `record-io` build); with BENCH_AGAINST, edge-decider
// built at those commits too.
//
// Each round starts them all in new workerd processes, loads them unmeasured for PREWARM at
// PREWARM_RATE/s each (V8 optimises hot code only after thousands of requests), then loads
// them in turn with one `decider loadtest` (one --url each, RATE/s each, order rotating by
// round), so a stall of this machine falls on all of them within milliseconds. CPU per request:
// the workerd process's CPU time over that run / the requests answered (warmup included).
// Ratios are taken per round against the empty Worker of that round; medians over rounds.
//
// usage: node bench/inturn.mjs --decider PATH --out FILE
//   env: BENCH_RATE=200 BENCH_ROUNDS=9 BENCH_PREWARM=20s BENCH_PREWARM_RATE=400 BENCH_DURATION=15s
import { writeFileSync } from "node:fs";
import { AGAINST, WORKERS, arg, cpuNs, decideOnce, loadtest, median, start } from "./lib.mjs";

const [DECIDER, out] = [arg("decider"), arg("out")];
if (!DECIDER || !out) throw new Error("usage: node bench/inturn.mjs --decider PATH --out FILE");
const env = (k, d) => process.env[k] ?? d;
const [RATE, ROUNDS, PREWARM_RATE] = [env("BENCH_RATE", 200), env("BENCH_ROUNDS", 9), env("BENCH_PREWARM_RATE", 400)].map(Number);
const [PREWARM, DURATION] = [env("BENCH_PREWARM", "20s"), env("BENCH_DURATION", "15s")];
const NAMES = ["ours", "ours_counters", "floor", "floor_b", "floor_io", ...AGAINST];
const KEYS = ["cpu_us", "cpu_stat_us", "p50_us", "p99_us"];

const rounds = [];
for (let round = 0; round < ROUNDS; round++) {
  const order = NAMES.map((_, i) => NAMES[(i + round) % NAMES.length]);
  const w = {};
  for (const n of order) {
    w[n] = await start(n);
    await decideOnce(w[n].url);
  }
  const urls = order.map((n) => w[n].url);
  await loadtest(DECIDER, urls, PREWARM_RATE, PREWARM, "0s");
  const c0 = order.map((n) => cpuNs(w[n].pid));
  const steps = await loadtest(DECIDER, urls, RATE, DURATION, "1s");
  const row = { order };
  order.forEach((n, i) => {
    const [s, c1] = [steps[i], cpuNs(w[n].pid)];
    const per = (k) => (c0[i][k] !== null && c1[k] !== null ? (c1[k] - c0[i][k]) / 1e3 / (s.responses + RATE * s.warmup_s) : null);
    const errors = Object.values(s.errors).reduce((a, b) => a + b, 0);
    row[n] = { cpu_us: per("schedstat"), cpu_stat_us: per("stat"), p50_us: s.latency?.p50_us, p99_us: s.latency?.p99_us, errors, sources: s.sources };
  });
  rounds.push(row);
  for (const n of order) await w[n].mf.dispose();
  console.error(`[inturn] round ${round + 1}/${ROUNDS}: ` + order.map((n) => `${n} ${row[n].cpu_us?.toFixed(0)} µs CPU, p99 ${row[n].p99_us} µs`).join(" | "));
}

const perRound = (a, k) => rounds.map((r) => r[a][k] / r.floor[k]);
const result = {
  rate: RATE, rounds: ROUNDS, prewarm: PREWARM, prewarm_rate: PREWARM_RATE, duration: DURATION,
  summary: Object.fromEntries(NAMES.map((n) => [n, {
    label: WORKERS[n].label,
    ...Object.fromEntries(KEYS.map((k) => [k, median(rounds.map((r) => r[n][k]))])),
    p99_us_range: [Math.min(...rounds.map((r) => r[n].p99_us)), Math.max(...rounds.map((r) => r[n].p99_us))],
    errors: rounds.reduce((a, r) => a + r[n].errors, 0),
    sources: rounds.at(-1)[n].sources,
  }])),
  // Per Worker and key: the median of the per-round ratios to the empty Worker, and those ratios.
  // edge-decider against the control doing the same I/O, and counters on against off, per round.
  vs_io: { cpu_us: { median: median(rounds.map((r) => r.ours.cpu_us / r.floor_io.cpu_us)), per_round: rounds.map((r) => r.ours.cpu_us / r.floor_io.cpu_us) } },
  // Per build of another commit: its CPU against the I/O control, and this build's against it, per round.
  against: Object.fromEntries(AGAINST.map((n) => [n, Object.fromEntries([["vs_io", (r) => r[n].cpu_us / r.floor_io.cpu_us], ["ours_vs", (r) => r.ours.cpu_us / r[n].cpu_us]]
    .map(([k, f]) => [k, { median: median(rounds.map(f)), per_round: rounds.map(f) }]))])),
  counters_vs_off: { cpu_us: { median: median(rounds.map((r) => r.ours_counters.cpu_us / r.ours.cpu_us)), per_round: rounds.map((r) => r.ours_counters.cpu_us / r.ours.cpu_us) } },
  vs_floor: Object.fromEntries(["ours", "ours_counters", "floor_b", "floor_io", ...AGAINST].map((n) => [n, Object.fromEntries(KEYS.map((k) => [k, { median: median(perRound(n, k)), per_round: perRound(n, k) }]))])),
  rounds_detail: rounds,
};
writeFileSync(out, JSON.stringify(result, null, 2) + "\n");

// Agreement check: `decider loadtest` against an independent load generator from the
// registries (oha, pinned, `--latency-correction` so it too measures from the scheduled
// send time) on the same target (edge-decider in workerd via Miniflare) at the same rate.
//
// Two ways, each over several rounds, medians over rounds:
// - side by side in time: both generators run *at once*, each at the rate, against the same
//   target, so both see the same target and the same machine noise; two correct
//   generators must then report the same distribution. This is what pass/fail is judged on.
// - one after the other, alternating which goes first: shows how much the machine's noise
//   alone moves the numbers between two runs.
// Passes when the median over concurrent rounds of the per-round ratio loadtest/oha is within
// the tolerance (10%) of 1, for p50 and for p99.
//
// The same percentile on both sides: loadtest reports the nearest rank (HdrHistogram: the
// ⌈q·n⌉-th smallest), oha the element at index ⌊q·n⌋ of its sorted latencies, one rank higher
// whenever q·n is whole (1,600 requests: its p99 is the 16th slowest, loadtest's the 17th).
// In a noisy phase two neighbouring ranks of the tail can be milliseconds apart, so oha
// writes every request (`--output-format csv`, latency-corrected durations) and its p50/p99
// are taken here by nearest rank; oha's own convention is kept beside them.
//
// usage: node bench/agreement.mjs --loadtest PATH --oha PATH [--out FILE]
//   env: AGREE_RATE=200 AGREE_DURATION=8 (seconds) AGREE_ROUNDS=7 AGREE_TOLERANCE=0.10
import { Miniflare } from "miniflare";
import { execFile } from "node:child_process";
import { promisify } from "node:util";
import { writeFileSync } from "node:fs";
import path from "node:path";
import { BODY_FILE, ROOT, arg, median, nearestRank } from "./workers.mjs";

const LOADTEST = arg("loadtest");
const OHA = arg("oha");
if (!LOADTEST || !OHA) {
  console.error("usage: node bench/agreement.mjs --loadtest PATH --oha PATH [--out FILE]");
  process.exit(2);
}
const RATE = Number(process.env.AGREE_RATE ?? 200);
const DURATION = Number(process.env.AGREE_DURATION ?? 8);
const ROUNDS = Number(process.env.AGREE_ROUNDS ?? 7);
const TOLERANCE = Number(process.env.AGREE_TOLERANCE ?? 0.1);
const CONNECTIONS = 32;
// oha runs its rate limiter and its requests on one tokio runtime; give it as many threads as
// `decider loadtest` uses (a timer thread and a runtime thread).
const OHA_THREADS = process.env.AGREE_OHA_THREADS ?? "2";
const log = (...a) => console.error("[agreement]", ...a);

const mf = new Miniflare({
  host: "127.0.0.1",
  port: 0,
  workers: [
    {
      name: "decider",
      modules: true,
      scriptPath: path.join(ROOT, "build/entry.mjs"),
      modulesRules: [{ type: "CompiledWasm", include: ["**/*.wasm"], fallthrough: true }, { type: "ESModule", include: ["**/*.js"] }],
      compatibilityDate: "2026-04-20",
      bindings: { DECISION_BACKEND: "embedded", AI_TIMEOUT_MS: "25", DEFAULT_ACTION: "route_a", OOD_CHECK: "true", SHADOW: "false" },
    },
  ],
  handleRuntimeStdio(stdout, stderr) {
    stdout.resume();
    stderr.resume();
  },
});
const url = new URL("/v1/decide", await mf.ready).href;

// Asynchronous on purpose: workerd writes a log line per decision to a pipe this process
// drains, so blocking the event loop while a generator runs would stall the Worker.
const execFileAsync = promisify(execFile);
const run = async (cmd, args) => (await execFileAsync(cmd, args, { encoding: "utf8", maxBuffer: 1 << 26 })).stdout;

async function ours() {
  const r = JSON.parse(
    await run(LOADTEST, ["--url", url, "--body", BODY_FILE, "--rate", String(RATE), "--duration", `${DURATION}s`, "--warmup", "0",
      "--connections", String(CONNECTIONS), "--timeout", "2s", "--json"]),
  );
  const s = r.steps[0];
  return {
    p50_ms: s.latency.p50_us / 1000, p99_ms: s.latency.p99_us / 1000, responses: s.responses, errors: s.errors,
    clock: r.clock, send_lag_p50_ms: s.send_lag.p50_us / 1000, send_lag_p99_ms: s.send_lag.p99_us / 1000,
  };
}

// The q-quantile of `sorted` by oha's index ⌊q·n⌋ (nearestRank, from workers.mjs, is
// HdrHistogram's and so loadtest's).
const ohaIndex = (sorted, q) => sorted[Math.min(sorted.length - 1, Math.floor(q * sorted.length))];

// oha's CSV: a header, then one row per answered request: start, DNS, DNS+dialup, first
// byte, duration (s, from the scheduled time with --latency-correction), bytes, status.
async function oha() {
  const rows = (
    await run(OHA, ["--no-tui", "--output-format", "csv", "-z", `${DURATION}s`, "-q", String(RATE), "--latency-correction",
      "-c", String(CONNECTIONS), "--worker-threads", OHA_THREADS, "-m", "POST", "-T", "application/json", "-D", BODY_FILE, url])
  ).trim().split("\n").slice(1).map((line) => line.split(","));
  const ms = rows.map((f) => Number(f[4]) * 1000).sort((a, b) => a - b);
  if (ms.length === 0 || ms.some((v) => !Number.isFinite(v))) throw new Error(`oha wrote no usable rows (${rows.length})`);
  const statuses = {};
  for (const f of rows) statuses[f[6]] = (statuses[f[6]] ?? 0) + 1;
  return {
    p50_ms: nearestRank(ms, 0.5), p99_ms: nearestRank(ms, 0.99), responses: ms.length, statuses,
    own: { p50_ms: ohaIndex(ms, 0.5), p99_ms: ohaIndex(ms, 0.99) },
  };
}

const percentileNote = "loadtest: nearest rank (HdrHistogram); oha: nearest rank over its per-request CSV (oha's own ⌊q·n⌋ index in `own`)";

// Warm both the target and each generator's connections; discarded.
await ours();
await oha();
const concurrent = [];
for (let i = 0; i < ROUNDS; i++) {
  const [o, h] = await Promise.all([ours(), oha()]);
  concurrent.push({ ours: o, oha: h });
  log(`concurrent round ${i + 1}: loadtest p50 ${o.p50_ms.toFixed(3)} p99 ${o.p99_ms.toFixed(3)} (send lag p50 ${o.send_lag_p50_ms.toFixed(3)}) | oha p50 ${h.p50_ms.toFixed(3)} p99 ${h.p99_ms.toFixed(3)} (own p99 ${h.own.p99_ms.toFixed(3)}) ms`);
}
const rounds = [];
for (let i = 0; i < ROUNDS; i++) {
  let pair;
  if (i % 2 === 0) {
    const o = await ours();
    pair = { ours: o, oha: await oha() };
  } else {
    const h = await oha();
    pair = { ours: await ours(), oha: h };
  }
  rounds.push(pair);
  log(`round ${i + 1}: loadtest p50 ${pair.ours.p50_ms.toFixed(3)} p99 ${pair.ours.p99_ms.toFixed(3)} | oha p50 ${pair.oha.p50_ms.toFixed(3)} p99 ${pair.oha.p99_ms.toFixed(3)} ms`);
}
await mf.dispose();

const m = (who, k, rs = concurrent) => median(rs.map((r) => r[who][k]));
const result = {
  target: "edge-decider POST /v1/decide in workerd (Miniflare)",
  rate: RATE,
  duration_s: DURATION,
  rounds: ROUNDS,
  connections: CONNECTIONS,
  tolerance: TOLERANCE,
  percentiles: percentileNote,
  loadtest_clock: concurrent[0]?.ours.clock,
  oha_version: (await run(OHA, ["--version"])).trim(),
  loadtest: { p50_ms: m("ours", "p50_ms"), p99_ms: m("ours", "p99_ms") },
  oha: { p50_ms: m("oha", "p50_ms"), p99_ms: m("oha", "p99_ms") },
  sequential: {
    loadtest: { p50_ms: m("ours", "p50_ms", rounds), p99_ms: m("ours", "p99_ms", rounds) },
    oha: { p50_ms: m("oha", "p50_ms", rounds), p99_ms: m("oha", "p99_ms", rounds) },
  },
  concurrent_detail: concurrent,
  sequential_detail: rounds,
};
// Concurrent rounds are paired (same target, same seconds): the ratio is taken per round and
// the median of those ratios is judged, as for any paired measurement.
result.p50_ratio = median(concurrent.map((r) => r.ours.p50_ms / r.oha.p50_ms));
result.p99_ratio = median(concurrent.map((r) => r.ours.p99_ms / r.oha.p99_ms));
// For the record: the ratios with oha's own percentile convention, not judged.
result.oha_own_convention = {
  p50_ratio: median(concurrent.map((r) => r.ours.p50_ms / r.oha.own.p50_ms)),
  p99_ratio: median(concurrent.map((r) => r.ours.p99_ms / r.oha.own.p99_ms)),
};
result.sequential.p50_ratio = result.sequential.loadtest.p50_ms / result.sequential.oha.p50_ms;
result.sequential.p99_ratio = result.sequential.loadtest.p99_ms / result.sequential.oha.p99_ms;
result.pass = Math.abs(result.p50_ratio - 1) <= TOLERANCE && Math.abs(result.p99_ratio - 1) <= TOLERANCE;
const out = arg("out");
if (out) writeFileSync(out, JSON.stringify(result, null, 2) + "\n");
console.log(JSON.stringify({ loadtest: result.loadtest, oha: result.oha, p50_ratio: result.p50_ratio, p99_ratio: result.p99_ratio, pass: result.pass }, null, 2));

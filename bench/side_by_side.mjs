// Side by side, one run: edge-decider, the empty workers-rs Worker (floor) and the plain-JS
// Worker, each in its own workerd (Miniflare, the runtime `wrangler dev` uses; a new one every
// few rounds, warmed to steady state) and loaded on a socket of its own (no proxy isolate in front, as on Cloudflare), driven by
// the same load generator (`decider loadtest`) at the same fixed rates, interleaved round
// by round so machine noise falls on all three alike (with a second copy of the empty
// Worker as an A/A control at the fixed rates), then the same rate with two Workers loaded at
// once (BENCH_PAIRED_RATES: ours with the floor, ours with JS, the A/A pair); then a step ramp for each knee, then
// cold starts (a fresh workerd to its first decision), then wasm sizes. Each fixed-rate
// measurement also reads the workerd process's CPU time, reported per request: unlike a
// p99, it counts work rather than waiting, so machine noise moves it far less. The rates in
// BENCH_ENTRY_RATES run again through Miniflare's main socket, where Miniflare's entry
// Worker proxies each request (what `wrangler dev` adds; bench/workers.mjs `start`).
//
// usage: node bench/side_by_side.mjs --loadtest PATH [--out FILE]
//   env: BENCH_RATES="100,400"  BENCH_ENTRY_RATES="400"  BENCH_PAIRED_RATES="400"  BENCH_DURATION=5s  BENCH_WARMUP=1s  BENCH_ROUNDS=9  BENCH_PREWARM=30s
//        BENCH_PREWARM_RATE=800  BENCH_RESTART_EVERY=3  BENCH_STEP=200:3000:200  BENCH_STEP_DURATION=2s  BENCH_P99_LIMIT=50ms  BENCH_COLD=5
import { readFileSync, writeFileSync } from "node:fs";
import { gzipSync } from "node:zlib";
import path from "node:path";
import { BODY_FILE, HERE, ROOT, WORKERS, arg, loadtest as run, loadtestArg, measure, median, start } from "./workers.mjs";

const LOADTEST = loadtestArg("node bench/side_by_side.mjs --loadtest PATH [--out FILE]");
const env = (k, d) => process.env[k] ?? d;
const RATES = env("BENCH_RATES", "100,400").split(",").map(Number);
const ENTRY_RATES = env("BENCH_ENTRY_RATES", "400").split(",").filter(Boolean).map(Number);
const DURATION = env("BENCH_DURATION", "5s");
const WARMUP = env("BENCH_WARMUP", "1s");
const ROUNDS = Number(env("BENCH_ROUNDS", "9"));
const STEP = env("BENCH_STEP", "200:3000:200");
const STEP_DURATION = env("BENCH_STEP_DURATION", "2s");
const P99_LIMIT = env("BENCH_P99_LIMIT", "50ms");
const COLD = Number(env("BENCH_COLD", "5"));
const PREWARM = env("BENCH_PREWARM", "30s");
const PREWARM_RATE = env("BENCH_PREWARM_RATE", "800");
const RESTART_EVERY = Number(env("BENCH_RESTART_EVERY", "3"));
const PAIRED_RATES = env("BENCH_PAIRED_RATES", "400").split(",").filter(Boolean).map(Number);
const log = (...a) => console.error("[side-by-side]", ...a);
const NAMES = ["ours", "floor", "js"];
// The fixed rates also run the A/A control (see WORKERS.floor_b).
const FIXED = [...NAMES, "floor_b"];
// Paired: two Workers loaded at the same time, each by its own generator at the same rate,
// on their own sockets. The sequential rounds above give each Worker its own 6 s, and on
// this machine a burst of host noise (p50 above 2 ms for a whole measurement) lands on
// whichever Worker is loaded then; loaded together, both get it. The ratio is taken per
// round (as the load generators' agreement is), and the A/A pair shows the noise band.
const PAIRS = [["ours", "floor"], ["ours", "js"], ["floor_b", "floor"]];

const body = readFileSync(BODY_FILE, "utf8");
async function decideOnce(url) {
  const t0 = performance.now();
  const r = await fetch(url, { method: "POST", headers: { "content-type": "application/json" }, body });
  const text = await r.text();
  const ms = performance.now() - t0;
  if (r.status !== 200) throw new Error(`${url}: status ${r.status}: ${text}`);
  return { ms, source: r.headers.get("x-decision-source"), json: JSON.parse(text) };
}

const loadtest = (url, extra) => run(LOADTEST, url, extra);

// ---- fixed rates, interleaved ------------------------------------------------------------
// Every RESTART_EVERY rounds, a new workerd for every Worker: two processes of the same
// Worker, loaded alike and interleaved, ended up about 2x apart in median p99 over 8 rounds
// here (bench/cpu_probe.mjs --only js,js#2: what a process happens to get from the machine),
// so one process per Worker for the whole run would count that luck in every round.
// Each new process first serves PREWARM at PREWARM_RATE unmeasured (24,000 requests by
// default): V8 moves a wasm function from its baseline compiler (Liftoff) to TurboFan only
// once ~13 MB of its code has run (`--wasm-tiering-budget`), and with
// `--trace-wasm-compilation-times` edge-decider's functions were still being tiered up
// after 16,000–24,000 requests. The measurements are of Workers in steady state, as a busy
// isolate on Cloudflare is; the cold start has its own table.
// Within a round, every rate on the Workers' own sockets, then every entry rate through
// Miniflare's entry Worker, each Worker in turn in an order that rotates.
const PLAN = [...RATES.map((rate) => ({ rate, via: "direct" })), ...ENTRY_RATES.map((rate) => ({ rate, via: "entry" }))];
const fixed = { direct: {}, entry: {} }; // via -> rate -> name -> [step reports]
for (const { rate, via } of PLAN) fixed[via][rate] = Object.fromEntries(FIXED.map((n) => [n, []]));
const paired = {}; // rate -> "a/b" -> [[step report of a, step report of b]]
for (const rate of PAIRED_RATES) paired[rate] = Object.fromEntries(PAIRS.map(([a, b]) => [`${a}/${b}`, []]));
const running = {};
for (let round = 0; round < ROUNDS; round++) {
  if (round % RESTART_EVERY === 0) {
    if (round > 0) for (const n of FIXED) await running[n].mf.dispose();
    for (const n of FIXED) {
      running[n] = await start(n);
      const first = await decideOnce(running[n].url);
      if (round === 0) log(`${n} up at ${running[n].url} (first answer source=${first.source})`);
    }
    for (const n of FIXED) await loadtest(running[n].url, ["--rate", PREWARM_RATE, "--duration", PREWARM, "--warmup", "0s"]);
  }
  const order = FIXED.map((_, i) => FIXED[(i + round) % FIXED.length]);
  for (const { rate, via } of PLAN) {
    for (const n of order) {
      const w = running[n];
      const s = await measure(LOADTEST, w, ["--rate", String(rate), "--duration", DURATION, "--warmup", WARMUP], via === "entry" ? w.entryUrl : w.url);
      fixed[via][rate][n].push(s);
      log(`round ${round + 1} ${via} rate ${rate}/s ${n}: p50 ${s.latency?.p50_us} µs p99 ${s.latency?.p99_us} µs cpu ${s.workerd_cpu_us?.toFixed(1)} µs/req errors ${JSON.stringify(s.errors)}`);
    }
  }
  for (const rate of PAIRED_RATES) {
    for (const [a, b] of PAIRS.map((_, i) => PAIRS[(i + round) % PAIRS.length])) {
      const extra = ["--rate", String(rate), "--duration", DURATION, "--warmup", WARMUP];
      const [sa, sb] = await Promise.all([measure(LOADTEST, running[a], extra), measure(LOADTEST, running[b], extra)]);
      paired[rate][`${a}/${b}`].push([sa, sb]);
      log(`round ${round + 1} paired rate ${rate}/s ${a} with ${b}: p99 ${sa.latency?.p99_us} / ${sb.latency?.p99_us} µs, p50 ${sa.latency?.p50_us} / ${sb.latency?.p50_us} µs`);
    }
  }
}
// The last processes stay up for the knees.

// ---- knees ---------------------------------------------------------------------------
const knees = {};
for (const n of NAMES) {
  const r = await loadtest(running[n].url, ["--step", STEP, "--duration", STEP_DURATION, "--warmup", WARMUP, "--p99-limit", P99_LIMIT]);
  knees[n] = { knee: r.knee, steps: r.steps.map((s) => ({ rate: s.target_rate, p50_us: s.latency?.p50_us, p99_us: s.latency?.p99_us, errors: s.errors, achieved: s.achieved_rate })) };
  log(`${n} knee: ${r.knee ? `${r.knee.rate}/s (${r.knee.reason})` : `none up to ${r.steps.at(-1).target_rate}/s`}`);
}
for (const n of FIXED) await running[n].mf.dispose();

// ---- cold start: a fresh workerd + isolate to its first decision ------------------------
const cold = Object.fromEntries(NAMES.map((n) => [n, { total_ms: [], first_request_ms: [], second_request_ms: [] }]));
for (let i = 0; i < COLD; i++) {
  for (const n of NAMES) {
    const t0 = performance.now();
    const { mf, url } = await start(n);
    const first = await decideOnce(url);
    const total = performance.now() - t0;
    const second = await decideOnce(url);
    cold[n].total_ms.push(total);
    cold[n].first_request_ms.push(first.ms);
    cold[n].second_request_ms.push(second.ms);
    await mf.dispose();
  }
}

// ---- sizes ---------------------------------------------------------------------------
const sizes = {};
for (const n of ["ours", "floor"]) {
  const bytes = readFileSync(WORKERS[n].wasm);
  sizes[n] = { raw: bytes.length, gzip: gzipSync(bytes, { level: 9 }).length };
}
const jsSrc = ["js-worker/worker.mjs", "js-worker/decide.mjs"].map((f) => readFileSync(path.join(HERE, f)));
const jsAll = Buffer.concat([...jsSrc, readFileSync(path.join(ROOT, "model/decision-model.json"))]);
sizes.js = { raw: jsAll.length, gzip: gzipSync(jsAll, { level: 9 }).length, note: "JS source + artifact JSON" };

// ---- summary -------------------------------------------------------------------------
/** Medians over the rounds of each Worker at each rate (`runs`: rate -> name -> [step reports]). */
function summarise(runs) {
  const out = {};
  for (const [rate, byName] of Object.entries(runs)) {
    out[rate] = {};
    for (const [n, steps] of Object.entries(byName)) {
      out[rate][n] = {
        p50_us: median(steps.map((s) => s.latency?.p50_us)),
        p99_us: median(steps.map((s) => s.latency?.p99_us)),
        p99_us_min: Math.min(...steps.map((s) => s.latency?.p99_us ?? Infinity)),
        p99_us_max: Math.max(...steps.map((s) => s.latency?.p99_us ?? -Infinity)),
        workerd_cpu_us: median(steps.map((s) => s.workerd_cpu_us)),
        achieved: median(steps.map((s) => s.achieved_rate)),
        errors: steps.reduce((a, s) => a + Object.values(s.errors).reduce((x, y) => x + y, 0), 0),
        sources: steps.at(-1).sources,
      };
    }
  }
  return out;
}
const summary = summarise(fixed.direct);
const summaryEntry = summarise(fixed.entry);

/** Per pair and rate: medians over the rounds of each side and of the per-round ratios a/b. */
function summarisePaired(runs) {
  const out = {};
  for (const [rate, byPair] of Object.entries(runs)) {
    out[rate] = {};
    for (const [key, rounds] of Object.entries(byPair)) {
      const q = (i, k) => rounds.map((r) => r[i].latency?.[k]);
      const perRound = (k) => rounds.map((r) => (r[0].latency?.[k] && r[1].latency?.[k] ? r[0].latency[k] / r[1].latency[k] : null));
      out[rate][key] = {
        a: { p50_us: median(q(0, "p50_us")), p99_us: median(q(0, "p99_us")), workerd_cpu_us: median(rounds.map((r) => r[0].workerd_cpu_us)) },
        b: { p50_us: median(q(1, "p50_us")), p99_us: median(q(1, "p99_us")), workerd_cpu_us: median(rounds.map((r) => r[1].workerd_cpu_us)) },
        p50_ratio: median(perRound("p50_us")),
        p99_ratio: median(perRound("p99_us")),
        p99_ratio_per_round: perRound("p99_us"),
        a_worse_rounds: rounds.filter((r) => r[0].latency?.p99_us > r[1].latency?.p99_us).length,
        rounds: rounds.length,
        errors: rounds.reduce((acc, r) => acc + r.reduce((x, st) => x + Object.values(st.errors).reduce((y, z) => y + z, 0), 0), 0),
      };
    }
  }
  return out;
}
const summaryPaired = summarisePaired(paired);
const result = {
  runtime: `workerd via miniflare ${JSON.parse(readFileSync(path.join(ROOT, "node_modules/miniflare/package.json"), "utf8")).version}`,
  load_generator: LOADTEST,
  body: JSON.parse(body),
  rates: RATES,
  entry_rates: ENTRY_RATES,
  duration: DURATION,
  warmup: WARMUP,
  rounds: ROUNDS,
  prewarm: PREWARM,
  prewarm_rate: PREWARM_RATE,
  restart_every: RESTART_EVERY,
  step: STEP,
  step_duration: STEP_DURATION,
  p99_limit: P99_LIMIT,
  labels: Object.fromEntries(FIXED.map((n) => [n, WORKERS[n].label])),
  summary,
  summary_entry: summaryEntry,
  paired_rates: PAIRED_RATES,
  summary_paired: summaryPaired,
  rounds_detail: fixed,
  paired_detail: paired,
  knees,
  cold: Object.fromEntries(
    NAMES.map((n) => [
      n,
      {
        runs: COLD,
        total_ms: median(cold[n].total_ms),
        first_request_ms: median(cold[n].first_request_ms),
        second_request_ms: median(cold[n].second_request_ms),
      },
    ]),
  ),
  sizes,
};
const out = arg("out");
if (out) writeFileSync(out, JSON.stringify(result, null, 2) + "\n");
console.log(JSON.stringify({ direct: result.summary, entry: result.summary_entry, paired: result.summary_paired }, null, 2));

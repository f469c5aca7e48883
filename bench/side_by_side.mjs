// Side by side, one run: edge-decider, the empty workers-rs Worker (floor) and the plain-JS
// Worker, each in its own workerd (Miniflare, the runtime `wrangler dev` uses; a new one every
// few rounds, warmed to steady state) and loaded on a socket of its own (no proxy isolate in front, as on Cloudflare), driven by
// the same load generator (`decider loadtest`) at the same fixed rates, interleaved round
// by round so machine noise falls on all three alike (with a second copy of the empty
// Worker as an A/A control at the fixed rates), then those four and the bounded-read control
// (the JS Worker reading its body as edge-decider does) loaded together by one generator
// whose requests go to them in turn (BENCH_TOGETHER_RATES, each Worker at that rate; the p99
// claims are judged on this); then a step ramp for each knee (confirmed by the next step), then
// cold starts (a fresh workerd to its first decision), then wasm sizes. Each fixed-rate
// measurement also reads the workerd process's CPU time, reported per request: unlike a
// p99, it counts work rather than waiting, so machine noise moves it far less. The rates in
// BENCH_ENTRY_RATES run again through Miniflare's main socket, where Miniflare's entry
// Worker proxies each request (what `wrangler dev` adds; bench/workers.mjs `start`).
//
// usage: node bench/side_by_side.mjs --loadtest PATH [--out FILE]
//   env: BENCH_RATES="100,400"  BENCH_ENTRY_RATES="400"  BENCH_TOGETHER_RATES="100,200"  BENCH_TOGETHER_DURATION=10s
//        BENCH_DURATION=5s  BENCH_WARMUP=1s  BENCH_ROUNDS=9  BENCH_PREWARM=80s  BENCH_PREWARM_RATE=300  BENCH_RESTART_EVERY=1
//        BENCH_STEP=200:3000:200  BENCH_STEP_DURATION=2s  BENCH_P99_LIMIT=50ms  BENCH_KNEE_CONFIRM=2  BENCH_COLD=5
import { readFileSync, writeFileSync } from "node:fs";
import { gzipSync } from "node:zlib";
import path from "node:path";
import { BODY_FILE, HERE, ROOT, WORKERS, arg, cpuNs, cpuPerRequest, loadtest as run, loadtestArg, measure, median, start } from "./workers.mjs";

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
const PREWARM = env("BENCH_PREWARM", "80s");
const PREWARM_RATE = env("BENCH_PREWARM_RATE", "300");
const RESTART_EVERY = Number(env("BENCH_RESTART_EVERY", "1"));
const TOGETHER_RATES = env("BENCH_TOGETHER_RATES", "100,200").split(",").filter(Boolean).map(Number);
const TOGETHER_DURATION = env("BENCH_TOGETHER_DURATION", "10s");
const KNEE_CONFIRM = env("BENCH_KNEE_CONFIRM", "2");
const log = (...a) => console.error("[side-by-side]", ...a);
const NAMES = ["ours", "floor", "js"];
// The fixed rates also run the A/A control (see WORKERS.floor_b).
const FIXED = [...NAMES, "floor_b"];
// The in-turn rounds also load the bounded-read control (WORKERS.js_bounded): the JS Worker
// reading its body as edge-decider does, so that the tail cost of the bound is apart from
// that of Rust/wasm. It is reported beside the claims, not judged.
const TOGETHER = [...FIXED, "js_bounded"];
// Together: the five Workers (each in its own workerd, on its own socket) loaded by one
// generator whose requests go to them in turn (`decider loadtest` with one --url per
// Worker; the turn order rotates every round of sends), each at the rate. Loaded one after
// the other, each Worker gets its own seconds of this machine, and a burst of host noise (a
// whole measurement with p50 above 2 ms) lands on whichever Worker runs then; loaded in
// turn, a stall falls on all of them within a millisecond or two. Two generators at once (the
// paired loading this replaced) competed with each other for the two cores and showed an
// A/A ratio of 1.83. Four Workers at 400/s each (1,600/s in all) saturated this machine
// (p99 45–250 ms for every Worker), hence the lower rates.

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
// so one process per Worker for the whole run would count that luck in every round; loaded
// in turn, two JS processes were still 1.18x apart over 10 rounds (README), so by default
// every round has new processes: nine draws of that luck per Worker instead of three.
// The new processes are first loaded together, in turn, PREWARM at PREWARM_RATE each,
// unmeasured (24,000 requests each by default): V8 moves a wasm function from its baseline compiler (Liftoff) to TurboFan only
// once ~13 MB of its code has run (`--wasm-tiering-budget`), and with
// `--trace-wasm-compilation-times` edge-decider's functions were still being tiered up
// after 16,000–24,000 requests. The measurements are of Workers in steady state, as a busy
// isolate on Cloudflare is; the cold start has its own table.
// Within a round, every rate on the Workers' own sockets, then every entry rate through
// Miniflare's entry Worker, each Worker in turn in an order that rotates.
const PLAN = [...RATES.map((rate) => ({ rate, via: "direct" })), ...ENTRY_RATES.map((rate) => ({ rate, via: "entry" }))];
const fixed = { direct: {}, entry: {} }; // via -> rate -> name -> [step reports]
for (const { rate, via } of PLAN) fixed[via][rate] = Object.fromEntries(FIXED.map((n) => [n, []]));
const together = {}; // rate -> name -> [step reports], one per round
for (const rate of TOGETHER_RATES) together[rate] = Object.fromEntries(TOGETHER.map((n) => [n, []]));
const running = {};
for (let round = 0; round < ROUNDS; round++) {
  if (round % RESTART_EVERY === 0) {
    if (round > 0) for (const n of TOGETHER) await running[n].mf.dispose();
    for (const n of TOGETHER) {
      running[n] = await start(n);
      const first = await decideOnce(running[n].url);
      if (round === 0) log(`${n} up at ${running[n].url} (first answer source=${first.source})`);
    }
    await loadtest(running[TOGETHER[0]].url, [...TOGETHER.slice(1).flatMap((n) => ["--url", running[n].url]), "--rate", PREWARM_RATE, "--duration", PREWARM, "--warmup", "0s"]);
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
  for (const rate of TOGETHER_RATES) {
    // The first --url rotates with the round too (the generator's turn order rotates anyway).
    const names = TOGETHER.map((_, i) => TOGETHER[(i + round) % TOGETHER.length]);
    const c0 = names.map((n) => cpuNs(running[n].pid));
    const r = await loadtest(running[names[0]].url, [...names.slice(1).flatMap((n) => ["--url", running[n].url]), "--rate", String(rate), "--duration", TOGETHER_DURATION, "--warmup", WARMUP]);
    const c1 = names.map((n) => cpuNs(running[n].pid));
    const targets = r.targets ?? [{ url: r.url, steps: r.steps }];
    names.forEach((n, i) => {
      const s = targets[i].steps[0];
      s.workerd_cpu_us = cpuPerRequest(c0[i], c1[i], s, r.warmup_s);
      together[rate][n].push(s);
    });
    log(`round ${round + 1} together rate ${rate}/s each: ` + names.map((n, i) => `${n} p50 ${targets[i].steps[0].latency?.p50_us} p99 ${targets[i].steps[0].latency?.p99_us} µs`).join(", "));
  }
}
// The last processes stay up for the knees.

// ---- knees ---------------------------------------------------------------------------
const knees = {};
for (const n of NAMES) {
  const r = await loadtest(running[n].url, ["--step", STEP, "--duration", STEP_DURATION, "--warmup", WARMUP, "--p99-limit", P99_LIMIT, "--knee-confirm", KNEE_CONFIRM]);
  knees[n] = { knee: r.knee, steps: r.steps.map((s) => ({ rate: s.target_rate, p50_us: s.latency?.p50_us, p99_us: s.latency?.p99_us, errors: s.errors, achieved: s.achieved_rate })) };
  log(`${n} knee: ${r.knee ? `${r.knee.rate}/s (${r.knee.reason})` : `none up to ${r.steps.at(-1).target_rate}/s`}`);
}
for (const n of TOGETHER) await running[n].mf.dispose();

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
const jsSrc = ["js-worker/worker.mjs", "js-worker/handler.mjs", "js-worker/decide.mjs"].map((f) => readFileSync(path.join(HERE, f)));
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

/**
 * Per rate of the together measurement: each Worker's medians over the rounds, and the
 * median of the per-round p99 and p50 ratios of each comparison (ours / floor, ours / JS, the
 * A/A control floor_b / floor, and with the bounded-read control ours / it and it / JS): the
 * Workers of one round shared its seconds.
 */
function summariseTogether(runs) {
  const out = {};
  for (const [rate, byName] of Object.entries(runs)) {
    const perRound = (a, b, k) => byName[a].map((s, i) => (s.latency?.[k] && byName[b][i]?.latency?.[k] ? s.latency[k] / byName[b][i].latency[k] : null));
    const cmp = (a, b) => ({
      p99_ratio: median(perRound(a, b, "p99_us")),
      p50_ratio: median(perRound(a, b, "p50_us")),
      p99_ratio_per_round: perRound(a, b, "p99_us"),
      a_worse_rounds: perRound(a, b, "p99_us").filter((x) => x > 1).length,
      cpu_ratio: median(byName[a].map((s, i) => (s.workerd_cpu_us && byName[b][i]?.workerd_cpu_us ? s.workerd_cpu_us / byName[b][i].workerd_cpu_us : null))),
    });
    out[rate] = {
      workers: summarise({ [rate]: byName })[rate],
      rounds: byName.ours.length,
      compare: {
        "ours/floor": cmp("ours", "floor"),
        "ours/js": cmp("ours", "js"),
        "floor_b/floor": cmp("floor_b", "floor"),
        ...(byName.js_bounded ? { "ours/js_bounded": cmp("ours", "js_bounded"), "js_bounded/js": cmp("js_bounded", "js") } : {}),
      },
    };
  }
  return out;
}
const summaryTogether = summariseTogether(together);
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
  knee_confirm: Number(KNEE_CONFIRM),
  labels: Object.fromEntries(TOGETHER.map((n) => [n, WORKERS[n].label])),
  summary,
  summary_entry: summaryEntry,
  together_rates: TOGETHER_RATES,
  together_duration: TOGETHER_DURATION,
  summary_together: summaryTogether,
  rounds_detail: fixed,
  together_detail: together,
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
console.log(JSON.stringify({ direct: result.summary, entry: result.summary_entry, together: result.summary_together }, null, 2));

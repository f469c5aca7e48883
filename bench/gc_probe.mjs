// How each Worker's garbage collections line up with its slow requests. The Workers run in
// their own workerd processes and are loaded in turn by one generator (as make bench's
// together measurement), with V8's --trace-gc on. `decider loadtest --latency-log` records
// every request's scheduled time and latency; each GC line is stamped on arrival. Per Worker
// this prints:
//   - young collections (scavenges): how often, how long, how much each collected, and how
//     many bytes per request outlived them (promoted: garbage that only a full collection
//     frees), measured between consecutive scavenges from the requests sent in between;
//   - full collections (mark-compact) and their pauses;
//   - the share of requests that were in flight during one of the Worker's own collections,
//     and p99 with and without those requests.
//
// Why: V8 sizes an isolate's young generation by its allocation rate. An isolate allocating
// less than 1,000 bytes per ms has its young generation shrunk (heap.cc,
// Heap::ShouldResizeNewSpace, kLowAllocationThroughput), so it stays at its minimum (1 MB
// here) and is collected every megabyte; above that rate it grows (8 MB here) and is
// collected several times less often, with longer pauses. The same Worker at another rate,
// or two Workers at the same rate, can land on either side, and the p99 follows.
//
// V8 flags: workerd takes them only from its config, which Miniflare does not expose. This
// script loads a copy of Miniflare's main file with one added line that sets the config's
// `v8Flags` (node_modules/miniflare/dist/src/index.gc-probe.js, written next to the
// original so that its relative paths resolve; make bench never loads it). workerd's stdout
// is line-buffered through coreutils' libstdbuf, so each GC line arrives when it happens.
//
// usage: node bench/gc_probe.mjs --loadtest PATH [--only ours,js,floor] [--rates 100,200]
//          [--seconds 10] [--rounds 6] [--prewarm 40s] [--prewarm-rate 300]
//          [--v8-flags "--min-semi-space-size=8"] [--out result.json]
// Each rate gets new workerd processes and its own prewarm. Where the GC lines cannot be
// timed (no libstdbuf, another Miniflare), it says why and, with --out, records it there.
// A Worker is NAME, NAME#LABEL (a second instance) or NAME#LABEL=SCRIPT (another build's
// entry module, e.g. ours#abuf=bench/.ab/abuf/entry.mjs).
import { createRequire } from "node:module";
import { existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import { COMPAT_DATE, WORKERS, arg, loadtest, loadtestArg, median, nearestRank as quantile } from "./workers.mjs";

const LOADTEST = loadtestArg(
  "node bench/gc_probe.mjs --loadtest PATH [--only ours,js,floor] [--rates N,M] [--seconds S] [--rounds N] [--prewarm D] [--prewarm-rate N] [--v8-flags FLAGS] [--out FILE]",
);
const NAMES = arg("only", "ours,js,floor").split(",");
const RATES = arg("rates", arg("rate", "100,200")).split(",").map(Number);
const SECONDS = Number(arg("seconds", "10"));
const ROUNDS = Number(arg("rounds", "6"));
const PREWARM = arg("prewarm", "40s");
const PREWARM_RATE = arg("prewarm-rate", "300");
const V8_FLAGS = ["--trace-gc", ...arg("v8-flags", "").split(" ").filter(Boolean)];
const OUT = arg("out");
// A GC line arrives just after the pause ends; a request overlaps the pause when it was in
// flight within [end - pause - SLACK, end].
const SLACK_US = 1000;

/** Ends the probe without a measurement, saying why (in --out too). */
function skip(why) {
  console.error(`gc_probe: not measured: ${why}`);
  if (OUT) writeFileSync(OUT, JSON.stringify({ skipped: why }, null, 2) + "\n");
  process.exit(OUT ? 0 : 2);
}

/** Miniflare with `v8Flags` from MF_PROBE_V8FLAGS: a patched copy of its main file. */
function patchedMiniflare() {
  const require = createRequire(import.meta.url);
  const main = require.resolve("miniflare");
  const copy = path.join(path.dirname(main), "index.gc-probe.js");
  const anchor = "function serializeConfig(config) {";
  const src = readFileSync(main, "utf8");
  if (!src.includes(anchor)) skip(`${main} has no serializeConfig to patch (another Miniflare version?)`);
  const patched = src.replace(anchor, `${anchor}\n  if (process.env.MF_PROBE_V8FLAGS) config.v8Flags = JSON.parse(process.env.MF_PROBE_V8FLAGS);`);
  if (!existsSync(copy) || readFileSync(copy, "utf8") !== patched) writeFileSync(copy, patched);
  return require(copy).Miniflare;
}

const STDBUF = ["/usr/libexec/coreutils/libstdbuf.so", "/usr/lib/coreutils/libstdbuf.so"].find(existsSync);
if (!STDBUF) skip("coreutils' libstdbuf.so not found: without it workerd buffers its GC lines and they cannot be timed");
// Inherited by the workerd processes Miniflare spawns.
process.env.LD_PRELOAD = STDBUF;
process.env._STDBUF_O = "L";
process.env.MF_PROBE_V8FLAGS = JSON.stringify(V8_FLAGS);
const Miniflare = patchedMiniflare();

const GC_LINE = /\[\d+:(0x[0-9a-f]+)\]\s+(\d+) ms: (Scavenge|Minor Mark-Sweep|Mark-Compact(?: \(reduce\))?|Mark-sweep)\S*\s+([\d.]+) \(([\d.]+)\) -> ([\d.]+) \(([\d.]+)\) MB,(?: pooled: [\d.]+ MB,)? ([\d.]+) \/ ([\d.]+) ms/;
const nowUs = () => Math.round((performance.timeOrigin + performance.now()) * 1000);

const byRate = {};
for (const rate of RATES) byRate[rate] = await measureAt(rate);
print(byRate);
if (OUT) {
  const labels = Object.fromEntries(
    NAMES.map((spec) => {
      const [name, script] = spec.split("=");
      const [kind, tag] = name.split("#");
      return [name, `${WORKERS[kind].label}${tag ? ` (${tag}${script ? `: ${script}` : ""})` : ""}`];
    }),
  );
  writeFileSync(OUT, JSON.stringify({ rates: RATES, seconds: SECONDS, rounds: ROUNDS, prewarm: PREWARM, prewarm_rate: Number(PREWARM_RATE), v8_flags: V8_FLAGS, labels, by_rate: byRate }, null, 2) + "\n");
}

/** New processes for every Worker, prewarmed, then ROUNDS rounds in turn at `rate` each. */
async function measureAt(rate) {
  const workers = [];
  try {
    for (const spec of NAMES) {
      const [name, script] = spec.split("=");
      const kind = name.split("#")[0];
      if (!WORKERS[kind]) throw new Error(`unknown Worker ${kind}; one of ${Object.keys(WORKERS).join(", ")}`);
      const options = WORKERS[kind].options();
      if (script) options.scriptPath = path.resolve(script);
      const wn = name.replace(/[^a-z0-9]/gi, "-").toLowerCase();
      const w = { name, events: [], pending: "" };
      w.mf = new Miniflare({
        host: "127.0.0.1",
        port: 0,
        workers: [{ name: wn, compatibilityDate: COMPAT_DATE, ...options, unsafeDirectSockets: [{ host: "127.0.0.1", port: 0 }] }],
        handleRuntimeStdio(stdout, stderr) {
          for (const s of [stdout, stderr]) {
            s.on("data", (chunk) => {
              const at = nowUs();
              w.pending += chunk;
              let i;
              while ((i = w.pending.indexOf("\n")) >= 0) {
                const m = GC_LINE.exec(w.pending.slice(0, i));
                w.pending = w.pending.slice(i + 1);
                if (m) {
                  w.events.push({
                    isolate: m[1], at_us: at, kind: m[3].startsWith("Mark-") ? "full" : "young",
                    before_mb: Number(m[4]), after_mb: Number(m[6]), pause_ms: Number(m[8]),
                  });
                }
              }
            });
          }
        },
      });
      await w.mf.ready;
      w.url = new URL("/v1/decide", await w.mf.unsafeGetDirectURL(wn)).href;
      workers.push(w);
    }
    const urls = workers.flatMap((w) => ["--url", w.url]).slice(2);
    console.error(`${rate}/s: prewarm: ${workers.length} Workers in turn, ${PREWARM_RATE}/s each for ${PREWARM}`);
    await loadtest(LOADTEST, workers[0].url, [...urls, "--rate", PREWARM_RATE, "--duration", PREWARM, "--warmup", "0s"]);

    const dir = mkdtempSync(path.join(os.tmpdir(), "gc-probe-"));
    const requests = workers.map(() => []);
    const rounds = [];
    try {
      for (let r = 0; r < ROUNDS; r++) {
        const log = path.join(dir, `r${r}.csv`);
        // No warmup: the log holds every request sent, so the counts between two collections
        // are complete (the processes are warm from the prewarm).
        const rep = await loadtest(LOADTEST, workers[0].url, [...urls, "--rate", String(rate), "--duration", `${SECONDS}s`, "--warmup", "0s", "--latency-log", log]);
        const mine = workers.map(() => []);
        for (const line of readFileSync(log, "utf8").trim().split("\n").slice(1)) {
          const [target, , at, lat] = line.split(",");
          mine[Number(target)].push({ at: Number(at), lat: Number(lat) });
        }
        mine.forEach((m, i) => requests[i].push(...m));
        const targets = rep.targets ?? [rep];
        rounds.push(mine);
        console.error(`${rate}/s: round ${r + 1}/${ROUNDS}: ` + workers.map((w, i) => `${w.name} p99 ${targets[i].steps[0].latency.p99_us} us`).join(", "));
      }
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }

    return workers.map((w, i) => summarise(w, requests[i], rounds.map((m) => m[i]), rate));
  } finally {
    for (const w of workers) await w.mf.dispose();
  }
}

// Medians over collections and rounds are the bench's (workers.mjs: the mean of the two middle
// values of an even count); request percentiles are nearest-rank (`quantile`), as loadtest's.

/** One Worker's GC statistics against its requests (all rounds) and its rounds. */
function summarise(w, reqs, rounds, rate) {
  // workerd runs Miniflare's own isolates beside the Worker's: the Worker's is the busiest.
  const byIsolate = new Map();
  for (const e of w.events) byIsolate.set(e.isolate, (byIsolate.get(e.isolate) ?? 0) + 1);
  const isolate = [...byIsolate].sort((a, b) => b[1] - a[1])[0]?.[0];
  const first = reqs.reduce((m, q) => Math.min(m, q.at), Infinity);
  const last = reqs.reduce((m, q) => Math.max(m, q.at + q.lat), -Infinity);
  const events = w.events.filter((e) => e.isolate === isolate && e.at_us >= first && e.at_us <= last + 1e6);
  const sent = reqs.map((q) => q.at).sort((a, b) => a - b);
  const between = (a, b) => lowerBound(sent, b) - lowerBound(sent, a);
  // Consecutive young collections with no full one in between: what the requests sent in
  // between allocated, and what of it outlived the second collection.
  const young = [];
  for (let i = 1; i < events.length; i++) {
    const [a, b] = [events[i - 1], events[i]];
    if (a.kind !== "young" || b.kind !== "young") continue;
    const n = between(a.at_us, b.at_us);
    if (n < 50) continue;
    young.push({
      n,
      seconds: (b.at_us - a.at_us) / 1e6,
      collected_mb: b.before_mb - a.after_mb,
      alloc_kb: ((b.before_mb - a.after_mb) * 1024) / n,
      promoted_kb: ((b.after_mb - a.after_mb) * 1024) / n,
    });
  }
  const overlaps = (q) => events.some((e) => q.at <= e.at_us && q.at + q.lat >= e.at_us - e.pause_ms * 1000 - SLACK_US);
  const perRound = rounds.map((rq) => {
    const clean = rq.filter((q) => !overlaps(q));
    return { p99_us: quantile(rq.map((q) => q.lat), 0.99), p99_without_own_gc_us: quantile(clean.map((q) => q.lat), 0.99), touched: rq.length - clean.length, requests: rq.length };
  });
  const ys = events.filter((e) => e.kind === "young");
  const fs = events.filter((e) => e.kind === "full");
  const allocKb = median(young.map((y) => y.alloc_kb));
  return {
    name: w.name,
    requests: reqs.length,
    // What V8's young-generation sizing compares with 1,000 bytes/ms.
    allocated_bytes_per_ms: allocKb === null ? null : (allocKb * 1024 * rate) / 1000,
    young: {
      count: ys.length,
      per_1000_requests: (1000 * ys.length) / reqs.length,
      interval_s: median(young.map((y) => y.seconds)),
      collected_mb: median(young.map((y) => y.collected_mb)),
      pause_ms: median(ys.map((e) => e.pause_ms)),
      allocated_kb_per_request: allocKb,
      promoted_kb_per_request: median(young.map((y) => y.promoted_kb)),
    },
    full: { count: fs.length, pauses_ms: fs.map((e) => e.pause_ms) },
    touched_share: perRound.reduce((a, r) => a + r.touched, 0) / reqs.length,
    p99_us: median(perRound.map((r) => r.p99_us)),
    p99_without_own_gc_us: median(perRound.map((r) => r.p99_without_own_gc_us)),
    rounds: perRound,
  };
}

function lowerBound(xs, v) {
  let [lo, hi] = [0, xs.length];
  while (lo < hi) {
    const mid = (lo + hi) >> 1;
    if (xs[mid] < v) lo = mid + 1;
    else hi = mid;
  }
  return lo;
}

function print(byRate) {
  const f = (x, d = 2) => (x === null || x === undefined ? "–" : Number(x).toFixed(d));
  for (const [rate, results] of Object.entries(byRate)) {
    console.log(`${results.length} Workers in turn at ${rate}/s each, ${ROUNDS} × ${SECONDS} s, V8 flags ${V8_FLAGS.join(" ")}`);
    console.log("Worker            alloc KB/req  bytes/ms  young/1000 req  every s  young MB  pause ms  promoted KB/req  full (pauses ms)     in own GC  p99 ms  p99 without ms");
    for (const r of results) {
      console.log(
        [
          r.name.padEnd(16),
          f(r.young.allocated_kb_per_request).padStart(13),
          f(r.allocated_bytes_per_ms, 0).padStart(9),
          f(r.young.per_1000_requests).padStart(15),
          f(r.young.interval_s).padStart(8),
          f(r.young.collected_mb).padStart(9),
          f(r.young.pause_ms).padStart(9),
          f(r.young.promoted_kb_per_request).padStart(16),
          `${r.full.count} (${r.full.pauses_ms.map((p) => p.toFixed(1)).join(", ")})`.padStart(20),
          `${f(100 * r.touched_share)}%`.padStart(11),
          f(r.p99_us / 1000).padStart(7),
          f(r.p99_without_own_gc_us / 1000).padStart(15),
        ].join(" "),
      );
    }
  }
}

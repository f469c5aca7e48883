// Wasm micro-benchmark in V8 (node): the whole decision of decider-core compiled to a plain
// wasm module (bench/wasm-micro), timed per decision, against the hand-written JS decision
// (bench/js-worker/decide.mjs) on the same inputs, in the same process, in the same run.
// Also: agreement (the JS baseline must decide exactly like decider-core, or the comparison
// is meaningless) and cold start in fresh isolates (node worker threads).
//
// usage: node bench/micro.mjs --wasm PATH [--runs 21] [--iters 20000] [--cold 9] [--out FILE]
import { readFileSync, writeFileSync } from "node:fs";
import { Worker } from "node:worker_threads";
import { fileURLToPath } from "node:url";
import path from "node:path";
import { decideBody, loadModel, loadRules } from "./js-worker/decide.mjs";

const HERE = path.dirname(fileURLToPath(import.meta.url));
const ROOT = path.resolve(HERE, "..");

function arg(name, dflt) {
  const i = process.argv.indexOf(`--${name}`);
  return i >= 0 ? process.argv[i + 1] : dflt;
}

const wasmPath = arg("wasm");
if (!wasmPath) {
  console.error("usage: node bench/micro.mjs --wasm PATH [--runs N] [--iters N] [--cold N] [--out FILE]");
  process.exit(2);
}
const RUNS = Number(arg("runs", 21));
const ITERS = Number(arg("iters", 20000));
const COLD = Number(arg("cold", 9));
const HOUR = 12; // the wasm side validates with default hour 12 as well

const median = (xs) => {
  const s = [...xs].sort((a, b) => a - b);
  const n = s.length;
  return n % 2 ? s[(n - 1) / 2] : (s[n / 2 - 1] + s[n / 2]) / 2;
};
const summary = (xs) => ({ median: median(xs), min: Math.min(...xs), max: Math.max(...xs), runs: xs.length });

const wasmBytes = readFileSync(wasmPath);
const rulesText = readFileSync(path.join(ROOT, "rules/default.json"), "utf8");

const { instance } = await WebAssembly.instantiate(wasmBytes, {});
const w = instance.exports;
if (w.init() !== 0) throw new Error("wasm init failed: artifact or rules refused");
const shipped = w.artifact_is_shipped() === 1;

const dec = new TextDecoder();
const enc = new TextEncoder();
// Call the export that fills the output buffer first, then read it (the pointer moves).
const outText = (len) => dec.decode(new Uint8Array(w.memory.buffer, w.output_ptr(), len));
const bodies = Array.from({ length: 256 }, (_, i) => outText(w.copy_body(i)));
function wasmDecide(text) {
  const bytes = enc.encode(text);
  const p = w.alloc(bytes.length);
  new Uint8Array(w.memory.buffer, p, bytes.length).set(bytes);
  return outText(w.decide(bytes.length));
}

// The JS baseline uses exactly the artifact the wasm module embeds (the shipped one at build
// time, or the tiny fallback when that did not load).
const jsArtifact = JSON.parse(outText(w.copy_artifact()));
const model = loadModel(jsArtifact);
const rules = loadRules(JSON.parse(rulesText));


// ---- agreement: same action, source, reason and rule; confidence within 1e-9 ----------
const extra = [
  '{"state":{"request_type":1,"region_id":3,"current_load":0.4,"recent_success_rate":0.97,"queue_depth":12,"hour":14}}',
  '{"state":{"request_type":5,"region_id":9,"current_load":3.5,"recent_success_rate":0.01,"queue_depth":1000,"hour":23}}',
  '{"state":{"request_type":0,"region_id":0,"current_load":0,"recent_success_rate":0,"queue_depth":0,"hour":0}}',
  '{"state":{"request_type":3,"region_id":4,"current_load":0.85,"recent_success_rate":0.6,"queue_depth":55,"hour":2}}',
];
const disagreements = [];
for (const b of [...bodies, ...extra]) {
  const r = JSON.parse(wasmDecide(b));
  const j = decideBody(model, rules, b, HOUR).body;
  const same =
    r.action === j.action &&
    r.source === j.source &&
    r.fallback_reason === j.fallback_reason &&
    (r.rule ?? null) === (j.rule ?? null) &&
    Math.abs(r.confidence - j.confidence) <= 1e-9;
  if (!same) disagreements.push({ body: b, rust: r, js: j });
}

// ---- timing --------------------------------------------------------------------------
// Wall time per decision, and CPU time per decision (process user+system time: on a shared
// machine the wall clock also counts the time this process waited for a core, CPU time much
// less so).
function timeRuns(fn) {
  fn(ITERS); // warm: JIT tiers, caches
  fn(ITERS);
  const wall = [];
  const cpu = [];
  for (let r = 0; r < RUNS; r++) {
    const c0 = process.cpuUsage();
    const t0 = performance.now();
    fn(ITERS);
    wall.push(((performance.now() - t0) * 1000) / ITERS);
    const c = process.cpuUsage(c0);
    cpu.push((c.user + c.system) / ITERS);
  }
  return { ...summary(wall), cpu: summary(cpu) };
}

let sink = 0;
// Interleave the three so machine noise hits each alike.
const wasmWhole = [];
const wasmDecideOnly = [];
const jsWhole = [];
const rounds = 3;
const one = {
  wasmWhole: (n) => (sink ^= w.bench_whole(n)),
  wasmDecide: (n) => (sink ^= w.bench_decide(n)),
  jsWhole: (n) => {
    for (let i = 0; i < n; i++) sink ^= JSON.stringify(decideBody(model, rules, bodies[i & 255], HOUR).body).length;
  },
};
for (let r = 0; r < rounds; r++) {
  wasmWhole.push(timeRuns(one.wasmWhole));
  wasmDecideOnly.push(timeRuns(one.wasmDecide));
  jsWhole.push(timeRuns(one.jsWhole));
}
const merge1 = (xs) => ({
  median: median(xs.map((x) => x.median)),
  min: Math.min(...xs.map((x) => x.min)),
  max: Math.max(...xs.map((x) => x.max)),
  runs: xs.reduce((a, x) => a + x.runs, 0),
});
const merge = (xs) => ({ ...merge1(xs), cpu: merge1(xs.map((x) => x.cpu)) });
// Where the whole decision's time goes: each stage on its own over the same seeded inputs
// (bench/wasm-micro `bench_stage`; labels as its STAGES). Stage 1 is the path a body takes
// only when the fast scanner refuses it (an error to report), so it is not part of the sum.
const STAGES = [
  "parse: body text → state (scanner, the path of a valid body)",
  "parse: body text → state through serde_json::Value (the path of an invalid body)",
  "model: state → outcome (encode, trees, calibration, checks)",
  "policy: state + outcome → decision",
  "serialise: decision → JSON text",
  "trees alone: features → margins (part of model)",
];
const stages = STAGES.map((label, k) => {
  const runs = [];
  for (let r = 0; r < rounds; r++) runs.push(timeRuns((n) => (sink ^= w.bench_stage(k, n))));
  return { stage: k, label, ...merge(runs) };
});

// ---- cold start: a fresh isolate (worker thread) to its first decision ----------------
const COLD_SRC = `
const { parentPort, workerData } = require("node:worker_threads");
(async () => {
  const t0 = performance.now();
  let out;
  if (workerData.kind === "wasm") {
    const mod = new WebAssembly.Module(workerData.bytes);
    const inst = new WebAssembly.Instance(mod, {});
    const w = inst.exports;
    if (w.init() !== 0) throw new Error("init failed");
    const b = new TextEncoder().encode(workerData.body);
    const p = w.alloc(b.length);
    new Uint8Array(w.memory.buffer, p, b.length).set(b);
    const n = w.decide(b.length);
    out = new TextDecoder().decode(new Uint8Array(w.memory.buffer, w.output_ptr(), n));
  } else {
    const m = await import(workerData.decideUrl);
    const model = m.loadModel(JSON.parse(workerData.artifact));
    const rules = m.loadRules(JSON.parse(workerData.rules));
    out = JSON.stringify(m.decideBody(model, rules, workerData.body, 12).body);
  }
  parentPort.postMessage({ ms: performance.now() - t0, out });
})();
`;
async function coldOnce(kind) {
  const worker = new Worker(COLD_SRC, {
    eval: true,
    workerData: {
      kind,
      bytes: wasmBytes,
      body: extra[0],
      artifact: JSON.stringify(jsArtifact),
      rules: rulesText,
      decideUrl: new URL("./js-worker/decide.mjs", import.meta.url).href,
    },
  });
  const msg = await new Promise((resolve, reject) => {
    worker.once("message", resolve);
    worker.once("error", reject);
  });
  await worker.terminate();
  if (!JSON.parse(msg.out).action) throw new Error(`cold ${kind}: no decision: ${msg.out}`);
  return msg.ms;
}
const coldWasm = [];
const coldJs = [];
for (let i = 0; i < COLD; i++) {
  coldWasm.push(await coldOnce("wasm"));
  coldJs.push(await coldOnce("js"));
}

// ---- the same wasm in workerd (Miniflare): does the Workers runtime run it as fast as V8 in node?
// workerd freezes clocks while a request runs, so time from outside: a request doing N
// decisions minus a request doing one, per decision.
async function workerdTiming() {
  const { Miniflare } = await import("miniflare");
  const script = `
import mod from "./micro.wasm";
const w = new WebAssembly.Instance(mod, {}).exports;
w.init();
export default { async fetch(req) {
  const u = new URL(req.url);
  const n = Number(u.searchParams.get("n") ?? "1");
  return new Response(String(u.pathname === "/decide" ? w.bench_decide(n) : w.bench_whole(n)));
} };`;
  const dir = path.join(HERE, "wasm-micro");
  const mf = new Miniflare({
    host: "127.0.0.1",
    port: 0,
    workers: [{ name: "micro", compatibilityDate: "2026-04-20", modules: [
      { type: "ESModule", path: path.join(dir, "bench-worker.mjs"), contents: script },
      { type: "CompiledWasm", path: path.join(dir, "micro.wasm"), contents: wasmBytes },
    ] }],
  });
  const base = await mf.ready;
  const get = async (p) => (await fetch(new URL(p, base))).text();
  const out = {};
  const N = ITERS;
  for (const which of ["whole", "decide"]) {
    for (let k = 0; k < 3; k++) await get(`/${which}?n=${N}`); // tier up
    const per = [];
    for (let k = 0; k < RUNS; k++) {
      const t0 = performance.now();
      await get(`/${which}?n=${N}`);
      const many = performance.now() - t0;
      const t1 = performance.now();
      await get(`/${which}?n=1`);
      const one = performance.now() - t1;
      per.push(((many - one) * 1000) / (N - 1));
    }
    out[which] = summary(per);
  }
  await mf.dispose();
  return out;
}
const inWorkerd = await workerdTiming();

const result = {
  runtime: `node ${process.version} (V8 ${process.versions.v8})`,
  artifact: shipped ? "model/decision-model.json" : "tiny test artifact (model/decision-model.json did not load)",
  model_version: model.version,
  trees: model.roots.length,
  iters_per_run: ITERS,
  runs: RUNS * rounds,
  wasm_whole_us: merge(wasmWhole),
  wasm_decide_us: merge(wasmDecideOnly),
  wasm_stages_us: stages,
  js_whole_us: merge(jsWhole),
  ratio_wasm_over_js: median(wasmWhole.map((x) => x.median)) / median(jsWhole.map((x) => x.median)),
  ratio_wasm_over_js_cpu: median(wasmWhole.map((x) => x.cpu.median)) / median(jsWhole.map((x) => x.cpu.median)),
  load_average: (await import("node:os")).loadavg(),
  cold_start_ms: { wasm: summary(coldWasm), js: summary(coldJs) },
  workerd_us: { runtime: "workerd via miniflare", whole: inWorkerd.whole, decide: inWorkerd.decide },
  wasm_module_bytes: wasmBytes.length,
  agreement: { checked: bodies.length + extra.length, disagreements: disagreements.length, examples: disagreements.slice(0, 3) },
  sink,
};
const out = arg("out");
if (out) writeFileSync(out, JSON.stringify(result, null, 2) + "\n");
console.log(JSON.stringify(result, null, 2));
if (disagreements.length) {
  console.error(`JS baseline disagrees with decider-core on ${disagreements.length} input(s)`);
  process.exit(1);
}

// Where a Worker allocates on the JS heap, per request, by call site. V8's sampling heap
// profiler (through workerd's inspector) records allocations while the Worker serves a
// fixed rate; this prints the sampled bytes per request, in total and for the call sites
// that allocate most.
//
// Why it matters: under load, nearly every request in the latency tail coincides with a
// young-generation collection (scavenge) of the Worker's isolate or of Miniflare's entry
// Worker, and an isolate scavenges once its new space (1–2 MB of allocations here) is
// full, or earlier when new ArrayBuffers add up. Fewer bytes per request means fewer
// scavenges. Minified function names are those of
// build/index.js (worker-build's shim and wasm-bindgen's glue, with src/glue.js inlined).
//
// usage: node bench/alloc_probe.mjs --loadtest PATH [--only ours|floor|js|ours=DIR/entry.mjs]
//          [--rate 400] [--seconds 5] [--top 25] [--out profile.json]
import { Miniflare } from "miniflare";
import WebSocket from "ws";
import { writeFileSync } from "node:fs";
import path from "node:path";
import { COMPAT_DATE, WORKERS, arg, loadtest, loadtestArg } from "./workers.mjs";

const LOADTEST = loadtestArg("node bench/alloc_probe.mjs --loadtest PATH [--only NAME[=SCRIPT]] [--rate N] [--seconds S] [--top N] [--out FILE]");
const [kind, script] = arg("only", "ours").split("=");
const RATE = Number(arg("rate", "400"));
const SECONDS = Number(arg("seconds", "5"));
const TOP = Number(arg("top", "25"));
const OUT = arg("out");
// Only what outlived a young-generation collection (promoted, or still alive at the end).
const SURVIVORS = process.argv.includes("--survivors");
if (!WORKERS[kind]) {
  console.error(`unknown Worker ${kind}; one of ${Object.keys(WORKERS).join(", ")}`);
  process.exit(2);
}

const options = WORKERS[kind].options();
if (script) options.scriptPath = path.resolve(script);
const inspectorPort = 9300 + (process.pid % 500);
const mf = new Miniflare({
  host: "127.0.0.1",
  port: 0,
  inspectorPort,
  workers: [{ name: kind, compatibilityDate: COMPAT_DATE, ...options }],
  handleRuntimeStdio(stdout, stderr) {
    stdout.resume();
    stderr.resume();
  },
});

try {
  const url = new URL("/v1/decide", await mf.ready).href;
  // Warm up first: V8 compiles and tiers up the hot code, and first-use allocations settle.
  await loadtest(LOADTEST, url, ["--rate", String(RATE), "--duration", "3s", "--warmup", "0s"]);

  const targets = await (await fetch(`http://127.0.0.1:${inspectorPort}/json`)).json();
  const target = targets.find((t) => t.title.endsWith(`worker core:user:${kind}`));
  if (!target) throw new Error(`no inspector target for ${kind} among ${targets.map((t) => t.title).join(", ")}`);
  const ws = new WebSocket(target.webSocketDebuggerUrl);
  await new Promise((resolve, reject) => {
    ws.once("open", resolve);
    ws.once("error", reject);
  });
  let nextId = 0;
  const pending = new Map();
  ws.on("message", (m) => {
    const msg = JSON.parse(m);
    if (pending.has(msg.id)) {
      pending.get(msg.id)(msg);
      pending.delete(msg.id);
    }
  });
  const call = (method, params = {}) =>
    new Promise((resolve, reject) => {
      const id = ++nextId;
      pending.set(id, (msg) => (msg.error ? reject(new Error(`${method}: ${msg.error.message}`)) : resolve(msg.result)));
      ws.send(JSON.stringify({ id, method, params }));
    });

  await call("HeapProfiler.enable");
  // Every 256 bytes on average; objects later collected by either collector are counted too.
  await call("HeapProfiler.startSampling", {
    samplingInterval: 256,
    includeObjectsCollectedByMajorGC: true,
    includeObjectsCollectedByMinorGC: !SURVIVORS,
  });
  const run = await loadtest(LOADTEST, url, ["--rate", String(RATE), "--duration", `${SECONDS}s`, "--warmup", "0s"]);
  const { profile } = await call("HeapProfiler.stopSampling");
  ws.close();
  if (OUT) writeFileSync(OUT, JSON.stringify(profile));

  const requests = run.steps[0].responses;
  const sites = new Map();
  const frame = (n) => `${n.callFrame.functionName || "(anonymous)"} ${path.basename(n.callFrame.url) || "(native)"}:${n.callFrame.lineNumber + 1}`;
  const walk = (node, stack) => {
    const here = [...stack, frame(node)];
    if (node.selfSize) {
      const key = here.slice(-4).reverse().join(" <- ");
      sites.set(key, (sites.get(key) ?? 0) + node.selfSize);
    }
    for (const c of node.children ?? []) walk(c, here);
  };
  walk(profile.head, []);
  const total = [...sites.values()].reduce((a, b) => a + b, 0);
  console.log(`${WORKERS[kind].label}${script ? ` (${script})` : ""}: ${(total / requests).toFixed(0)} bytes allocated per request (sampled; ${requests} requests at ${RATE}/s)`);
  for (const [site, bytes] of [...sites].sort((a, b) => b[1] - a[1]).slice(0, TOP)) {
    console.log(`${(bytes / requests).toFixed(0).padStart(7)} B/req  ${site}`);
  }
} finally {
  await mf.dispose();
}

// Lab infrastructure: the request stream, the loopback origins answering from the ground
// truth, the built Worker in workerd (through the end-to-end tests' harness), the log file,
// and the `decider` CLI.
import { execFileSync } from "node:child_process";
import { existsSync, mkdirSync, readFileSync, writeFileSync } from "node:fs";
import path from "node:path";
import { ROOT, rng, startOrigin, startWorker } from "../tests/e2e/helpers.mjs";
import { ROUTES, hash01, latencyMs, succeeds, successProb } from "./truth.mjs";

export { ROOT };
export const LAB = path.join(ROOT, "lab");
export const WORK = path.join(LAB, "work");
export const RESULTS = path.join(LAB, "results");
const TOKEN = "lab-admin-token";

/**
 * The CLI: `DECIDER` when set, else the debug build `make lab` has just brought up to date
 * (`make cli`; a release build lying around could be older than the sources).
 */
export function deciderBin() {
  const p = process.env.DECIDER || path.join(ROOT, "target/debug/decider");
  if (!existsSync(p)) throw new Error(`no decider CLI at ${p}: run \`make cli\` first`);
  return p;
}

/** Runs `decider ARGS…`; returns stdout. Throws with its stderr when it fails. */
export function decider(args, input) {
  try {
    return execFileSync(deciderBin(), args, { cwd: ROOT, input, encoding: "utf8", maxBuffer: 1 << 28, stdio: ["pipe", "pipe", "pipe"] });
  } catch (e) {
    throw new Error(`decider ${args.join(" ")} failed (exit ${e.status}): ${e.stderr || e.message}`);
  }
}

/** `decider decide` over states: one decision per state, checked for errors. */
export function decideStates(model, states, extra = []) {
  const out = decider(["decide", "--model", model, ...extra], states.map((s) => JSON.stringify({ state: s })).join("\n") + "\n");
  const lines = out.split("\n").filter(Boolean).map((l) => JSON.parse(l));
  if (lines.length !== states.length || lines.some((l) => l.error)) throw new Error(`decider decide: ${lines.length} answers for ${states.length} states`);
  return lines;
}

/**
 * Builds the Worker with `challenger` embedded as the challenger model, into `outDir`; with
 * `champion`, that artifact is embedded as the champion instead of model/decision-model.json.
 */
export function buildWithChallenger(challenger, outDir, champion) {
  const env = { ...process.env, DECIDER_CHALLENGER: challenger };
  if (champion) env.DECIDER_MODEL = champion;
  else delete env.DECIDER_MODEL;
  execFileSync("bash", ["scripts/build-worker.sh", "--out-dir", outDir, "--no-opt"], {
    cwd: ROOT,
    stdio: ["ignore", "inherit", "inherit"],
    env,
  });
  return path.join(ROOT, outDir, "index.js");
}

// Countries chosen so that every region of the shipped REGIONS map occurs once.
const COUNTRIES = [["US", 0], ["CA", 1], ["MX", 2], ["BR", 3], ["GB", 4], ["DE", 5], ["AE", 6], ["JP", 7], ["IN", 8], ["AU", 9]];
// Request type → a request the shipped REQUEST_TYPES table classifies as that type; daytime
// type mix of the simulator.
const TYPES = [
  [0.3, "GET", (i) => `/page/${i}`],
  [0.25, "POST", (i) => `/item/${i}`],
  [0.15, "GET", (i) => `/search?q=${i}`],
  [0.08, "GET", (i) => `/batch/${i}`],
  [0.13, "GET", (i) => `/export/${i}`],
  [0.09, "GET", (i) => `/render/${i}`],
];

function pick(r, weights) {
  let u = r() * weights.reduce((a, b) => a + b, 0);
  for (let i = 0; i < weights.length; i++) if ((u -= weights[i]) < 0) return i;
  return weights.length - 1;
}
const round4 = (v) => Math.round(v * 1e4) / 1e4;

/** `k` stratified uniforms in [0, 1): one in each of k equal slices, in a random order. */
function stratified(r, k) {
  const u = Array.from({ length: k }, (_, i) => (i + r()) / k);
  for (let i = k - 1; i > 0; i--) {
    const j = Math.floor(r() * (i + 1));
    [u[i], u[j]] = [u[j], u[i]];
  }
  return u;
}

/**
 * A seeded request stream: `n` requests in batches of `batch`, each batch under one signal
 * snapshot. Half the snapshots are spread over loads 0.2–0.97, half concentrated on 0.62–0.86,
 * where the lab and the simulator disagree most. The snapshots are stratified (each signal's
 * draws cover its distribution evenly), so that two streams of different seeds differ in their
 * requests but hardly in their mix of signals: a policy's value on one stream is then close to
 * its value on another, which is what comparing an estimate from one run with a measurement on
 * the next needs.
 */
export function makeStream({ seed, n, batch = 40 }) {
  const r = rng(seed);
  const nb = Math.ceil(n / batch);
  const [uLoad, uSuccess, uQueue] = [stratified(r, nb), stratified(r, nb), stratified(r, nb)];
  const batches = [];
  for (let b = 0; b < nb; b++) {
    const v = uLoad[b], w = uSuccess[b], x = uQueue[b];
    const load = round4(v < 0.5 ? 0.2 + 0.77 * (v / 0.5) : 0.62 + 0.24 * ((v - 0.5) / 0.5));
    const success = round4(w < 0.88 ? 0.96 + 0.035 * (w / 0.88) : 0.4 + 0.5 * ((w - 0.88) / 0.12));
    const queue = x < 0.04 ? Math.round(100 + 150 * (x / 0.04)) : Math.round(Math.min(99, load * 35 - 8 * Math.log(1 - r())));
    const signals = { current_load: load, recent_success_rate: success, queue_depth: queue };
    const requests = [];
    for (let j = b * batch; j < Math.min(n, (b + 1) * batch); j++) {
      const type = pick(r, TYPES.map((t) => t[0]));
      const [country, region] = COUNTRIES[Math.floor(r() * COUNTRIES.length)];
      requests.push({ id: `lab-${seed}-${j}`, method: TYPES[type][1], path: TYPES[type][2](j), type, country, region });
    }
    batches.push({ signals, requests });
  }
  return batches;
}

/** The state the Worker should build for a request under a snapshot (hour aside). */
export function intendedState(req, signals) {
  return { request_type: req.type, region_id: req.region, ...signals };
}

/**
 * Starts three origins answering from the ground truth and the Worker in workerd.
 * `script`: the built Worker's main module; `vars`: extra wrangler vars; `extra`: extra
 * Miniflare options for the Worker; `rollout`: the control plane beside it (`{vars}`, as
 * the end-to-end tests' `startWorker` takes it).
 */
export async function startLab({ seed, script, vars = {}, extra = {}, rollout = false }) {
  // `fail(request, action)`, when a scenario sets it: that request fails at that origin, with
  // `failStatus` (500 by default; 502–504 make the Worker fail over).
  const shared = { signals: null, byId: new Map(), fail: null, failStatus: 500 };
  const origins = [];
  for (const [i, action] of ROUTES.entries()) {
    const o = await startOrigin("ABC"[i]);
    o.counts = { requests: 0, successes: 0 };
    o.behave = (req, res, record) => {
      req.resume();
      req.on("end", () => {
        const lab = shared.byId.get(req.headers["x-lab-id"]);
        o.counts.requests++;
        if (!lab) {
          res.writeHead(400).end("unknown x-lab-id");
          return;
        }
        const state = intendedState(lab, shared.signals);
        // A scenario may make an origin fail some requests on purpose (`shared.fail`).
        const failed = shared.fail?.(lab, action) ?? false;
        const ok = !failed && succeeds(seed, lab.id, state, action);
        if (ok) o.counts.successes++;
        const status = ok ? 200 : failed ? shared.failStatus : 500;
        lab.origin = action;
        lab.originStatus = status;
        setTimeout(() => {
          res.writeHead(status, { "content-type": "application/json" });
          res.end(JSON.stringify({ origin: action, ok }));
        }, latencyMs(state, action, hash01(`${seed}:latency:${lab.id}`)));
      });
    };
    origins.push(o);
  }
  const worker = await startWorker({
    vars: {
      ORIGIN_ROUTE_A: origins[0].url,
      ORIGIN_ROUTE_B: origins[1].url,
      ORIGIN_ROUTE_C: origins[2].url,
      FAILOVER: "{}",
      ADMIN_TOKEN: TOKEN,
      SIGNALS_CACHE_S: "0",
      CANARY_KEY: "header:x-lab-user",
      ...vars,
    },
    extra: { kvNamespaces: ["SIGNALS"], ...(script ? { scriptPath: script } : {}), ...extra },
    rollout,
  });
  return { worker, origins, shared };
}

async function pushSignals(worker, signals) {
  const res = await worker.fetch("/v1/admin/signals", {
    method: "PUT",
    headers: { authorization: `Bearer ${TOKEN}`, "content-type": "application/json" },
    body: JSON.stringify(signals),
  });
  if (res.status !== 200) throw new Error(`PUT /v1/admin/signals: ${res.status} ${await res.text()}`);
  await res.arrayBuffer();
}

/**
 * Sends the stream through the Worker, `concurrency` requests in flight within a batch; a new
 * snapshot is pushed only when the previous batch has finished. Returns the lab's records.
 */
export async function runStream(lab, batches, { concurrency = 8, onBatch } = {}) {
  const { worker, shared } = lab;
  const records = [];
  for (const [bi, b] of batches.entries()) {
    await pushSignals(worker, b.signals);
    shared.signals = b.signals;
    let next = 0;
    const one = async () => {
      while (next < b.requests.length) {
        const req = { ...b.requests[next++] };
        shared.byId.set(req.id, req);
        const init = {
          method: req.method,
          cf: { country: req.country },
          headers: { "cf-ray": req.id, "x-lab-id": req.id, "x-lab-user": req.id },
        };
        if (req.method === "POST") {
          init.body = JSON.stringify({ lab: req.id });
          init.headers["content-type"] = "application/json";
        }
        const res = await worker.fetch(req.path, init);
        await res.arrayBuffer();
        req.status = res.status;
        req.action = res.headers.get("x-decision-action");
        req.signals = b.signals;
        records.push(req);
      }
    };
    await Promise.all(Array.from({ length: concurrency }, one));
    onBatch?.(bi + 1, batches.length);
  }
  // Log lines arrive asynchronously: wait for one decision line per request.
  const want = new Set(records.map((r) => r.id));
  const end = Date.now() + 20000;
  for (;;) {
    const seen = worker.logs.filter((l) => l.event === "decision" && want.has(l.request_id)).length;
    if (seen >= want.size) break;
    if (Date.now() > end) throw new Error(`only ${seen} of ${want.size} decision log lines arrived`);
    await new Promise((r) => setTimeout(r, 50));
  }
  return records;
}

/** Writes the Worker's raw stdout (what `wrangler dev`/workerd prints) to `file`. */
export function writeRawLog(lab, file) {
  mkdirSync(path.dirname(file), { recursive: true });
  writeFileSync(file, lab.worker.stdoutLines.join("\n") + "\n");
}

/** The decision log lines of this run's requests, by request id. */
export function decisionsById(lab) {
  const m = new Map();
  for (const l of lab.worker.logs) if (l.event === "decision" && l.request_id) m.set(l.request_id, l);
  return m;
}

export async function stopLab(lab) {
  await lab.worker.dispose();
  await Promise.all(lab.origins.map((o) => o.close()));
}

/**
 * Lab integrity: every request has a decision line whose state is the intended one, and every
 * routed request reached the origin its decision named, with the status the Worker relayed.
 */
export function checkIntegrity(records, byId) {
  let missing = 0, stateMismatch = 0, originMismatch = 0;
  for (const r of records) {
    const d = byId.get(r.id);
    if (!d) {
      missing++;
      continue;
    }
    const want = intendedState(r, r.signals);
    if (Object.keys(want).some((k) => d.state?.[k] !== want[k])) stateMismatch++;
    if (d.action !== r.action) originMismatch++;
    else if (d.action === "reject" ? r.origin !== undefined || r.status !== 503 : r.origin !== d.action || r.originStatus !== r.status) originMismatch++;
  }
  return { requests: records.length, missing_decisions: missing, state_mismatches: stateMismatch, origin_mismatches: originMismatch };
}

/** Mean true success probability of the given (state, action) pairs. */
export function trueValue(pairs) {
  if (pairs.length === 0) return null;
  return pairs.reduce((s, [state, action]) => s + successProb(state, action), 0) / pairs.length;
}

export function writeJson(file, value) {
  mkdirSync(path.dirname(file), { recursive: true });
  writeFileSync(file, JSON.stringify(value, null, 2) + "\n");
}

export function readJsonFile(file) {
  return JSON.parse(readFileSync(file, "utf8"));
}

/** `decider report --json` on log files. */
export function report(files, extra = []) {
  return JSON.parse(decider(["report", "--logs", ...files, "--json", "--quiet", ...extra]));
}

/** The sticky bucket 0..100 of a routing key, as decider_core::rollout::canary_bucket
 * computes it (FNV-1a 64-bit, mod 100). */
export function canaryBucket(key) {
  let h = 0xcbf29ce484222325n;
  for (const b of Buffer.from(key, "utf8")) {
    h ^= BigInt(b);
    h = (h * 0x100000001b3n) & 0xffffffffffffffffn;
  }
  return Number(h % 100n);
}

// Test harness: runs the built Worker (build/index.js + wasm) in workerd through Miniflare,
// with a stub Workers AI binding controlled from the test, and captures its log lines.
import { Miniflare } from "miniflare";
import { readFileSync } from "node:fs";
import { fileURLToPath } from "node:url";
import path from "node:path";

export const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "../..");
export const ACTIONS = ["route_a", "route_b", "route_c", "reject"];
// The date wrangler.toml ships with, so the tests run the Worker as `wrangler deploy` would.
export const COMPAT_DATE = (() => {
  const m = /^compatibility_date\s*=\s*"(\d{4}-\d{2}-\d{2})"/m.exec(readFileSync(path.join(ROOT, "wrangler.toml"), "utf8"));
  if (!m) throw new Error('wrangler.toml: no compatibility_date = "YYYY-MM-DD" line');
  return m[1];
})();

export function readJson(rel) {
  return JSON.parse(readFileSync(path.join(ROOT, rel), "utf8"));
}

/**
 * The cases of one kind of fault (`ai`, `kv`, `origin`, `config`) of the fault table
 * (tests/fixtures/faults.json): each injects one fault and states the Worker's outcome.
 */
export function faultCases(fault) {
  return readJson("tests/fixtures/faults.json").cases.filter((c) => c.fault === fault);
}

/** The example state from the README. */
export const EXAMPLE_STATE = Object.freeze({
  request_type: 1,
  region_id: 3,
  current_load: 0.4,
  recent_success_rate: 0.97,
  queue_depth: 12,
  hour: 14,
});

// The stub Workers AI binding. workers-rs checks the binding's constructor is named `Ai`.
// Each run() asks the Node side (CONTROL) what to do, so a test can make the model answer,
// throw, hang, or return garbage, and see exactly what the Worker sent. That round trip
// costs milliseconds, so timing tests fix the behaviour up front instead (`ai: {static}`).
const AI_STUB = `
class Ai {
  constructor(env) { this.env = env; }
  async run(model, input) {
    // STATIC (an inner binding) fixes the behaviour with no round trip to Node, for timing tests.
    const { mode, answer } = this.env.STATIC ?? await (await this.env.CONTROL.fetch("http://control/run", {
      method: "POST", body: JSON.stringify({ model, input }),
    })).json();
    switch (mode) {
      case "answer": return answer;
      case "throw": throw new Error("stub: inference failed");
      case "hang": return new Promise(() => {});
      case "nan-confidence": return { action: "route_b", confidence: NaN };
      case "inf-probabilities": return { probabilities: [Infinity, 0, 0, 0] };
      case "nan-probabilities": return { probabilities: { route_a: NaN, route_b: 0.5, route_c: 0.25, reject: 0.25 } };
      case "undefined": return undefined;
      default: throw new Error("stub: unknown mode " + mode);
    }
  }
}
export default function (env) { return new Ai(env); }
`;

// A binding whose constructor is not \`Ai\`: the Worker must treat the model as unavailable.
const NOT_AI_STUB = `export default function () { return { run: async () => ({ action: "route_a", confidence: 1 }) }; }`;

/** The admin token of a Worker whose test does not set one. */
export const DEFAULT_ADMIN_TOKEN = "e2e-default-admin-token-8f3a";

// Shipped REGIONS: US → 0 (home cluster A), GB → 4 (B), JP → 7 (C). The state's hour is the
// current UTC hour, so each place must decide its route at every hour ("each place decides its
// route at every hour" in routing.test.mjs): DE (region 5) was rejected for POSTs from 12 to 15 UTC.
export const WHERE = {
  route_a: { country: "US", continent: "NA" },
  route_b: { country: "GB", continent: "EU" },
  route_c: { country: "JP", continent: "AS" },
};
export const REGION_OF = { US: 0, GB: 4, JP: 7 };

/**
 * Starts the Worker.
 * @param {object} opts
 * @param {Record<string,string>} [opts.vars]  wrangler vars
 * @param {boolean|"not-ai"|{static: {mode: string, answer?: any}}} [opts.ai]
 *   true: the stub AI binding driven from the test; {static}: the stub with a fixed behaviour;
 *   "not-ai": a binding whose constructor is not `Ai`
 * @param {object} [opts.extra]                extra Miniflare options for the Worker
 * @param {object[]} [opts.workers]            extra workers (origins, …)
 * @param {false|{vars?: Record<string,string>, extra?: object}} [opts.rollout]
 *   the control plane (workers/rollout/build/index.js) beside it, its `Rollout` object bound to
 *   the Worker as `ROLLOUT` across scripts, as `make dev` and a deploy bind it
 *
 * Every Worker gets an ADMIN_TOKEN (DEFAULT_ADMIN_TOKEN unless the test sets its own), so that
 * `health()` can read the whole /v1/health document; `ADMIN_TOKEN: null` starts it without one.
 */
export async function startWorker({ vars = {}, ai = false, extra = {}, workers = [], rollout = false } = {}) {
  vars = { ADMIN_TOKEN: DEFAULT_ADMIN_TOKEN, ...vars };
  if (vars.ADMIN_TOKEN === null) delete vars.ADMIN_TOKEN;
  const logs = [];
  const stdoutLines = [];
  const aiState = { mode: "answer", answer: { action: "route_b", confidence: 0.99 }, calls: [] };
  const main = {
    name: "decider",
    modules: true,
    scriptPath: path.join(ROOT, "build/index.js"),
    // build/index.js (imported by the main module) is an ES module, not CommonJS.
    modulesRules: [{ type: "CompiledWasm", include: ["**/*.wasm"], fallthrough: true }, { type: "ESModule", include: ["**/*.js"] }],
    compatibilityDate: COMPAT_DATE,
    bindings: vars,
    ...extra,
  };
  const all = [main];
  if (ai === true || ai?.static) {
    main.wrappedBindings = { AI: { scriptName: "ai-stub", bindings: ai.static ? { STATIC: ai.static } : {} } };
    all.push({
      name: "ai-stub",
      modules: true,
      script: AI_STUB,
      serviceBindings: {
        async CONTROL(request) {
          const call = await request.json();
          aiState.calls.push(call);
          return Response.json({ mode: aiState.mode, answer: aiState.answer });
        },
      },
    });
  } else if (ai === "not-ai") {
    main.wrappedBindings = { AI: { scriptName: "not-ai" } };
    all.push({ name: "not-ai", modules: true, script: NOT_AI_STUB });
  }
  if (rollout) {
    main.durableObjects = { ...main.durableObjects, ROLLOUT: { className: "Rollout", scriptName: CONTROL_PLANE } };
    all.push({
      name: CONTROL_PLANE,
      modules: true,
      scriptPath: path.join(ROOT, "workers/rollout/build/index.js"),
      modulesRules: main.modulesRules,
      compatibilityDate: COMPAT_DATE,
      bindings: rollout.vars ?? {},
      durableObjects: { ROLLOUT: { className: "Rollout", useSQLite: true } },
      ...rollout.extra,
    });
  }
  all.push(...workers);
  let pending = "";
  const mf = new Miniflare({
    workers: all,
    handleRuntimeStdio(stdout, stderr) {
      stdout.on("data", (chunk) => {
        pending += chunk.toString();
        let i;
        while ((i = pending.indexOf("\n")) >= 0) {
          const line = pending.slice(0, i);
          pending = pending.slice(i + 1);
          stdoutLines.push(line);
          try {
            // The line's own length rides along, not enumerable (matchers ignore it).
            logs.push(Object.defineProperty(JSON.parse(line), "$bytes", { value: Buffer.byteLength(line) }));
          } catch {
            // not a JSON line (workerd banner etc.)
          }
        }
      });
      stderr.on("data", (chunk) => {
        if (process.env.E2E_VERBOSE) process.stderr.write(chunk);
      });
    },
  });
  const url = await mf.ready;
  const fetch = (p, init) => mf.dispatchFetch(new URL(p, "http://localhost"), init);
  // Warm the isolate (wasm instantiation) so timings measure requests, not start-up.
  await (await fetch("/v1/health")).arrayBuffer();
  return {
    mf,
    /** The Worker's own HTTP address (for clients outside this process, e.g. the CLI). */
    url: url.href.replace(/\/$/, ""),
    fetch,
    logs,
    stdoutLines,
    ai: aiState,
    /** GET /v1/health with the admin token: the whole document (the public part without one). */
    health(init = {}) {
      const auth = vars.ADMIN_TOKEN ? { authorization: `Bearer ${vars.ADMIN_TOKEN}` } : {};
      return fetch("/v1/health", { ...init, headers: { ...auth, ...init.headers } });
    },
    /** POST /v1/decide with a JSON body. */
    decide(body, headers = {}) {
      return fetch("/v1/decide", {
        method: "POST",
        headers: { "content-type": "application/json", ...headers },
        body: typeof body === "string" ? body : JSON.stringify(body),
      });
    },
    /** Waits until `pred` holds for some log record (logs arrive asynchronously). */
    async waitForLog(pred, timeoutMs = 2000) {
      const end = Date.now() + timeoutMs;
      for (;;) {
        const hit = logs.find(pred);
        if (hit) return hit;
        if (Date.now() > end) throw new Error("no matching log line; got:\n" + stdoutLines.join("\n"));
        await new Promise((r) => setTimeout(r, 10));
      }
    },
    /** One look of the control plane's judge (its Cron Trigger). */
    async judge() {
      const plane = await mf.getWorker(CONTROL_PLANE);
      return (await plane.scheduled({ cron: "* * * * *" })).outcome;
    },
    /** The control plane's object, as the serving Worker reaches it. */
    async controlPlane() {
      const ns = await mf.getDurableObjectNamespace("ROLLOUT", CONTROL_PLANE);
      return ns.get(ns.idFromName("rollout"));
    },
    dispose: () => mf.dispose(),
  };
}

/** The control plane's script name (workers/rollout/wrangler.toml). */
export const CONTROL_PLANE = "edge-decider-rollout";

/** Deterministic PRNG (mulberry32) for generated cases. */
export function rng(seed) {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

/** Asserts the decision shape (README, /v1/decide) and that headers mirror the body. */
export function checkDecisionShape(expect, res, d) {
  expect(res.status).toBe(200);
  expect(res.headers.get("content-type")).toBe("application/json");
  expect(ACTIONS).toContain(d.action);
  expect(["model", "rules", "default"]).toContain(d.source);
  expect(d.encoder_version).toBe(1);
  expect(Number.isInteger(d.decision_us) && d.decision_us >= 0).toBe(true);
  expect(Object.keys(d).slice(0, 8)).toEqual([
    "action", "confidence", "source", "fallback_reason", "model_version",
    "encoder_version", "probabilities", "decision_us",
  ]);
  expect(res.headers.get("x-decision-action")).toBe(d.action);
  expect(res.headers.get("x-decision-source")).toBe(d.source);
  expect(res.headers.get("x-decision-model-version")).toBe(d.model_version ?? "none");
  if (d.source === "model") expect(d.fallback_reason).toBeNull();
  else expect(d.fallback_reason).not.toBeNull();
  if (d.probabilities) {
    expect(Object.keys(d.probabilities)).toEqual(ACTIONS);
    const sum = Object.values(d.probabilities).reduce((a, b) => a + b, 0);
    expect(Math.abs(sum - 1)).toBeLessThan(1e-9);
  }
}

/**
 * A loopback origin (a Node HTTP server on 127.0.0.1) that records what it receives.
 * `behave(req, res, body)` may answer differently; by default it answers 200 JSON naming itself.
 */
export async function startOrigin(name) {
  const http = await import("node:http");
  const origin = {
    name,
    requests: [],
    /** Optional custom handler: (req, res, record) => void; record.body is filled when the body ends. */
    behave: null,
    url: "",
    reset() {
      this.requests.length = 0;
      this.behave = null;
    },
  };
  const server = http.createServer((req, res) => {
    const record = { method: req.method, url: req.url, headers: req.headers, body: null, chunks: [] };
    origin.requests.push(record);
    if (origin.behave) return origin.behave(req, res, record);
    req.on("data", (c) => record.chunks.push(c));
    req.on("end", () => {
      record.body = Buffer.concat(record.chunks);
      res.writeHead(200, { "content-type": "application/json", "x-origin": name, "x-decision-action": "spoofed-by-origin" });
      res.end(JSON.stringify({ origin: name, method: req.method, url: req.url, bytes: record.body.length }));
    });
  });
  await new Promise((r) => server.listen(0, "127.0.0.1", r));
  origin.url = `http://127.0.0.1:${server.address().port}`;
  origin.close = () => new Promise((r) => { server.closeAllConnections?.(); server.close(() => r()); });
  return origin;
}

/** Reads a request body fully (for custom origin behaviours). */
export function readBody(req, record) {
  return new Promise((resolve) => {
    req.on("data", (c) => record.chunks.push(c));
    req.on("end", () => {
      record.body = Buffer.concat(record.chunks);
      resolve(record.body);
    });
  });
}

/** A port on 127.0.0.1 where nothing listens (connection refused). */
export async function closedPort() {
  const net = await import("node:net");
  const srv = net.createServer();
  await new Promise((r) => srv.listen(0, "127.0.0.1", r));
  const { port } = srv.address();
  await new Promise((r) => srv.close(r));
  return port;
}

// The three Workers of the side-by-side benchmark and how to run one, shared by
// bench/side_by_side.mjs (make bench) and bench/cpu_probe.mjs (quick A/B of builds).
import { Miniflare } from "miniflare";
import { execFile } from "node:child_process";
import { promisify } from "node:util";
import { readFileSync, readdirSync } from "node:fs";
import { fileURLToPath } from "node:url";
import path from "node:path";

export const HERE = path.dirname(fileURLToPath(import.meta.url));
export const ROOT = path.resolve(HERE, "..");
export const COMPAT_DATE = "2026-04-20";
export const BODY_FILE = path.join(HERE, "state.json");

// The wasm module, and build/index.js (imported by edge-decider's main module) as an ES module.
const wasmRule = [{ type: "CompiledWasm", include: ["**/*.wasm"], fallthrough: true }, { type: "ESModule", include: ["**/*.js"] }];
export const WORKERS = {
  ours: {
    label: "edge-decider (Rust/wasm)",
    wasm: path.join(ROOT, "build/index_bg.wasm"),
    options: (scriptPath = path.join(ROOT, "build/entry.mjs")) => ({
      modules: true,
      scriptPath,
      modulesRules: wasmRule,
      // The defaults of wrangler.toml's [vars].
      bindings: { DECISION_BACKEND: "embedded", AI_TIMEOUT_MS: "25", DEFAULT_ACTION: "route_a", OOD_CHECK: "true", SHADOW: "false" },
    }),
  },
  floor: {
    label: "empty workers-rs Worker (floor)",
    wasm: path.join(HERE, "floor-worker/build/index_bg.wasm"),
    options: () => ({
      modules: true,
      scriptPath: path.join(HERE, "floor-worker/build/index.js"),
      modulesRules: wasmRule,
    }),
  },
  // The A/A control: the floor again, in its own workerd. Its p99 against the floor's shows
  // how far two identical Workers land apart in one run: the noise band of the p99 ratios.
  floor_b: {
    label: "empty workers-rs Worker, second instance (A/A control)",
    options: () => WORKERS.floor.options(),
  },
  js: {
    label: "plain JS Worker (same decision by hand)",
    options: () => ({ modules: jsModules("worker.mjs") }),
  },
  // The JS Worker reading the body with edge-decider's bounded read (src/glue.js) instead of
  // `request.text()`: what the bound costs, apart from Rust/wasm.
  js_bounded: {
    label: "plain JS Worker, edge-decider's bounded body read (control)",
    options: () => ({
      modules: [
        ...jsModules("worker-bounded.mjs"),
        { type: "ESModule", path: path.join(HERE, "js-worker/glue.js"), contents: readFileSync(path.join(ROOT, "src/glue.js"), "utf8") },
      ],
    }),
  },
};

/** The JS Worker's modules, `main` (a file in bench/js-worker) first. */
function jsModules(main) {
  const file = (name) => ({ type: "ESModule", path: path.join(HERE, "js-worker", name), contents: readFileSync(path.join(HERE, "js-worker", name), "utf8") });
  return [
    file(main),
    file("handler.mjs"),
    file("decide.mjs"),
    { type: "Text", path: path.join(HERE, "js-worker/artifact.json.txt"), contents: readFileSync(path.join(ROOT, "model/decision-model.json"), "utf8") },
    { type: "Text", path: path.join(HERE, "js-worker/rules.json.txt"), contents: readFileSync(path.join(ROOT, "rules/default.json"), "utf8") },
  ];
}

/** The value after `--name` on the command line, or `dflt`. */
export function arg(name, dflt) {
  const i = process.argv.indexOf(`--${name}`);
  return i >= 0 ? process.argv[i + 1] : dflt;
}

/** The `--loadtest PATH` argument; prints `usage` and exits without it. */
export function loadtestArg(usage) {
  const bin = arg("loadtest");
  if (!bin) {
    console.error(`usage: ${usage}`);
    process.exit(2);
  }
  return bin;
}

/** Process ids of this process's children. */
function children() {
  try {
    return readFileSync(`/proc/${process.pid}/task/${process.pid}/children`, "utf8").trim().split(/\s+/).filter(Boolean).map(Number);
  } catch {
    return [];
  }
}

/**
 * CPU time a process has run so far, all threads, in nanoseconds (/proc/PID/task/T/schedstat);
 * null when it cannot be read (not Linux, process gone).
 */
export function cpuNs(pid) {
  if (!pid) return null;
  try {
    return readdirSync(`/proc/${pid}/task`).reduce((a, t) => {
      try {
        return a + Number(readFileSync(`/proc/${pid}/task/${t}/schedstat`, "utf8").split(" ")[0]);
      } catch {
        return a; // a thread that ended meanwhile
      }
    }, 0);
  } catch {
    return null;
  }
}

/**
 * Starts one Worker in its own workerd. `options` overrides the Worker's Miniflare options.
 * Returns the Miniflare instance, the workerd process id and two `/v1/decide` URLs:
 * - `url`, a socket of the Worker's own (Miniflare's `unsafeDirectSockets`): a request goes
 *   from workerd's HTTP server straight into the Worker's isolate, as on Cloudflare;
 * - `entryUrl`, Miniflare's main socket, which `wrangler dev` serves: a request first runs
 *   through Miniflare's entry Worker, a second isolate in the same workerd that adds the
 *   `cf` object and proxies the request and its response. It cost about 300–345 µs of workerd
 *   CPU per request in the bench runs here, more than the Workers under test, and its own
 *   garbage collections were behind most of the tail latencies (README, "Performance").
 */
export async function start(name, label = name, options = WORKERS[name].options()) {
  const before = new Set(children());
  const workerName = label.replace(/[^a-z0-9-]/gi, "-");
  const mf = new Miniflare({
    host: "127.0.0.1",
    port: 0,
    workers: [{ name: workerName, compatibilityDate: COMPAT_DATE, ...options, unsafeDirectSockets: [{ host: "127.0.0.1", port: 0 }] }],
    // Drain workerd's output (one log line per decision) without printing it.
    handleRuntimeStdio(stdout, stderr) {
      stdout.resume();
      stderr.resume();
    },
  });
  const entry = await mf.ready;
  const direct = await mf.unsafeGetDirectURL(workerName);
  const pid = children().find((p) => !before.has(p)) ?? null;
  return { mf, url: new URL("/v1/decide", direct).href, entryUrl: new URL("/v1/decide", entry).href, pid };
}

// Asynchronous on purpose: workerd writes a log line per decision to a pipe this process
// drains, so blocking the event loop while the generator runs would stall the Workers.
const execFileAsync = promisify(execFile);

/** Runs the load generator against `url` and returns its `--json` report. */
export async function loadtest(loadtestBin, url, extra) {
  const args = ["--url", url, "--body", BODY_FILE, "--json", "--connections", "32", "--timeout", "2s", ...extra];
  const { stdout } = await execFileAsync(loadtestBin, args, { encoding: "utf8", maxBuffer: 1 << 24 });
  return JSON.parse(stdout);
}

/**
 * One fixed-rate measurement of a running Worker (at `url`, its own socket unless given):
 * the load generator's step report plus
 * `workerd_cpu_us`, the workerd process's CPU time (all threads) per request. The CPU time
 * spans the warmup too, so the requests counted are the measured ones plus the warmup's
 * (sent at the same rate).
 */
export async function measure(loadtestBin, w, extra, url = w.url) {
  const c0 = cpuNs(w.pid);
  const r = await loadtest(loadtestBin, url, extra);
  const s = r.steps[0];
  s.workerd_cpu_us = cpuPerRequest(c0, cpuNs(w.pid), s, r.warmup_s);
  return s;
}

/**
 * CPU µs per request between two `cpuNs` readings around a load generator run: its measured
 * responses plus its warmup's (sent at the same rate); null when a reading failed.
 */
export function cpuPerRequest(c0, c1, step, warmupS) {
  const requests = step.responses + step.target_rate * (warmupS ?? 0);
  return c0 !== null && c1 !== null && requests > 0 ? (c1 - c0) / 1e3 / requests : null;
}

/** The q-quantile of `xs` by nearest rank: the ⌈q·n⌉-th smallest (HdrHistogram's, and so
 * `decider loadtest`'s); null when empty. */
export const nearestRank = (xs, q) => {
  if (xs.length === 0) return null;
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.max(0, Math.ceil(q * s.length) - 1)];
};

export const median = (xs) => {
  const s = xs.filter((x) => x !== null && x !== undefined).sort((a, b) => a - b);
  const n = s.length;
  return n === 0 ? null : n % 2 ? s[(n - 1) / 2] : (s[n / 2 - 1] + s[n / 2]) / 2;
};

// Shared by the bench scripts: the Workers, starting one in a fresh workerd, a workerd
// process's CPU time, and running `decider loadtest`.
import { Miniflare } from "miniflare";
import { execFile } from "node:child_process";
import { promisify } from "node:util";
import { readFileSync, readdirSync } from "node:fs";
import { fileURLToPath } from "node:url";
import path from "node:path";

export const HERE = path.dirname(fileURLToPath(import.meta.url));
export const ROOT = path.resolve(HERE, "..");
export const BODY_FILE = path.join(HERE, "state.json");
const BODY = readFileSync(BODY_FILE, "utf8");
// The date that ships, so every Worker runs as `wrangler deploy` would run edge-decider.
const COMPAT_DATE = /^compatibility_date\s*=\s*"([\d-]+)"/m.exec(readFileSync(path.join(ROOT, "wrangler.toml"), "utf8"))?.[1];
if (!COMPAT_DATE) throw new Error("wrangler.toml: no compatibility_date line");

// workers-rs output: build/index.js, an ES module importing its wasm.
const modulesRules = [{ type: "CompiledWasm", include: ["**/*.wasm"], fallthrough: true }, { type: "ESModule", include: ["**/*.js"] }];
const floor = { modules: true, scriptPath: path.join(HERE, "floor-worker/build/index.js"), modulesRules };
const floorIo = { modules: true, scriptPath: path.join(HERE, "floor-worker/build-record/index.js"), modulesRules };
// As deployed: decision ids signed (DECISION_ID_KEY is a secret every deploy sets).
const ours = {
  modules: true, scriptPath: path.join(ROOT, "build/index.js"), modulesRules,
  bindings: { DECISION_BACKEND: "embedded", DECISION_ID_KEY: "bench-decision-id-key-0123456789abcdef" },
};
// The rollout's control plane (workers/rollout), a Worker of its own that the serving Worker
// binds by script name, as wrangler.toml ships it.
const CONTROL_PLANE = "edge-decider-rollout";
const controlPlane = {
  name: CONTROL_PLANE, modules: true, scriptPath: path.join(ROOT, "workers/rollout/build/index.js"), modulesRules,
  durableObjects: { ROLLOUT: { className: "Rollout", useSQLite: true } },
};
export const WORKERS = {
  ours: { label: "edge-decider", options: ours },
  // The same build with the control plane bound, as wrangler.toml ships it: every decision
  // counted in the isolate, the counts flushed and the setting read through waitUntil (the
  // control plane runs in the same workerd, so its CPU counts here too).
  ours_counters: {
    label: "edge-decider, rollout counters on",
    options: { ...ours, durableObjects: { ROLLOUT: { className: "Rollout", scriptName: CONTROL_PLANE } } },
    beside: [controlPlane],
  },
  floor: { label: "empty workers-rs Worker", options: floor },
  // The A/A control: the same empty Worker in a workerd of its own. How far it lands from the
  // first is how far two identical Workers land apart on this machine in this run.
  floor_b: { label: "empty Worker, second copy (A/A)", options: floor },
  // The empty Worker doing the I/O every decision must do (its `record-io` feature): what is
  // left between it and edge-decider is edge-decider's own code.
  floor_io: { label: "empty Worker + a decision's I/O", options: floorIo },
};
// edge-decider built at other commits (`BENCH_AGAINST` in bench/run.sh, passed on as
// "sha=build-dir ..."), with the same bindings: `at_<sha>`, run beside this build.
export const AGAINST = (process.env.BENCH_AGAINST_BUILDS ?? "").split(/\s+/).filter(Boolean).map((a) => {
  const [sha, dir] = a.split("=");
  WORKERS[`at_${sha}`] = { label: `edge-decider at ${sha}`, options: { ...ours, scriptPath: path.join(dir, "index.js") } };
  return `at_${sha}`;
});

export const arg = (name, dflt) => (process.argv.includes(`--${name}`) ? process.argv[process.argv.indexOf(`--${name}`) + 1] : dflt);

export const median = (xs) => {
  const s = xs.filter(Number.isFinite).sort((a, b) => a - b);
  return s.length === 0 ? null : (s[Math.floor((s.length - 1) / 2)] + s[Math.ceil((s.length - 1) / 2)]) / 2;
};

const read = (f) => {
  try {
    return readFileSync(f, "utf8");
  } catch {
    return null; // a thread or process that ended meanwhile
  }
};
const children = () => (read(`/proc/${process.pid}/task/${process.pid}/children`) ?? "").trim().split(/\s+/).filter(Boolean).map(Number);

/**
 * CPU time of process `pid` so far, ns, two ways: `schedstat`, the sum of its threads'
 * /proc/PID/task/T/schedstat (ns resolution, threads alive now), and `stat`, utime + stime
 * of /proc/PID/stat (10 ms ticks, threads that ended included).
 */
export function cpuNs(pid) {
  const tasks = read(`/proc/${pid}/status`) ? readdirSync(`/proc/${pid}/task`) : [];
  const schedstat = tasks.reduce((a, t) => a + Number(read(`/proc/${pid}/task/${t}/schedstat`)?.split(" ")[0] ?? 0), 0);
  // The fields after the command name, which is in parentheses and may hold spaces.
  const f = read(`/proc/${pid}/stat`)?.split(") ")[1]?.split(" ");
  return { schedstat: tasks.length ? schedstat : null, stat: f ? (Number(f[11]) + Number(f[12])) * 1e7 : null };
}

/**
 * Starts Worker `name` in a new workerd, served on a socket of its own (`unsafeDirectSockets`:
 * a request goes straight into the Worker's isolate, as on Cloudflare, not first through
 * Miniflare's entry Worker). Returns the Miniflare instance, the workerd pid, the /v1/decide URL.
 */
export async function start(name) {
  const before = new Set(children());
  const mf = new Miniflare({
    host: "127.0.0.1",
    port: 0,
    workers: [
      { name, compatibilityDate: COMPAT_DATE, ...WORKERS[name].options, unsafeDirectSockets: [{ host: "127.0.0.1", port: 0 }] },
      ...(WORKERS[name].beside ?? []).map((w) => ({ compatibilityDate: COMPAT_DATE, ...w })),
    ],
    // edge-decider logs a line per decision; drained, as `wrangler dev` does.
    handleRuntimeStdio: (stdout, stderr) => [stdout, stderr].forEach((s) => s.resume()),
  });
  await mf.ready;
  return { mf, url: new URL("/v1/decide", await mf.unsafeGetDirectURL(name)).href, pid: children().find((p) => !before.has(p)) ?? null };
}

/** One POST /v1/decide; its latency in ms. Throws unless answered 200. */
export async function decideOnce(url) {
  const t0 = performance.now();
  const r = await fetch(url, { method: "POST", headers: { "content-type": "application/json" }, body: BODY });
  const text = await r.text();
  if (r.status !== 200) throw new Error(`${url}: status ${r.status}: ${text}`);
  return performance.now() - t0;
}

// Asynchronous on purpose: workerd writes its log lines to a pipe this process drains, so
// blocking the event loop while a generator runs would stall the Worker.
const execFileAsync = promisify(execFile);
export const run = async (cmd, args) => (await execFileAsync(cmd, args, { encoding: "utf8", maxBuffer: 1 << 26 })).stdout;

/** `decider loadtest`, `rate`/s to each of `urls` in turn (one schedule); each target's first step report. */
export async function loadtest(decider, urls, rate, duration, warmup) {
  const r = JSON.parse(await run(decider, ["loadtest", ...urls.flatMap((u) => ["--url", u]), "--body", BODY_FILE, "--rate", String(rate),
    "--duration", duration, "--warmup", warmup, "--connections", "32", "--timeout", "2s", "--json"]));
  return (r.targets ?? [r]).map((t) => ({ ...t.steps[0], warmup_s: r.warmup_s }));
}

// The control plane's knee: how many flush batches a second its one Durable Object takes
// before its latency climbs. The control plane (workers/rollout/build) runs in workerd beside
// a small driver Worker bound to its object; each request to the driver builds one flush
// batch as a busy serving isolate sends it (every arm and source's row, and OUTCOMES caller
// outcomes with fresh decision ids, so each is remembered: the SQLite insert path) and posts
// it to the object's /flush. `decider loadtest` ramps the rate; the knee is the first rate
// whose p99 is over KNEE_FACTOR times the first step's (or that has an error), two steps in a
// row. One object per deployment takes every isolate's flushes, so the knee, times
// ROLLOUT_FLUSH_S, is how many serving isolates one control plane serves.
//
// usage: node bench/knee.mjs --decider PATH --out FILE
//   env: KNEE_STEP=50:600:50 KNEE_DURATION=5s KNEE_OUTCOMES=100 KNEE_FACTOR=3
import { writeFileSync } from "node:fs";
import path from "node:path";
import { Miniflare } from "miniflare";
import { ROOT, arg, run } from "./lib.mjs";

const [DECIDER, out] = [arg("decider"), arg("out")];
if (!DECIDER || !out) throw new Error("usage: node bench/knee.mjs --decider PATH --out FILE");
const env = (k, d) => process.env[k] ?? d;
const [STEP, DURATION] = [env("KNEE_STEP", "50:600:50"), env("KNEE_DURATION", "5s")];
const [OUTCOMES, FACTOR] = [Number(env("KNEE_OUTCOMES", 100)), Number(env("KNEE_FACTOR", 3))];
const COMPAT_DATE = "2026-07-30";
const modulesRules = [{ type: "CompiledWasm", include: ["**/*.wasm"], fallthrough: true }, { type: "ESModule", include: ["**/*.js"] }];

// Builds one batch per request: 9 rows (3 arms × 3 sources) and OUTCOMES caller outcomes
// whose ids are new (a counter in the driver's isolate), tagged champion/model.
const DRIVER = `
let n = 0;
const row = (arm, src) => ({ arm, mv: arm === "challenger" ? "m-2" : "m-1", src, d: 40, o: 38, s: 36000000, q: 36000000 });
export default {
  async fetch(request, env) {
    const outcomes = [];
    for (let i = 0; i < ${OUTCOMES}; i++) {
      n++;
      const hex = n.toString(16).padStart(11, "0");
      outcomes.push(["7b1e6c1a-2f4d-4e8b-9c3a-" + hex + "0", Date.now(), 1000000]);
    }
    const rows = [];
    for (const arm of ["champion", "challenger", "holdout"]) for (const src of ["model", "rules", "default"]) rows.push(row(arm, src));
    const batch = JSON.stringify({ v: 2, challenger: "m-2", rows, outcomes });
    const stub = env.ROLLOUT.get(env.ROLLOUT.idFromName("rollout"));
    const r = await stub.fetch("https://rollout/flush", { method: "POST", headers: { "content-type": "application/json" }, body: batch });
    return new Response(await r.text(), { status: r.status });
  },
};`;

const mf = new Miniflare({
  host: "127.0.0.1",
  port: 0,
  workers: [
    { name: "driver", modules: true, script: DRIVER, compatibilityDate: COMPAT_DATE, durableObjects: { ROLLOUT: { className: "Rollout", scriptName: "edge-decider-rollout" } } },
    { name: "edge-decider-rollout", modules: true, scriptPath: path.join(ROOT, "workers/rollout/build/index.js"), modulesRules, compatibilityDate: COMPAT_DATE, durableObjects: { ROLLOUT: { className: "Rollout", useSQLite: true } } },
  ],
  handleRuntimeStdio: (stdout, stderr) => [stdout, stderr].forEach((s) => s.resume()),
});
const url = new URL("/flush", await mf.ready).href;
const first = await fetch(url, { method: "POST" });
if (first.status !== 200) throw new Error(`the driver answered ${first.status}: ${await first.text()}`);
const report = JSON.parse(await run(DECIDER, ["loadtest", "--url", url, "-X", "POST", "--step", STEP, "--duration", DURATION,
  "--warmup", "2s", "--no-stop-at-knee", "--p99-limit", "10s", "--connections", "64", "--timeout", "5s", "--json"]));
await mf.dispose();

const steps = report.steps.map((s) => ({
  rate: s.target_rate, achieved: s.achieved_rate, p50_ms: (s.latency?.p50_us ?? NaN) / 1e3, p99_ms: (s.latency?.p99_us ?? NaN) / 1e3,
  errors: Object.values(s.errors ?? {}).reduce((a, b) => a + b, 0),
}));
const base = steps[0].p99_ms;
const over = (s) => s.p99_ms > FACTOR * base || s.errors > 0;
const i = steps.findIndex((s, k) => over(s) && steps[k + 1] && over(steps[k + 1]));
const knee = i >= 0 ? steps[i].rate : null;
const lastGood = i > 0 ? steps[i - 1].rate : i < 0 ? steps.at(-1).rate : null;
writeFileSync(out, JSON.stringify({ outcomes_per_batch: OUTCOMES, factor: FACTOR, step: STEP, duration: DURATION, base_p99_ms: base, knee_rps: knee, last_good_rps: lastGood, steps }, null, 2) + "\n");
console.error(`[knee] first step p99 ${base.toFixed(2)} ms; knee ${knee ?? "not reached"} batches/s (last under ${FACTOR}× p99: ${lastGood})`);

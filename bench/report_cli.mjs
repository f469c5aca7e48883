// `decider report` on a large log: wall seconds and peak resident memory of
// `decider report --logs FILE --json` on LINES log lines, as `/usr/bin/time -v` reports them.
// The log comes from bench/gen_logs.py (`--lines N --out FILE`) when it exists, else from the
// generator below: decision records (log_version 1, both endpoints, every source; routed ones
// with their outcome), outcome lines for some /v1/decide ones, and `wrangler dev` noise. When
// the binary has no `report` subcommand, or it fails, the result file says "not measured" and
// why, and `make bench` goes on.
//
// usage: node bench/report_cli.mjs --decider PATH --out FILE [--lines 1000000]
import { execFileSync, spawnSync } from "node:child_process";
import { createWriteStream, existsSync, mkdtempSync, rmSync, statSync, writeFileSync } from "node:fs";
import { once } from "node:events";
import os from "node:os";
import path from "node:path";
import { HERE, arg } from "./lib.mjs";

const [DECIDER, out, LINES] = [arg("decider"), arg("out"), Number(arg("lines", 1_000_000))];
if (!DECIDER || !out) throw new Error("usage: node bench/report_cli.mjs --decider PATH --out FILE [--lines N]");
const save = (o) => writeFileSync(out, JSON.stringify({ lines: LINES, ...o }, null, 2) + "\n");

async function generate(file) {
  let x = 0x9e3779b9; // a fixed seed: the same file every run
  const rnd = () => (x = (Math.imul(x ^ (x >>> 15), 0x2c1b3c6d) + 0x6d2b79f5) >>> 0) / 2 ** 32;
  const pick = (xs) => xs[Math.floor(rnd() * xs.length)];
  const s = createWriteStream(file);
  for (let i = 0; i < LINES; i++) {
    const ts = new Date(Date.parse("2026-12-02T10:00:00Z") + i * 5).toISOString();
    let rec = { log_version: 1, event: "outcome", ts, decision_id: `d-${i - 4}`, reward: rnd() < 0.9 ? 1 : 0, status: null, latency_ms: null };
    if (i % 10 !== 4) {
      const [p, source, action] = [[rnd(), rnd(), rnd(), rnd()], rnd() < 0.85 ? "model" : pick(["rules", "default"]), pick(["route_a", "route_b", "route_c", "reject"])];
      const sum = p.reduce((a, b) => a + b);
      rec = {
        log_version: 1, event: "decision", ts, decision_id: `d-${i}`, request_id: null, endpoint: i % 2 ? "route" : "decide",
        state: { request_type: i % 6, region_id: i % 10, current_load: rnd(), recent_success_rate: rnd(), queue_depth: Math.floor(rnd() * 150), hour: i % 24 },
        action, source, fallback_reason: source === "model" ? null : pick(["low_confidence", "out_of_distribution", "stale_signals"]),
        rule: source === "rules" ? "overload" : null, confidence: Math.max(...p) / sum, propensity: 1, explored: false,
        probabilities: { route_a: p[0] / sum, route_b: p[1] / sum, route_c: p[2] / sum, reject: p[3] / sum },
        model_version: "m-2026-11-20", rules_version: "rules-2026-11-01", encoder_version: 1, backend: "embedded",
        arm: rnd() < 0.05 ? "holdout" : "champion", decision_us: Math.floor(rnd() * 40),
      };
      const [origin, latency_ms] = action === "reject" ? [null, 0] : [action, Math.round(rnd() * 300)];
      const status = origin ? (rnd() < 0.97 ? 200 : 502) : 503;
      if (i % 2) rec.outcome = { origin, status, latency_ms, failover: null, error: status === 502 ? "upstream_status" : null, attempts: origin ? [{ origin, status, error: null, latency_ms }] : [] };
    }
    const line = i % 10 === 9 ? `[wrangler:info] POST /v1/decide 200 OK (${i % 7}ms)` : JSON.stringify(rec);
    if (!s.write(line + "\n")) await once(s, "drain");
  }
  await new Promise((resolve) => s.end(resolve));
}

if (spawnSync(DECIDER, ["report", "--help"]).status !== 0) {
  save({ not_measured: "this build of `decider` has no `report` subcommand" });
  process.exit(0);
}
const dir = mkdtempSync(path.join(os.tmpdir(), "decider-report-"));
const file = path.join(dir, "dev.log");
try {
  const genLogs = path.join(HERE, "gen_logs.py");
  const generator = existsSync(genLogs) ? "bench/gen_logs.py" : "bench/report_cli.mjs";
  if (existsSync(genLogs)) execFileSync("python3", [genLogs, "--lines", String(LINES), "--out", file], { stdio: ["ignore", "ignore", "inherit"] });
  else await generate(file);
  const r = spawnSync("/usr/bin/time", ["-v", DECIDER, "report", "--logs", file, "--json"], { encoding: "utf8", maxBuffer: 1 << 28 });
  const clock = r.stderr.match(/Elapsed \(wall clock\) time \(h:mm:ss or m:ss\): ([\d:.]+)/)?.[1];
  const rssKb = Number(r.stderr.match(/Maximum resident set size \(kbytes\): (\d+)/)?.[1]);
  if (r.status !== 0 || !clock) save({ generator, not_measured: `\`decider report\` failed (exit ${r.status}): ${r.stderr.trim().split("\n")[0]}` });
  else save({ generator, file_bytes: statSync(file).size, wall_s: clock.split(":").reduce((a, v) => a * 60 + Number(v), 0), max_rss_mb: (rssKb * 1024) / 1e6 });
} finally {
  rmSync(dir, { recursive: true, force: true });
}

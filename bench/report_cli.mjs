// `decider report` on a large log: wall seconds and peak resident memory of
// `decider report --logs FILE --json` on LINES log lines, as `/usr/bin/time -v` reports them.
// The log comes from decider-cli's `gen_logs` example (built here with `cargo run --release`):
// decision and outcome records written with the Worker's record codec (both endpoints, every
// source; routed ones with their outcome; late, duplicated and orphaned outcomes) and the
// `wrangler dev` noise around them. When the binary has no `report` subcommand, or the log
// cannot be generated, or the report fails, the result file says "not measured" and why, and
// `make bench` goes on.
//
// usage: node bench/report_cli.mjs --decider PATH --out FILE [--lines 1000000]
import { spawnSync } from "node:child_process";
import { mkdtempSync, rmSync, statSync, writeFileSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import { ROOT, arg } from "./lib.mjs";

const [DECIDER, out, LINES] = [arg("decider"), arg("out"), Number(arg("lines", 1_000_000))];
if (!DECIDER || !out) throw new Error("usage: node bench/report_cli.mjs --decider PATH --out FILE [--lines N]");
const save = (o) => writeFileSync(out, JSON.stringify({ lines: LINES, ...o }, null, 2) + "\n");
const generator = "crates/decider-cli/examples/gen_logs.rs";
const lastLine = (text) => text.trim().split("\n").at(-1) ?? "";
const errorLine = (text) => text.split("\n").find((l) => l.startsWith("error")) ?? lastLine(text);

if (spawnSync(DECIDER, ["report", "--help"]).status !== 0) {
  save({ not_measured: "this build of `decider` has no `report` subcommand" });
  process.exit(0);
}
const dir = mkdtempSync(path.join(os.tmpdir(), "decider-report-"));
const file = path.join(dir, "dev.log");
try {
  const cargo = ["run", "--release", "--locked", "-p", "decider-cli", "--example", "gen_logs", "--", "--lines", String(LINES), "--out", file];
  const g = spawnSync("cargo", cargo, { cwd: ROOT, encoding: "utf8", stdio: ["ignore", "ignore", "pipe"] });
  if (g.status !== 0) {
    save({ generator, not_measured: `the log generator failed (exit ${g.status}): ${g.error?.message ?? errorLine(g.stderr)}` });
  } else {
    // The generator's last stderr line counts what it wrote, by kind.
    const log = JSON.parse(lastLine(g.stderr));
    const r = spawnSync("/usr/bin/time", ["-v", DECIDER, "report", "--logs", file, "--json"], { encoding: "utf8", maxBuffer: 1 << 28 });
    const clock = r.stderr.match(/Elapsed \(wall clock\) time \(h:mm:ss or m:ss\): ([\d:.]+)/)?.[1];
    const rssKb = Number(r.stderr.match(/Maximum resident set size \(kbytes\): (\d+)/)?.[1]);
    if (r.status !== 0 || !clock) save({ generator, not_measured: `\`decider report\` failed (exit ${r.status}): ${r.stderr.trim().split("\n")[0]}` });
    else save({ generator, log, file_bytes: statSync(file).size, wall_s: clock.split(":").reduce((a, v) => a * 60 + Number(v), 0), max_rss_mb: (rssKb * 1024) / 1e6 });
  }
} finally {
  rmSync(dir, { recursive: true, force: true });
}

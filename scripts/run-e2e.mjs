#!/usr/bin/env node
// Runs the end-to-end suite (vitest) and prints one closing line: "e2e: N passed, M failed".
// Arguments are passed to vitest (e.g. a test file). Needs build/index.js (make build).
import { spawnSync } from "node:child_process";
import { existsSync, mkdtempSync, readFileSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";

if (!existsSync("build/index.js")) {
  console.error("build/index.js is missing: run `make build` first");
  process.exit(2);
}
const report = path.join(mkdtempSync(path.join(tmpdir(), "e2e-")), "report.json");
const run = spawnSync(
  "node_modules/.bin/vitest",
  ["run", "--config", "tests/e2e/vitest.config.mjs", "--reporter=default", "--reporter=json", `--outputFile.json=${report}`, ...process.argv.slice(2)],
  { stdio: "inherit", env: { ...process.env, WRANGLER_SEND_METRICS: "false" } },
);
let passed = 0, failed = 0, skipped = 0;
if (existsSync(report)) {
  const r = JSON.parse(readFileSync(report, "utf8"));
  passed = r.numPassedTests;
  failed = r.numFailedTests + (r.numTotalTestSuites > 0 && !r.success && r.numFailedTests === 0 ? 1 : 0);
  skipped = r.numPendingTests + r.numTodoTests;
}
console.log(`e2e: ${passed} passed, ${failed} failed` + (skipped ? `, ${skipped} skipped` : ""));
process.exit(run.status === 0 && failed === 0 && passed > 0 ? 0 : 1);

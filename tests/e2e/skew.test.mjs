// Training/serving skew: the same states through `decider decide` (native) and through the
// Worker in workerd (wasm) must give identical decisions: actions, sources, fallback reasons,
// and confidences and probabilities bit for bit (a served model's softmax takes exp from the
// libm crate on every target).
//
// States: tests/fixtures/skew_states.jsonl (scripts/gen-skew-states.mjs, fixed seed), or any
// JSONL file of states (bare or {"state": …}) given as SKEW_STATES=path (`make skew STATES=path`).
// DECIDER_BIN=path picks the CLI binary (default: target/debug/decider).
import { afterAll, beforeAll, expect, test } from "vitest";
import { spawnSync } from "node:child_process";
import { existsSync, readFileSync } from "node:fs";
import path from "node:path";
import { ROOT, startWorker } from "./helpers.mjs";

const STATES = process.env.SKEW_STATES || path.join(ROOT, "tests/fixtures/skew_states.jsonl");
const DEFAULT_FIXTURE = !process.env.SKEW_STATES;
// `make cli` builds it (debug: same arithmetic as release, and already built by cargo test).
const CLI = process.env.DECIDER_BIN || path.join(ROOT, "target/debug/decider");

const states = readFileSync(path.resolve(ROOT, STATES), "utf8")
  .split("\n")
  .filter((l) => l.trim())
  .map((l) => {
    const v = JSON.parse(l);
    return v && typeof v === "object" && "state" in v ? v.state : v;
  });

let w;
beforeAll(async () => {
  w = await startWorker();
});
afterAll(() => w?.dispose());

function native() {
  expect(existsSync(CLI), `${CLI} is missing: make cli (or DECIDER_BIN=path)`).toBe(true);
  const run = spawnSync(
    CLI,
    ["decide", "--model", path.join(ROOT, "model/decision-model.json"), "--rules", path.join(ROOT, "rules/default.json")],
    { input: states.map((s) => JSON.stringify(s)).join("\n") + "\n", encoding: "utf8", maxBuffer: 64 << 20 },
  );
  expect(run.status, run.stderr).toBe(0);
  const out = run.stdout.split("\n").filter((l) => l.trim()).map((l) => JSON.parse(l));
  expect(out).toHaveLength(states.length);
  return out;
}

async function served() {
  const out = new Array(states.length);
  const batch = 16;
  for (let i = 0; i < states.length; i += batch) {
    await Promise.all(
      states.slice(i, i + batch).map(async (state, j) => {
        const res = await w.decide({ state });
        const body = await res.json();
        expect(res.status, JSON.stringify({ state, body })).toBe(200);
        out[i + j] = body;
      }),
    );
  }
  return out;
}

test(`native and served decisions agree (${path.relative(ROOT, path.resolve(ROOT, STATES))})`, async () => {
  if (DEFAULT_FIXTURE) expect(states.length).toBeGreaterThanOrEqual(200);
  expect(states.length).toBeGreaterThan(0);
  const [a, b] = [native(), await served()];
  const mismatches = [];
  let maxDiff = 0;
  const sources = {};
  for (let i = 0; i < states.length; i++) {
    const n = a[i];
    const s = b[i];
    sources[s.source] = (sources[s.source] ?? 0) + 1;
    const diff = n.confidence === null || s.confidence === null
      ? (n.confidence === s.confidence ? 0 : Infinity)
      : Math.abs(n.confidence - s.confidence);
    maxDiff = Math.max(maxDiff, diff);
    if (n.action !== s.action || n.source !== s.source || n.fallback_reason !== s.fallback_reason
      || n.model_version !== s.model_version || n.confidence !== s.confidence
      || JSON.stringify(n.probabilities) !== JSON.stringify(s.probabilities)) {
      mismatches.push({ state: states[i], native: n, served: s });
    }
  }
  console.log(`skew: ${states.length} states, ${mismatches.length} mismatches, max |Δconfidence| ${maxDiff}, sources ${JSON.stringify(sources)}`);
  expect(mismatches.slice(0, 5)).toEqual([]);
  // The fixture must exercise both the model and the rule path.
  if (DEFAULT_FIXTURE) {
    expect(sources.model ?? 0).toBeGreaterThan(0);
    expect(sources.rules ?? 0).toBeGreaterThan(0);
  }
});

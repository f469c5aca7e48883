// Decision records and outcomes, as a learner reads them: every decision's log line carries
// the full state, a unique decision_id (also in the /v1/decide body and x-decision-id), the
// propensity, versions and arm; POST /v1/outcome logs a caller's outcome; EXPLORE_PERCENT
// draws route actions with exact, reproducible propensities.
import { afterAll, beforeAll, describe, expect, test } from "vitest";
import { spawnSync } from "node:child_process";
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import { EXAMPLE_STATE, ROOT, readJson, startWorker } from "./helpers.mjs";

const TOKEN = "outcome-token-for-tests";
const STATES = readFileSync(path.join(ROOT, "tests/fixtures/skew_states.jsonl"), "utf8").split("\n").filter(Boolean);
const GOLDEN = readFileSync(path.join(ROOT, "tests/fixtures/golden_decisions.jsonl"), "utf8").split("\n").filter(Boolean);

let w;
let explore;
beforeAll(async () => {
  [w, explore] = await Promise.all([
    startWorker({ vars: { OUTCOME_TOKEN: TOKEN } }),
    startWorker({ vars: { EXPLORE_PERCENT: "20" } }),
  ]);
});
afterAll(() => Promise.all([w?.dispose(), explore?.dispose()]));

const record = (worker, id) => worker.waitForLog((l) => l.event === "decision" && l.decision_id === id);

describe("decision records", () => {
  test("one JSON log line per decision with the documented fields", async () => {
    const res = await w.decide({ state: { ...EXAMPLE_STATE, queue_depth: 13 } }, { "cf-ray": "log-test-1" });
    const d = await res.json();
    const line = await w.waitForLog((l) => l.request_id === "log-test-1");
    expect(line).toMatchObject({
      event: "decision",
      endpoint: "decide",
      action: d.action,
      source: d.source,
      fallback_reason: d.fallback_reason,
      confidence: d.confidence,
      model_version: d.model_version,
      encoder_version: 1,
      decision_us: d.decision_us,
    });
    expect(Date.parse(line.ts)).not.toBeNaN();
    expect(w.logs.filter((l) => l.request_id === "log-test-1")).toHaveLength(1);
  });

  test("a request without cf-ray logs a null request id", async () => {
    const before = w.logs.length;
    await (await w.decide({ state: { ...EXAMPLE_STATE, queue_depth: 14 } })).arrayBuffer();
    const line = await w.waitForLog((l, i) => i >= before && l.event === "decision");
    expect(line.request_id).toBeNull();
  });

  test("a /v1/decide record carries the state as decided, its id, propensity and versions", async () => {
    const { hour: _h, ...noHour } = EXAMPLE_STATE;
    const res = await w.decide({ state: noHour }, { "cf-ray": "rec-1" });
    const body = await res.json();
    expect(body.decision_id).toMatch(/^[0-9a-f-]{36}$/);
    expect(res.headers.get("x-decision-id")).toBe(body.decision_id);
    const line = await record(w, body.decision_id);
    expect(line).toMatchObject({
      log_version: 1, event: "decision", endpoint: "decide", request_id: "rec-1",
      action: body.action, source: body.source, fallback_reason: body.fallback_reason,
      propensity: 1, explored: false, arm: "champion", backend: "embedded", encoder_version: 1,
      model_version: body.model_version, rules_version: expect.any(String),
      probabilities: body.probabilities,
    });
    // All six fields, the hour filled in by the Worker (the current UTC hour).
    expect(Object.keys(line.state).sort()).toEqual(["current_load", "hour", "queue_depth", "recent_success_rate", "region_id", "request_type"]);
    expect(line.state).toMatchObject(noHour);
    expect(line.state.hour).toBe(new Date().getUTCHours());
    expect(line.$bytes).toBeLessThanOrEqual(1024);
  });

  test("decision ids are unique", async () => {
    const ids = new Set();
    for (let i = 0; i < 50; i++) ids.add((await (await w.decide({ state: EXAMPLE_STATE })).json()).decision_id);
    expect(ids.size).toBe(50);
  });

  test("with EXPLORE_PERCENT unset, decisions are byte for byte the golden ones", async () => {
    // The same file as decider-core's native golden test (crates/decider-core/tests/decisions.rs):
    // a served model's softmax takes exp from the libm crate on every target.
    for (let i = 0; i < STATES.length; i++) {
      const text = await (await w.decide(`{"state": ${STATES[i]}}`)).text();
      // The golden line is the decision; the Worker's answer adds its id at the end.
      // decision_us is a timing (workerd's local clock may tick during a decision), not
      // part of the decision.
      const decision = text.replace(/,"decision_id":"[0-9a-f-]{36}"}$/, "}").replace(/"decision_us":\d+/, '"decision_us":0');
      expect(decision, `state ${i + 1}`).toBe(GOLDEN[i]);
    }
  });
});

describe("POST /v1/outcome", () => {
  const post = (body, token = TOKEN) =>
    w.fetch("/v1/outcome", {
      method: "POST",
      headers: { "content-type": "application/json", ...(token ? { authorization: `Bearer ${token}` } : {}) },
      body: typeof body === "string" ? body : JSON.stringify(body),
    });

  test("logs the caller's reward for a decision", async () => {
    const { decision_id } = await (await w.decide({ state: EXAMPLE_STATE })).json();
    const res = await post({ decision_id, reward: 0.75 });
    expect(res.status).toBe(202);
    expect(await res.json()).toEqual({ accepted: true, decision_id, live: false });
    const line = await w.waitForLog((l) => l.event === "outcome" && l.decision_id === decision_id);
    expect(line).toMatchObject({ log_version: 1, reward: 0.75, status: null, latency_ms: null });
  });

  test("or its observed status and latency", async () => {
    const res = await post({ decision_id: "caller-id-2", status: 503, latency_ms: 41.5 });
    expect(res.status).toBe(202);
    const line = await w.waitForLog((l) => l.event === "outcome" && l.decision_id === "caller-id-2");
    expect(line).toMatchObject({ reward: null, status: 503, latency_ms: 41.5 });
  });

  test.each([
    ["no token", { decision_id: "a", reward: 1 }, null, 401, "unauthorized", null],
    ["a wrong token", { decision_id: "a", reward: 1 }, "nope", 401, "unauthorized", null],
    ["reward above 1", { decision_id: "a", reward: 1.5 }, TOKEN, 400, "out_of_range", "reward"],
    ["no reward or status", { decision_id: "a" }, TOKEN, 400, "missing_field", "reward"],
    ["an unknown key", { decision_id: "a", reward: 1, score: 2 }, TOKEN, 400, "unknown_field", "score"],
    ["a bad id", { decision_id: "<script>", reward: 1 }, TOKEN, 400, "out_of_range", "decision_id"],
    ["a status out of range", { decision_id: "a", status: 700 }, TOKEN, 400, "out_of_range", "status"],
    ["malformed JSON", "{", TOKEN, 400, "invalid_json", null],
  ])("refuses %s", async (_name, body, token, status, code, field) => {
    const res = await post(body, token);
    expect(res.status).toBe(status);
    const { error } = await res.json();
    expect(error).toMatchObject({ code, field });
  });

  test("GET is 405", async () => {
    const res = await w.fetch("/v1/outcome");
    expect(res.status).toBe(405);
    expect(res.headers.get("allow")).toBe("POST");
  });
});

// The record table: one file of good and bad records (tests/fixtures/record_cases.json) that
// decider-core's reader and the CLI's log reader are held to natively. Here the Worker gives
// the same verdicts for the fields a request can carry, and the lines it logs read back in
// `decider report` with the table's counts.
describe("the record table (tests/fixtures/record_cases.json)", () => {
  const { cases, format } = readJson("tests/fixtures/record_cases.json");
  // A string line is text as it is (a key given twice): its body by the table's rule.
  const bodyText = (c, line) => {
    if (c.worker === "outcome") {
      expect(line.startsWith(format.outcome_head), c.name).toBe(true);
      return "{" + line.slice(format.outcome_head.length);
    }
    expect(line.startsWith('{"state":') && line.endsWith(format.decision_tail), c.name).toBe(true);
    return line.slice(0, line.length - format.decision_tail.length) + "}";
  };
  const served = cases.filter((c) => c.worker !== null);
  const CLI = process.env.DECIDER_BIN || path.join(ROOT, "target/debug/decider");
  const post = (body) =>
    w.fetch("/v1/outcome", {
      method: "POST",
      headers: { "content-type": "application/json", authorization: `Bearer ${TOKEN}` },
      body: typeof body === "string" ? body : JSON.stringify(body),
    });
  const ids = new Set();

  test.each(served.map((c) => [c.name, c]))("%s: the Worker's verdict is the table's", async (_name, c) => {
    for (const [i, line] of c.lines.entries()) {
      const want = c.expect[i];
      let res;
      if (typeof line === "string") {
        const body = bodyText(c, line);
        res = c.worker === "outcome" ? await post(body) : await w.decide(body);
      } else if (c.worker === "outcome") {
        const { event: _e, log_version: _v, ts: _t, ...body } = line;
        res = await post(body);
      } else {
        res = await w.decide({ state: line.state });
      }
      const accepted = want.ok === true || want.skip === "duplicate_outcome";
      const answer = await res.json();
      if (accepted) {
        expect(res.status, `${c.name} line ${i}`).toBe(c.worker === "outcome" ? 202 : 200);
        ids.add(answer.decision_id);
      } else {
        expect(res.status, `${c.name} line ${i}`).toBe(400);
        expect(answer.error, `${c.name} line ${i}`).toMatchObject({ code: want.code, field: want.field });
      }
    }
  });

  // The lines whose bodies the Worker refuses above (a key given twice, a reward with a status)
  // are the lines decider report refuses, each a bad_record naming the same field.
  test("decider report refuses the outcome lines the Worker refuses, naming the same field", () => {
    const refused = served
      .filter((c) => c.worker === "outcome")
      .flatMap((c) => c.lines.map((line, i) => [line, c.expect[i]]))
      .filter(([, want]) => ["duplicate_field", "conflicting_fields"].includes(want.code));
    expect(refused.length).toBeGreaterThanOrEqual(4);
    const dir = mkdtempSync(path.join(os.tmpdir(), "records-"));
    try {
      const file = path.join(dir, "refused.log");
      writeFileSync(file, refused.map(([line]) => (typeof line === "string" ? line : JSON.stringify(line))).join("\n") + "\n");
      const run = spawnSync(CLI, ["report", "--logs", file, "--json"], { encoding: "utf8" });
      expect(run.status, run.stderr).toBe(0);
      const r = JSON.parse(run.stdout);
      expect(r.outcomes).toBe(0);
      expect(r.skipped.bad_record).toBe(refused.length);
      const samples = r.skipped_samples.join("\n");
      for (const [, want] of refused.slice(0, 3)) expect(samples).toContain(`bad_record: ${want.code}: ${want.field}`);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });

  test("what the Worker logged for them reads back in decider report with the table's counts", async () => {
    const outcomeCases = served.filter((c) => c.worker === "outcome");
    const accepted = outcomeCases.flatMap((c) => c.expect).filter((e) => e.ok === true || e.skip).length;
    const duplicates = outcomeCases.flatMap((c) => c.expect).filter((e) => e.skip === "duplicate_outcome").length;
    const decided = served.filter((c) => c.worker === "decide").flatMap((c) => c.expect).filter((e) => e.ok === true).length;
    const theirs = () => w.logs.filter((l) => ids.has(l.decision_id));
    for (let waited = 0; theirs().length < accepted + decided && waited < 2000; waited += 10) {
      await new Promise((r) => setTimeout(r, 10));
    }
    const lines = theirs().map((l) => JSON.stringify(l));
    expect(lines.length).toBe(accepted + decided);
    const dir = mkdtempSync(path.join(os.tmpdir(), "records-"));
    try {
      const file = path.join(dir, "worker.log");
      writeFileSync(file, lines.join("\n") + "\n");
      const run = spawnSync(CLI, ["report", "--logs", file, "--json"], { encoding: "utf8" });
      expect(run.status, run.stderr).toBe(0);
      const r = JSON.parse(run.stdout);
      expect(r.decisions).toBe(decided);
      expect(r.outcomes).toBe(accepted - duplicates);
      expect(r.skipped).toMatchObject({ bad_record: 0, duplicate_outcome: duplicates, not_json: 0 });
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});

describe("exploration", () => {
  test("draws route actions at the configured share with exact propensities", async () => {
    const h = await (await explore.fetch("/v1/health")).json();
    expect(h.explore_percent).toBe(20);
    const n = 300;
    const counts = {};
    let explored = 0;
    for (let i = 0; i < n; i++) {
      const body = await (await explore.decide({ state: EXAMPLE_STATE })).json();
      const line = await record(explore, body.decision_id);
      expect(line.action).toBe(body.action);
      expect(line.source).toBe("model");
      counts[line.action] = (counts[line.action] ?? 0) + 1;
      explored += line.explored ? 1 : 0;
      const greedy = "route_a"; // the example state's model action
      const expected = line.action === greedy ? 0.8 + 0.2 / 3 : 0.2 / 3;
      expect(line.propensity).toBeCloseTo(expected, 12);
      if (line.explored) expect(["route_a", "route_b", "route_c"]).toContain(line.action);
      else expect(line.action).toBe(greedy);
    }
    expect(counts.reject ?? 0).toBe(0);
    // 20% explored: binomial(300, 0.2) is 60 ± 6.9; allow 4 standard deviations.
    expect(Math.abs(explored - 60)).toBeLessThan(28);
  });

  test("routes the same share of the model's rejects, each with its exact propensity", async () => {
    // A state the shipped model rejects with confidence 0.95.
    const state = { request_type: 4, region_id: 4, current_load: 0.7015, recent_success_rate: 1.0, queue_depth: 2, hour: 0 };
    const n = 300;
    let explored = 0;
    for (let i = 0; i < n; i++) {
      const body = await (await explore.decide({ state })).json();
      const line = await record(explore, body.decision_id);
      expect(line.action).toBe(body.action);
      expect(line.source).toBe("model");
      expect(line.explored).toBe(line.action !== "reject");
      expect(line.propensity).toBeCloseTo(line.explored ? 0.2 / 3 : 0.8, 12);
      explored += line.explored ? 1 : 0;
    }
    expect(Math.abs(explored - 60)).toBeLessThan(28);
  });
});

// Configuration by wrangler vars: overrides take effect, invalid values are reported on
// /v1/health and replaced by safe defaults, and the Worker keeps answering.
import { afterAll, beforeAll, describe, expect, test } from "vitest";
import { EXAMPLE_STATE, checkDecisionShape, readJson, startWorker } from "./helpers.mjs";

const ARTIFACT = readJson("model/decision-model.json");
const DEFAULT_RULES = readJson("rules/default.json");
const CUSTOM_RULES = {
  version: "e2e-custom-1",
  rules: [
    { name: "queue-reject", when: { queue_depth: { gte: 500 } }, action: "reject" },
    { name: "everything-c", when: {}, action: "route_c" },
  ],
};

const workers = {};
beforeAll(async () => {
  const specs = {
    plain: {},
    invalid: {
      DECISION_BACKEND: "gpu",
      AI_TIMEOUT_MS: "soon",
      CONFIDENCE_THRESHOLD: "1.5",
      DEFAULT_ACTION: "route_z",
      RULES: '{"version": "broken", "rules": [{"name": "no-catch-all", "when": {"hour": {"in": [1]}}, "action": "route_a"}]}',
      OOD_CHECK: "perhaps",
      SHADOW: "sometimes",
    },
    // Threshold 1.0: no model answer is confident enough, so every decision shows the rules.
    customRules: { CONFIDENCE_THRESHOLD: "1", RULES: JSON.stringify(CUSTOM_RULES) },
    noRules: { CONFIDENCE_THRESHOLD: "1", RULES: "none", DEFAULT_ACTION: "route_b" },
    noOod: { OOD_CHECK: "false" },
    zeroThreshold: { CONFIDENCE_THRESHOLD: "0" },
  };
  const started = await Promise.all(Object.entries(specs).map(([k, vars]) => startWorker({ vars }).then((w) => [k, w])));
  for (const [k, w] of started) workers[k] = w;
});
afterAll(async () => {
  await Promise.all(Object.values(workers).map((w) => w.dispose()));
});

async function decide(w, state = EXAMPLE_STATE) {
  const res = await w.decide({ state });
  const d = await res.json();
  checkDecisionShape(expect, res, d);
  return d;
}

describe("invalid configuration", () => {
  test("is reported on /v1/health, variable by variable", async () => {
    const h = await (await workers.invalid.health()).json();
    expect(h.status).toBe("degraded");
    expect(h.config_errors.map((e) => e.var)).toEqual([
      "DECISION_BACKEND", "AI_TIMEOUT_MS", "CONFIDENCE_THRESHOLD", "DEFAULT_ACTION", "RULES", "OOD_CHECK", "SHADOW",
    ]);
    const rules = h.config_errors.find((e) => e.var === "RULES");
    expect(rules.message).toContain("no-catch-all");
    // ... and replaced by the safe defaults.
    expect(h).toMatchObject({
      backend: "embedded",
      model: { loaded: true },
      threshold: ARTIFACT.threshold,
      threshold_source: "artifact",
      default_action: "route_a",
      rules: { version: DEFAULT_RULES.version, source: "default" },
      ood_check: true,
      shadow: false,
    });
  });

  test("is hidden from /v1/health without the admin token: degraded, not why", async () => {
    const text = await (await workers.invalid.fetch("/v1/health")).text();
    const h = JSON.parse(text);
    expect(h.status).toBe("degraded");
    expect(h.config_errors).toBeUndefined();
    expect(text).not.toMatch(/DECISION_BACKEND|no-catch-all|gpu/);
  });

  test("is logged once per isolate, variable by variable (config_error)", async () => {
    const w = workers.invalid;
    // More requests on the same isolate log nothing more.
    await decide(w);
    await (await w.health()).arrayBuffer();
    await w.waitForLog((l) => l.event === "config_error" && l.var === "SHADOW");
    const events = w.logs.filter((l) => l.event === "config_error");
    expect(events.map((e) => e.var)).toEqual([
      "DECISION_BACKEND", "AI_TIMEOUT_MS", "CONFIDENCE_THRESHOLD", "DEFAULT_ACTION", "RULES", "OOD_CHECK", "SHADOW",
    ]);
    const h = await (await w.health()).json();
    for (const e of events) {
      expect(e.message).toBe(h.config_errors.find((c) => c.var === e.var).message);
      expect(e.ts).toMatch(/^\d{4}-\d{2}-\d{2}T/);
    }
    // A valid configuration logs none.
    expect(workers.plain.logs.filter((l) => l.event === "config_error")).toEqual([]);
  });

  test("does not stop the Worker from deciding with the model", async () => {
    const d = await decide(workers.invalid);
    expect(d.source).toBe("model");
  });
});

describe("overrides", () => {
  test("RULES replaces the default table", async () => {
    const h = await (await workers.customRules.health()).json();
    expect(h.rules).toEqual({ version: "e2e-custom-1", source: "config", count: 2 });
    expect(h).toMatchObject({ threshold: 1, threshold_source: "config", config_errors: [] });
    const a = await decide(workers.customRules);
    expect(a).toMatchObject({ action: "route_c", source: "rules", rule: "everything-c" });
    const b = await decide(workers.customRules, { ...EXAMPLE_STATE, queue_depth: 600 });
    expect(b).toMatchObject({ action: "reject", source: "rules", rule: "queue-reject" });
  });

  test("RULES=none: fallbacks take DEFAULT_ACTION (source default)", async () => {
    const d = await decide(workers.noRules);
    expect(d).toMatchObject({ action: "route_b", source: "default" });
    expect(["low_confidence", "out_of_distribution"]).toContain(d.fallback_reason);
    const h = await (await workers.noRules.health()).json();
    expect(h.rules).toEqual({ version: null, source: "none", count: 0 });
  });

  test("CONFIDENCE_THRESHOLD=1 sends low-confidence answers to rules", async () => {
    const d = await decide(workers.customRules);
    expect(d.confidence).toBeLessThan(1);
    expect(d.fallback_reason).toBe("low_confidence");
  });

  test("CONFIDENCE_THRESHOLD=0 lets the model decide every in-distribution state", async () => {
    const d = await decide(workers.zeroThreshold, { ...EXAMPLE_STATE, region_id: 8, current_load: 0.7 });
    expect(d).toMatchObject({ source: "model", fallback_reason: null });
  });
});

describe("out-of-distribution check", () => {
  // Far outside any training range the artifact records.
  const outlier = { ...EXAMPLE_STATE, current_load: ARTIFACT.feature_ranges.current_load[1] + 10 };

  test("a raw field outside the training ranges → rules (out_of_distribution)", async () => {
    const d = await decide(workers.plain, outlier);
    expect(d).toMatchObject({ source: "rules", fallback_reason: "out_of_distribution" });
    expect(d.confidence).not.toBeNull();
  });

  test("OOD_CHECK=false lets the model see it", async () => {
    const d = await decide(workers.noOod, outlier);
    expect(d.fallback_reason).not.toBe("out_of_distribution");
  });
});

describe("debug endpoint", () => {
  test("is off by default", async () => {
    const res = await workers.plain.fetch("/v1/debug/encode", {
      method: "POST", headers: { "content-type": "application/json" }, body: JSON.stringify({ state: EXAMPLE_STATE }),
    });
    expect(res.status).toBe(404);
  });
});

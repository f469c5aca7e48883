// Configuration by wrangler vars: overrides take effect, invalid values are reported on
// /v1/health and replaced by safe defaults, and the Worker keeps answering. The configuration
// faults of the fault table (tests/fixtures/faults.json) run here too.
import { afterAll, beforeAll, describe, expect, test } from "vitest";
import { EXAMPLE_STATE, WHERE, checkDecisionShape, faultCases, readJson, startOrigin, startWorker } from "./helpers.mjs";

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

describe("debug endpoints", () => {
  test("the encode endpoint is off by default", async () => {
    const res = await workers.plain.fetch("/v1/debug/encode", {
      method: "POST", headers: { "content-type": "application/json" }, body: JSON.stringify({ state: EXAMPLE_STATE }),
    });
    expect(res.status).toBe(404);
  });

  test("the trap endpoint is off by default", async () => {
    const res = await workers.plain.fetch("/v1/debug/trap", { method: "POST" });
    expect(res.status).toBe(404);
  });
});

describe("configuration faults (the fault table)", () => {
  const TOKEN = "faults-admin-token";
  const HEALTHY = { current_load: 0.35, recent_success_rate: 0.99, queue_depth: 4 };
  const US = { country: "US", continent: "NA" }; // shipped REGIONS: region 0, route_a with healthy signals
  const GB = WHERE.route_b; // region 4, route_b at every hour, GET or POST
  /** A case runs as `test.fails` while its bug is open. */
  const run = (c) => (c.known_bug ? test.fails : test);
  let A, B, C;
  const started = [];
  beforeAll(async () => {
    [A, B, C] = await Promise.all([startOrigin("A"), startOrigin("B"), startOrigin("C")]);
  });
  afterAll(async () => {
    await Promise.all(started.map((x) => x.dispose()));
    await Promise.all([A, B, C].map((o) => o?.close()));
  });
  const routingVars = () => ({
    ORIGIN_ROUTE_A: A.url, ORIGIN_ROUTE_B: B.url, ORIGIN_ROUTE_C: C.url,
    ORIGIN_TIMEOUT_MS: "300", ADMIN_TOKEN: TOKEN, SIGNALS_CACHE_S: "0",
  });
  async function pushHealthy(x) {
    const res = await x.fetch("/v1/admin/signals", {
      method: "PUT",
      headers: { authorization: `Bearer ${TOKEN}`, "content-type": "application/json" },
      body: JSON.stringify(HEALTHY),
    });
    return res.status;
  }

  for (const c of faultCases("config")) {
    run(c)(c.name, async () => {
      const w = await startWorker({ vars: { ...routingVars(), ...c.vars }, extra: { kvNamespaces: ["SIGNALS"] } });
      started.push(w);
      const h = await (await w.health()).json();
      const e = c.expect;
      expect(h.status).toBe(e.health);
      expect(h.config_errors.map((x) => x.var)).toEqual(e.config_errors);
      for (const err of h.config_errors) {
        // A scalar's message quotes the refused value; a table's names what is wrong in it.
        if (!["RULES", "REQUEST_TYPES", "REGIONS", "FAILOVER"].includes(err.var)) {
          expect(err.message).toContain(JSON.stringify(String(c.vars[err.var])));
        }
        expect(err.message).toMatch(/; using|has no origin/);
      }
      expect(h).toMatchObject(e.defaults);
      const d = await (await w.decide({ state: EXAMPLE_STATE })).json();
      expect(d.source).toBe(e.decides);
      if (e.routes) {
        expect(await pushHealthy(w)).toBe(200);
        const r = await w.fetch("/fault/config", { cf: US });
        expect(r.status).toBe(200);
        expect(r.headers.get("x-decision-action")).toBe("route_a");
        expect((await r.json()).origin).toBe("A");
      }
      if (e.route_b_fails_over_to) {
        // route_b has no valid origin: nothing is sent there, so even a POST goes to its failover.
        [A, B, C].forEach((o) => o.reset());
        const r = await w.fetch("/fault/config", { method: "POST", cf: GB, body: "{}", headers: { "content-type": "application/json" } });
        expect(r.status).toBe(200);
        expect(r.headers.get("x-decision-action")).toBe("route_b");
        expect(r.headers.get("x-decision-failover")).toBe(e.route_b_fails_over_to);
        expect((await r.json()).origin).toBe("C");
        expect(B.requests).toHaveLength(0);
      }
    });
  }
});

// POST /v1/decide, GET /v1/health and the error surface, on the embedded model: bad requests,
// the shared bad-input table (tests/fixtures/bad_inputs.json, also run by
// scripts/check-bad-inputs.mjs), and answering again after a wasm trap.
import { afterAll, beforeAll, describe, expect, test } from "vitest";
import { bodyBytes, check } from "../../scripts/check-bad-inputs.mjs";
import {
  ACTIONS, COMPAT_DATE, EXAMPLE_STATE, checkDecisionShape, readJson, rng, startWorker,
} from "./helpers.mjs";

const ARTIFACT = readJson("model/decision-model.json");
const DEFAULT_RULES = readJson("rules/default.json");
const GOLDEN = readJson("tests/fixtures/golden_features.json");
const BAD = readJson("tests/e2e/cases/bad_requests.json").cases;
const BAD_INPUTS = readJson("tests/fixtures/bad_inputs.json").cases;

let w;
beforeAll(async () => {
  w = await startWorker({ vars: { DEBUG_ENDPOINTS: "true" } });
});
afterAll(() => w?.dispose());

describe("POST /v1/decide", () => {
  test("the README example is decided by the embedded model", async () => {
    const res = await w.decide({ state: EXAMPLE_STATE }, { "cf-ray": "8f00e2e-LHR" });
    const d = await res.json();
    checkDecisionShape(expect, res, d);
    expect(d.source).toBe("model");
    expect(d.fallback_reason).toBeNull();
    expect(d.model_version).toBe(ARTIFACT.model_version);
    expect(d.confidence).toBeGreaterThanOrEqual(ARTIFACT.threshold);
    expect(d.confidence).toBe(d.probabilities[d.action]);
    expect(Math.max(...Object.values(d.probabilities))).toBe(d.confidence);
  });

  test("hour defaults to the current UTC hour", async () => {
    const { hour, ...noHour } = EXAMPLE_STATE;
    const d1 = await (await w.decide({ state: noHour })).json();
    const d2 = await (await w.decide({ state: { ...noHour, hour: new Date().getUTCHours() } })).json();
    expect(d1.probabilities).toEqual(d2.probabilities);
  });

  test("content-type with parameters is accepted", async () => {
    const res = await w.decide({ state: EXAMPLE_STATE }, { "content-type": "application/json; charset=utf-8" });
    expect(res.status).toBe(200);
  });

  test("loads above 1 and deep queues are legal", async () => {
    const res = await w.decide({ state: { ...EXAMPLE_STATE, current_load: 3.5, queue_depth: 100000 } });
    const d = await res.json();
    checkDecisionShape(expect, res, d);
  });

  test.each(BAD)("bad request: $name", async (c) => {
    const res = await w.decide(c.raw ?? JSON.stringify(c.body));
    expect(res.status).toBe(c.status);
    expect(res.headers.get("content-type")).toBe("application/json");
    const { error } = await res.json();
    expect(error.code).toBe(c.code);
    expect(error.field).toBe(c.field);
    expect(typeof error.message).toBe("string");
    if (c.field) expect(error.message).toContain(c.field.replace(/^state\./, ""));
    expect(res.headers.get("x-decision-action")).toBeNull();
  });

  test("malformed JSON reports line and column", async () => {
    const res = await w.decide('{\n  "state": {\n    "request_type": 1,\n    oops\n  }\n}');
    expect(res.status).toBe(400);
    const { error } = await res.json();
    expect(error).toMatchObject({ code: "invalid_json", line: 4, column: 5 });
    expect(error.message).toContain("line 4 column 5");
  });

  test.each([
    ["missing", undefined],
    ["text/plain", "text/plain"],
    ["form", "application/x-www-form-urlencoded"],
    ["json-ish", "application/jsonp"],
  ])("wrong content type (%s) is 415", async (_name, ct) => {
    const headers = ct ? { "content-type": ct } : {};
    const res = await w.fetch("/v1/decide", { method: "POST", headers, body: JSON.stringify({ state: EXAMPLE_STATE }) });
    expect(res.status).toBe(415);
    expect((await res.json()).error.code).toBe("unsupported_media_type");
  });

  test("body over 16 KiB is 413 (declared length)", async () => {
    const body = JSON.stringify({ state: EXAMPLE_STATE }) + " ".repeat(16 * 1024);
    const res = await w.decide(body);
    expect(res.status).toBe(413);
    expect((await res.json()).error.code).toBe("payload_too_large");
  });

  test("body over 16 KiB is 413 (streamed, no content-length)", async () => {
    const chunk = new TextEncoder().encode(" ".repeat(4096));
    let sent = 0;
    const stream = new ReadableStream({
      pull(c) {
        if (sent++ < 8) c.enqueue(chunk);
        else c.close();
      },
    });
    const res = await w.fetch("/v1/decide", {
      method: "POST", headers: { "content-type": "application/json" }, body: stream, duplex: "half",
    });
    expect(res.status).toBe(413);
  });

  // A service-binding caller can declare a content-length its stream does not keep; workerd
  // passes both on. The limit is enforced on the bytes that arrive, not on the declaration.
  test("a lying content-length over a service binding is still 413 (and an honest one 200)", async () => {
    const caller = `export default { async fetch(req, env) {
      const n = +new URL(req.url).searchParams.get("n");
      const base = new TextEncoder().encode(${JSON.stringify(JSON.stringify({ state: EXAMPLE_STATE }))});
      const body = new Uint8Array(base.length + n).fill(32); body.set(base);
      const stream = new ReadableStream({ start(c) { c.enqueue(body.slice(0, 8192)); c.enqueue(body.slice(8192)); c.close(); } });
      const r = await env.DECIDER.fetch("http://decider/v1/decide", {
        method: "POST", headers: { "content-type": "application/json", "content-length": "100" }, body: stream,
      });
      return new Response(JSON.stringify({ status: r.status, body: await r.json() }));
    } }`;
    const lw = await startWorker({
      workers: [{ name: "caller", modules: true, script: caller, compatibilityDate: COMPAT_DATE, serviceBindings: { DECIDER: "decider" } }],
    });
    try {
      const callerFetch = await lw.mf.getWorker("caller");
      const big = await (await callerFetch.fetch("http://caller/?n=20000")).json();
      expect(big.status).toBe(413);
      expect(big.body.error.code).toBe("payload_too_large");
      const small = await (await callerFetch.fetch("http://caller/?n=0")).json();
      expect(small.status).toBe(200);
      expect(small.body.source).toBe("model");
    } finally {
      await lw.dispose();
    }
  });

  test("exactly 16 KiB is accepted", async () => {
    const base = JSON.stringify({ state: EXAMPLE_STATE });
    const body = base + " ".repeat(16 * 1024 - base.length);
    expect(body.length).toBe(16384);
    expect((await w.decide(body)).status).toBe(200);
  });

  test.each(["GET", "PUT", "DELETE", "PATCH"])("%s /v1/decide is 405 with Allow", async (method) => {
    const res = await w.fetch("/v1/decide", { method });
    expect(res.status).toBe(405);
    expect(res.headers.get("allow")).toBe("POST");
    expect((await res.json()).error.code).toBe("method_not_allowed");
  });

  test("generated malformed requests get 4xx naming the field, never 5xx", async () => {
    // Mutations of a valid state the case table above does not list: each must be
    // refused naming the mutated field (or accepted when the mutation is legal).
    const rand = rng(20261130);
    const fields = Object.keys(EXAMPLE_STATE);
    const junk = [null, true, false, "", "x", [], {}, [1], { a: 1 }, -1, -1e308, 1e308, 0.5, 7, 24, 1e6, -0.0001, "1", "0.5"];
    let refused = 0;
    for (let i = 0; i < 150; i++) {
      const field = fields[Math.floor(rand() * fields.length)];
      const value = junk[Math.floor(rand() * junk.length)];
      const state = { ...EXAMPLE_STATE, [field]: value };
      const res = await w.decide({ state });
      expect(res.status, JSON.stringify(state)).toBeLessThan(500);
      const body = await res.json();
      if (res.status === 200) {
        expect(ACTIONS).toContain(body.action);
      } else {
        refused++;
        expect(res.status).toBe(400);
        expect(body.error.field, JSON.stringify(state)).toBe(`state.${field}`);
      }
    }
    expect(refused).toBeGreaterThan(100);
  });
});

describe("GET /v1/health", () => {
  test("reports model, versions, backend, threshold and rules", async () => {
    const res = await w.health();
    expect(res.status).toBe(200);
    const h = await res.json();
    expect(h).toMatchObject({
      status: "ok",
      backend: "embedded",
      model: { loaded: true, version: ARTIFACT.model_version, error: null },
      encoder_version: 1,
      actions: ACTIONS,
      threshold: ARTIFACT.threshold,
      threshold_source: "artifact",
      rules: { version: DEFAULT_RULES.version, source: "default", count: DEFAULT_RULES.rules.length },
      config_errors: [],
    });
  });

  test("without the admin token: status, backend, model, versions, threshold, exploration and the rollout only", async () => {
    const h = await (await w.fetch("/v1/health")).json();
    expect(h).toEqual({
      status: "ok",
      backend: "embedded",
      model: { loaded: true, version: ARTIFACT.model_version },
      encoder_version: 1,
      rules: { version: DEFAULT_RULES.version },
      threshold: ARTIFACT.threshold,
      explore_percent: 0,
      // No ROLLOUT object bound, no challenger: CHALLENGER_PERCENT (0) is the share.
      rollout: { automatic: false, challenger_version: null, setting: 0, phase: null, effective_champion: null },
    });
  });

  test("HEAD is allowed, POST is 405 with Allow", async () => {
    expect((await w.fetch("/v1/health", { method: "HEAD" })).status).toBe(200);
    const res = await w.fetch("/v1/health", { method: "POST" });
    expect(res.status).toBe(405);
    expect(res.headers.get("allow")).toBe("GET, HEAD");
  });
});

describe("routing of unknown paths", () => {
  test.each(["/v1/nope", "/v1/", "/v1/decide/extra", "/v1/admin"])("%s is 404 JSON", async (p) => {
    const res = await w.fetch(p);
    expect(res.status).toBe(404);
    expect((await res.json()).error.code).toBe("not_found");
  });
});

describe("encoder golden vectors in wasm", () => {
  test("every golden state encodes to exactly its 16 floats", async () => {
    expect(GOLDEN.cases.length).toBeGreaterThan(10);
    for (const c of GOLDEN.cases) {
      const res = await w.fetch("/v1/debug/encode", {
        method: "POST", headers: { "content-type": "application/json" }, body: JSON.stringify({ state: c.state }),
      });
      expect(res.status).toBe(200);
      const got = await res.json();
      expect(got.encoder_version).toBe(GOLDEN.encoder_version);
      expect(got.features).toHaveLength(16);
      // Bit for bit: the encoder is only exact IEEE operations and a table (no libm).
      got.features.forEach((v, i) => expect(v, `${JSON.stringify(c.state)}[${i}]`).toBe(c.features[i]));
    }
  });
});

describe("the bad-input table", () => {
  // Every case gets its expected status, error code and field, and none gets a 5xx.
  let plain;
  beforeAll(async () => {
    plain = await startWorker();
  });
  afterAll(() => plain?.dispose());

  const send = (worker, c) => {
    const headers = c.content_type === null ? {} : { "content-type": c.content_type };
    return worker.fetch(c.path, { method: c.method, headers, body: bodyBytes(c) });
  };

  test.each(BAD_INPUTS.map((c) => [c.name, c]))("%s", async (_name, c) => {
    expect(await check(c, await send(plain, c))).toEqual([]);
  });
});

describe("a wasm trap", () => {
  // A trap (what a panic compiles to) must not leave the Worker broken: the next request is
  // answered by a fresh instance (workers-rs's recovery in the module worker-build emits),
  // checked through POST /v1/debug/trap.
  let trapping;
  beforeAll(async () => {
    trapping = await startWorker({ vars: { DEBUG_ENDPOINTS: "true" } });
  });
  afterAll(() => trapping?.dispose());

  test("after a trap the Worker answers again, from a fresh instance", async () => {
    const w = trapping;
    const before = await w.decide({ state: EXAMPLE_STATE });
    expect(before.status).toBe(200);
    const health = async () => (await (await w.fetch("/v1/health")).json()).model.loaded;
    expect(await health()).toBe(true);

    for (let i = 0; i < 2; i++) {
      const trap = await w.fetch("/v1/debug/trap", { method: "POST" });
      expect(trap.status).toBe(500);
      await trap.arrayBuffer();
      // Decisions and health both answer after the trap.
      const d = await w.decide({ state: EXAMPLE_STATE });
      expect(d.status).toBe(200);
      expect((await d.json()).source).toBe("model");
      expect(await health()).toBe(true);
    }
    // Each trap was followed by a re-instantiation (log lines arrive asynchronously).
    const reinits = () => w.stdoutLines.filter((l) => l.includes("Reinitializing Wasm application")).length;
    for (let t = 0; t < 100 && reinits() < 2; t++) await new Promise((r) => setTimeout(r, 20));
    expect(reinits()).toBe(2);
  });
});

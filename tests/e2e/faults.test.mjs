// The fault table (tests/fixtures/faults.json): every injected fault with its defined
// outcome. Cases the other e2e files already assert name that test (`covered_by`), and this
// file checks the named test still exists; the rest run here. A `known_bug` case states what
// the Worker must do and runs as `test.fails` until the Worker is fixed (the reason is in the
// table); when a fix lands, the case starts failing here and its `known_bug` must go.
import { afterAll, beforeAll, describe, expect, test } from "vitest";
import { readFileSync } from "node:fs";
import path from "node:path";
import { EXAMPLE_STATE, ROOT, closedPort, readBody, readJson, startOrigin, startWorker } from "./helpers.mjs";

const TABLE = readJson("tests/fixtures/faults.json");
const TOKEN = "faults-admin-token";
const HEALTHY = { current_load: 0.35, recent_success_rate: 0.99, queue_depth: 4 };
const US = { country: "US", continent: "NA" }; // shipped REGIONS: region 0, route_a with healthy signals
const DE = { country: "DE", continent: "EU" }; // region 5, route_b
const ORIGIN_TIMEOUT_MS = 300;
const AI_MODEL = "@cf/test/faults";

// A Workers AI stub (constructor named `Ai`, as workers-rs requires) with the faults the
// shared stub in helpers.mjs does not have. Its mode comes from the test through CONTROL.
const AI_STUB = `
class Ai {
  constructor(env) { this.env = env; }
  async run(model, input) {
    const { mode } = await (await this.env.CONTROL.fetch("http://control/mode")).json();
    switch (mode) {
      case "throw": throw new Error("stub: inference failed");
      case "hang": return new Promise(() => {});
      case "throw-string": throw "plain string";
      case "reject-null": return Promise.reject(null);
      case "symbol": return { action: Symbol("route_b"), confidence: 0.99 };
      case "bigint": return { action: "route_b", confidence: 10n };
      case "huge-string": return "x".repeat(32 * 1024 * 1024);
      case "huge-array": return { probabilities: new Array(1000000).fill(0.25) };
      case "huge-padding": return { action: "route_b", confidence: 0.99, padding: "p".repeat(16 * 1024 * 1024) };
      case "huge-error": throw new Error("E".repeat(4 * 1024 * 1024));
      case "deep": { let v = 0.25; for (let i = 0; i < 100000; i++) v = [v]; return { probabilities: v }; }
      case "circular": { const o = { action: "route_b", confidence: 0.99 }; o.self = o; return o; }
      case "getter-throws": return { action: "route_b", get confidence() { throw new Error("stub: getter"); } };
      default: return { action: "route_b", confidence: 0.99 };
    }
  }
}
export default function (env) { return new Ai(env); }
`;

// A KV namespace stub (constructor named `KvNamespace`) whose every call fails.
const KV_THROWS = `
class KvNamespace {
  async get() { throw new Error("kv stub: read failed"); }
  async put() { throw new Error("kv stub: write failed"); }
}
export default function () { return new KvNamespace(); }
`;

/** Origin behaviours by the table's `origin` name; `ctx.sent` records what was written. */
const ORIGIN_FAULTS = {
  "drop-before-headers": (req) => req.socket.destroy(),
  "not-http": (req) => req.socket.end("NOT HTTP AT ALL\r\n\r\n"),
  slow: (req, res, record) => readBody(req, record).then(() => setTimeout(() => res.end("too late"), ORIGIN_TIMEOUT_MS + 2000)),
  "status-502": (req, res) => res.writeHead(502).end("bad gateway upstream"),
  "status-500": (req, res) => res.writeHead(500, { "content-type": "text/plain" }).end("origin 500"),
  "drop-mid-body": (req, res) => {
    res.writeHead(200, { "content-type": "application/octet-stream", "content-length": "100000" });
    res.write(Buffer.alloc(1000, 97));
    setTimeout(() => res.socket.destroy(), 50);
  },
  "drop-mid-body-chunked": (req, res) => {
    res.writeHead(200, { "content-type": "application/octet-stream" });
    res.write(Buffer.alloc(1000, 97));
    setTimeout(() => res.socket.destroy(), 50);
  },
  // Reads the first chunk of the request body, then hangs up.
  "drop-mid-request-body": (req) => req.once("data", () => req.socket.destroy()),
};

let ray = 0;
const nextRay = (tag) => `fault-${++ray}-${tag}`;
const decisionLine = (w, id) => w.waitForLog((l) => l.event === "decision" && l.request_id === id);
/** A case runs as `test.fails` while its bug is open. */
const run = (c) => (c.known_bug ? test.fails : test);
const cases = (fault) => TABLE.cases.filter((c) => c.fault === fault && !c.covered_by);

let A, B, C;
const started = [];
async function worker(opts) {
  const w = await startWorker(opts);
  started.push(w);
  return w;
}
const routingVars = () => ({
  ORIGIN_ROUTE_A: A.url, ORIGIN_ROUTE_B: B.url, ORIGIN_ROUTE_C: C.url,
  ORIGIN_TIMEOUT_MS: String(ORIGIN_TIMEOUT_MS), ADMIN_TOKEN: TOKEN, SIGNALS_CACHE_S: "0",
});
async function pushHealthy(w) {
  const res = await w.fetch("/v1/admin/signals", {
    method: "PUT",
    headers: { authorization: `Bearer ${TOKEN}`, "content-type": "application/json" },
    body: JSON.stringify(HEALTHY),
  });
  return res.status;
}

beforeAll(async () => {
  [A, B, C] = await Promise.all([startOrigin("A"), startOrigin("B"), startOrigin("C")]);
});
afterAll(async () => {
  await Promise.all(started.map((w) => w.dispose()));
  await Promise.all([A, B, C].map((o) => o?.close()));
});

describe("the table", () => {
  test("lists every fault of the table", () => {
    const names = TABLE.cases.map((c) => c.name).join("\n");
    for (const needle of [
      /^ai: binding throws$/m, /^ai: binding never answers \(timeout\)$/m, /^ai: garbage/m, /^ai: NaN/m, /^ai: huge answer/m,
      /^kv: no signals stored$/m, /^kv: not JSON$/m, /^kv: wrong type/m, /^kv: NaN literal$/m, /^kv: stale/m,
      /^origin: refuses connections/m, /^origin: slow beyond ORIGIN_TIMEOUT_MS/m, /^origin: 503/m, /^origin: drops the connection mid-body/m,
      /^config: .*RULES/m, /^config: .*CONFIDENCE_THRESHOLD/m,
    ]) {
      expect(names).toMatch(needle);
    }
    for (const c of TABLE.cases) {
      expect(["ai", "kv", "origin", "config"], c.name).toContain(c.fault);
      expect(c.expect, c.name).toBeTypeOf("object");
    }
  });

  const covered = TABLE.cases.filter((c) => c.covered_by);
  test.each(covered.map((c) => [c.name, c]))("%s: asserted by the named test", (_name, c) => {
    const src = readFileSync(path.join(ROOT, c.covered_by.file), "utf8");
    // The title as written in the source (test("…") or test.each(…)("…")).
    expect(src).toContain(JSON.stringify(c.covered_by.test).slice(0, -1));
  });
});

describe("Workers AI faults", () => {
  let mode = "answer";
  let ai, aiShort, aiRouting;
  const stub = () => ({
    extra: { wrappedBindings: { AI: { scriptName: "fault-ai" } } },
    workers: [{
      name: "fault-ai", modules: true, script: AI_STUB,
      serviceBindings: { async CONTROL() { return Response.json({ mode }); } },
    }],
  });
  const aiVars = (timeout) => ({ DECISION_BACKEND: "workers-ai", AI_MODEL, AI_TIMEOUT_MS: String(timeout), CONFIDENCE_THRESHOLD: "0.8" });
  beforeAll(async () => {
    // `ai`: answers must arrive, so a generous budget; `aiShort`: for hangs and traps, which
    // last until the AI timer fires.
    [ai, aiShort, aiRouting] = await Promise.all([
      worker({ vars: aiVars(2000), ...stub() }),
      worker({ vars: aiVars(300), ...stub() }),
      worker({ vars: { ...aiVars(2000), ...routingVars() }, ...stub(), extra: { ...stub().extra, kvNamespaces: ["SIGNALS"] } }),
    ]);
    expect(await pushHealthy(aiRouting)).toBe(200);
  });

  const slowModes = new Set(["hang", "deep", "circular", "getter-throws"]);
  for (const c of cases("ai")) {
    run(c)(c.name, async () => {
      mode = c.ai_mode;
      const w = c.route ? aiRouting : slowModes.has(c.ai_mode) ? aiShort : ai;
      const id = nextRay(c.ai_mode);
      const res = c.route
        ? await w.fetch("/fault/ai", { cf: US, headers: { "cf-ray": id } })
        : await w.decide({ state: EXAMPLE_STATE }, { "cf-ray": id });
      const text = await res.text();
      mode = "answer";
      const e = c.expect;
      expect(res.status).toBe(e.status);
      expect(res.headers.get("x-decision-source")).toBe(e.source);
      expect(res.headers.get("x-decision-action")).toBe(e.action);
      if (!c.route) {
        const d = JSON.parse(text);
        expect(d).toMatchObject({ source: e.source, fallback_reason: e.fallback_reason, action: e.action });
        // Backend text is for the log only.
        expect(text).not.toMatch(/stub|plain string|EEEE|invalid type/);
      } else {
        expect(JSON.parse(text).origin).toBe("A");
      }
      const line = await decisionLine(w, id);
      expect(line).toMatchObject({ source: e.source, fallback_reason: e.fallback_reason, action: e.action });
      const raw = w.stdoutLines.find((l) => l.includes(`"${id}"`));
      if (e.log?.detail_contains) expect(line.detail).toContain(e.log.detail_contains);
      if (e.log?.max_line_bytes) expect(raw.length).toBeLessThanOrEqual(e.log.max_line_bytes);
      // The isolate is still healthy: the next answer is used.
      const next = await (await w.decide({ state: EXAMPLE_STATE })).json();
      expect(next).toMatchObject({ source: "model", action: "route_b" });
    });
  }

  test("ai: binding never answers (timeout): log line names the budget", async () => {
    mode = "hang";
    const id = nextRay("hang");
    const d = await (await aiShort.decide({ state: EXAMPLE_STATE }, { "cf-ray": id })).json();
    mode = "answer";
    expect(d).toMatchObject({ source: "rules", fallback_reason: "model_timeout", action: "route_a" });
    const line = await decisionLine(aiShort, id);
    expect(line).toMatchObject({ fallback_reason: "model_timeout", detail: "no answer within AI_TIMEOUT_MS=300" });
  });
});

describe("KV signal faults", () => {
  let w, kv, broken;
  beforeAll(async () => {
    [w, broken] = await Promise.all([
      worker({ vars: routingVars(), extra: { kvNamespaces: ["SIGNALS"] } }),
      worker({
        vars: routingVars(),
        extra: { wrappedBindings: { SIGNALS: { scriptName: "kv-throws" } } },
        workers: [{ name: "kv-throws", modules: true, script: KV_THROWS }],
      }),
    ]);
    kv = await w.mf.getKVNamespace("SIGNALS");
  });

  const expand = (v) => {
    const now = Date.now();
    if (v === "$DEEP") return "[".repeat(100000) + "]".repeat(100000);
    return v.replaceAll("$NOW", String(now)).replaceAll("$TOMORROW", String(now + 86_400_000)).replaceAll("$MIB", "p".repeat(1 << 20));
  };

  for (const c of cases("kv")) {
    run(c)(c.name, async () => {
      const target = c.kv_stub ? broken : w;
      if (!c.kv_stub) await kv.put("signals", expand(c.kv_value));
      const id = nextRay("kv");
      const res = await target.fetch("/fault/kv", { cf: US, headers: { "cf-ray": id } });
      expect(res.status).toBe(c.expect.status);
      await res.arrayBuffer();
      const health = await (await target.health()).text();
      if (c.health_no_internals) {
        const h = JSON.parse(health);
        expect(h.routing.signals.detail).toMatch(/^KV read failed/);
        expect(health).not.toMatch(/wasm-function|\\n\s+at |file:\/\/\//);
        return;
      }
      expect(res.headers.get("x-decision-source")).toBe(c.expect.source);
      const line = await decisionLine(target, id);
      expect(line.fallback_reason).toBe(c.expect.fallback_reason);
      expect(line.outcome.status).toBe(200); // still routed
      if (c.expect.log?.signals_detail) {
        expect(line.request.signals_detail).toContain(c.expect.log.signals_detail);
        expect(JSON.parse(health).routing.signals).toMatchObject({ fresh: false });
        expect(JSON.parse(health).routing.signals.detail).toContain(c.expect.log.signals_detail);
      }
      if (c.expect.admin_put_status) {
        const put = await target.fetch("/v1/admin/signals", {
          method: "PUT",
          headers: { authorization: `Bearer ${TOKEN}`, "content-type": "application/json" },
          body: JSON.stringify(HEALTHY),
        });
        expect(put.status).toBe(c.expect.admin_put_status);
        const body = await put.text();
        expect(JSON.parse(body).error.code).toBe("store_unavailable");
        expect(body).not.toContain("kv stub");
      }
    });
  }

  test("valid signals written after corrupt ones are used at once (SIGNALS_CACHE_S=0)", async () => {
    await kv.put("signals", "not json");
    await kv.put("signals", JSON.stringify({ ...HEALTHY, updated_at: Date.now() }));
    const id = nextRay("kv-recovered");
    const res = await w.fetch("/fault/kv", { cf: US, headers: { "cf-ray": id } });
    await res.arrayBuffer();
    expect((await decisionLine(w, id)).fallback_reason).not.toBe("stale_signals");
  });
});

describe("origin faults", () => {
  let w;
  beforeAll(async () => {
    w = await worker({ vars: routingVars(), extra: { kvNamespaces: ["SIGNALS"] } });
    expect(await pushHealthy(w)).toBe(200);
  });
  const reset = () => [A, B, C].forEach((o) => o.reset());

  for (const c of cases("origin")) {
    run(c)(c.name, async () => {
      reset();
      let target = w;
      if (c.origin === "refused") {
        target = await worker({ vars: { ...routingVars(), ORIGIN_ROUTE_A: `http://127.0.0.1:${await closedPort()}` }, extra: { kvNamespaces: ["SIGNALS"] } });
        expect(await pushHealthy(target)).toBe(200);
      } else {
        A.behave = ORIGIN_FAULTS[c.origin];
      }
      const payload = Buffer.alloc(32 * 1024, 7);
      // A cf-ray longer than the record keeps: the failover records are the longest lines.
      const ray = nextRay(c.origin);
      const id = `${ray}-${"R".repeat(200)}`;
      const t0 = performance.now();
      const res = await target.fetch("/fault/origin?x=1", {
        method: c.method,
        cf: US,
        headers: { "cf-ray": id, ...(c.method === "GET" ? {} : { "content-type": "application/octet-stream" }) },
        body: c.method === "GET" ? undefined : payload,
      });
      const e = c.expect;
      expect(res.status).toBe(e.status);
      expect(res.headers.get("x-decision-action")).toBe("route_a");
      expect(res.headers.get("x-decision-source")).not.toBeNull();
      expect(res.headers.get("x-decision-failover")).toBe(e.failover);
      let text = null;
      let bodyError = null;
      try {
        text = Buffer.from(await res.arrayBuffer());
      } catch (err) {
        bodyError = err;
      }
      if (e.min_ms === "ORIGIN_TIMEOUT_MS") expect(performance.now() - t0).toBeGreaterThanOrEqual(ORIGIN_TIMEOUT_MS);
      if (e.code) {
        expect(res.headers.get("content-type")).toBe("application/json");
        expect(JSON.parse(text).error.code).toBe(e.code);
      }
      if (e.body) expect(text.toString()).toBe(e.body);
      if (e.body_origin) expect(JSON.parse(text).origin).toBe(e.body_origin);
      if (e.body_error) expect(bodyError).not.toBeNull();
      if (e.body_prefix_only) {
        // Either the read fails or it ends early; never more than the origin sent, never a retry.
        if (bodyError === null) expect(text.equals(Buffer.alloc(1000, 97))).toBe(true);
      }
      if (e.contacted_failover === false) expect(B.requests.length + C.requests.length).toBe(0);
      if (e.failover_body_intact) expect(Buffer.compare(B.requests[0].body, payload)).toBe(0);
      const line = await target.waitForLog((l) => l.event === "decision" && l.request_id?.startsWith(`${ray}-R`));
      expect(line.$bytes).toBeLessThanOrEqual(1024);
      expect(line.outcome.attempts[0].origin).toBe("route_a");
      // A line over 1 KB is written without its nulls: absent is null.
      expect(line.outcome.failover ?? null).toBe(e.failover);
      expect(line.outcome.attempts).toHaveLength(e.failover ? 2 : 1);
      // The runtime's words are in the record's detail, never in the response.
      if (e.log?.upstream_error) expect(line.detail).toContain(e.log.upstream_error);
      if (e.log?.upstream_status) expect(line.outcome.attempts[0].status).toBe(e.log.upstream_status);
      // The Worker keeps serving.
      reset();
      const after = await target.fetch("/fault/after", { cf: DE });
      expect(after.status).toBe(200);
      await after.arrayBuffer();
    });
  }
});

describe("configuration faults", () => {
  for (const c of cases("config")) {
    run(c)(c.name, async () => {
      const w = await worker({ vars: { ...routingVars(), ...c.vars }, extra: { kvNamespaces: ["SIGNALS"] } });
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
        const r = await w.fetch("/fault/config", { method: "POST", cf: DE, body: "{}", headers: { "content-type": "application/json" } });
        expect(r.status).toBe(200);
        expect(r.headers.get("x-decision-action")).toBe("route_b");
        expect(r.headers.get("x-decision-failover")).toBe(e.route_b_fails_over_to);
        expect((await r.json()).origin).toBe("C");
        expect(B.requests).toHaveLength(0);
      }
    });
  }
});

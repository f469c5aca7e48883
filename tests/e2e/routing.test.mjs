// Edge routing: requests outside /v1/ are decided from the request and the live signals
// (local KV), then proxied to loopback origins that record what they received, or rejected.
// The KV and origin faults of the fault table (tests/fixtures/faults.json) run here too:
// signals that cannot be used send decisions to rules and the request is still routed; an
// origin that fails gets its defined outcome (failover, 502, or its answer relayed).
import { afterAll, afterEach, beforeAll, describe, expect, test } from "vitest";
import { createHash, randomBytes } from "node:crypto";
import { REGION_OF, WHERE, closedPort, faultCases, readBody, startOrigin, startWorker } from "./helpers.mjs";

const TOKEN = "e2e-admin-token-0123456789";
const HEALTHY = { current_load: 0.35, recent_success_rate: 0.99, queue_depth: 4 };
const OVERLOAD = { current_load: 1.0, recent_success_rate: 0.2, queue_depth: 900 };
const ORIGIN_TIMEOUT_MS = 400;

let A, B, C, w;
const origins = () => ({ route_a: A, route_b: B, route_c: C });
/** Workers started by the fault-table tests, disposed at the end. */
const started = [];

async function routingWorker(vars = {}, extra = {}) {
  return startWorker({
    vars: {
      ORIGIN_ROUTE_A: A.url,
      ORIGIN_ROUTE_B: B.url,
      ORIGIN_ROUTE_C: C.url,
      ORIGIN_TIMEOUT_MS: String(ORIGIN_TIMEOUT_MS),
      ADMIN_TOKEN: TOKEN,
      SIGNALS_CACHE_S: "0",
      REJECT_RETRY_AFTER_S: "7",
      ...vars,
    },
    extra: { kvNamespaces: ["SIGNALS"], ...extra },
  });
}

function push(worker, signals, token = TOKEN) {
  const headers = { "content-type": "application/json" };
  if (token !== null) headers.authorization = `Bearer ${token}`;
  return worker.fetch("/v1/admin/signals", { method: "PUT", headers, body: JSON.stringify(signals) });
}

function get(worker, path, { cf = WHERE.route_a, headers = {}, ...init } = {}) {
  return worker.fetch(path, { cf, headers, ...init });
}

const decisionLine = (worker, id) => worker.waitForLog((l) => l.event === "decision" && l.request_id === id);

beforeAll(async () => {
  [A, B, C] = await Promise.all([startOrigin("A"), startOrigin("B"), startOrigin("C")]);
  w = await routingWorker();
});
afterAll(async () => {
  await Promise.all([w, ...started].map((x) => x?.dispose()));
  await Promise.all([A, B, C].map((o) => o?.close()));
});
afterEach(() => {
  for (const o of [A, B, C]) o.reset();
});

describe("admin signals endpoint", () => {
  test.each([
    ["no Authorization", null],
    ["a wrong token", "not-the-token"],
    ["the token with one character changed", TOKEN.slice(0, -1) + "X"],
    ["a prefix of the token", TOKEN.slice(0, 8)],
    ["an empty token", ""],
  ])("a push with %s is 401", async (_name, token) => {
    const res = await push(w, HEALTHY, token);
    expect(res.status).toBe(401);
    expect(res.headers.get("www-authenticate")).toBe("Bearer");
    expect((await res.json()).error.code).toBe("unauthorized");
  });

  test("the Basic scheme is 401 too", async () => {
    const res = await w.fetch("/v1/admin/signals", {
      method: "PUT",
      headers: { authorization: `Basic ${TOKEN}`, "content-type": "application/json" },
      body: JSON.stringify(HEALTHY),
    });
    expect(res.status).toBe(401);
  });

  test("a push with the token stores and stamps the signals", async () => {
    const before = Date.now();
    const res = await push(w, { ...HEALTHY, updated_at: 1 });
    expect(res.status).toBe(200);
    const { stored } = await res.json();
    expect(stored).toMatchObject(HEALTHY);
    expect(stored.updated_at).toBeGreaterThanOrEqual(before - 1000);
    const shown = await (await w.fetch("/v1/admin/signals", { headers: { authorization: `Bearer ${TOKEN}` } })).json();
    expect(shown).toMatchObject({ signals: stored, fresh: true, max_age_s: 60 });
  });

  test.each([
    [{ ...HEALTHY, recent_success_rate: 1.5 }, "out_of_range", "recent_success_rate"],
    [{ current_load: 0.5, recent_success_rate: 0.9 }, "missing_field", "queue_depth"],
    [{ ...HEALTHY, load: 1 }, "unknown_field", "load"],
    [{ ...HEALTHY, queue_depth: "deep" }, "invalid_type", "queue_depth"],
    [[1, 2, 3], "invalid_type", "signals"],
  ])("an invalid push %j is 400 naming the field", async (body, code, field) => {
    const res = await push(w, body);
    expect(res.status).toBe(400);
    expect((await res.json()).error).toMatchObject({ code, field });
  });

  test("wrong content type is 415, wrong method 405", async () => {
    const auth = { authorization: `Bearer ${TOKEN}` };
    const r1 = await w.fetch("/v1/admin/signals", { method: "PUT", headers: { ...auth, "content-type": "text/plain" }, body: "{}" });
    expect(r1.status).toBe(415);
    const r2 = await w.fetch("/v1/admin/signals", { method: "POST", headers: auth });
    expect(r2.status).toBe(405);
    expect(r2.headers.get("allow")).toBe("GET, PUT");
  });
});

describe("routing with healthy signals", () => {
  beforeAll(async () => {
    expect((await push(w, HEALTHY)).status).toBe(200);
  });

  test("GET /any/path?q=1 reaches the origin named in x-decision-action, as sent", async () => {
    const res = await get(w, "/any/path?q=1&r=a%20b", {
      headers: {
        "x-custom": "hello",
        accept: "application/json",
        "x-decision-action": "reject",
        "x-decision-source": "client-spoof",
        "X-Decision-Model-Version": "evil",
        "cf-ray": "route-get-1",
      },
    });
    expect(res.status).toBe(200);
    const action = res.headers.get("x-decision-action");
    expect(["route_a", "route_b", "route_c"]).toContain(action);
    expect(res.headers.get("x-decision-source")).toMatch(/^(model|rules)$/);
    expect(res.headers.get("x-decision-model-version")).not.toBe("evil");
    const body = await res.json();
    const target = origins()[action];
    expect(body.origin).toBe(target.name);
    expect(res.headers.get("x-origin")).toBe(target.name);
    const others = Object.values(origins()).filter((o) => o !== target);
    expect(others.every((o) => o.requests.length === 0)).toBe(true);
    expect(target.requests).toHaveLength(1);
    const got = target.requests[0];
    expect(got.method).toBe("GET");
    expect(got.url).toBe("/any/path?q=1&r=a%20b");
    expect(got.headers["x-custom"]).toBe("hello");
    expect(got.headers.accept).toBe("application/json");
    expect(Object.keys(got.headers).filter((h) => h.startsWith("x-decision-"))).toEqual([]);
    expect(got.headers.host).toBe(new URL(target.url).host);
    const line = await decisionLine(w, "route-get-1");
    expect(line).toMatchObject({ endpoint: "route", action, outcome: { origin: action, status: 200, failover: null, error: null } });
    expect(line.outcome.attempts).toEqual([expect.objectContaining({ origin: action, status: 200, error: null })]);
    expect(line.outcome.latency_ms).toBeGreaterThanOrEqual(0);
    expect(line.state).toMatchObject({ request_type: 0, region_id: 0 });
    expect(line.request).toMatchObject({ method: "GET", country: "US" });
  });

  test("each place decides its route at every hour, for GET and POST (regression: DE POSTs 12–15 UTC)", async () => {
    for (const [expected, cf] of Object.entries(WHERE)) {
      for (const request_type of [0, 1]) {
        for (let hour = 0; hour < 24; hour++) {
          const state = { request_type, region_id: REGION_OF[cf.country], ...HEALTHY, hour };
          const d = await (await w.decide({ state })).json();
          expect(d.action, `${cf.country} type ${request_type} at ${hour}h`).toBe(expected);
        }
      }
    }
  });

  test("each routed action reaches its own origin", async () => {
    const seen = new Set();
    for (const [expected, cf] of Object.entries(WHERE)) {
      const res = await get(w, `/home/${expected}`, { cf });
      expect(res.status).toBe(200);
      const action = res.headers.get("x-decision-action");
      const body = await res.json();
      expect(body.origin).toBe(origins()[action].name);
      expect(body.url).toBe(`/home/${expected}`);
      seen.add(action);
    }
    // Healthy signals, light requests: every region goes to its home cluster.
    expect([...seen].sort()).toEqual(["route_a", "route_b", "route_c"]);
  });

  test("a POST body arrives intact, byte for byte", async () => {
    const payload = randomBytes(200 * 1024);
    const res = await get(w, "/upload?kind=bin", {
      method: "POST",
      headers: { "content-type": "application/octet-stream", "x-trace": "t1" },
      body: payload,
    });
    expect(res.status).toBe(200);
    const target = origins()[res.headers.get("x-decision-action")];
    const got = target.requests[0];
    expect(got.method).toBe("POST");
    expect(got.url).toBe("/upload?kind=bin");
    expect(got.headers["content-type"]).toBe("application/octet-stream");
    expect(got.headers["x-trace"]).toBe("t1");
    expect(createHash("sha256").update(got.body).digest("hex")).toBe(createHash("sha256").update(payload).digest("hex"));
  });

  test("the request body is streamed to the origin, not buffered whole", async () => {
    // The client sends its second chunk only after the origin has received the first.
    let firstArrived;
    const arrived = new Promise((r) => (firstArrived = r));
    for (const o of [A, B, C]) {
      o.behave = (req, res, record) => {
        req.once("data", () => firstArrived());
        readBody(req, record).then((b) => res.end(`got ${b.length}`));
      };
    }
    const enc = new TextEncoder();
    let step = 0;
    const body = new ReadableStream({
      async pull(ctl) {
        if (step === 0) ctl.enqueue(enc.encode("first chunk;"));
        else if (step === 1) {
          const ok = await Promise.race([arrived.then(() => true), new Promise((r) => setTimeout(() => r(false), 5000))]);
          ctl.enqueue(enc.encode(ok ? "second chunk" : "origin never saw the first chunk"));
        } else ctl.close();
        step++;
      },
    });
    const res = await get(w, "/stream-up", { method: "POST", body, duplex: "half", headers: { "content-type": "text/plain" } });
    expect(await res.text()).toBe("got 24");
    const target = origins()[res.headers.get("x-decision-action")];
    expect(target.requests[0].body.toString()).toBe("first chunk;second chunk");
  });

  test("the response body is streamed to the client", async () => {
    let clientGotFirst;
    const clientSaw = new Promise((r) => (clientGotFirst = r));
    for (const o of [A, B, C]) {
      o.behave = (req, res) => {
        // Not text/*: Miniflare's dispatchFetch gzips compressible types, and its gzip
        // buffers (a harness artefact; workerd itself passes text through unbuffered).
        res.writeHead(200, { "content-type": "application/octet-stream" });
        res.write("part one;");
        Promise.race([clientSaw.then(() => "part two"), new Promise((r) => setTimeout(() => r("client never saw part one"), 5000))])
          .then((t) => res.end(t));
      };
    }
    const res = await get(w, "/stream-down");
    const reader = res.body.getReader();
    const dec = new TextDecoder();
    let text = "";
    const first = await reader.read();
    text += dec.decode(first.value);
    clientGotFirst();
    for (;;) {
      const { value, done } = await reader.read();
      if (done) break;
      text += dec.decode(value);
    }
    expect(text).toBe("part one;part two");
  });

  test("redirects and origin errors are relayed as they are", async () => {
    for (const o of [A, B, C]) {
      o.behave = (req, res) => {
        if (req.url === "/moved") res.writeHead(302, { location: "/elsewhere" }).end();
        else res.writeHead(404, { "content-type": "text/plain" }).end("origin 404");
      };
    }
    const r1 = await get(w, "/moved", { redirect: "manual" });
    expect(r1.status).toBe(302);
    expect(r1.headers.get("location")).toBe("/elsewhere");
    const r2 = await get(w, "/missing");
    expect(r2.status).toBe(404);
    expect(await r2.text()).toBe("origin 404");
    expect(r2.headers.get("x-decision-action")).not.toBeNull();
  });

  test("/v1 paths in any case are never proxied", async () => {
    const res = await get(w, "/V1/DECIDE", { method: "POST" });
    expect(res.status).toBe(404);
    expect(A.requests.length + B.requests.length + C.requests.length).toBe(0);
  });
});

describe("failover", () => {
  beforeAll(async () => {
    expect((await push(w, HEALTHY)).status).toBe(200);
  });

  // The US region is decided to route_a with healthy signals; its failover is route_b.
  async function firstAction() {
    const res = await get(w, "/probe");
    await res.arrayBuffer();
    A.reset(); B.reset(); C.reset();
    return res.headers.get("x-decision-action");
  }

  test("a 503 from the origin is retried once on the failover origin (GET)", async () => {
    expect(await firstAction()).toBe("route_a");
    A.behave = (req, res) => res.writeHead(503).end("down");
    const res = await get(w, "/retry-me?x=1", { headers: { "cf-ray": "failover-503" } });
    expect(res.status).toBe(200);
    expect(res.headers.get("x-decision-action")).toBe("route_a");
    expect(res.headers.get("x-decision-failover")).toBe("route_b");
    expect((await res.json()).origin).toBe("B");
    expect(A.requests).toHaveLength(1);
    expect(B.requests).toHaveLength(1);
    expect(B.requests[0].url).toBe("/retry-me?x=1");
    const line = await decisionLine(w, "failover-503");
    // A line over 1 KB is written without its nulls: absent is null.
    expect(line.outcome).toMatchObject({ origin: "route_b", failover: "route_b", status: 200 });
    expect(line.outcome.error ?? null).toBeNull();
    expect(line.outcome.attempts).toEqual([
      expect.objectContaining({ origin: "route_a", status: 503, error: "upstream_status" }),
      expect.objectContaining({ origin: "route_b", status: 200 }),
    ]);
    expect(line.outcome.attempts[1].error ?? null).toBeNull();
    expect(line.detail).toContain("503");
  });

  test("an origin that does not answer within ORIGIN_TIMEOUT_MS fails over", async () => {
    A.behave = (req, res) => setTimeout(() => res.end("too late"), 3000);
    const t0 = performance.now();
    const res = await get(w, "/slow");
    const elapsed = performance.now() - t0;
    expect(res.status).toBe(200);
    expect((await res.json()).origin).toBe("B");
    expect(res.headers.get("x-decision-failover")).toBe("route_b");
    expect(elapsed).toBeGreaterThanOrEqual(ORIGIN_TIMEOUT_MS);
    expect(elapsed).toBeLessThan(ORIGIN_TIMEOUT_MS + 1500);
  });

  test("a PUT body survives the failover", async () => {
    A.behave = (req, res, record) => readBody(req, record).then(() => res.writeHead(504).end());
    const payload = randomBytes(64 * 1024);
    const res = await get(w, "/doc/1", { method: "PUT", body: payload, headers: { "content-type": "application/octet-stream" } });
    expect(res.status).toBe(200);
    expect((await res.json()).origin).toBe("B");
    expect(Buffer.compare(B.requests[0].body, payload)).toBe(0);
    expect(B.requests[0].method).toBe("PUT");
  });

  test("a POST is not retried: 502 JSON with the decision headers", async () => {
    A.behave = (req, res, record) => readBody(req, record).then(() => res.writeHead(503).end("down"));
    const res = await get(w, "/orders", { method: "POST", body: "{\"n\":1}", headers: { "content-type": "application/json" } });
    expect(res.status).toBe(502);
    expect(res.headers.get("x-decision-action")).toBe("route_a");
    expect(res.headers.get("x-decision-source")).not.toBeNull();
    expect((await res.json()).error.code).toBe("bad_gateway");
    expect(A.requests).toHaveLength(1);
    expect(B.requests).toHaveLength(0);
  });

  test("when the failover origin fails too: 502", async () => {
    A.behave = (req, res) => res.writeHead(503).end();
    B.behave = (req, res) => res.writeHead(502).end();
    const res = await get(w, "/both-down", { headers: { "cf-ray": "both-down" } });
    expect(res.status).toBe(502);
    expect(res.headers.get("x-decision-failover")).toBe("route_b");
    expect((await res.json()).error.message).toMatch(/route_a.*route_b/);
    const line = await decisionLine(w, "both-down");
    expect(line.outcome).toMatchObject({ origin: "route_b", failover: "route_b", status: 502, error: "upstream_status" });
    expect(line.detail).toMatch(/503.*502/);
    expect(C.requests).toHaveLength(0);
  });
});

describe("reject", () => {
  test("after a push of severe overload: 503 with Retry-After, no origin contacted", async () => {
    expect((await push(w, OVERLOAD)).status).toBe(200);
    const res = await get(w, "/any/path?q=1", { headers: { "cf-ray": "rejected-1" } });
    expect(res.status).toBe(503);
    expect(res.headers.get("retry-after")).toBe("7");
    expect(res.headers.get("x-decision-action")).toBe("reject");
    expect((await res.json()).error.code).toBe("rejected");
    expect(A.requests.length + B.requests.length + C.requests.length).toBe(0);
    const line = await decisionLine(w, "rejected-1");
    expect(line).toMatchObject({ action: "reject", outcome: { status: 503, origin: null, attempts: [] } });
    expect((await push(w, HEALTHY)).status).toBe(200);
  });
});

describe("stale signals", () => {
  test("no signals stored → rules (stale_signals), still routed", async () => {
    const fresh = await routingWorker();
    try {
      const res = await get(fresh, "/x", { headers: { "cf-ray": "stale-none" } });
      expect(res.headers.get("x-decision-source")).toBe("rules");
      const line = await decisionLine(fresh, "stale-none");
      expect(line.fallback_reason).toBe("stale_signals");
      expect(line.request.signals_detail).toBe("no signals stored");
      const h = await (await fresh.health()).json();
      expect(h.routing.signals).toMatchObject({ fresh: false, detail: "no signals stored" });
    } finally {
      await fresh.dispose();
    }
  });

  test("signals older than SIGNALS_MAX_AGE_S → rules (stale_signals)", async () => {
    const kv = await w.mf.getKVNamespace("SIGNALS");
    await kv.put("signals", JSON.stringify({ ...HEALTHY, updated_at: Date.now() - 61_000 }));
    const res = await get(w, "/x", { headers: { "cf-ray": "stale-old" } });
    expect(res.headers.get("x-decision-source")).toBe("rules");
    const line = await decisionLine(w, "stale-old");
    expect(line.fallback_reason).toBe("stale_signals");
    expect(line.request.signals_age_s).toBeGreaterThan(60);
    await kv.put("signals", JSON.stringify({ ...HEALTHY, updated_at: Date.now() - 5_000 }));
    const again = await get(w, "/x", { headers: { "cf-ray": "stale-recent" } });
    await again.arrayBuffer();
    expect((await decisionLine(w, "stale-recent")).fallback_reason).not.toBe("stale_signals");
  });

  test("without a SIGNALS binding every request is stale, and health says why", async () => {
    const bare = await startWorker({ vars: { ORIGIN_ROUTE_A: A.url, ORIGIN_ROUTE_B: B.url, ORIGIN_ROUTE_C: C.url } });
    try {
      const res = await get(bare, "/x", { headers: { "cf-ray": "no-kv" } });
      expect(res.status).toBe(200);
      expect((await decisionLine(bare, "no-kv")).fallback_reason).toBe("stale_signals");
      const h = await (await bare.health()).json();
      expect(h.routing.signals.detail).toMatch(/SIGNALS/);
    } finally {
      await bare.dispose();
    }
  });
});

describe("connection failure", () => {
  test("an origin that refuses connections fails over", async () => {
    const down = await routingWorker({ ORIGIN_ROUTE_A: `http://127.0.0.1:${await closedPort()}` });
    try {
      expect((await push(down, HEALTHY)).status).toBe(200);
      const res = await get(down, "/refused", { headers: { "cf-ray": "refused-1" } });
      expect(res.status).toBe(200);
      expect(res.headers.get("x-decision-action")).toBe("route_a");
      expect((await res.json()).origin).toBe("B");
      const line = await decisionLine(down, "refused-1");
      expect(line.outcome.attempts[0]).toMatchObject({ origin: "route_a", error: "connect" });
      // A line over 1 KB is written without its nulls: absent is null.
      expect(line.outcome.attempts[0].status ?? null).toBeNull();
      expect(line.detail).toMatch(/failed/);
    } finally {
      await down.dispose();
    }
  });
});

// ---- the fault table's KV and origin faults ----

const FAULT_TOKEN = "faults-admin-token";
const FAULT_ORIGIN_TIMEOUT_MS = 300;
const US = WHERE.route_a; // shipped REGIONS: region 0, route_a with healthy signals
const GB = WHERE.route_b; // region 4, route_b
/** A case runs as `test.fails` while its bug is open. */
const run = (c) => (c.known_bug ? test.fails : test);
let ray = 0;
const nextRay = (tag) => `fault-${++ray}-${tag}`;
async function worker(opts) {
  const x = await startWorker(opts);
  started.push(x);
  return x;
}
const faultVars = () => ({
  ORIGIN_ROUTE_A: A.url, ORIGIN_ROUTE_B: B.url, ORIGIN_ROUTE_C: C.url,
  ORIGIN_TIMEOUT_MS: String(FAULT_ORIGIN_TIMEOUT_MS), ADMIN_TOKEN: FAULT_TOKEN, SIGNALS_CACHE_S: "0",
});
async function pushHealthy(x) {
  const res = await x.fetch("/v1/admin/signals", {
    method: "PUT",
    headers: { authorization: `Bearer ${FAULT_TOKEN}`, "content-type": "application/json" },
    body: JSON.stringify(HEALTHY),
  });
  return res.status;
}

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
  slow: (req, res, record) => readBody(req, record).then(() => setTimeout(() => res.end("too late"), FAULT_ORIGIN_TIMEOUT_MS + 2000)),
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

describe("signals that cannot be used (KV faults of the fault table)", () => {
  let w, kv, broken;
  beforeAll(async () => {
    [w, broken] = await Promise.all([
      worker({ vars: faultVars(), extra: { kvNamespaces: ["SIGNALS"] } }),
      worker({
        vars: faultVars(),
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

  for (const c of faultCases("kv")) {
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
          headers: { authorization: `Bearer ${FAULT_TOKEN}`, "content-type": "application/json" },
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

describe("origin faults (the fault table)", () => {
  let w;
  beforeAll(async () => {
    w = await worker({ vars: faultVars(), extra: { kvNamespaces: ["SIGNALS"] } });
    expect(await pushHealthy(w)).toBe(200);
  });
  const reset = () => [A, B, C].forEach((o) => o.reset());

  for (const c of faultCases("origin")) {
    run(c)(c.name, async () => {
      reset();
      let target = w;
      if (c.origin === "refused") {
        target = await worker({ vars: { ...faultVars(), ORIGIN_ROUTE_A: `http://127.0.0.1:${await closedPort()}` }, extra: { kvNamespaces: ["SIGNALS"] } });
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
      if (e.min_ms === "ORIGIN_TIMEOUT_MS") expect(performance.now() - t0).toBeGreaterThanOrEqual(FAULT_ORIGIN_TIMEOUT_MS);
      if (e.code) {
        expect(res.headers.get("content-type")).toBe("application/json");
        expect(JSON.parse(text).error.code).toBe(e.code);
      }
      if (e.body) expect(text.toString()).toBe(e.body);
      if (e.body_origin) expect(JSON.parse(text).origin).toBe(e.body_origin);
      if (e.body_error) expect(bodyError).not.toBeNull();
      if (e.body_prefix_only) {
        // workerd ends a cut chunked answer with a proper last chunk (a runtime row of the
        // protocol table): the read ends after exactly the bytes the origin sent, never a retry.
        expect(bodyError).toBeNull();
        expect(text.equals(Buffer.alloc(1000, 97))).toBe(true);
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
      const after = await target.fetch("/fault/after", { cf: GB });
      expect(after.status).toBe(200);
      await after.arrayBuffer();
    });
  }
});

describe("health", () => {
  test("reports routing configuration without secrets", async () => {
    const text = await (await w.health()).text();
    expect(text).not.toContain(TOKEN);
    const h = JSON.parse(text);
    expect(h.routing).toMatchObject({
      origins: { route_a: A.url, route_b: B.url, route_c: C.url },
      failover: { route_a: "route_b", route_b: "route_c", route_c: "route_a" },
      origin_timeout_ms: ORIGIN_TIMEOUT_MS,
      canary_percent: 100,
      admin_enabled: true,
    });
  });
});

// The proxy at the protocol's edges. The protocol table (tests/fixtures/protocol.json): odd
// requests and misbehaving origins on the routing path, written byte for byte on the wire
// (raw-origin.mjs), with what the client must see and what the origin must (not) receive.
// Then: another client's request after a misbehaving one, request bodies, upstream failures,
// client text the Worker repeats, /v1/health of a routing Worker, and a burst of mixed
// requests in which no answer may reach the wrong request. A row with `known_bug` states the
// right outcome and runs as `test.fails` until the Worker gives it; then it fails here, and
// the marker must go.
import { afterAll, afterEach, beforeAll, describe, expect, test } from "vitest";
import { createHash, randomBytes } from "node:crypto";
import { readJson, rng, startWorker } from "./helpers.mjs";
import { cleanPool, echoOf, rawRequest, startRawOrigin } from "./raw-origin.mjs";

const TABLE = readJson("tests/fixtures/protocol.json");
const ADMIN = "protocol-admin-token-5d1c9e";
const HEALTHY = { current_load: 0.35, recent_success_rate: 0.99, queue_depth: 4 };
// Short enough for the slow-origin rows; the client's upload does not count against it (see
// the slow-upload rows).
const ORIGIN_TIMEOUT_MS = 1000;
/** Text that only a runtime exception, a stack or a panic would put in a body. */
const RUNTIME_TEXT = /TypeError|RangeError|Error:|Network connection lost|Request with a GET|cannot have a body|Responses may only|serve handler|Response\.error|reference =|kj\/|jsg|wasm|Invalid response|invalid protocol|status line|\n\s+at /;
/** The whole of a 502's message: which origin, and what became of each attempt, in words. */
const OUTCOME = String.raw`(failed|timed out|answered (invalid status )?\d{1,3}|not configured)`;
const BAD_GATEWAY_MESSAGE = new RegExp(String.raw`^origin for route_[abc] ${OUTCOME}(, failover route_[abc] ${OUTCOME})?$`);
/** What the log appends to text it cuts (src/log.rs CUT_MARK). */
const CUT_MARK = "…[truncated]";

/** PROTOCOL_KNOWN_BUGS=run runs the known_bug rows as ordinary tests, to see how they fail. */
const showBugs = process.env.PROTOCOL_KNOWN_BUGS === "run";
const failing = (known) => (known && !showBugs ? test.fails : test);

let A, B, C, w, entry, direct;
let seq = 0;
const salt = randomBytes(3).toString("hex");
/** A unique request token (letters and digits only: it travels in a query). */
const token = (tag = "p") => `${tag}${++seq}z${salt}`;

beforeAll(async () => {
  [A, B, C] = await Promise.all(["A", "B", "C"].map(startRawOrigin));
  w = await startWorker({
    vars: {
      ORIGIN_ROUTE_A: A.url, ORIGIN_ROUTE_B: B.url, ORIGIN_ROUTE_C: C.url,
      ORIGIN_TIMEOUT_MS: String(ORIGIN_TIMEOUT_MS), ADMIN_TOKEN: ADMIN, SIGNALS_CACHE_S: "0",
      // A and B fail over to each other, so C is never contacted by right and can stand
      // for "another host" (redirect targets, absolute-form request lines).
      FAILOVER: JSON.stringify({ route_a: "route_b", route_b: "route_a" }),
    },
    extra: { kvNamespaces: ["SIGNALS"], unsafeDirectSockets: [{ host: "127.0.0.1", port: 0 }] },
  });
  entry = await w.mf.ready;
  direct = await w.mf.unsafeGetDirectURL();
  const put = await w.fetch("/v1/admin/signals", {
    method: "PUT",
    headers: { authorization: `Bearer ${ADMIN}`, "content-type": "application/json" },
    body: JSON.stringify(HEALTHY),
  });
  expect(put.status).toBe(200);
});
afterAll(async () => {
  await w?.dispose();
  await Promise.all([A, B, C].map((o) => o?.close()));
});
// Each test checks the Worker's handling of its own requests, so tests must not depend on
// their order: the next one starts on a clean connection pool.
afterEach(() => cleanPool(entry, [A, B, C], () => token("drain")));

/** Fills a table value: `{T}` the token, `{A}`/`{B}`/`{C}` origin URLs, `{C_HOST}`; generators. */
function fill(v, T) {
  if (v && typeof v === "object") return fill(v.prefix ?? "", T) + (v.repeat ?? "").repeat(v.count ?? 0) + fill(v.suffix ?? "", T);
  return String(v)
    .replaceAll("{T}", T)
    .replaceAll("{A}", A.url).replaceAll("{B}", B.url).replaceAll("{C}", C.url)
    .replaceAll("{C_HOST}", new URL(C.url).host);
}

/** Origin steps with the origin URLs filled in (`${TOKEN}` is the origin's to fill). */
const steps = (list, T) => list.map((s) => JSON.parse(fill(JSON.stringify(s), T)));

/** The echo an origin answered with, or null when the body is not one. */
function echo(res) {
  try {
    const e = JSON.parse(res.body.toString());
    return e && typeof e === "object" && "token" in e ? e : null;
  } catch {
    return null;
  }
}

/** The target with the token in its query (origin-form and absolute-form only). */
function withToken(target, T) {
  if (!/^(\/|https?:)/.test(target)) return target;
  return target + (target.includes("?") ? "&" : "?") + `t=${T}`;
}

function bodyOf(spec, T) {
  if (!spec) return undefined;
  if (spec.bytes !== undefined) return randomBytes(spec.bytes);
  return Buffer.from(fill(spec.text, T), "utf8");
}

const sha = (b) => createHash("sha256").update(b).digest("hex");
const short = (r) => JSON.stringify({
  status: r.status, interim: r.interim, error: r.error, bodyError: r.bodyError, timedOut: r.timedOut, ms: Math.round(r.ms),
  headers: Object.fromEntries(Object.entries(r.headers).filter(([k]) => k.startsWith("x-") || k === "location")),
  body: r.body.toString().slice(0, 300),
});

/** A request from another client: it must be answered with its own echo. */
async function nextRequest() {
  const V = token("v");
  const res = await rawRequest(entry, { method: "GET", target: `/next/client?user=alice&t=${V}`, timeoutMs: 4000 });
  return { V, res, got: echo(res)?.token ?? null };
}

/** Waits until the origin log has a line containing `needle`. */
async function logLine(needle, timeoutMs = 2000) {
  const end = Date.now() + timeoutMs;
  for (;;) {
    const hit = w.stdoutLines.find((l) => l.includes(needle));
    if (hit) return hit;
    if (Date.now() > end) throw new Error(`no log line contains ${needle}`);
    await new Promise((r) => setTimeout(r, 10));
  }
}

async function runRow(row) {
  const T = token();
  const req = { ...TABLE.defaults, ...row.request };
  if (row.origin?.a) A.script(T, steps(row.origin.a, T));
  if (row.origin?.b) B.script(T, steps(row.origin.b, T));
  const body = bodyOf(req.body, T);
  const method = fill(req.method, T);
  const res = await rawRequest(req.socket === "direct" ? direct : entry, {
    method,
    target: withToken(fill(req.target, T), T),
    headers: (req.headers ?? []).map(([k, v]) => [k, fill(v, T)]),
    body,
    framing: req.framing,
    declaredLength: req.declared_length,
    closeAfterBody: req.close_after_body,
    continueWaitMs: req.continue_wait_ms ?? 200,
    head: method === "HEAD",
    host: req.host,
    lingerMs: req.linger_ms,
    pace: req.pace,
    timeoutMs: req.timeout_ms ?? 5000,
  });
  const seen = JSON.stringify(A.requests.map((q) => [q.method, q.target.slice(0, 80), q.headerMap, q.complete]));
  const why = `${row.name}\nclient saw ${short(res)}\nA saw ${seen.slice(0, 1500)}`;
  const e = row.expect_client ?? {};
  if (e.no_response) expect(res.status, why).toBeNull();
  if (e.interim) expect(res.interim, why).toEqual(e.interim);
  if (e.status !== undefined) expect(res.status, why).toBe(e.status);
  if (e.code) {
    expect(res.headers["content-type"], why).toBe("application/json");
    const { error } = JSON.parse(res.body.toString());
    expect(error.code, why).toBe(e.code);
    if (e.code === "bad_gateway") expect(error.message, why).toMatch(BAD_GATEWAY_MESSAGE);
  }
  // Whatever the Worker itself answers carries no runtime text.
  if (res.headers["content-type"] === "application/json" && !echo(res)) expect(res.body.toString(), why).not.toMatch(RUNTIME_TEXT);
  if (e.decision_headers === true) {
    expect(res.headers["x-decision-action"], why).toBe("route_a");
    expect(res.headers["x-decision-source"], why).toMatch(/^(model|rules)$/);
  }
  if (e.runtime_error) expect(res.headers["x-decision-action"], why).toBeUndefined();
  if ("failover" in e) expect(res.headers["x-decision-failover"] ?? null, why).toBe(e.failover);
  if (e.own_token) expect(echo(res)?.token, why).toBe(T);
  if (e.body_origin) expect(echo(res)?.origin, why).toBe(e.body_origin);
  if (e.body_is_token) expect(res.body.toString(), why).toBe(T);
  if (e.body_text !== undefined) expect(res.body.toString(), why).toBe(e.body_text);
  if (e.empty_body) expect(res.body.length, why).toBe(0);
  if (e.body_error) expect(res.bodyError ?? (res.timedOut ? "timed out" : null), why).not.toBeNull();
  if (e.max_body_bytes) expect(res.body.length, why).toBeLessThanOrEqual(e.max_body_bytes);
  if (e.min_ms === "ORIGIN_TIMEOUT_MS") expect(res.ms, why).toBeGreaterThanOrEqual(ORIGIN_TIMEOUT_MS);
  for (const [k, v] of Object.entries(e.header_equals ?? {})) expect(res.headers[k], why).toBe(fill(v, T));
  for (const k of e.header_absent ?? []) expect(res.headers[k], why).toBeUndefined();
  if (e.truncated_echo) {
    const [rec] = A.byToken(T);
    expect(res.body.length, why).toBe(JSON.stringify(echoOf(A, rec)).length - e.truncated_echo);
  }

  const o = row.expect_origin ?? {};
  // Whatever the origins were going to receive has arrived by the time the client has its
  // answer, except a body the client abandoned; give that a moment.
  if (o.a_body_complete === false) await new Promise((r) => setTimeout(r, 200));
  const [got] = A.byToken(T);
  if (o.a_received !== undefined) expect(A.byToken(T).length > 0, why).toBe(o.a_received);
  if (o.b_received !== undefined) expect(B.byToken(T).length > 0, why).toBe(o.b_received);
  if (o.c_received !== undefined) expect(C.requests.length > 0, why).toBe(o.c_received);
  if (o.a_requests !== undefined) expect(A.byToken(T).length, why).toBe(o.a_requests);
  if (o.a_body_complete === false) expect(A.byToken(T).every((r) => !r.complete), why).toBe(true);
  if (o.method) expect(got?.method, why).toBe(o.method);
  if (o.target) expect(got?.target, why).toBe(fill(o.target, T));
  if (o.target_length_at_least) expect(got?.target.length, why).toBeGreaterThanOrEqual(o.target_length_at_least);
  for (const h of o.absent_headers ?? []) {
    for (const r of [...A.byToken(T), ...B.byToken(T)]) expect(r.headerMap[h], `${why}\nheader ${h}`).toBeUndefined();
  }
  for (const [k, v] of Object.entries(o.present_headers ?? {})) expect(got?.headerMap[k], why).toBe(v);
  for (const [k, n] of Object.entries(o.header_lengths ?? {})) expect(got?.headerMap[k]?.length, why).toBe(n);
  if (o.body_intact) {
    await got.bodyDone;
    expect(got.complete, why).toBe(true);
    expect(got.body.length, why).toBe(body.length);
    expect(sha(got.body), why).toBe(sha(body));
  }
  if (o.body_bytes !== undefined) {
    await got.bodyDone;
    expect(got.body.length, why).toBe(o.body_bytes);
  }
  if (o.body_text !== undefined) {
    await got.bodyDone;
    expect(got.body.toString(), why).toBe(o.body_text);
  }
  if (o.also_received) {
    const other = fill(o.also_received, T);
    for (let i = 0; i < 100 && A.byToken(other).length === 0; i++) await new Promise((r) => setTimeout(r, 10));
    expect(A.byToken(other).length, why).toBe(1);
  }

  if (row.expect_log?.max_line_bytes) {
    const line = await logLine(T);
    expect(line.length, why).toBeLessThanOrEqual(row.expect_log.max_line_bytes);
  }

  const next = await nextRequest();
  const nextWhy = `${why}\nnext client saw ${short(next.res)}`;
  if (row.next === "runtime_misdelivers") {
    // Recorded runtime behaviour: the pooled connection still holds the answer meant for
    // this row's request, and the next request is answered from it (its head, followed by
    // whatever comes next on the connection), not with its own answer.
    expect(next.got, nextWhy).not.toBe(next.V);
  } else {
    expect(next.res.status, nextWhy).toBe(200);
    expect(next.got, nextWhy).toBe(next.V);
  }
}

describe("protocol table", () => {
  for (const row of TABLE.rows) {
    failing(Boolean(row.known_bug))(row.name, () => runRow(row), 30_000);
  }
});

describe("another client's request after a misbehaving one gets its own answer", () => {
  /** A request that misbehaves, then another client's request. */
  async function thenAnotherClient(base, attacker, script) {
    const T = token("a");
    if (script) A.script(T, script);
    const first = await rawRequest(base, { timeoutMs: 5000, ...attacker, target: `${attacker.target}?t=${T}` });
    const next = await nextRequest();
    const why = `first ${short(first)}\nnext ${short(next.res)}`;
    return { T, first, next, why };
  }

  for (const [label, socket] of [["entry socket", () => entry], ["the Worker's own socket", () => direct]]) {
    test(`Expect: 100-continue on HEAD (${label})`, async () => {
      const { next, first, why } = await thenAnotherClient(socket(), { method: "HEAD", target: "/attacker", head: true, headers: [["expect", "100-continue"]] });
      expect(first.status, why).toBe(200);
      expect(next.res.status, why).toBe(200);
      expect(next.got, why).toBe(next.V);
      expect(next.res.ms, why).toBeLessThan(2000);
    });
  }

  // A status outside 200..=599 is a failed attempt: a GET fails over to B, which answers with
  // the request's own echo; a POST is not retried and gets the Worker's 502.
  const upstream = [
    ["an origin answering 103 then 200 (GET): the failover answers", { method: "GET" }, [{ raw: "HTTP/1.1 103 Early Hints\r\nlink: </a.css>; rel=preload\r\n\r\n" }, { echo: {} }], { failover: "B" }],
    ["an origin answering status 600 (GET): the failover answers", { method: "GET" }, [{ echo: { status: 600 } }], { failover: "B" }],
    ["an origin answering status 999 (POST): 502", { method: "POST", body: Buffer.from("order=1") }, [{ echo: { status: 999 } }], { message: "origin for route_a answered invalid status 999" }],
  ];
  for (const [label, req, script, want] of upstream) {
    test(label, async () => {
      const { T, next, first, why } = await thenAnotherClient(entry, { ...req, target: "/upstream" }, script);
      if (want.failover) {
        expect(first.status, why).toBe(200);
        expect(first.headers["x-decision-failover"], why).toBe("route_b");
        expect(echo(first)?.origin, why).toBe(want.failover);
        expect(echo(first)?.token, why).toBe(T);
      } else {
        expect(first.status, why).toBe(502);
        expect(first.headers["x-decision-failover"], why).toBeUndefined();
        const { error } = JSON.parse(first.body.toString());
        expect(error.code, why).toBe("bad_gateway");
        expect(error.message, why).toBe(want.message);
      }
      expect(next.res.status, why).toBe(200);
      expect(next.got, why).toBe(next.V);
    });
  }
});

describe("request bodies", () => {
  test("Expect: 100-continue on a 2 MiB upload (curl's default above 1 MiB) is proxied", async () => {
    const payload = randomBytes(2 * 1024 * 1024);
    const T = token("u");
    // curl waits up to 1 s for the interim 100 before it sends the body anyway; workerd sends
    // none (see the table). This client waits 300 ms.
    const res = await rawRequest(entry, {
      method: "PUT", target: `/upload/file.bin?t=${T}`, body: payload, continueWaitMs: 300, timeoutMs: 10_000,
      headers: [["expect", "100-continue"], ["content-type", "application/octet-stream"]],
    });
    expect(res.status, short(res)).toBe(200);
    expect(echo(res)?.token).toBe(T);
    expect(echo(res)?.origin).toBe("A");
    const [got] = A.byToken(T);
    expect(got.headerMap.expect).toBeUndefined();
    expect(sha(got.body)).toBe(sha(payload));
  }, 20_000);

  for (const method of ["GET", "HEAD"]) {
    test(`${method} with a body is 400 body_not_allowed, not a 502 with runtime text`, async () => {
      const T = token("g");
      const res = await rawRequest(entry, { method, target: `/with-body?t=${T}`, body: Buffer.from("abc"), head: method === "HEAD" });
      expect(res.status, short(res)).toBe(400);
      if (method === "GET") {
        expect(JSON.parse(res.body.toString()).error.code).toBe("body_not_allowed");
        expect(res.body.toString()).not.toMatch(RUNTIME_TEXT);
      }
      expect(A.byToken(T).length + B.byToken(T).length).toBe(0);
    });
  }
});

describe("upstream failures", () => {
  test("a 502 for an origin that drops the connection carries no runtime text", async () => {
    const T = token("d");
    A.script(T, [{ body_wait: true }, { destroy: true }]);
    const res = await rawRequest(entry, { method: "POST", target: `/drops?t=${T}`, body: Buffer.from("x"), headers: [["cf-ray", T]] });
    expect(res.status, short(res)).toBe(502);
    const { error } = JSON.parse(res.body.toString());
    expect(error.code).toBe("bad_gateway");
    expect(error.message).toBe("origin for route_a failed");
    // The detail is in the log.
    const line = JSON.parse(await logLine(T));
    expect(line.detail).toMatch(/^route_a failed: .*Network connection lost/);
    // A line over 1 KB is written without its nulls: absent is null.
    expect(line.outcome).toMatchObject({ origin: "route_a", error: "connect" });
    expect(line.outcome.failover ?? null).toBeNull();
  });
});

describe("client text the Worker repeats is bounded", () => {
  const bigRay = (T) => `${T}-${"R".repeat(60_000)}`;
  test("a 60 KB cf-ray gives a bounded log line (routed)", async () => {
    const T = token("r");
    const res = await rawRequest(entry, { method: "GET", target: `/ray?t=${T}`, headers: [["cf-ray", bigRay(T)]] });
    expect(res.status).toBe(200);
    const line = await logLine(T);
    expect(line.length).toBeLessThanOrEqual(4096);
    const id = JSON.parse(line).request_id;
    expect(id.startsWith(`${T}-RRR`)).toBe(true);
    expect(Buffer.byteLength(id)).toBe(128 + Buffer.byteLength(CUT_MARK));
  });

  test("a 60 KB cf-ray gives a bounded log line (/v1/decide)", async () => {
    const T = token("r");
    const res = await rawRequest(entry, {
      method: "POST", target: "/v1/decide",
      headers: [["content-type", "application/json"], ["cf-ray", bigRay(T)]],
      body: Buffer.from(JSON.stringify({ state: { request_type: 1, region_id: 3, current_load: 0.4, recent_success_rate: 0.97, queue_depth: 12, hour: 14 } })),
    });
    expect(res.status).toBe(200);
    const line = await logLine(T);
    expect(line.length).toBeLessThanOrEqual(4096);
  });

  test("a 404 echoes at most 128 bytes of the path", async () => {
    const res = await rawRequest(entry, { method: "GET", target: `/v1/${"p".repeat(8192)}` });
    expect(res.status).toBe(404);
    const { error } = JSON.parse(res.body.toString());
    expect(error.code).toBe("not_found");
    expect(Buffer.byteLength(error.message)).toBeLessThanOrEqual(160);
  });

  test("unknown_field echoes at most 128 bytes of the key", async () => {
    const key = "k".repeat(8192);
    const res = await w.decide(`{"state": {"${key}": 1}}`);
    expect(res.status).toBe(400);
    const { error } = await res.json();
    expect(error.code).toBe("unknown_field");
    expect(Buffer.byteLength(error.message)).toBeLessThanOrEqual(300);
    expect(Buffer.byteLength(error.field)).toBeLessThanOrEqual(160);
  });

});

describe("/v1/health of a routing Worker", () => {
  test("without the admin token it shows no origins and no failover map", async () => {
    const text = await (await w.fetch("/v1/health")).text();
    for (const o of [A, B, C]) expect(text).not.toContain(new URL(o.url).host);
    const h = JSON.parse(text);
    expect(h.routing?.failover).toBeUndefined();
    expect(h.routing?.origins).toBeUndefined();
    expect(h).toMatchObject({ status: "ok", backend: "embedded", encoder_version: 1 });
    expect(h.threshold).toBeTypeOf("number");
    expect(h.model?.version).toBeTypeOf("string");
  });

  test("with the admin token it shows the routing configuration", async () => {
    const h = await (await w.fetch("/v1/health", { headers: { authorization: `Bearer ${ADMIN}` } })).json();
    expect(h.routing.origins).toEqual({ route_a: A.url, route_b: B.url, route_c: C.url });
    expect(h.routing.failover).toEqual({ route_a: "route_b", route_b: "route_a" });
  });
});

describe("upload timing", () => {
  // ORIGIN_TIMEOUT_MS bounds the origin, not the client: the slow-upload rows of the table
  // show a slow client waited for; here the origin stops taking the body, which the Worker
  // must not wait for without end.
  test("an origin that stops taking a 32 MiB PUT body times out, and the failover gets the whole body", async () => {
    const T = token("stall");
    A.script(T, [{ pause: 6000 }]);
    const payload = randomBytes(32 * 1024 * 1024);
    const res = await rawRequest(entry, {
      method: "PUT", target: `/stall/file.bin?t=${T}`, body: payload, timeoutMs: 20_000,
      headers: [["content-type", "application/octet-stream"], ["cf-ray", T]],
    });
    const why = short(res);
    expect(res.status, why).toBe(200);
    expect(res.headers["x-decision-failover"], why).toBe("route_b");
    expect(echo(res)?.origin, why).toBe("B");
    expect(res.ms, why).toBeGreaterThanOrEqual(ORIGIN_TIMEOUT_MS);
    const [atB] = B.byToken(T);
    await atB.bodyDone;
    expect(atB.body.length).toBe(payload.length);
    expect(sha(atB.body)).toBe(sha(payload));
    expect(A.byToken(T).every((r) => !r.complete)).toBe(true);
    const line = JSON.parse(await logLine(T));
    // A line over 1 KB is written without its nulls: absent is null.
    expect(line.outcome.attempts.map((a) => [a.origin, a.error ?? null])).toEqual([["route_a", "timeout"], ["route_b", null]]);
    expect(line.detail).toMatch(/^route_a timed out: the origin stopped taking the body/);
  }, 40_000);
});

describe("burst", () => {
  /**
   * Kinds of request in the burst, with their share and what each must get. `check` gets the
   * response and the token and returns a problem or null.
   */
  const own = (res, T) => (res.status === 200 && echo(res)?.token === T && res.headers["x-echo-token"] === T ? null : "not its own 200");
  /** Tokens of other requests anywhere in an answer: its echo header, or its body (also when
   * the body is raw HTTP of another answer). */
  const othersIn = (res, T) => {
    const found = new Set([...res.body.toString("latin1").matchAll(/"token":"(\w+)"|x-echo-token: (\w+)/g)].map((m) => m[1] ?? m[2]));
    if (res.headers["x-echo-token"]) found.add(res.headers["x-echo-token"]);
    found.delete(T);
    return [...found];
  };
  const workerError = (codes, statuses) => (res) => {
    if (!statuses.includes(res.status)) return `status ${res.status}`;
    if (echo(res)) return "an origin's answer instead of the Worker's error";
    if (res.headers["content-type"] !== "application/json") return "not a JSON error";
    const text = res.body.toString();
    if (RUNTIME_TEXT.test(text)) return "runtime text";
    const { error } = JSON.parse(text);
    if (!codes.includes(error?.code)) return `code ${error?.code}`;
    if (error.code === "bad_gateway" && !BAD_GATEWAY_MESSAGE.test(error.message)) return `message ${error.message}`;
    return null;
  };
  /** Its own answer, from the failover origin B. */
  const ownFromFailover = (res, T) => (own(res, T) ?? (res.headers["x-decision-failover"] === "route_b" && echo(res)?.origin === "B" ? null : "not from the failover origin"));
  const interim103 = [{ raw: "HTTP/1.1 103 Early Hints\r\nlink: </a.css>; rel=preload\r\n\r\n" }, { echo: {} }];
  const KINDS = [
    ["good GET", 36, () => ({ method: "GET", target: "/b/good" }), null, own],
    ["good POST", 12, () => ({ method: "POST", target: "/b/post", body: randomBytes(1024) }), null, own],
    ["hop-by-hop headers", 4, () => ({ method: "GET", target: "/b/hop", headers: [["connection", "x-hop"], ["x-hop", "1"], ["te", "trailers"]] }), null, own],
    ["Expect on HEAD", 3, () => ({ method: "HEAD", target: "/b/expect-head", head: true, headers: [["expect", "100-continue"]] }), null,
      (res, T) => (res.status === 200 && res.headers["x-echo-token"] === T ? null : `not its own 200 (status ${res.status})`)],
    ["Expect on POST", 3, () => ({ method: "POST", target: "/b/expect-post", body: randomBytes(2048), continueWaitMs: 50, headers: [["expect", "100-continue"]] }), null, own],
    ["GET with a body", 4, () => ({ method: "GET", target: "/b/get-body", body: Buffer.from("abc") }), null, workerError(["body_not_allowed"], [400])],
    ["unknown /v1 path", 3, () => ({ method: "GET", target: `/v1/${"n".repeat(600)}` }), null, workerError(["not_found"], [404])],
    ["encoded path", 3, () => ({ method: "GET", target: "/b/a%2Fb/%2e%2e/c" }), null, own],
    ["origin 103 then 200 (GET)", 6, () => ({ method: "GET", target: "/b/103" }), interim103, own],
    ["origin 103 then 200 (POST)", 3, () => ({ method: "POST", target: "/b/103-post", body: Buffer.from("x") }), interim103, workerError(["bad_gateway"], [502])],
    ["origin status 600", 4, () => ({ method: "GET", target: "/b/600" }), [{ echo: { status: 600 } }], own],
    ["origin status 999 (POST)", 2, () => ({ method: "POST", target: "/b/999", body: Buffer.from("x") }), [{ echo: { status: 999 } }], workerError(["bad_gateway"], [502])],
    ["origin redirect", 4, () => ({ method: "GET", target: "/b/302" }), [{ echo: { status: 302, headers: { location: "/elsewhere" } } }],
      (res, T) => (res.status === 302 && echo(res)?.token === T ? null : "not its own 302")],
    ["origin chunked", 4, () => ({ method: "GET", target: "/b/chunked" }), [{ echo: { framing: "chunked" } }], own],
    ["origin closes mid-body", 3, () => ({ method: "GET", target: "/b/mid-body" }),
      [{ raw: "HTTP/1.1 200 OK\r\ncontent-length: 5000\r\nx-token: ${TOKEN}\r\n\r\npartial" }, { sleep: 20 }, { destroy: true }],
      (res, T) => (res.status === 200 && res.headers["x-token"] === T && res.bodyError ? null : "not its own truncated 200")],
    ["origin drops before headers (POST)", 3, () => ({ method: "POST", target: "/b/drop", body: Buffer.from("x") }), [{ body_wait: true }, { destroy: true }], workerError(["bad_gateway"], [502])],
    ["origin slow headers", 1, () => ({ method: "GET", target: "/b/slow" }), [{ sleep: ORIGIN_TIMEOUT_MS + 700 }, { echo: {} }], ownFromFailover],
  ];
  const total = KINDS.reduce((s, k) => s + k[1], 0);

  test("2,000 mixed requests, 50 at a time: well-formed, no stray 5xx, none answered with another's response", async () => {
    const N = 2000;
    const CONCURRENCY = 50;
    const pick = rng(20261202);
    const plan = Array.from({ length: N }, () => {
      let x = pick() * total;
      return KINDS.find((k) => (x -= k[1]) < 0) ?? KINDS[0];
    });
    const problems = [];
    const byKind = {};
    let next = 0;
    const worker = async () => {
      for (;;) {
        const i = next++;
        if (i >= N) return;
        const [kind, , make, script, check] = plan[i];
        const T = token("b");
        if (script) A.script(T, script);
        const r = make();
        const res = await rawRequest(entry, { timeoutMs: 10_000, continueWaitMs: 1000, ...r, target: `${r.target}?t=${T}` });
        const stats = (byKind[kind] ??= {});
        stats[res.status ?? res.error] = (stats[res.status ?? res.error] ?? 0) + 1;
        const others = othersIn(res, T);
        let problem = null;
        if (res.status === null) problem = `no answer (${res.error ?? "timeout"})`;
        else if (others.length) problem = `answered with the response to ${others.join(", ")}`;
        else if (res.status >= 500 && ![502, 504].includes(res.status)) problem = `status ${res.status}`;
        else problem = check(res, T);
        if (problem) problems.push(`${i} ${kind}: ${problem} ${short(res).slice(0, 200)}`);
      }
    };
    await Promise.all(Array.from({ length: CONCURRENCY }, worker));
    const summary = JSON.stringify(byKind);
    const wrong = problems.filter((p) => p.includes("answered with the response to"));
    const head = `${problems.length} problems, ${wrong.length} of them another request's response; statuses by kind ${summary}`;
    expect(problems.length, `${head}\n${[...wrong.slice(0, 5), ...problems.slice(0, 15)].join("\n")}`).toBe(0);
  }, 120_000);
});

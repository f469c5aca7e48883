// SECURITY.md claims 7–11 in `make test`: the Worker is not an open proxy (only configured
// origins are contacted, whatever the URL, Host, path or headers say), admin endpoints need
// the exact bearer token, client secrets never reach the log, and client headers do not
// steer decisions. Every origin is a loopback server; `evil` is one that is never configured.
import { afterAll, beforeAll, describe, expect, test } from "vitest";
import net from "node:net";
import { CANARY, SECRET_HEADERS, checkHeaderIndependence, leakedLogLines } from "../../scripts/check-bad-inputs.mjs";
import { startOrigin, startWorker } from "./helpers.mjs";

const TOKEN = "sec-admin-token-7c1f9e2b4a6d8f03";
const HEALTHY = { current_load: 0.35, recent_success_rate: 0.99, queue_depth: 4 };
const US = { country: "US", continent: "NA" };

let A, B, C, evil, w, noAdmin;
const configured = () => [A, B, C];
const resetAll = () => [A, B, C, evil].forEach((o) => o.reset());
const hostOf = (o) => new URL(o.url).host;

function push(worker, headers, body = JSON.stringify(HEALTHY)) {
  return worker.fetch("/v1/admin/signals", { method: "PUT", headers: { "content-type": "application/json", ...headers }, body });
}

/** Sends a raw HTTP/1.1 request line to workerd (what a client can put on the wire). */
async function raw(worker, target, headers = {}) {
  const base = await worker.mf.ready;
  return new Promise((resolve, reject) => {
    let buf = "";
    const s = net.connect(Number(base.port), base.hostname, () => {
      const hs = { host: base.host, connection: "close", ...headers };
      s.write(`GET ${target} HTTP/1.1\r\n${Object.entries(hs).map(([k, v]) => `${k}: ${v}\r\n`).join("")}\r\n`);
    });
    // The status line and headers are enough (the origin has recorded the request by then);
    // workerd keeps the connection open, so do not wait for it to close.
    s.on("data", (c) => {
      buf += c;
      if (buf.includes("\r\n\r\n")) {
        s.destroy();
        resolve(buf);
      }
    });
    s.on("end", () => resolve(buf));
    s.on("error", reject);
    s.setTimeout(5000, () => { s.destroy(); reject(new Error(`no answer to ${target}`)); });
  });
}

beforeAll(async () => {
  [A, B, C, evil] = await Promise.all(["A", "B", "C", "EVIL"].map(startOrigin));
  const vars = { ORIGIN_ROUTE_A: A.url, ORIGIN_ROUTE_B: B.url, ORIGIN_ROUTE_C: C.url, SIGNALS_CACHE_S: "0" };
  [w, noAdmin] = await Promise.all([
    startWorker({ vars: { ...vars, ADMIN_TOKEN: TOKEN }, extra: { kvNamespaces: ["SIGNALS"] } }),
    startWorker({ vars: { ...vars, ADMIN_TOKEN: null }, extra: { kvNamespaces: ["SIGNALS"] } }),
  ]);
  expect((await push(w, { authorization: `Bearer ${TOKEN}` })).status).toBe(200);
});
afterAll(async () => {
  await Promise.all([w, noAdmin].map((x) => x?.dispose()));
  await Promise.all([A, B, C, evil].map((o) => o?.close()));
});

// SECURITY.md claim 9.
describe("not an open proxy: only configured origins are contacted", () => {
  /** Exactly one configured origin got the request, with its own Host; `evil` got nothing. */
  function onlyConfigured(expectedUrl) {
    expect(evil.requests).toHaveLength(0);
    const hit = configured().filter((o) => o.requests.length > 0);
    expect(hit).toHaveLength(1);
    const [got] = hit[0].requests;
    expect(got.headers.host).toBe(hostOf(hit[0]));
    if (expectedUrl !== undefined) expect(got.url).toBe(expectedUrl);
  }

  // Paths that would name another host if the Worker built its upstream URL by string
  // concatenation or re-parsed the client's URL. On the wire, as a client can send them.
  const paths = () => {
    const e = hostOf(evil);
    return [
      ["protocol-relative //host", `//${e}/x`, `//${e}/x`],
      ["userinfo /@host", `/@${e}/x`, `/@${e}/x`],
      ["encoded slashes /%2F%2Fhost", `/%2F%2F${e}/x`, `/%2F%2F${e}/x`],
      ["backslashes /\\\\host", `/\\\\${e}/x`, `///${e}/x`],
      ["encoded backslashes /%5C%5Chost", `/%5C%5C${e}/x`, `/%5C%5C${e}/x`],
      ["dot segments /..%2F..%2Fhost", `/..%2F..%2F${e}/x`, `/..%2F..%2F${e}/x`],
      ["URL in the query", `/x?url=http://${e}/&next=//${e}`, `/x?url=http://${e}/&next=//${e}`],
    ];
  };
  test("paths that name another host stay on the configured origin, path intact", async () => {
    for (const [name, target, seen] of paths()) {
      resetAll();
      const res = await raw(w, target);
      expect(res.split("\r\n")[0], name).toBe("HTTP/1.1 200 OK");
      onlyConfigured(seen);
    }
  });

  test("absolute-form request lines never reach another host", async () => {
    // Local workerd refuses these before the Worker runs (500 from the runtime, not from the
    // Worker); the point is that nothing reaches `evil` either way.
    for (const target of [`http://${hostOf(evil)}/abs`, `http://${hostOf(evil)}`, `${hostOf(evil)}/x`, `@${hostOf(evil)}/x`]) {
      resetAll();
      await raw(w, target);
      expect(evil.requests, target).toHaveLength(0);
    }
  });

  test("a request URL naming another host is proxied to the configured origin", async () => {
    resetAll();
    const res = await w.mf.dispatchFetch(`${evil.url}/via-url?q=1`, { cf: US });
    expect(res.status).toBe(200);
    expect((await res.json()).origin).toBe("A");
    onlyConfigured("/via-url?q=1");
  });

  test.each([
    ["Host", { host: "HOST" }],
    ["X-Forwarded-Host", { "x-forwarded-host": "HOST" }],
    ["Forwarded: host=", { forwarded: "host=HOST;proto=http" }],
    ["X-Original-URL / X-Rewrite-URL", { "x-original-url": "http://HOST/o", "x-rewrite-url": "http://HOST/o" }],
    ["X-Forwarded-Proto / X-Forwarded-Port / X-Host", { "x-forwarded-proto": "http", "x-forwarded-port": "PORT", "x-host": "HOST" }],
    ["x-decision-action", { "x-decision-action": "route_c", "x-decision-origin": "http://HOST" }],
  ])("the %s header does not choose the destination", async (_name, template) => {
    resetAll();
    const e = new URL(evil.url);
    const headers = Object.fromEntries(Object.entries(template).map(([k, v]) => [k, v.replace("HOST", e.host).replace("PORT", e.port)]));
    const res = await raw(w, "/hdr", headers);
    expect(res.split("\r\n")[0]).toBe("HTTP/1.1 200 OK");
    onlyConfigured("/hdr");
  });

  test("an origin's redirect to another host is relayed, not followed", async () => {
    resetAll();
    for (const o of configured()) o.behave = (req, res) => res.writeHead(302, { location: `${evil.url}/stolen` }).end();
    const res = await w.fetch("/go", { cf: US, redirect: "manual" });
    expect(res.status).toBe(302);
    expect(res.headers.get("location")).toBe(`${evil.url}/stolen`);
    expect(evil.requests).toHaveLength(0);
  });

  test("with no origin configured nothing is contacted: 502", async () => {
    const bare = await startWorker({ vars: { ADMIN_TOKEN: TOKEN }, extra: { kvNamespaces: ["SIGNALS"] } });
    try {
      resetAll();
      const res = await bare.fetch(`/x?origin=${evil.url}`, { cf: US, headers: { host: hostOf(evil) } });
      expect(res.status).toBe(502);
      expect((await res.json()).error.code).toBe("bad_gateway");
      expect([A, B, C, evil].every((o) => o.requests.length === 0)).toBe(true);
    } finally {
      await bare.dispose();
    }
  });
});

// SECURITY.md claims 10, 11 and 15.
describe("only operators push or read signals, or see the whole /v1/health", () => {
  // Missing token, wrong token, one character changed, a prefix, empty and the Basic scheme:
  // tests/e2e/routing.test.mjs "a push with %s is 401", "the Basic scheme is 401 too".
  test.each([
    ["the token plus one byte (longer)", () => `Bearer ${TOKEN}x`],
    ["the token minus its last byte (shorter)", () => `Bearer ${TOKEN.slice(0, -1)}`],
    ["the last byte changed", () => `Bearer ${TOKEN.slice(0, -1)}${TOKEN.at(-1) === "3" ? "4" : "3"}`],
    ["the first byte changed", () => `Bearer X${TOKEN.slice(1)}`],
    ["the token in another case", () => `Bearer ${TOKEN.toUpperCase()}`],
    ["the token twice", () => `Bearer ${TOKEN}${TOKEN}`],
    ["the token with \"%00\" appended", () => `Bearer ${TOKEN}%00`],
    ["the token as the scheme", () => `${TOKEN}`],
  ])("a push with %s is 401 and stores nothing", async (_name, header) => {
    const before = await (await w.fetch("/v1/admin/signals", { headers: { authorization: `Bearer ${TOKEN}` } })).json();
    const res = await push(w, { authorization: header() }, JSON.stringify({ current_load: 1, recent_success_rate: 0.1, queue_depth: 999 }));
    expect(res.status).toBe(401);
    expect(res.headers.get("www-authenticate")).toBe("Bearer");
    expect((await res.json()).error.code).toBe("unauthorized");
    const after = await (await w.fetch("/v1/admin/signals", { headers: { authorization: `Bearer ${TOKEN}` } })).json();
    expect(after.signals).toEqual(before.signals);
  });

  test("the token elsewhere than Authorization (query, cookie, X-Admin-Token) is 401", async () => {
    for (const [p, headers] of [
      [`/v1/admin/signals?token=${TOKEN}`, {}],
      ["/v1/admin/signals", { cookie: `token=${TOKEN}` }],
      ["/v1/admin/signals", { "x-admin-token": TOKEN, "x-authorization": `Bearer ${TOKEN}` }],
    ]) {
      const res = await w.fetch(p, { method: "PUT", headers: { "content-type": "application/json", ...headers }, body: JSON.stringify(HEALTHY) });
      expect(res.status, p).toBe(401);
    }
  });

  test("reading the signals needs the token too", async () => {
    expect((await w.fetch("/v1/admin/signals")).status).toBe(401);
    expect((await w.fetch("/v1/admin/signals", { headers: { authorization: "Bearer nope" } })).status).toBe(401);
    expect((await w.fetch("/v1/admin/signals", { headers: { authorization: `bearer ${TOKEN}` } })).status).toBe(200);
  });

  test("without ADMIN_TOKEN the admin endpoint refuses everyone", async () => {
    for (const auth of [undefined, "Bearer ", "Bearer undefined", "Bearer null", `Bearer ${TOKEN}`]) {
      const res = await push(noAdmin, auth === undefined ? {} : { authorization: auth });
      expect(res.status, String(auth)).toBe(401);
    }
    // Nor does anyone see the whole /v1/health document.
    for (const auth of [undefined, `Bearer ${TOKEN}`]) {
      const h = await (await noAdmin.fetch("/v1/health", { headers: auth ? { authorization: auth } : {} })).json();
      expect(h.routing, String(auth)).toBeUndefined();
      expect(h.config, String(auth)).toBeUndefined();
    }
  });

  test("/v1/health shows the whole document to the admin token only", async () => {
    const PUBLIC = ["backend", "encoder_version", "explore_percent", "model", "rollout", "rules", "status", "threshold"];
    for (const auth of [undefined, "Bearer nope", `Basic ${TOKEN}`, `Bearer ${TOKEN}x`, `Bearer ${TOKEN.slice(0, -1)}`]) {
      const text = await (await w.fetch("/v1/health", { headers: auth ? { authorization: auth } : {} })).text();
      const h = JSON.parse(text);
      expect(Object.keys(h).sort(), String(auth)).toEqual(PUBLIC);
      expect(Object.keys(h.model).sort(), String(auth)).toEqual(["loaded", "version"]);
      expect(Object.keys(h.rules), String(auth)).toEqual(["version"]);
      expect(Object.keys(h.rollout).sort(), String(auth)).toEqual(["automatic", "challenger_version", "effective_champion", "phase", "setting"]);
      for (const o of [A, B, C]) expect(text, String(auth)).not.toContain(new URL(o.url).host);
    }
    const h = await (await w.fetch("/v1/health", { headers: { authorization: `Bearer ${TOKEN}` } })).json();
    expect(h.routing.origins).toEqual({ route_a: A.url, route_b: B.url, route_c: C.url });
    expect(h.config).toBeTypeOf("object");
    expect(h.config_errors).toEqual([]);
  });

  test("the 401 is checked before the body: an oversized or malformed body without the token is 401", async () => {
    const res = await push(w, {}, "x".repeat(64 * 1024));
    expect(res.status).toBe(401);
    const res2 = await push(w, { authorization: "Bearer wrong" }, "{not json");
    expect(res2.status).toBe(401);
  });
});

// SECURITY.md claims 7 and 8.
describe("secrets are not logged, client headers do not steer decisions", () => {
  test("a client's Authorization and Cookie never reach the log (decide, routing, admin, health)", async () => {
    const start = w.stdoutLines.length;
    await (await w.decide({ state: { request_type: 1, region_id: 3, current_load: 0.4, recent_success_rate: 0.97, queue_depth: 12 } }, SECRET_HEADERS)).arrayBuffer();
    await (await w.decide("{bad json", SECRET_HEADERS)).arrayBuffer();
    await (await w.fetch("/routed?x=1", { cf: US, headers: { ...SECRET_HEADERS, "cf-ray": "sec-leak-1" } })).arrayBuffer();
    // A wrong admin token that is the canary, and the right one with the canary cookie.
    expect((await push(w, { authorization: `Bearer ${CANARY}`, cookie: SECRET_HEADERS.cookie })).status).toBe(401);
    expect((await push(w, { authorization: `Bearer ${TOKEN}`, cookie: SECRET_HEADERS.cookie })).status).toBe(200);
    await (await w.fetch("/v1/health", { headers: SECRET_HEADERS })).arrayBuffer();
    await w.waitForLog((l) => l.request_id === "sec-leak-1");
    await w.waitForLog((l) => l.event === "signals_stored");
    await new Promise((r) => setTimeout(r, 100));
    const lines = w.stdoutLines.slice(start);
    expect(lines.length).toBeGreaterThanOrEqual(3); // decide, route, signals_stored
    expect(leakedLogLines(lines)).toEqual([]);
    expect(lines.filter((l) => l.includes(TOKEN))).toEqual([]);
    // Health never shows the admin token either.
    expect(await (await w.health()).text()).not.toContain(TOKEN);
  });

  test("the routed request still carries the client's credentials to the origin (and only there)", async () => {
    resetAll();
    await (await w.fetch("/creds", { cf: US, headers: SECRET_HEADERS })).arrayBuffer();
    expect(A.requests[0].headers.authorization).toBe(SECRET_HEADERS.authorization);
    expect(evil.requests).toHaveLength(0);
  });

  test("spoofed client headers do not change a /v1/decide decision", async () => {
    expect(await checkHeaderIndependence(w.fetch)).toEqual([]);
  });

  test("edge routing: the region comes from request.cf, never from client headers", async () => {
    const spoof = {
      "cf-ipcountry": "JP", "x-region-id": "9", "x-country": "JP", "cf-ipcontinent": "AS",
      "x-forwarded-for": "203.0.113.7", forwarded: "for=203.0.113.7", "x-real-ip": "203.0.113.7",
    };
    const lines = [];
    for (const [i, headers] of [{}, spoof].entries()) {
      resetAll();
      const id = `sec-region-${i}`;
      const res = await w.fetch("/region", { cf: US, headers: { ...headers, "cf-ray": id } });
      expect(res.status).toBe(200);
      expect((await res.json()).origin).toBe("A");
      lines.push(await w.waitForLog((l) => l.event === "decision" && l.request_id === id));
    }
    for (const l of lines) {
      expect(l.state.region_id).toBe(0);
      expect(l.request).toMatchObject({ country: "US", continent: "NA" });
    }
    expect(lines[1].action).toBe(lines[0].action);
  });
});

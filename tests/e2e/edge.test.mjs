// Strict at the edges: the edge-case table (tests/fixtures/edge_cases.json) against the built
// Worker in workerd. Bodies with two meanings are refused naming the field, an origin that
// stops sending its body is cut and the record says so, TRACE and CONNECT never reach an
// origin, an origin answering HEAD with a body must not break other clients' requests (a
// runtime defect, recorded), requests without a routing key get buckets of their own, and a
// 300 MiB answer streams through without being held. A row with `runtime_bug` states the right
// outcome and runs as test.fails until workerd gives it; `runtime` rows assert what workerd
// does by itself, so a change in workerd shows here.
import { afterAll, afterEach, beforeAll, describe, expect, test } from "vitest";
import { spawnSync } from "node:child_process";
import { createHash, randomBytes } from "node:crypto";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import { ROOT, readJson, startWorker } from "./helpers.mjs";
import { cleanPool, rawRequest, startRawOrigin } from "./raw-origin.mjs";

const TABLE = readJson("tests/fixtures/edge_cases.json");
const ADMIN = "edge-admin-token-2b7e41";
const OUTCOME = "edge-outcome-token-9c03d5";
const HEALTHY = { current_load: 0.35, recent_success_rate: 0.99, queue_depth: 4 };
const CLI = process.env.DECIDER_BIN || path.join(ROOT, "target/debug/decider");
/** EDGE_RUNTIME_BUGS=run runs the runtime_bug rows as ordinary tests, to see how they fail. */
const showBugs = process.env.EDGE_RUNTIME_BUGS === "run";

// A Worker that calls the decider through a service binding with any method, and says what
// came back (or that the runtime refused to build the request).
const CALLER = `export default { async fetch(req, env) {
  const u = new URL(req.url);
  try {
    const r = await env.DECIDER.fetch(new Request("http://decider" + u.searchParams.get("path"), { method: u.searchParams.get("method") }));
    return Response.json({ status: r.status, allow: r.headers.get("allow"), body: await r.text() });
  } catch (e) { return Response.json({ threw: String(e.message) }); }
} }`;

let A, B, w, entry, direct, caller;
let seq = 0;
const salt = randomBytes(3).toString("hex");
const token = (tag = "e") => `${tag}${++seq}z${salt}`;

/** Healthy signals: every request is decided route_a (origin A). Pushed again after each row,
 * so a row that changed them (a refused body that was not refused) cannot steer the next. */
async function pushHealthy() {
  const put = await w.fetch("/v1/admin/signals", {
    method: "PUT",
    headers: { authorization: `Bearer ${ADMIN}`, "content-type": "application/json" },
    body: JSON.stringify(HEALTHY),
  });
  expect(put.status).toBe(200);
}

beforeAll(async () => {
  [A, B] = await Promise.all(["A", "B"].map(startRawOrigin));
  w = await startWorker({
    vars: {
      ORIGIN_ROUTE_A: A.url, ORIGIN_ROUTE_B: B.url, ORIGIN_TIMEOUT_MS: "1000", ORIGIN_BODY_IDLE_MS: "800",
      FAILOVER: JSON.stringify({ route_a: "route_b", route_b: "route_a" }), CANARY_PERCENT: "50",
      ADMIN_TOKEN: ADMIN, OUTCOME_TOKEN: OUTCOME, SIGNALS_CACHE_S: "0",
    },
    extra: { kvNamespaces: ["SIGNALS"], unsafeDirectSockets: [{ host: "127.0.0.1", port: 0 }] },
    workers: [{ name: "caller", modules: true, script: CALLER, serviceBindings: { DECIDER: "decider" } }],
  });
  entry = await w.mf.ready;
  direct = await w.mf.unsafeGetDirectURL();
  caller = await w.mf.getWorker("caller");
  await pushHealthy();
});
afterAll(async () => {
  await w?.dispose();
  await Promise.all([A, B].map((o) => o?.close()));
});
afterEach(async () => {
  await pushHealthy();
  // An answer a row left on a pooled connection must not be read by another row's request.
  await cleanPool(entry, [A, B], () => token("drain"));
});

function echoToken(res) {
  try {
    return JSON.parse(res.body.toString()).token ?? null;
  } catch {
    return null;
  }
}

const short = (r) => JSON.stringify({ status: r.status, error: r.error, bodyError: r.bodyError, ms: Math.round(r.ms), body: r.body.toString().slice(0, 200) });

/** Decision and outcome records logged from index `from` on. */
const recordsSince = (from) => w.logs.slice(from).filter((l) => l.event === "decision" || l.event === "outcome");
const settle = () => new Promise((r) => setTimeout(r, 200));

/** `decider report --json` over these record lines. */
function report(lines) {
  const dir = mkdtempSync(path.join(os.tmpdir(), "edge-"));
  try {
    const file = path.join(dir, "worker.log");
    writeFileSync(file, lines.map((l) => JSON.stringify(l)).join("\n") + "\n");
    const run = spawnSync(CLI, ["report", "--logs", file, "--json"], { encoding: "utf8" });
    expect(run.status, run.stderr).toBe(0);
    return JSON.parse(run.stdout);
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

const RUNNERS = {
  async body(row) {
    const { method, path: p, auth, body } = row.request;
    const bearer = { admin: ADMIN, outcome: OUTCOME }[auth];
    const before = w.logs.length;
    const res = await w.fetch(p, {
      method,
      headers: { "content-type": "application/json", ...(bearer ? { authorization: `Bearer ${bearer}` } : {}) },
      body,
    });
    const answer = await res.json();
    const e = row.expect;
    expect(res.status, JSON.stringify(answer)).toBe(e.status);
    if (e.code) expect(answer.error).toMatchObject({ code: e.code, field: e.field });
    if (e.logged === false) {
      await settle();
      expect(recordsSince(before)).toEqual([]);
    }
    if (e.logged === true) await w.waitForLog((l, i) => i >= before && l.event === "outcome" && l.decision_id === answer.decision_id);
  },

  async stalled_body(row) {
    const T = token("s");
    A.script(T, row.origin);
    const res = await rawRequest(entry, { method: "GET", target: `/stalled?t=${T}`, headers: [["cf-ray", T]], timeoutMs: 10_000 });
    const e = row.expect;
    const why = short(res);
    expect(res.status, why).toBe(e.status);
    expect(res.body.toString(), why).toBe(e.body_text);
    if (e.body_error !== undefined) expect(res.bodyError !== null, why).toBe(e.body_error);
    expect(res.ms, why).toBeGreaterThanOrEqual(e.cut_after_ms - 50);
    if (e.cut_within_ms) expect(res.ms, why).toBeLessThan(e.cut_within_ms);
    const line = await w.waitForLog((l) => l.request_id === T, 3000);
    expect(line.outcome.status).toBe(e.log.status);
    expect(line.outcome.error ?? null).toBe(e.log.error);
    expect(line.outcome.attempts.map((a) => [a.origin, a.status ?? null, a.error ?? null])).toEqual(e.log.attempts);
    // decider report scores it as the Worker's live counts do.
    const r = report([line]);
    expect(r.by_endpoint.route).toMatchObject({ n: 1, with_outcome: 1, successes: e.reward });
  },

  async method(row) {
    const T = token("m");
    const { method, target, headers = [], via } = row.request;
    const before = w.logs.length;
    let status, allow, body;
    if (via === "binding") {
      const res = await caller.fetch(`http://caller/?method=${method}&path=${encodeURIComponent(`${target}?t=${T}`)}`);
      ({ status, allow, body } = await res.json());
    } else {
      const res = await rawRequest(entry, { method, target: `${target}?t=${T}`, headers: [...headers, ["cf-ray", T]] });
      ({ status, body } = res);
      allow = res.headers.allow;
      body = body.toString();
    }
    const e = row.expect;
    expect(status, body).toBe(e.status);
    if (e.allow) expect(allow).toBe(e.allow);
    if (e.code) expect(JSON.parse(body).error.code).toBe(e.code);
    await settle();
    expect(A.byToken(T).length + B.byToken(T).length).toBe(e.origin_requests);
    if (e.logged === false) expect(recordsSince(before)).toEqual([]);
  },

  async no_key(row) {
    const arms = {};
    const keys = new Set();
    for (let i = 0; i < row.requests; i++) {
      const T = token("k");
      const headers = [["cf-ray", T], ...(row.key ? [["cf-connecting-ip", row.key]] : [])];
      // The Worker's own socket: Miniflare's entry adds a cf-connecting-ip of its own.
      const res = await rawRequest(direct, { method: "GET", target: `/keys?t=${T}`, headers });
      expect(res.status, short(res)).toBe(200);
      const line = await w.waitForLog((l) => l.request_id === T);
      keys.add(line.key ?? null);
      arms[line.arm] = (arms[line.arm] ?? 0) + 1;
    }
    const e = row.expect;
    expect([...keys]).toEqual([e.key]);
    if (e.holdout_share_between) {
      const share = (arms.holdout ?? 0) / row.requests;
      expect(share, JSON.stringify(arms)).toBeGreaterThanOrEqual(e.holdout_share_between[0]);
      expect(share, JSON.stringify(arms)).toBeLessThanOrEqual(e.holdout_share_between[1]);
    }
    if (e.one_arm) expect(Object.keys(arms), JSON.stringify(arms)).toHaveLength(1);
    // /v1/decide reads the same key by the same rule.
    const state = { request_type: 1, region_id: 3, current_load: 0.4, recent_success_rate: 0.97, queue_depth: 12 };
    const res = await rawRequest(direct, {
      method: "POST", target: "/v1/decide", body: Buffer.from(JSON.stringify({ state })),
      headers: [["content-type", "application/json"], ...(row.key ? [["cf-connecting-ip", row.key]] : [])],
    });
    const { decision_id } = JSON.parse(res.body.toString());
    const line = await w.waitForLog((l) => l.decision_id === decision_id);
    expect(line.key ?? null).toBe(e.decide_key);
  },

  async large_body(row) {
    const T = token("l");
    A.script(T, [{ stream: { bytes: row.bytes } }]);
    const res = await w.fetch(`/large?t=${T}`, { headers: { "cf-ray": T } });
    expect(res.status).toBe(row.expect.status);
    const reader = res.body.getReader();
    const hash = createHash("sha256");
    let received = 0;
    let ahead = null;
    for (;;) {
      const { value, done } = await reader.read();
      if (done) break;
      hash.update(value);
      received += value.length;
      if (ahead === null && received >= row.pause_after_bytes) {
        // The client stops reading: the origin may get only as far ahead as the buffers
        // between them hold, not the whole body.
        await new Promise((r) => setTimeout(r, row.pause_ms));
        ahead = A.byToken(T)[0].streamed - received;
      }
    }
    const [rec] = A.byToken(T);
    expect(received).toBe(row.bytes);
    expect(hash.digest("hex")).toBe(rec.streamedSha256);
    expect(ahead).toBeLessThanOrEqual(row.expect.max_ahead_bytes);
    const line = await w.waitForLog((l) => l.request_id === T, 5000);
    expect(line.outcome.status).toBe(row.expect.log.status);
    expect(line.outcome.error ?? null).toBe(row.expect.log.error);
  },
};

/** The head_body row: a HEAD whose answer carries a body, then POSTs from other clients. */
async function headThenPosts(row) {
  const T = token("h");
  A.script(T, row.origin);
  const head = await rawRequest(entry, { method: "HEAD", target: `/head?t=${T}`, head: true });
  const posts = [];
  for (let i = 0; i < row.posts; i++) {
    const P = token("p");
    const res = await rawRequest(entry, { method: "POST", target: `/order?t=${P}`, body: Buffer.from(`order=${P}`) });
    posts.push({ P, res, token: echoToken(res), own: res.status === 200 && echoToken(res) === P, atOrigin: A.byToken(P).length });
  }
  return { head, posts };
}

describe("edge cases (tests/fixtures/edge_cases.json)", () => {
  for (const row of TABLE.cases.filter((c) => c.kind !== "head_body")) {
    test(row.name, () => RUNNERS[row.kind](row), 120_000);
  }
  for (const row of TABLE.cases.filter((c) => c.kind === "head_body")) {
    (row.runtime_bug && !showBugs ? test.fails : test)(`${row.name} [runtime bug: the right outcome]`, async () => {
      const { head, posts } = await headThenPosts(row);
      expect(head.status).toBe(row.expect.head_status);
      expect(posts.filter((p) => p.own).length, posts.map((p) => short(p.res)).join("\n")).toBe(row.expect.own_answers);
    }, 60_000);
    test(`${row.name} [runtime: what workerd does]`, async () => {
      const { head, posts } = await headThenPosts(row);
      const rt = row.runtime;
      const [first, ...rest] = posts;
      const why = posts.map((p) => short(p.res)).join("\n");
      expect(head.status).toBe(row.expect.head_status);
      // The first POST on the pooled connection reads the HEAD's body as its answer, after
      // the origin had received it (so a retry would send it twice): a 502 when the bytes
      // are not an answer, that answer when they are.
      expect(first.res.status, why).toBe(rt.first_post_status);
      if (rt.first_post_code) expect(JSON.parse(first.res.body.toString()).error.code).toBe(rt.first_post_code);
      if (rt.first_post_token) expect(first.token, why).toBe(rt.first_post_token);
      expect(first.atOrigin > 0).toBe(rt.origin_got_first_post);
      if (rt.other_posts_own !== undefined) expect(rest.filter((p) => p.own).length, why).toBe(rt.other_posts_own);
      // Desync: each later POST gets the answer meant for the POST before it.
      if (rt.each_post_gets_the_previous_answer) {
        expect(rest.map((p) => p.token), why).toEqual(posts.slice(0, -1).map((p) => p.P));
      }
    }, 60_000);
  }
});

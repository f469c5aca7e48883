// src/glue.js in node, without a Worker:
// - the bounded body read on streams workerd does not hand the Worker in the end-to-end
//   tests: a reader without `readAtLeast` (node's BYOB reader), a stream that is not bytes,
//   and `readAtLeast` answering in pieces. The Worker's own reads (workerd's `readAtLeast`)
//   are covered by api.test.mjs and the bad-input table;
// - `isPlainDecide`, the fast path's test that skips Rust's request checks;
// - `decisionResponse`, whose init object is reused from call to call.
import { describe, expect, test } from "vitest";
import { decisionResponse, isPlainDecide, readBounded } from "../../src/glue.js";

const MAX = 16;
const bytes = (n, from = 0) => Uint8Array.from({ length: n }, (_, i) => (from + i) % 251);

/** A request-like object whose body yields `chunks`; `kind`: "bytes" or "default". */
function request(chunks, kind) {
  let i = 0;
  let cancelled = false;
  const body = new ReadableStream({
    type: kind === "bytes" ? "bytes" : undefined,
    pull(c) {
      if (i < chunks.length) c.enqueue(chunks[i++].slice());
      else c.close();
    },
    cancel() {
      cancelled = true;
    },
  });
  return { req: { body }, cancelled: () => cancelled };
}

/**
 * A request whose BYOB reader has workerd's `readAtLeast` over a body of `total` bytes,
 * declaring `declared` as its content-length (none when undefined). `reads()` counts the
 * reads, `sizes()` lists the buffer sizes read into.
 */
function readAtLeastRequest(total, declared) {
  let sent = 0;
  let cancelled = false;
  const sizes = [];
  const reader = {
    // Fills `view` up to `min` bytes, short only when the body ends (as workerd's does).
    async readAtLeast(min, view) {
      expect(min).toBe(view.byteLength);
      sizes.push(view.byteLength);
      const n = Math.min(min, total - sent);
      view.set(bytes(n, sent));
      sent += n;
      return n === 0 ? { done: true, value: view.subarray(0, 0) } : { done: false, value: view.subarray(0, n) };
    },
    cancel: async () => {
      cancelled = true;
    },
  };
  const headers = new Headers(declared === undefined ? {} : { "content-length": String(declared) });
  return {
    req: { headers, body: { getReader: ({ mode } = {}) => (mode === "byob" ? reader : null) } },
    cancelled: () => cancelled,
    reads: () => sizes.length,
    sizes: () => sizes,
  };
}

describe.each(["bytes", "default"])("%s stream", (kind) => {
  test.each([
    ["empty", []],
    ["one chunk", [bytes(5)]],
    ["several chunks up to the limit", [bytes(6), bytes(6, 6), bytes(4, 12)]],
  ])("%s is read whole", async (_n, chunks) => {
    const { req, cancelled } = request(chunks, kind);
    const want = chunks.flatMap((c) => [...c]);
    expect([...(await readBounded(req, MAX))]).toEqual(want);
    expect(cancelled()).toBe(false);
  });

  test("one byte over the limit is null and cancels the stream", async () => {
    const { req, cancelled } = request([bytes(10), bytes(7, 10)], kind);
    expect(await readBounded(req, MAX)).toBeNull();
    await new Promise((r) => setTimeout(r, 0));
    expect(cancelled()).toBe(true);
  });
});

test("no body is empty", async () => {
  expect([...(await readBounded({ body: null }, MAX))]).toEqual([]);
});

test.each([
  ["empty", 0],
  ["a small body", 5],
  ["exactly the limit", MAX],
])("readAtLeast: %s is read whole", async (_n, total) => {
  const { req, cancelled } = readAtLeastRequest(total);
  expect([...(await readBounded(req, MAX))]).toEqual([...bytes(total)]);
  expect(cancelled()).toBe(false);
});

test("readAtLeast: over the limit is null and cancels", async () => {
  const { req, cancelled } = readAtLeastRequest(MAX + 1);
  expect(await readBounded(req, MAX)).toBeNull();
  expect(cancelled()).toBe(true);
});

test("a body stream that cannot be read rejects (and throws nothing into the caller)", async () => {
  const locked = new ReadableStream();
  locked.getReader();
  const read = readBounded({ body: locked }, MAX);
  expect(read).toBeInstanceOf(Promise);
  await expect(read).rejects.toThrow();
});

// `isPlainDecide` answers true only for requests the router's checks (src/body.rs) accept;
// anything else it leaves to the router (false), errors included. The bad-input table
// checks the same from outside: a request refused by the router is refused on either path.
describe("isPlainDecide", () => {
  const LIMIT = 16384;
  const req = (over = {}) => {
    const { method = "POST", url = "http://localhost/v1/decide", headers = { "content-type": "application/json", "content-length": "120" } } = over;
    return { method, url, headers: new Headers(headers) };
  };

  test.each([
    ["the common request", req()],
    ["no content-length (chunked)", req({ headers: { "content-type": "application/json" } })],
    ["a charset parameter", req({ headers: { "content-type": "application/json; charset=utf-8" } })],
    ["exactly the limit", req({ headers: { "content-type": "application/json", "content-length": "16384" } })],
    ["a zero length", req({ headers: { "content-type": "application/json", "content-length": "0" } })],
    ["an https URL with a port", req({ url: "https://a.example:8443/v1/decide" })],
  ])("%s is plain", (_n, r) => {
    expect(isPlainDecide(r, LIMIT)).toBe(true);
  });

  test.each([
    ["GET", req({ method: "GET" })],
    ["post in lower case", req({ method: "post" })],
    ["a trailing slash", req({ url: "http://localhost/v1/decide/" })],
    ["upper case", req({ url: "http://localhost/V1/DECIDE" })],
    ["a longer name", req({ url: "http://localhost/v1/decidex" })],
    ["a prefix", req({ url: "http://localhost/x/v1/decide" })],
    ["an escape", req({ url: "http://localhost/v1/%64ecide" })],
    ["a query", req({ url: "http://localhost/v1/decide?x=1" })],
    ["a fragment", req({ url: "http://127.0.0.1:8787/v1/decide#f" })],
    ["a ? in the authority", req({ url: "http://localhost?/v1/decide" })],
    ["no authority", req({ url: "http:///v1/decide" })],
    ["no scheme", req({ url: "/v1/decide" })],
    ["no content type", req({ headers: { "content-length": "120" } })],
    ["another JSON-like type", req({ headers: { "content-type": "application/jsonp" } })],
    ["a +json type", req({ headers: { "content-type": "application/json-patch+json" } })],
    ["other spelling (Rust decides)", req({ headers: { "content-type": "Application/JSON" } })],
    ["space before the parameter (Rust decides)", req({ headers: { "content-type": "application/json ; charset=utf-8" } })],
    ["one byte over the limit", req({ headers: { "content-type": "application/json", "content-length": "16385" } })],
    ["a huge length", req({ headers: { "content-type": "application/json", "content-length": "99999999999999999999" } })],
    ["a signed length (Rust decides)", req({ headers: { "content-type": "application/json", "content-length": "+12" } })],
    ["a non-number length", req({ headers: { "content-type": "application/json", "content-length": "12a" } })],
  ])("%s is not", (_n, r) => {
    expect(isPlainDecide(r, LIMIT)).toBe(false);
  });
});

test("decisionResponse: each response has its own decision headers", async () => {
  const a = decisionResponse('{"a":1}', "route_a", "model", "m1");
  const b = decisionResponse('{"b":2}', "reject", "rules", "none");
  expect(Object.fromEntries(a.headers)).toEqual({
    "cache-control": "no-store",
    "content-type": "application/json",
    "x-decision-action": "route_a",
    "x-decision-model-version": "m1",
    "x-decision-source": "model",
  });
  expect(b.headers.get("x-decision-action")).toBe("reject");
  expect(b.headers.get("x-decision-source")).toBe("rules");
  expect(b.headers.get("x-decision-model-version")).toBe("none");
  expect([a.status, await a.text(), await b.text()]).toEqual([200, '{"a":1}', '{"b":2}']);
});

describe("readAtLeast with a declared length", () => {
  test.each([
    ["an honest length", 5, 5],
    ["an honest zero", 0, 0],
    ["exactly the limit", MAX, MAX],
    ["a body shorter than declared", 3, 9],
  ])("%s: one read into a buffer one byte longer than declared", async (_n, total, declared) => {
    const r = readAtLeastRequest(total, declared);
    expect([...(await readBounded(r.req, MAX))]).toEqual([...bytes(total)]);
    expect(r.sizes()).toEqual([declared + 1]);
    expect(r.cancelled()).toBe(false);
  });

  test("a body longer than declared but within the limit is read whole", async () => {
    const r = readAtLeastRequest(12, 4);
    expect([...(await readBounded(r.req, MAX))]).toEqual([...bytes(12)]);
    expect(r.reads()).toBe(2);
    expect(r.cancelled()).toBe(false);
  });

  test("a body longer than declared that stops at declared + 1 bytes is read whole", async () => {
    const r = readAtLeastRequest(5, 4);
    expect([...(await readBounded(r.req, MAX))]).toEqual([...bytes(5)]);
  });

  test("a body longer than declared and over the limit is null and cancels", async () => {
    const r = readAtLeastRequest(MAX + 1, 4);
    expect(await readBounded(r.req, MAX)).toBeNull();
    expect(r.cancelled()).toBe(true);
  });

  test.each([
    ["no content-length", undefined],
    ["one over the limit", MAX + 1],
    ["not a number", "12a"],
  ])("%s: one read into max + 1 bytes", async (_n, declared) => {
    const r = readAtLeastRequest(5, declared);
    expect([...(await readBounded(r.req, MAX))]).toEqual([...bytes(5)]);
    expect(r.sizes()).toEqual([MAX + 1]);
  });
});

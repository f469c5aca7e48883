// src/glue.js's bounded body read, on streams workerd does not hand the Worker in the
// end-to-end tests: a reader without `readAtLeast` (node's BYOB reader), a stream that is
// not bytes, and `readAtLeast` answering in pieces. The Worker's own reads (workerd's
// `readAtLeast`) are covered by api.test.mjs and the bad-input table.
import { describe, expect, test } from "vitest";
import { readBounded } from "../../src/glue.js";

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

/** A request whose BYOB reader has workerd's `readAtLeast` over a body of `total` bytes. */
function readAtLeastRequest(total) {
  let sent = 0;
  let cancelled = false;
  const reader = {
    // Fills `view` up to `min` bytes, short only when the body ends (as workerd's does).
    async readAtLeast(min, view) {
      expect(min).toBe(view.byteLength);
      const n = Math.min(min, total - sent);
      view.set(bytes(n, sent));
      sent += n;
      return n === 0 ? { done: true, value: view.subarray(0, 0) } : { done: false, value: view.subarray(0, n) };
    },
    cancel: async () => {
      cancelled = true;
    },
  };
  return { req: { body: { getReader: ({ mode } = {}) => (mode === "byob" ? reader : null) } }, cancelled: () => cancelled };
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

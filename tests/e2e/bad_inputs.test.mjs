// The bad-input table (tests/fixtures/bad_inputs.json): every case gets its expected status,
// error code and field, and none gets a 5xx. The table and its checker
// (scripts/check-bad-inputs.mjs) are shared with the hardening work; this runs them in `make test`.
import { afterAll, beforeAll, expect, test } from "vitest";
import { bodyBytes, check } from "../../scripts/check-bad-inputs.mjs";
import { readJson, startWorker } from "./helpers.mjs";

const { cases } = readJson("tests/fixtures/bad_inputs.json");

// With the embedded model, `POST /v1/decide` is answered by the Worker's fast path (src/lib.rs
// `decide_fast`); with the Workers AI backend, by the async router. Both must answer every
// case of the table the same way, so the table runs against both.
// (The table's accepted bodies are decided by the stub model there: same status, other body.)
let w;
let router;
beforeAll(async () => {
  [w, router] = await Promise.all([
    startWorker(),
    startWorker({ vars: { DECISION_BACKEND: "workers-ai", AI_MODEL: "@cf/test/edge-decider" }, ai: true }),
  ]);
});
afterAll(() => Promise.all([w?.dispose(), router?.dispose()]));

const send = (worker, c) => {
  const headers = c.content_type === null ? {} : { "content-type": c.content_type };
  return worker.fetch(c.path, { method: c.method, headers, body: bodyBytes(c) });
};

test.each(cases.map((c) => [c.name, c]))("%s", async (_name, c) => {
  expect(await check(c, await send(w, c))).toEqual([]);
});

test.each(cases.map((c) => [c.name, c]))("router path (Workers AI backend): %s", async (_name, c) => {
  const [fast, slow] = await Promise.all([send(w, c), send(router, c)]);
  const [fastText, slowText] = await Promise.all([fast.clone().text(), slow.clone().text()]);
  expect(await check(c, slow)).toEqual([]);
  // Same status; an error has the same body, byte for byte (a decision differs by backend).
  expect(slow.status).toBe(fast.status);
  if (fast.status >= 400) expect(slowText).toBe(fastText);
});

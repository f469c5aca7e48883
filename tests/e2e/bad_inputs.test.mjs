// The bad-input table (tests/fixtures/bad_inputs.json): every case gets its expected status,
// error code and field, and none gets a 5xx. The table and its checker
// (scripts/check-bad-inputs.mjs) are shared with the hardening scripts; this runs them in `make test`.
import { afterAll, beforeAll, expect, test } from "vitest";
import { bodyBytes, check } from "../../scripts/check-bad-inputs.mjs";
import { readJson, startWorker } from "./helpers.mjs";

const { cases } = readJson("tests/fixtures/bad_inputs.json");

let w;
beforeAll(async () => {
  w = await startWorker();
});
afterAll(() => w?.dispose());

const send = (worker, c) => {
  const headers = c.content_type === null ? {} : { "content-type": c.content_type };
  return worker.fetch(c.path, { method: c.method, headers, body: bodyBytes(c) });
};

test.each(cases.map((c) => [c.name, c]))("%s", async (_name, c) => {
  expect(await check(c, await send(w, c))).toEqual([]);
});

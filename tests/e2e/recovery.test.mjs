// A wasm trap (what a panic compiles to) must not leave the Worker broken: the next request
// is answered by a fresh instance (workers-rs's recovery in the module worker-build emits),
// checked through POST /v1/debug/trap.
import { afterAll, beforeAll, expect, test } from "vitest";
import { EXAMPLE_STATE, startWorker } from "./helpers.mjs";

let w;
beforeAll(async () => {
  w = await startWorker({ vars: { DEBUG_ENDPOINTS: "true" } });
});
afterAll(() => w?.dispose());

test("the trap endpoint is off by default", async () => {
  const plain = await startWorker();
  try {
    const res = await plain.fetch("/v1/debug/trap", { method: "POST" });
    expect(res.status).toBe(404);
  } finally {
    await plain.dispose();
  }
});

test("after a trap the Worker answers again, from a fresh instance", async () => {
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

// Cold start: a fresh workerd started through Miniflare's Node API, to the first answered
// POST /v1/decide, for edge-decider, the empty workers-rs Worker, a second copy of it (the
// A/A control) and the empty Worker doing a decision's I/O (with BENCH_AGAINST, edge-decider
// at those commits too). Per round they start in turn (order rotating), each in a new workerd;
// `total_ms` runs from `new Miniflare` to the first answer (workerd start, wasm compile,
// isolate start, first request), `first_ms` is the first request alone, `second_ms` the next
// one. One unmeasured start first, so that this Node process loading Miniflare's code counts
// against nobody. The claims are ratios of the medians over rounds to the empty Worker's.
//
// usage: node bench/cold.mjs --out FILE [--rounds 11]
import { writeFileSync } from "node:fs";
import { AGAINST, WORKERS, arg, decideOnce, median, start } from "./lib.mjs";

const [out, ROUNDS] = [arg("out"), Number(arg("rounds", 11))];
if (!out) throw new Error("usage: node bench/cold.mjs --out FILE [--rounds N]");
const NAMES = ["ours", "floor", "floor_b", "floor_io", ...AGAINST];

await (await start("floor")).mf.dispose();
const times = Object.fromEntries(NAMES.map((n) => [n, { total_ms: [], first_ms: [], second_ms: [] }]));
for (let round = 0; round < ROUNDS; round++) {
  for (const n of NAMES.map((_, i) => NAMES[(i + round) % NAMES.length])) {
    const t0 = performance.now();
    const w = await start(n);
    times[n].first_ms.push(await decideOnce(w.url));
    times[n].total_ms.push(performance.now() - t0);
    times[n].second_ms.push(await decideOnce(w.url));
    await w.mf.dispose();
  }
  console.error(`[cold] round ${round + 1}/${ROUNDS}: ` + NAMES.map((n) => `${n} ${times[n].total_ms.at(-1).toFixed(0)} ms (first request ${times[n].first_ms.at(-1).toFixed(1)})`).join(" | "));
}
const summary = Object.fromEntries(NAMES.map((n) => [n, { label: WORKERS[n].label, ...Object.fromEntries(Object.entries(times[n]).map(([k, v]) => [k, median(v)])) }]));
const vs = (n) => ({ total_ms: summary[n].total_ms / summary.floor.total_ms, first_ms: summary[n].first_ms / summary.floor.first_ms });
writeFileSync(out, JSON.stringify({ rounds: ROUNDS, summary, vs_floor: Object.fromEntries(NAMES.filter((n) => n !== "floor").map((n) => [n, vs(n)])), detail: times }, null, 2) + "\n");

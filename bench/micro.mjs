// The whole decision in wasm, in V8: µs per decision of `State::from_body` + `request::decide` + the answer, on the shipped model
// (bench/wasm-micro, a plain wasm module) in this Node process, over 256 seeded bodies. Two
// untimed runs let V8 tier the code up, then RUNS timed runs of ITERS decisions; per run the
// wall time and this process's CPU time per decision. The claim is the median wall time;
// CPU time is beside it because on a shared machine wall time also counts waiting for a core.
//
// usage: node bench/micro.mjs --wasm PATH --out FILE [--runs 21] [--iters 20000]
import { readFileSync, writeFileSync } from "node:fs";
import { arg, median } from "./lib.mjs";

const [wasm, out, RUNS, ITERS] = [arg("wasm"), arg("out"), Number(arg("runs", 21)), Number(arg("iters", 20000))];
if (!wasm || !out) throw new Error("usage: node bench/micro.mjs --wasm PATH --out FILE [--runs N] [--iters N]");
const w = (await WebAssembly.instantiate(readFileSync(wasm), {})).instance.exports;
if (w.init() !== 0) throw new Error(`${wasm}: the shipped model or the default rules were refused`);

let checksum = w.bench_whole(ITERS) ^ w.bench_whole(ITERS);
const wall = [];
const cpu = [];
for (let r = 0; r < RUNS; r++) {
  const [c0, t0] = [process.cpuUsage(), performance.now()];
  checksum ^= w.bench_whole(ITERS);
  wall.push(((performance.now() - t0) * 1000) / ITERS);
  const c = process.cpuUsage(c0);
  cpu.push((c.user + c.system) / ITERS);
}
const stats = (xs) => ({ median: median(xs), min: Math.min(...xs), max: Math.max(...xs) });
const result = { runtime: `node ${process.version} (V8 ${process.versions.v8})`, runs: RUNS, iters_per_run: ITERS, wall_us: stats(wall), cpu_us: stats(cpu), checksum };
writeFileSync(out, JSON.stringify(result, null, 2) + "\n");
console.error(`[micro] median ${result.wall_us.median.toFixed(3)} µs wall, ${result.cpu_us.median.toFixed(3)} µs CPU per decision`);

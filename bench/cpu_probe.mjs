// Quick A/B of Worker builds by CPU per request: each Worker (or another build of one,
// `ours=DIR/index.js`) in its own workerd, loaded at a fixed rate round by
// round, in an order that rotates each round; prints the workerd CPU time per request
// (all threads) and p50/p99, medians over the rounds. `make bench` reports the same CPU
// measure for the three Workers. A `#` suffix starts another copy of a Worker
// (`js,js#2`: an A/A pair).
//
// usage: node bench/cpu_probe.mjs --loadtest PATH [--rate 400] [--duration 6s] [--rounds 5]
//          [--only ours,floor,js,js#2,ours=bench/.ab/base/index.js,floor=DIR/index.js] [--entry] [--fresh]
import path from "node:path";
import { ROOT, WORKERS, arg, loadtest, loadtestArg, measure, median, start } from "./workers.mjs";

const LOADTEST = loadtestArg("node bench/cpu_probe.mjs --loadtest PATH [--rate N] [--duration D] [--rounds N] [--only LIST] [--entry] [--fresh]");
const RATE = arg("rate", "400");
const DURATION = arg("duration", "6s");
const ROUNDS = Number(arg("rounds", "5"));
const names = arg("only", "ours,floor,js").split(",");
// --entry: through Miniflare's entry Worker (as `wrangler dev` serves) instead of each
// Worker's own socket (bench/workers.mjs `start`).
const ENTRY = process.argv.includes("--entry");
// --fresh: a new workerd for each Worker each round (loaded 2 s, unmeasured, first), so that
// what one process happens to get from the machine is not counted in every round.
const FRESH = process.argv.includes("--fresh");

const up = {};
for (const n of names) {
  const [name, script] = n.split("=");
  const kind = name.split("#")[0];
  const options = WORKERS[kind].options();
  if (script) options.scriptPath = path.resolve(ROOT, script);
  up[n] = { ...(await start(kind, n, options)), kind, options };
  await loadtest(LOADTEST, up[n].url, ["--rate", RATE, "--duration", "2s", "--warmup", "0s"]);
}
const res = Object.fromEntries(names.map((n) => [n, []]));
for (let r = 0; r < ROUNDS; r++) {
  // The order rotates each round, as in bench/side_by_side.mjs: a Worker's place in the
  // round (first after the others' load, or last) must not tell in its numbers.
  for (const n of names.map((_, i) => names[(i + r) % names.length])) {
    if (FRESH && r > 0) {
      await up[n].mf.dispose();
      const { kind, options } = up[n];
      up[n] = { ...(await start(kind, n, options)), kind, options };
      await loadtest(LOADTEST, up[n].url, ["--rate", RATE, "--duration", "2s", "--warmup", "0s"]);
    }
    const s = await measure(LOADTEST, up[n], ["--rate", RATE, "--duration", DURATION, "--warmup", "1s"], ENTRY ? up[n].entryUrl : up[n].url);
    res[n].push(s);
    console.error(`round ${r + 1} ${n}: cpu ${s.workerd_cpu_us?.toFixed(1)} µs/req p50 ${s.latency?.p50_us} p99 ${s.latency?.p99_us}`);
  }
}
for (const n of names) {
  const m = (f) => median(res[n].map(f));
  console.log(`${n}: workerd CPU ${m((s) => s.workerd_cpu_us)?.toFixed(1)} µs/req, p50 ${m((s) => s.latency?.p50_us)} µs, p99 ${m((s) => s.latency?.p99_us)} µs (medians of ${ROUNDS})`);
}
for (const n of names) await up[n].mf.dispose();

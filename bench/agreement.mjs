// Does `decider loadtest` measure what an independent generator measures? It and oha (pinned,
// `--latency-correction`: it too times each request from its scheduled send time) load the
// same edge-decider (workerd via Miniflare, the Worker's own socket) at once, RATE/s each, for
// DURATION s, over ROUNDS rounds; the medians of the per-round p50 and p99 ratios loadtest/oha
// are the claim. A/A control: in every round also two `decider loadtest` at once, the same
// way (their ratio, first/second); which pair runs first alternates by round.
//
// Same percentile on both sides: loadtest reports the nearest rank (the ⌈q·n⌉-th smallest);
// oha's own p99 is one rank higher whenever q·n is whole, and neighbouring ranks of a tail can
// be milliseconds apart here, so oha writes every request (CSV) and is ranked the same way.
//
// usage: node bench/agreement.mjs --decider PATH --oha PATH --out FILE
//   env: AGREE_RATE=200 AGREE_DURATION=8 AGREE_ROUNDS=7
import { writeFileSync } from "node:fs";
import { BODY_FILE, arg, decideOnce, loadtest, median, run, start } from "./lib.mjs";

const [DECIDER, OHA, out] = [arg("decider"), arg("oha"), arg("out")];
if (!DECIDER || !OHA || !out) throw new Error("usage: node bench/agreement.mjs --decider PATH --oha PATH --out FILE");
const [RATE, DURATION, ROUNDS] = [process.env.AGREE_RATE ?? 200, process.env.AGREE_DURATION ?? 8, process.env.AGREE_ROUNDS ?? 7].map(Number);

const w = await start("ours");
await decideOnce(w.url);
async function ours() {
  const [s] = await loadtest(DECIDER, [w.url], RATE, `${DURATION}s`, "0s");
  return { p50_ms: s.latency.p50_us / 1000, p99_ms: s.latency.p99_us / 1000, responses: s.responses };
}
// oha's CSV: a header, then per answered request: start, DNS, DNS+dialup, first byte, duration
// (s, from the scheduled time), bytes, status. Two runtime threads, as `decider loadtest` has.
async function oha() {
  const csv = await run(OHA, ["--no-tui", "--output-format", "csv", "-z", `${DURATION}s`, "-q", String(RATE), "--latency-correction",
    "-c", "32", "--worker-threads", "2", "-m", "POST", "-T", "application/json", "-D", BODY_FILE, w.url]);
  const rows = csv.trim().split("\n").slice(1).map((line) => line.split(","));
  const ms = rows.map((f) => Number(f[4]) * 1000).sort((a, b) => a - b);
  if (ms.length === 0 || !ms.every(Number.isFinite)) throw new Error(`oha wrote no usable rows (${rows.length})`);
  const rank = (q) => ms[Math.max(0, Math.ceil(q * ms.length) - 1)];
  return { p50_ms: rank(0.5), p99_ms: rank(0.99), responses: ms.length, non_200: rows.filter((f) => f[6] !== "200").length };
}

await Promise.all([ours(), oha()]); // warms the Worker and both generators; discarded
const rounds = [];
for (let i = 0; i < ROUNDS; i++) {
  const pair = () => Promise.all([ours(), oha()]);
  const aa = () => Promise.all([ours(), ours()]);
  let p, a;
  if (i % 2 === 0) [p, a] = [await pair(), await aa()];
  else [a, p] = [await aa(), await pair()];
  const [lt, oh] = p;
  rounds.push({ loadtest: lt, oha: oh, aa: a });
  console.error(`[agreement] round ${i + 1}/${ROUNDS}: p99 loadtest ${lt.p99_ms} oha ${oh.p99_ms.toFixed(3)} | A/A ${a[0].p99_ms} ${a[1].p99_ms} ms`);
}
await w.mf.dispose();

const ratio = (f) => median(rounds.map(f));
const medians = (k) => ({ p50: median(rounds.map((r) => r[k].p50_ms)), p99: median(rounds.map((r) => r[k].p99_ms)) });
writeFileSync(out, JSON.stringify({
  rate: RATE, duration_s: DURATION, rounds: ROUNDS, oha_version: (await run(OHA, ["--version"])).trim(),
  p50_ratio: ratio((r) => r.loadtest.p50_ms / r.oha.p50_ms),
  p99_ratio: ratio((r) => r.loadtest.p99_ms / r.oha.p99_ms),
  aa_p50_ratio: ratio((r) => r.aa[0].p50_ms / r.aa[1].p50_ms),
  aa_p99_ratio: ratio((r) => r.aa[0].p99_ms / r.aa[1].p99_ms),
  medians_ms: { loadtest: medians("loadtest"), oha: medians("oha") },
  rounds_detail: rounds,
}, null, 2) + "\n");

// Renders docs/reports/BENCHMARKS.md from the result files of one `make bench` run (bench/results/*.json):
// the judged headline, what each row measures, the tables, the machine and the commands.
// Every number on the page is read from those files; none is typed in.
//
// usage: node bench/render.mjs --results bench/results --out docs/reports/BENCHMARKS.md
import { existsSync, readFileSync, writeFileSync } from "node:fs";
import path from "node:path";
import { arg } from "./lib.mjs";

const dir = arg("results", "bench/results");
const read = (f) => (existsSync(path.join(dir, f)) ? JSON.parse(readFileSync(path.join(dir, f), "utf8")) : null);
const [machine, micro, inturn, cold, agree, report, sizes, knee] = ["machine", "micro", "inturn", "cold", "agreement", "report", "sizes", "knee"].map((n) => read(`${n}.json`));

const num = (v, d = 3) => (typeof v === "number" && Number.isFinite(v) ? v.toFixed(d) : "–");
const int = (v) => (typeof v === "number" ? v.toLocaleString("en-US") : "?");
const ms = (us) => num(us / 1000);
/**
 * met / not met against `target` ({min, max}); "within noise" when the value lies nearer to
 * the target's edge than the A/A control `aa` lies to 1, on either side.
 */
function judge(v, { min = -Infinity, max = Infinity }, aa) {
  if (typeof v !== "number" || !Number.isFinite(v)) return "not measured";
  const inside = v >= min && v <= max;
  const dist = inside ? Math.min(v - min, max - v) : Math.max(min - v, v - max);
  if (typeof aa === "number" && dist < Math.abs(aa - 1)) return "**within noise**";
  return inside ? "**met**" : "**not met**";
}

const lines = [];
const p = (s = "") => lines.push(s);
const row = (...cells) => p(`| ${cells.join(" | ")} |`);
const table = (...head) => (row(...head), row(...head.map(() => "---")));

p("# Benchmarks");
p();
p(`> \`make bench\` on ${machine?.date}, commit \`${machine?.commit}\`${machine?.dirty ? " plus uncommitted changes to the measured code" : ""}, ${Math.round(machine?.total_s / 60)} min. ` +
  "Every number below is read from that run's files in `bench/results/` by `bench/render.mjs`.");
if (machine?.quick) p("> **BENCH_QUICK=1: a short pipeline check; these numbers are not claims.**");
const busy = [machine?.load_start, machine?.load_end].some((l) => Number(l?.split(" ")[0]) > machine?.nproc);
if (busy) p(`> The machine was busy (1-minute load average above its ${machine.nproc} cores at the start or end of the run): latencies and absolute times are noisy; the ratios compare Workers measured side by side.`);
p();
p("## Headline");
p();
table("claim", "measured", "A/A control", "target", "verdict");
row("whole decision in wasm (V8), median CPU µs per decision", `${num(micro?.cpu_us.median, 2)} µs (wall ${num(micro?.wall_us.median, 2)} µs)`, "–", "≤ 5 µs", judge(micro?.cpu_us.median, { max: 5 }));
// Every headline ratio is edge-decider over the control doing the same I/O ("a decision's I/O
// alone"); its A/A band is how far two identical empty Workers land apart in the same run.
const cpu = inturn?.vs_io?.cpu_us.median;
const cpuAA = inturn?.vs_floor.floor_b.cpu_us.median;
row(`workerd CPU per request at ${inturn?.rate}/s, edge-decider / a decision's I/O alone, median of ${inturn?.rounds} per-round ratios`,
  `${num(cpu)} (${num(inturn?.summary.ours.cpu_us, 0)} / ${num(inturn?.summary.floor_io?.cpu_us, 0)} µs); over the empty Worker ${num(inturn?.vs_floor.ours.cpu_us.median)}`, num(cpuAA), "≤ 1.15", judge(cpu, { max: 1.15 }, cpuAA));
const counters = inturn?.counters_vs_off?.cpu_us.median;
row(`workerd CPU per request at ${inturn?.rate}/s, rollout counters on / off (the same build with and without the ROLLOUT object), median of ${inturn?.rounds} per-round ratios`,
  `${num(counters)} (${num(inturn?.summary.ours_counters?.cpu_us, 0)} / ${num(inturn?.summary.ours.cpu_us, 0)} µs)`, num(cpuAA), "≤ 1.05", judge(counters, { max: 1.05 }, cpuAA));
for (const [k, what, max] of [["total_ms", "fresh workerd → first answered POST /v1/decide", 1.19], ["first_ms", "first request after start-up", 1.5]]) {
  const s = cold?.summary;
  const v = s ? s.ours[k] / s.floor_io[k] : undefined;
  const aa = cold?.vs_floor.floor_b[k];
  row(`cold start, ${what}, edge-decider / a decision's I/O alone, medians of ${cold?.rounds} rounds`, `${num(v)} (${num(s?.ours[k], 1)} / ${num(s?.floor_io[k], 1)} ms); over the empty Worker ${num(cold?.vs_floor.ours[k])}`,
    num(aa), `≤ ${max.toFixed(2)}`, judge(v, { max }, aa));
}
const kb = (b) => `${num(b / 1000, 1)} KB`;
row("wasm size, raw and gzip -9 (1 KB = 1,000 bytes)", sizes ? `edge-decider (serving) ${kb(sizes.ours.raw)} raw, **${kb(sizes.ours.gzip9)} gzip**; empty Worker ${kb(sizes.floor.raw)} raw, ${kb(sizes.floor.gzip9)} gzip${sizes.control_plane ? `; the control plane (workers/rollout, not loaded by routing isolates) ${kb(sizes.control_plane.raw)} raw, ${kb(sizes.control_plane.gzip9)} gzip` : ""}` : "–",
  "–", "≤ 250 KB gzip", judge(sizes?.ours.gzip9 / 1000, { max: 250 }));
if (sizes?.priors_model) {
  const grow = (sizes.ours.gzip9 - sizes.priors_model.gzip9) / 1000;
  row("wasm growth of the network-base model over the same recipe's trees alone (`--base priors`), gzip -9", `${grow >= 0 ? "+" : ""}${num(grow, 1)} KB (${kb(sizes.ours.gzip9)} vs ${kb(sizes.priors_model.gzip9)})`, "–", "≤ +10 KB", judge(grow, { max: 10 }));
}
for (const q of ["p50", "p99"]) {
  const [v, aa] = [agree?.[`${q}_ratio`], agree?.[`aa_${q}_ratio`]];
  row(`\`decider loadtest\` / oha, ${q} at ${agree?.rate}/s, both at once, median of ${agree?.rounds} per-round ratios`, num(v), num(aa), "0.90 – 1.10", judge(v, { min: 0.9, max: 1.1 }, aa));
}
if (knee) {
  const at = (r) => knee.steps.find((x) => x.rate === r);
  row(`the control plane's knee: flush batches/s (${knee.outcomes_per_batch} caller outcomes each) before its p99 passes ${knee.factor}× the first step's (${num(knee.base_p99_ms, 1)} ms), two steps in a row`,
    knee.knee_rps === null ? `not reached by ${knee.steps.at(-1).rate}/s` : `${knee.knee_rps}/s (last under it ${knee.last_good_rps}/s: p50 ${num(at(knee.last_good_rps)?.p50_ms, 1)} ms, p99 ${num(at(knee.last_good_rps)?.p99_ms, 1)} ms)`,
    "–", "measured", "–");
}
for (const [k, what, unit, max] of [["wall_s", "wall time", "s", 10], ["max_rss_mb", "peak RSS (1 MB = 10⁶ bytes)", "MB", 200]]) {
  const verdict = report?.not_measured ? "not measured" : report?.lines === 1e6 ? judge(report?.[k], { max }) : `not judged (${int(report?.lines)} lines)`;
  row(`\`decider report\` on ${int(report?.lines)} log lines, ${what}`, report?.not_measured ? `not measured: ${report.not_measured}` : `${num(report?.[k], 2)} ${unit}`, "–", `≤ ${max} ${unit}`, verdict);
}
const againstNames = Object.keys(inturn?.against ?? {});
if (againstNames.length) {
  // BENCH_AGAINST: this build against edge-decider built at other commits, in the same rounds.
  const cs = cold?.summary;
  const io = (n, k) => (cs?.[n] && cs?.floor_io ? cs[n][k] / cs.floor_io[k] : undefined);
  const sha = (n) => n.replace(/^at_/, "");
  // A BENCH_AGAINST commit that is this run's own: a second build of the same code, an A/A
  // of edge-decider itself.
  const again = (n) => machine?.commit && sha(n) === machine.commit;
  const gz = (n) => (n === "ours" ? sizes?.ours.gzip9 : sizes?.against?.[sha(n)]?.gzip9);
  p();
  p(`### Against earlier commits (\`BENCH_AGAINST\`), in the same rounds`);
  p();
  table("Worker", "CPU / a decision's I/O alone", "cold start / I/O alone", "first request / I/O alone", "wasm gzip");
  for (const n of ["ours", ...againstNames]) {
    const cpuIo = n === "ours" ? inturn.vs_io.cpu_us.median : inturn.against[n].vs_io.median;
    row(n === "ours" ? `edge-decider at ${machine?.commit}, this run's build` : again(n) ? `${inturn.summary[n].label}, built again from its tree` : inturn.summary[n].label,
      num(cpuIo), num(io(n, "total_ms")), num(io(n, "first_ms")), gz(n) ? kb(gz(n)) : "–");
  }
  p();
  const aa = { cpu: cpuAA, total: cold?.vs_floor.floor_b.total_ms, first: cold?.vs_floor.floor_b.first_ms };
  // Same as the other within the A/A band, or worse / better by more than it.
  const verdict = (v, band) => (typeof v !== "number" || typeof band !== "number" ? "–" : Math.abs(v - 1) <= Math.abs(band - 1) ? "within the A/A band" : v > 1 ? "**worse**" : "**better**");
  table(`edge-decider at ${machine?.commit} / the other`, "CPU (median of per-round ratios)", "cold start", "first request", "wasm gzip");
  for (const n of againstNames) {
    const [c, t, f] = [inturn.against[n].ours_vs.median, cs?.ours.total_ms / cs?.[n]?.total_ms, cs?.ours.first_ms / cs?.[n]?.first_ms];
    row(again(n) ? `/ ${sha(n)} (the same code: A/A)` : `/ ${sha(n)}`, `${num(c)} [A/A ${num(aa.cpu)}]: ${verdict(c, aa.cpu)}`, `${num(t)} [A/A ${num(aa.total)}]: ${verdict(t, aa.total)}`,
      `${num(f)} [A/A ${num(aa.first)}]: ${verdict(f, aa.first)}`, gz(n) ? `${(gz("ours") - gz(n)) >= 0 ? "+" : ""}${num((gz("ours") - gz(n)) / 1000, 1)} KB` : "–");
  }
}
p();
p("**within noise**: the ratio lies nearer to its target's edge than its A/A control (the same measurement of two identical " +
  "empty Workers, or of two identical generators) lies to 1, so this run cannot tell on which side it is. Latencies (p50, p99) are in the tables, not judged.");
p();
p("## What each row measures");
p();
p(`- **Whole decision in wasm**: body text → \`State::from_body\` → \`decider_core::request::decide\` (the composition the Worker calls) → the answer's JSON (what \`/v1/decide\` computes between reading the body and writing the response), through the \`Decider\` the Worker builds from the shipped model and default rules, compiled to a plain wasm module (\`bench/wasm-micro\`) and run in Node's V8 on 256 seeded bodies: ${micro?.runs} runs of ${int(micro?.iters_per_run)} decisions after two untimed ones. Judged on this process's CPU time per decision (wall time also counts waiting for a core on a shared machine).`);
p(`- **workerd CPU per request**: edge-decider (as built, and the same build with the \`ROLLOUT\` Durable Object bound: its live rollout counters on, flushed through \`waitUntil\`), the empty workers-rs Worker (\`bench/floor-worker\`: reads the body, answers a constant JSON) and a second copy of it (A/A), and the empty Worker doing a decision's I/O, each round in new workerd processes on their own sockets (no Miniflare entry Worker in front): ${inturn?.prewarm} unmeasured at ${inturn?.prewarm_rate}/s each, then ${inturn?.duration} at ${inturn?.rate}/s each, all of them (with \`BENCH_AGAINST\`, edge-decider at those commits too) loaded in turn by one \`decider loadtest\`. CPU = the workerd process's CPU time (its threads' /proc schedstat) / requests answered, edge-decider's one log line per decision included; per-round ratios (to the control doing the same I/O, to the empty Worker, counters on to off), medians over rounds. The control "a decision's I/O alone", is the empty Worker built with its \`record-io\` feature: it reads the four request headers edge-decider reads and the body, draws a \`decision_id\` from \`crypto.randomUUID()\`, logs a constant record as long as edge-decider's for this state and answers edge-decider's body with its six headers; no parsing, no decision. Between it and the empty Worker lies what the runtime charges for the I/O a recorded decision needs; between it and edge-decider, edge-decider's own code.`);
p("- **Cold start**: `new Miniflare(…)` starting a fresh workerd with the Worker, to the answer of the first `POST /v1/decide`; and that first request's latency alone. edge-decider (counters off), the three empty Workers of the CPU row and the builds of `BENCH_AGAINST` start in turn, order rotating each round; the ratio of the medians. The total grows with the wasm's bytes whatever they hold, not only with its code: Miniflare serialises the configuration, modules included, into one Cap'n Proto buffer that it grows 4 KB at a time, copying it each time (a module of 770 KB of data and no function started about as slowly as edge-decider's 772 KB, 131 vs 130 ms, an empty module 108 ms). The first request's excess is mostly V8 compiling, on first call, each wasm function the request runs. Compiling it at start-up instead does not carry over: between start-up and the first request V8 drops the baseline (Liftoff) code on a memory-pressure signal (its `--flush-liftoff-code`, on by default), so a decision run at start-up had its functions compiled again by the first request (268 functions with or without that warm-up; 129 with the flag off).");
p("- **wasm size**: `build/index_bg.wasm` (uploaded with `build/index.js` by `wrangler deploy`) and the empty Worker's, raw and `gzip -9` bytes; and the same Worker built around the model `model/regenerate.sh`'s recipe trains with `--base priors` (trees alone), for what the network base adds.");
p(`- **\`decider loadtest\` / oha**: both load the same edge-decider at once, ${agree?.rate}/s each for ${agree?.duration_s} s per round; ${agree?.oha_version} with \`--latency-correction\`, its percentiles taken from its per-request CSV by nearest rank as \`decider loadtest\` takes them. A/A: two \`decider loadtest\` at once, every round.`);
p("- **The control plane's knee**: `bench/knee.mjs`: the control plane (`workers/rollout/build`) in workerd beside a driver Worker bound to its object; each request to the driver builds one flush batch as a busy isolate sends it (the nine rows of every arm and source, and caller outcomes with fresh decision ids: the SQLite insert path) and posts it to the object's `/flush`; `decider loadtest` ramps the rate. One object takes every isolate's flushes, so the knee over the flushes one isolate sends a second is the fleet one control plane serves (docs/rollout.md).");
p(`- **\`decider report\`**: \`/usr/bin/time -v decider report --logs FILE --json\` on a generated log${report?.generator ? ` (${report.generator}, ${num(report.file_bytes / 1e6, 0)} MB)` : ""}: elapsed wall time and maximum resident set size.`);
p();
p("## Tables");
p();
if (inturn) {
  p(`### workerd at ${inturn.rate}/s each, loaded in turn: medians over ${inturn.rounds} rounds`);
  p();
  table("Worker", "CPU µs/req (schedstat)", "CPU µs/req (/proc stat)", "p50 ms", "p99 ms", "p99 range ms", "CPU / empty", "p50 / empty", "p99 / empty", "errors", "x-decision-source");
  for (const [n, s] of Object.entries(inturn.summary)) {
    const r = inturn.vs_floor[n];
    row(s.label, num(s.cpu_us, 0), num(s.cpu_stat_us, 0), ms(s.p50_us), ms(s.p99_us), `${ms(s.p99_us_range[0])} – ${ms(s.p99_us_range[1])}`,
      num(r?.cpu_us.median), num(r?.p50_us.median), num(r?.p99_us.median), int(s.errors), Object.entries(s.sources).map(([k, v]) => `${k} ${v}`).join(", "));
  }
  p();
  if (inturn.vs_io) p(`Per-round CPU ratios: edge-decider / a decision's I/O alone ${inturn.vs_io.cpu_us.per_round.map((x) => num(x)).join(", ")}; counters on / off ${inturn.counters_vs_off.cpu_us.per_round.map((x) => num(x)).join(", ")}.`);
  p(`Per-round CPU ratios to the empty Worker: edge-decider ${inturn.vs_floor.ours.cpu_us.per_round.map((x) => num(x)).join(", ")}; A/A ${inturn.vs_floor.floor_b.cpu_us.per_round.map((x) => num(x)).join(", ")}` +
    (inturn.vs_floor.floor_io ? `; a decision's I/O alone ${inturn.vs_floor.floor_io.cpu_us.per_round.map((x) => num(x)).join(", ")}` : "") + ". " +
    "Latency runs from each request's scheduled send time to the end of its response (open loop); the A/A row's ratios are the noise band of edge-decider's.");
  p();
}
if (cold) {
  p(`### Cold start: medians over ${cold.rounds} rounds`);
  p();
  table("Worker", "new Miniflare → first answer ms", "first request ms", "second request ms", "total / empty", "first request / empty");
  for (const [n, s] of Object.entries(cold.summary)) row(s.label, num(s.total_ms, 1), num(s.first_ms, 1), num(s.second_ms, 1), num(cold.vs_floor[n]?.total_ms), num(cold.vs_floor[n]?.first_ms));
  p();
}
if (agree) {
  p(`### \`decider loadtest\` and oha at ${agree.rate}/s: medians over ${agree.rounds} rounds`);
  p();
  table("generator", "p50 ms", "p99 ms");
  row("`decider loadtest`", num(agree.medians_ms.loadtest.p50), num(agree.medians_ms.loadtest.p99));
  row(agree.oha_version, num(agree.medians_ms.oha.p50), num(agree.medians_ms.oha.p99));
  p();
  p(`Per-round p99 ratios: ${agree.rounds_detail.map((r) => num(r.loadtest.p99_ms / r.oha.p99_ms)).join(", ")}; A/A ${agree.rounds_detail.map((r) => num(r.aa[0].p99_ms / r.aa[1].p99_ms)).join(", ")}.`);
  p();
}
if (micro) p(`The decision in V8, ${micro.runtime.replace(/ \(/, ", ").replace(/\)$/, "")}, per run: CPU ${num(micro.cpu_us.min, 2)} – ${num(micro.cpu_us.max, 2)} µs, wall ${num(micro.wall_us.min, 2)} – ${num(micro.wall_us.max, 2)} µs per decision. Stage by stage, natively: \`cargo bench -p decider-core --bench decision\`.`);
p();
const value = read("value.json");
if (value?.results?.length && value.summary) {
  // `make value`: its own run (not `make bench`'s), policies learned from logs scored by true
  // value; the figures across seeds are bench/value_peers.py's summary, as in VALUE.md.
  const rs = value.results;
  const { mean, margin_pt: margin, covered, train_s: train } = value.summary;
  const signed = (v) => (v < 0 ? "−" : "+") + num(Math.abs(v), 2);
  p("## Learning from logs (`make value`)");
  p();
  p(`From its own run (\`bench/results/value.json\`; per seed: [VALUE.md](VALUE.md); method: [docs/learning.md](../learning.md)): ` +
    `on the three-origin world, policies trained on week 1's logs (${int(value.decisions)} decisions) and scored by true value on week 2, seeds ${rs[0].seed}–${rs[rs.length - 1].seed}. ` +
    `Mean true value: the logger ${num(mean.logger, 4)}, \`decider train --logs\` ${num(mean.decider, 4)}, a LightGBM direct method ${num(mean.lightgbm_dm, 4)}, OBP's IPW learner ${num(mean.obp_ipw, 4)}, the oracle ${num(mean.oracle, 4)}. ` +
    `decider − the best peer: ${signed(margin.mean)} points on average, ${signed(margin.min)} to ${signed(margin.max)} per seed. ` +
    `\`decider ope\` on week 2's logs: the truth inside DR's 95% interval on ${covered.dr} of ${rs.length} seeds. Training ${num(train[0], 1)}–${num(train[1], 1)} s per seed.`);
  p();
}
p("## Machine and commands");
p();
if (machine) {
  p(`${machine.cpu} × ${machine.nproc}, ${machine.mem}, ${machine.kernel}; load average (1, 5, 15 min) ${machine.load_start} at the start, ${machine.load_end} at the end. ` +
    `${machine.rustc}; node ${machine.node}; wrangler ${machine.wrangler}; miniflare ${machine.miniflare} (workerd ${machine.workerd}). ` +
    `Seconds per step: ${Object.entries(machine.steps_s).map(([k, v]) => `${k} ${v}`).join(", ")}.`);
  p();
}
p("```");
p((againstNames.length ? `BENCH_AGAINST="${againstNames.map((n) => n.replace(/^at_/, "")).join(" ")}" ` : "") + "make bench                 # = bash bench/run.sh: builds, the steps below, then this page (BENCH_QUICK=1: a short check)");
for (const c of ["micro.mjs --wasm target/bench-wasm-micro/wasm32-unknown-unknown/release/decider_wasm_micro.wasm --out bench/results/micro.json",
  "inturn.mjs --decider target/release/decider --out bench/results/inturn.json", "cold.mjs --out bench/results/cold.json",
  "agreement.mjs --decider target/release/decider --oha .tools/bin/oha --out bench/results/agreement.json",
  "report_cli.mjs --decider target/release/decider --out bench/results/report.json", "render.mjs --results bench/results --out docs/reports/BENCHMARKS.md"]) p(`node bench/${c}`);
p("```");
writeFileSync(arg("out", "docs/reports/BENCHMARKS.md"), lines.join("\n") + "\n");

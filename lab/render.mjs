// Renders docs/reports/LAB.md from lab/results/*.json (nothing in it is written by hand but the prose).
import { existsSync, readFileSync, writeFileSync } from "node:fs";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { TRUTH_MD } from "./truth.mjs";

const LAB = path.dirname(fileURLToPath(import.meta.url));
const load = (name) => {
  const p = path.join(LAB, "results", name);
  return existsSync(p) ? JSON.parse(readFileSync(p, "utf8")) : null;
};
const f = (x, d = 4) => (x == null ? "—" : Number(x).toFixed(d));
const pct = (x) => (x == null ? "—" : `${(100 * x).toFixed(1)}%`);
const ci = (g) => (g?.ci95 ? `[${f(g.ci95[0])}, ${f(g.ci95[1])}]` : "—");
const mark = (m) => `- ${m.pass ? "**pass**" : "**FAIL**"} — ${m.name}: ${m.detail}`;

function groupTable(title, groups) {
  const rows = Object.entries(groups ?? {}).map(
    ([k, g]) => `| ${k} | ${g.n} | ${g.with_outcome} | ${g.successes} | ${f(g.success_rate)} | ${ci(g)} | ${g.latency_ms?.p50 ?? "—"} |`,
  );
  return [`| ${title} | n | with outcome | successes | success | 95% interval | p50 ms |`, "|---|---|---|---|---|---|---|", ...rows].join("\n");
}

function sectionA(a) {
  if (!a) return "Scenario A has not run yet (`make lab`).";
  const t = a.truth;
  return `Run: ${a.requests} requests, seed ${a.seed}, ${a.seconds} s, UTC hour(s) ${a.hours.join(", ")};
\`${Object.entries(a.vars).map(([k, v]) => `${k}=${v}`).join(" ")}\`, \`FAILOVER={}\`. Champion \`${a.champion_version}\`
(the shipped model); challenger \`${a.challenger_version}\`, trained by \`decider train\` on
\`decider simulate ${a.challenger_training.simulate}\` with the labels of request types
${a.challenger_training.rotated_types.join(", ")} rotated ${a.challenger_training.rotate_steps} clusters on
(${a.challenger_training.rotated} of ${a.challenger_training.rows} rows).

**Verdict of \`decider report\`:** ${a.report.verdict}

${a.report.verdicts.map((v) => `- \`${v.kind}\` → *${v.action}*: ${v.text}`).join("\n")}

${groupTable("arm", a.report.by_arm)}

${groupTable("model version", a.report.by_model_version)}

Per origin, the report against the origins' own counters:

| origin | report: with outcome | origin: requests | report: successes | origin: answered 200 |
|---|---|---|---|---|
${a.origin_counts.map((o) => `| ${o.origin} | ${o.report_with_outcome} | ${o.lab_requests} | ${o.report_successes} | ${o.lab_successes} |`).join("\n")}

Ground truth (mean success probability of the choices, from the ground-truth table with the
states the Worker logged; the model's and the rules' choices by \`decider decide\` with the
shipped model, natively, and with \`--threshold 1\` for rules only):

| states | n | logged actions | model's choices | rules' choices | model − rules |
|---|---|---|---|---|---|
${["champion", "challenger", "holdout"].map((k) => `| ${k} arm | ${t.arms[k].n} | ${f(t.arms[k].true_value_of_logged_actions)} | ${f(t.arms[k].true_value_model)} | ${f(t.arms[k].true_value_rules)} | ${f(t.arms[k].true_value_model - t.arms[k].true_value_rules)} |`).join("\n")}
| all | ${t.all.n} | | ${f(t.all.true_value_model)} | ${f(t.all.true_value_rules)} | ${f(t.all.true_value_model - t.all.true_value_rules)} |

Replay across the day: the same requests, arms and outcome draws, decided natively as if the
run had happened at each UTC hour (the model's spill thresholds move in hours 14–20; the ground
truth does not move):

| UTC hour | champion | challenger | holdout | measured model − rules | true model − rules |
|---|---|---|---|---|---|
${(a.hour_replay ?? []).map((r) => `| ${r.hour} | ${f(r.champion)} | ${f(r.challenger)} | ${f(r.holdout)} | ${f(r.measured_gap)} | ${f(r.true_gap)} |`).join("\n")}

Must show:

${a.must_show.map(mark).join("\n")}`;
}

function sectionB(b) {
  if (!b) return "Scenario B has not run yet (`make lab`).";
  if (b.status !== "ran") return `Not run: **${b.status}** (missing: ${b.missing.join(", ")}).\n\n${b.must_show.map(mark).join("\n")}`;
  const o = b.ope_candidate;
  const os = b.ope_shipped;
  const row = (name, e, t) => `| ${name} | ${e.n ?? "—"} | ${f(e.logged_value?.value ?? e.logged_value)} | ${f(e.ips?.value ?? e.ips)} | ${f(e.snips?.value ?? e.snips)} | ${f(e.dr?.value)} | [${f(e.dr?.ci95?.[0])}, ${f(e.dr?.ci95?.[1])}] | ${f(e.ess, 1)} | ${f(t)} |`;
  return `Run: ${b.requests_per_phase} requests per phase, ${b.seconds} s in all.

1. **Exploration** (seed ${b.explore.seed}): the shipped model \`${b.champion_version}\` with
   \`EXPLORE_PERCENT=20\`; ${b.explore.explored} decisions explored.
2. **Learning**: \`decider train --logs\` on those logs → candidate \`${b.candidate_version}\`;
   \`decider ope\` on the same logs (in sample) and on a newer exploration run of the shipped
   model (seed ${b.ope_candidate_newer_logs.seed}, ${b.ope_candidate_newer_logs.requests} requests) that the candidate was not trained on.
   The must-show reads the second, as \`decider train --logs\` advises: the candidate's labels
   were chosen by a reward model fitted on the training logs, so an estimate on those same logs
   can be optimistic. The last column is the ground truth's value of the policy's choices on
   the states of those logs, i.e. what each estimate tries to estimate.

| policy, logs | n | logged value | IPS | SNIPS | DR | DR 95% interval | ESS | true value on these states |
|---|---|---|---|---|---|---|---|---|
${row(`candidate ${b.candidate_version}, training logs (in sample)`, o, b.truth.explore.candidate)}
${row(`shipped ${b.champion_version}, training logs`, os, b.truth.explore.shipped)}
${row(`candidate, newer logs`, b.ope_candidate_newer_logs, b.truth.explore_newer.candidate)}
${[...(o.warnings ?? [])].map((w) => `\n- warning (training logs): ${w}`).join("")}

3. **Serving** (fresh traffic, seed ${b.serve.seed}): the candidate as the challenger,
   \`${Object.entries(b.serve.vars).map(([k, v]) => `${k}=${v}`).join(" ")}\`. The out-of-distribution check is off
   here, and every estimate above is made with \`--no-ood\` to match: a candidate learned from one
   run's logs knows a single UTC hour, so served an hour later the check would send all of its
   decisions to the rules, although nothing in the lab depends on the hour.

${groupTable("arm", b.serve.by_arm)}

**Verdict of \`decider report\`:** ${b.serve.verdict}

Ground truth of the fresh traffic's states: the shipped model's choices are worth ${f(b.truth.serve.shipped)},
the candidate's ${f(b.truth.serve.candidate)}. The stream and the outcomes are seeded; the exploration
draws are not (the Worker derives each from its decision's random id), so the candidate differs
from run to run.

Must show:

${b.must_show.map(mark).join("\n")}`;
}

export function render() {
  const a = load("scenario-a.json");
  const b = load("scenario-b.json");
  const md = `# The traffic lab

\`make lab\` runs the built Worker in workerd (Miniflare, as the end-to-end tests do) against
three loopback origins whose answers follow a ground truth of the lab's own, pushes signal
snapshots through \`PUT /v1/admin/signals\` between batches of requests, writes the Worker's raw
log, and reads it with \`decider report\`. Everything below is rendered from
\`lab/results/*.json\` by \`lab/render.mjs\`; the scripts are in \`lab/\`.

## The ground truth

${TRUTH_MD}

## The traffic

Each scenario sends a seeded stream: batches of 40 requests, each batch under one signal
snapshot (half the snapshots with load uniform over 0.20–0.97, half over 0.62–0.86; recent
success rate 0.96–0.995, or 0.40–0.90 in 12%; queue depth from the load, 4% surges of 100–250).
The snapshots' draws are stratified, so streams of different seeds share their mix of signals
and a policy is worth about the same on each (scenario B's tables give the true values per
stream).
Request types come from the path and method (the shipped \`REQUEST_TYPES\`) in the simulator's
daytime mix, regions from \`cf.country\` (one country per region), the hour is the UTC hour of
the run. Every request has its own routing key (\`CANARY_KEY=header:x-lab-user\`), so arms are
assigned independently of the state. \`FAILOVER={}\`: a failed origin is not retried, so each
request's outcome is the one origin's answer. Success in \`decider report\` is the status
(below 500), a rejected request counts as a failure; no latency SLO.

## Scenario A: champion, challenger and holdout

${sectionA(a)}

## Scenario B: the learning loop

${sectionB(b)}
`;
  writeFileSync(path.join(LAB, "..", "docs", "reports", "LAB.md"), md);
}

if (import.meta.url === `file://${process.argv[1]}`) render();

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

const int = (x) => (x == null ? "—" : Number(x).toLocaleString("en-US"));
const seq = (lo, hi) => `[${lo >= 0 ? "+" : ""}${f(lo)}, ${hi >= 0 ? "+" : ""}${f(hi)}]`;

/** The judge's evidence: the two-sample e-values (better, worse) against the bar 2/α, or the
 * union judge's sequence of the difference. */
const test = (s) =>
  s.judge === "two_sample" && s.evidence
    ? `e ${Math.exp(s.evidence[0]).toPrecision(3)} / ${Math.exp(s.evidence[1]).toPrecision(3)} (bar ${(2 / s.alpha).toFixed(0)}, share ${f(s.allocation)})`
    : `sequence ${seq(s.lo, s.hi)}`;

/** One rollout of scenario C: its changes, its looks, the traffic after it, the report. */
function rolloutPart(r, title) {
  const rows = r.changes.map((c) => {
    const s = c.statistics;
    return `| ${c.from}% → ${c.to}% | ${c.why} | ${int(c.requests)} | ${int(c.requests_total)} | ${s.treatment.n} | ${f(s.treatment.mean)} | ${s.baseline.n} | ${f(s.baseline.mean)} | ${test(s)} | ${f(s.alpha)} |`;
  });
  return `**${title}.** Champion \`${r.champion_version}\`, challenger \`${r.challenger_version}\`; traffic seed
${r.seed}, a look after every ${int(r.chunk)} requests (at most ${int(r.cap)}), ${r.seconds} s. The judge decided after
**${int(r.requests)} requests** (${r.looks.length} looks): phase \`${r.final.phase}\`, setting ${r.final.setting}${r.final.effective_champion ? `, effective champion \`${r.final.effective_champion}\`` : ""}.

| change | why | requests in the step | requests in all | challenger outcomes | challenger mean | champion outcomes | champion mean | the test | α of the step |
|---|---|---|---|---|---|---|---|---|---|
${rows.join("\n")}

The setting after each look (requests sent → share): ${r.looks.map((l) => `${int(l.requests)} → ${l.setting}`).join(", ")}.

After the last change (and 1.1 s for the isolate to read it): ${int(r.after.requests)} more requests, decided by
${Object.entries(r.after.served_by).map(([k, v]) => `${k.replace(/^(\S+) (.*)$/, "the $1 arm with `$2`")}: ${int(v)}`).join("; ")}.

\`decider report\` on the Worker's raw log: *${r.report.rollout?.action}* — ${r.report.rollout?.text}

Ground truth of the ${int(r.truth.states)} requests' states (the states the Worker logged, each model's choice by
\`decider decide\`): the challenger's choices are worth ${f(r.truth.challenger)}, the champion's ${f(r.truth.champion)}.`;
}

function sectionC(c, a) {
  if (!c) return "Scenario C has not run yet (`LAB_ONLY=c node lab/run.mjs`).";
  const aa = c.aa;
  const aaRows = aa.runs.map((r) => `| ${r.seed} | ${int(r.requests)} | ${r.looks} | ${r.changes.length ? r.changes.map((x) => `${x.from} → ${x.to} (${x.why})`).join(", ") : "none"} | ${r.final_phase} | ${r.final_setting} | ${r.last_look.treatment_n} | ${r.last_look.baseline_n} | ${seq(r.last_look.lo, r.last_look.hi)} |`);
  return `Run: ${c.seconds} s in all (${c.build_seconds} s of builds, the A/A part ${aa.seconds} s).
The serving Worker: \`${Object.entries(c.vars).map(([k, v]) => `${k}=${v}`).join(" ")}\`, \`FAILOVER={}\`; the control plane
(\`workers/rollout\`, a Worker of its own in the same workerd, bound as \`ROLLOUT\`):
\`${Object.entries(c.plane_vars ?? {}).map(([k, v]) => `${k}=${v}`).join(" ")}\`, \`ROLLOUT_STEPS\` (${c.better.policy.steps.join(",")}) and
\`ROLLOUT_ALPHA\` (${c.better.policy.alpha}) at their defaults. Nobody sets the challenger's share: the lab plays
the control plane's Cron Trigger. After each chunk of traffic it waits 1.1 s (the last 1 s
window ends), sends one request (the isolate flushes the counts it still holds), waits 1.1 s
again, runs the control plane's scheduled handler (one look of the judge), and reads
\`rollout\` from the serving Worker's \`/v1/health\`. Every
routing key is in the canary (\`CANARY_PERCENT=100\`, no holdout arm); an outcome is the status
of the ground-truth origin the request reached. The rollout begins when the control plane is
first read (the lab's health check before the traffic), and a step counts only the windows that begin
after it began: the lab waits 1.1 s before the first request, and again after each change of
setting, or the outcomes of that second would fall in a window the judge never counts. The
integrity must-show checks that at every look the judge had counted exactly the step's
requests, one outcome each.

The stream, the arms (sticky buckets of the request ids) and the outcomes are seeded; which
requests serve at which share is not quite (the isolate reads the share at most every second,
at first and after each change, at moments the run's timing sets), so the number of requests to
a decision varies from run to run.

The two models: \`${c.shipped_version}\`, the shipped \`model/decision-model.json\`, and
\`${c.worse_version}\`, a deliberately worse model trained by scenario A's recipe (\`decider simulate ${c.worse_training.simulate}\`,
the labels of request types ${c.worse_training.rotated_types.join(", ")} rotated ${c.worse_training.rotate_steps} clusters on, \`decider train\`)${a && a.challenger_version !== c.worse_version ? ` with this run's CLI (scenario A's results above were recorded with \`${a.challenger_version}\`, the same recipe trained by the CLI of that run)` : ""}.
Each pairing is its own build (\`DECIDER_MODEL\` for the champion, \`DECIDER_CHALLENGER\` for the
challenger):

1. *Better challenger*: champion = the worse model, challenger = the shipped model.
2. *Worse challenger*: champion = the shipped model, challenger = the worse model.
3. *A/A*: the shipped model as both champion and challenger.

"Requests in the step" counts the lab's routed requests from the look of the previous change to
the look of this one (so in multiples of a chunk); the outcomes and means are the rollout
record's \`statistics\`, i.e. what the judge compared: the step's own counts, begun afresh at the
previous change. "The test" is what decided: the two-sample e-values for "the challenger is
better" and "worse", each against the bar 2/α at the step's share of α, given the arms' share of
the traffic the isolates named (docs/rollout.md, "The judge"); or, when the share was not
known, the union judge's always-valid confidence sequence of the difference (challenger −
champion).

${rolloutPart(c.better, "1. A better challenger")}

${rolloutPart(c.worse, "2. A worse challenger")}

**3. A/A.** ${aa.seeds} rollouts, each a fresh pair of Workers (fresh control plane storage) from one build, with
its own traffic seed, ${int(aa.requests_per_seed)} requests and a look after every ${int(aa.chunk)} (${aa.parallel} rollouts at a
time). A rollout in which the judge changed anything (a step or a rollback) is a false decision:
**${aa.false_decisions} of ${aa.runs.length}**${aa.false_seeds.length ? ` (seeds ${aa.false_seeds.join(", ")})` : ""}, against ${aa.allowed} allowed by the claimed error rate
(\`ROLLOUT_ALPHA\` ${aa.alpha} × ${aa.seeds}). The judge claims less: an A/A rollout leaves its first step
by mistake with probability at most α/2 (docs/rollout.md), every look included. The last three
columns are the judge's last look: the outcomes it had compared and the difference's sequence,
which must contain 0 when nothing changed.

| seed | requests | looks | changes | final phase | setting | challenger outcomes | champion outcomes | difference's sequence |
|---|---|---|---|---|---|---|---|---|
${aaRows.join("\n")}

Must show:

${c.must_show.map(mark).join("\n")}`;
}

function sectionD(d) {
  if (!d) return "Scenario D has not run yet (`LAB_ONLY=d node lab/run.mjs`).";
  const b = d.bake;
  const rows = (r) => r.steps.map((s) => `| \`${s.verb}\` | ${s.status} | ${s.setting}% | ${s.phase}${s.paused ? ", paused" : ""} | ${s.health_history} | ${s.ms} | ${s.look_ms} |`).join("\n");
  return `Run: ${d.seconds} s. The same two Workers as scenario C (the champion the deliberately worse
model, the challenger the shipped one), with the control plane's policy set as an operator
would: \`ROLLOUT_MIN_STEP_S=${b.min_step_s}\`, \`ROLLOUT_BAKE_PERCENT=${b.bake_percent}\`, \`ROLLOUT_BAKE_S=3600\`.

**1. Time on a step, and a bake that fails.** Chunks of 1,000 requests with a look after each.
The steps and how long each lasted (the record's \`ts\` less its \`step_since\`):
${b.changes.map((c) => `${c.from}% → ${c.to}% (${c.why}) after ${c.step_s.toFixed(1)} s`).join("; ")}. Once the
challenger baked (after ${b.degraded_at} requests), the origins failed half the requests of the routing
keys it serves (a challenger that degrades under full load); the judge rolled it back from the
bake, ${b.final?.phase} after ${b.requests} requests and ${b.looks} looks.

**2. Controls.** Each verb through \`decider rollout VERB --url … --json\` (the serving Worker
relays \`/v1/admin/rollout\` to the control plane), then \`/v1/health\` read and one look of the
judge; a webhook receiver on loopback (\`ROLLOUT_WEBHOOK_URL\`):

| verb | exit | setting | phase | last change in /v1/health | CLI ms | look ms |
|---|---|---|---|---|---|---|
${rows(d.controls.ok)}

Records in the log: ${d.controls.ok.records.map((r) => `${r.why}${r.reason ? ` ("${r.reason}")` : ""}`).join(", ")}. Notifications:
${d.controls.ok.notifications.length}, ids ${d.controls.ok.notifications.map((n) => n.id).join(", ")}.

**3. A webhook that fails (500) or hangs.** The same verbs:

| receiver | settings as with a working one | slowest verb, ms | slowest look, ms | delivery failures logged |
|---|---|---|---|---|
${["fail", "hang"].map((k) => { const r = d.controls[k]; return `| ${k} | ${r.steps.map((x) => `${x.setting}/${x.phase}`).join(" ") === d.controls.ok.steps.map((x) => `${x.setting}/${x.phase}`).join(" ") ? "yes" : "no"} | ${Math.max(...r.steps.map((x) => x.ms))} | ${Math.max(...r.steps.map((x) => x.look_ms))} | ${r.webhook_failures} |`; }).join("\n")}

(A hanging receiver is given up after 5 s per attempt, later than this run looked.)

Must show:

${d.must_show.map(mark).join("\n")}`;
}

function sectionE(e) {
  if (!e) return "Scenario E has not run yet (`LAB_ONLY=e node lab/run.mjs`).";
  const row = (r) => `| ${r.failover ? "on" : "off"} | ${r.requests} | ${r.looks.length} | ${r.final?.phase} at ${r.final?.setting}% | ${f(r.final?.challenger, 3)} | ${f(r.final?.champion, 3)} | ${f(r.report.by_origin.route_b?.success_rate, 3)} | ${r.report.rescued_by_failover} | ${Object.entries(r.clients).map(([k, v]) => `${k}: ${v}`).join(", ")} |`;
  return `Run: ${e.seconds} s. The champion is the shipped model; the challenger was trained on the
simulator's data with every routed label set to route_b, so it sends nearly everything there.
On top of the ground truth, route_b's origin fails ${pct(e.fail_share)} of its requests with a 503, which the
Worker fails over for idempotent methods (a POST, a quarter of the traffic, is not resent: its
client gets a 502). The same rollout (the
default steps, a look every ${e.on.chunk} requests) runs on a fresh pair of Workers with failover on
(the shipped a → b → c → a map) and off (\`FAILOVER={}\`). A decision's reward is its decided
origin's first attempt; 10% of model decisions explore (\`EXPLORE_PERCENT=10\`).

| failover | requests | looks | end | challenger mean | champion mean | route_b success (\`decider report\`) | rescued_by_failover | client statuses |
|---|---|---|---|---|---|---|---|---|
${row(e.on)}
${row(e.off)}

A policy \`decider train --logs\` learned from the failover-on log sends ${pct(e.learned.learned)} of the ${e.learned.states}
logged states to route_b (the champion ${pct(e.learned.champion)}, the challenger ${pct(e.learned.challenger)}).

Must show:

${e.must_show.map(mark).join("\n")}`;
}

export function render() {
  const a = load("scenario-a.json");
  const b = load("scenario-b.json");
  const c = load("scenario-c.json");
  const d = load("scenario-d.json");
  const e = load("scenario-e.json");
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
assigned independently of the state. \`FAILOVER={}\` (but in scenario E's "on" run): a failed
origin is not retried, so each request's outcome is the one origin's answer. Success in \`decider report\` is the status
(below 500), a rejected request counts as a failure; no latency SLO.

## Scenario A: champion, challenger and holdout

${sectionA(a)}

## Scenario B: the learning loop

${sectionB(b)}

## Scenario C: rollouts that run themselves

${sectionC(c, a)}

## Scenario D: the rollout as an operator runs it

${sectionD(d)}

## Scenario E: failover rescues the client, not the decision

${sectionE(e)}
`;
  writeFileSync(path.join(LAB, "..", "docs", "reports", "LAB.md"), md);
}

if (import.meta.url === `file://${process.argv[1]}`) render();

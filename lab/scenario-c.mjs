// Scenario C: rollouts that run themselves.
//
// The serving Worker runs with the control plane (workers/rollout) bound beside it, and the lab
// plays the control plane's Cron Trigger: between chunks of traffic it runs its scheduled
// handler, each run one look of the judge. Nobody sets a share: the judge ramps the challenger through ROLLOUT_STEPS or rolls it
// back, from the outcomes the Worker counts itself (a routed request's outcome is the status
// of the ground-truth origin it reached).
//  1. A better challenger (the shipped model, against scenario A's worse model as the
//     champion) must reach 100% through every step.
//  2. A worse challenger (scenario A's worse model, against the shipped champion) must be
//     rolled back to 0, and serve nothing after.
//  3. A/A: the shipped model as both champion and challenger, on fresh Workers (fresh Durable
//     Object storage) with their own traffic seeds; a rollout in which the judge changes
//     anything is a false decision, and there may be no more of them than the judge's error
//     rate claims.
import { mkdirSync } from "node:fs";
import path from "node:path";
import { trainWorse } from "./corrupt.mjs";
import {
  RESULTS, ROOT, WORK, buildWithChallenger, checkIntegrity, decideStates, decider, decisionsById,
  makeStream, readJsonFile, report, runStream, startLab, stopLab, trueValue, writeJson, writeRawLog,
} from "./lib.mjs";

const SHIPPED = path.join(ROOT, "model/decision-model.json");
// Windows of 1 s, flushes every second or 50 outcomes, the share re-read every second: a cron
// run after a chunk of traffic sees that chunk's counts. Every routing key in the canary, so
// no holdout arm (the lab's rules beat the model, which would raise a holdout alarm).
export const VARS = {
  CANARY_PERCENT: "100",
  ROLLOUT_FLUSH_S: "1",
  ROLLOUT_FLUSH_OUTCOMES: "50",
  ROLLOUT_CACHE_S: "1",
  DECISION_ID_KEY: "lab-decision-id-key-0123456789abcdef",
};
// The control plane's: ROLLOUT_STEPS and ROLLOUT_ALPHA are left at their defaults; the
// must-shows read the values in force from /v1/health (`rollout.store.config`).
export const PLANE_VARS = {
  ROLLOUT_WINDOW_S: "1",
  ROLLOUT_MIN_OUTCOMES: "100",
  ROLLOUT_MIN_STEP_S: "0",
  ROLLOUT_BAKE_PERCENT: "0",
};
const PLANE = { vars: PLANE_VARS };
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

/** Requests [start, end) of a stream, keeping each request's signal snapshot. */
export function slice(batches, start, end) {
  const out = [];
  let i = 0;
  for (const b of batches) {
    const lo = Math.max(start - i, 0), hi = Math.min(end - i, b.requests.length);
    if (lo < hi) out.push({ signals: b.signals, requests: b.requests.slice(lo, hi) });
    i += b.requests.length;
  }
  return out;
}

/**
 * One look of the judge, as a Cron Trigger run: wait for the current 1 s window to end, send
 * one request so that the isolate flushes the counts it still holds, wait for that window to
 * end too, run the control plane's scheduled handler, and read the rollout from /v1/health
 * (admin). The setting and phase are the control plane's; before the next traffic the
 * serving isolate has applied them (it reads them at most every ROLLOUT_CACHE_S).
 */
export async function look(lab) {
  await sleep(1100);
  await (await lab.worker.fetch("/v1/health")).arrayBuffer();
  await sleep(1100);
  const outcome = await lab.worker.judge();
  if (outcome !== "ok") throw new Error(`the control plane's scheduled handler answered ${outcome}`);
  for (let i = 0; ; i++) {
    const h = await (await lab.worker.health()).json();
    if (!h.rollout?.store?.bound || !h.rollout.store.state) throw new Error(`no control plane: ${JSON.stringify(h.rollout)}`);
    const cp = h.rollout.store.state;
    const setting = cp.rules_only ? "rules" : cp.share;
    if (h.rollout.setting === setting || i === 50) return { ...h.rollout, setting, phase: cp.phase };
    await sleep(200);
  }
}

/**
 * Sends `total` requests of the stream `chunk` at a time, with a look after each chunk, until
 * the stream ends or (with `untilDecided`) the rollout is no longer ramping.
 */
async function drive(lab, batches, { total, chunk, untilDecided, log, name }) {
  const records = [];
  const looks = [];
  let stepStart = 0; // requests sent when the current step began
  for (let start = 0; start < total; start += chunk) {
    records.push(...(await runStream(lab, slice(batches, start, Math.min(total, start + chunk)))));
    const before = looks.at(-1)?.setting ?? lab.firstSetting;
    const r = await look(lab);
    const c = r.store.state.last?.challenger;
    looks.push({
      requests: records.length,
      setting: r.setting,
      phase: r.phase,
      verdict: c?.verdict ?? null,
      treatment_n: c?.treatment.n ?? null,
      baseline_n: c?.baseline.n ?? null,
      lo: c?.lo ?? null,
      hi: c?.hi ?? null,
      // The step's routed requests, which the judge should have counted (every one has an
      // outcome: the origin's status, or a failure when rejected).
      step_requests: records.length - stepStart,
    });
    const moved = r.setting !== before;
    if (moved) {
      stepStart = records.length;
      // The new step counts only the windows that begin after the change: let the window in
      // which the judge made it end before the next request.
      await sleep(1100);
    }
    if (log && (moved || r.phase !== "ramping" || looks.length % 10 === 0)) {
      log(`${name}: ${records.length} requests, ${looks.length} looks: ${r.phase} at ${r.setting}`);
    }
    if (untilDecided && r.phase !== "ramping") break;
  }
  return { records, looks };
}

/** A rollout record's comparison, without the sequences' inner details. */
function stats(s) {
  const arm = (a) => ({ n: a.n, mean: a.mean, lo: a.lo, hi: a.hi });
  return {
    verdict: s.verdict, alpha: s.alpha, delta: s.delta, lo: s.lo, hi: s.hi, treatment: arm(s.treatment), baseline: arm(s.baseline),
    judge: s.judge ?? null, allocation: s.allocation ?? null, evidence: s.evidence ?? null,
  };
}

/** The changes, with the lab's requests up to each (at the look where the setting moved). */
function steps(looks, changes, first) {
  const at = [];
  let prev = first;
  for (const l of looks) {
    if (l.setting !== prev) at.push(l.requests);
    prev = l.setting;
  }
  return changes.map((c, i) => ({
    from: c.from,
    to: c.to,
    why: c.why,
    ts: c.ts,
    text: c.text,
    requests_total: at[i] ?? null,
    requests: at[i] != null ? at[i] - (i ? at[i - 1] : 0) : null,
    statistics: stats(c.statistics),
  }));
}

/** /v1/health once the isolate has heard the control plane's setting (it asks after its
 * first request, through waitUntil). */
export async function healthHeard(lab) {
  for (let i = 0; ; i++) {
    const h = await (await lab.worker.health()).json();
    if (h.rollout?.automatic || i === 50) return h;
    await sleep(100);
  }
}

/** The judge's policy in force, from the control plane's configuration (/v1/health). */
function policyOf(config) {
  const p = { steps: config?.ROLLOUT_STEPS, alpha: config?.ROLLOUT_ALPHA, min_outcomes: config?.ROLLOUT_MIN_OUTCOMES };
  if (!Array.isArray(p.steps) || typeof p.alpha !== "number") throw new Error(`no rollout policy in /v1/health: ${JSON.stringify(p)}`);
  return p;
}

/** Looks at which the judge had counted fewer (or more) outcomes than the step's requests. */
function uncounted(looks) {
  return looks.filter((l) => (l.treatment_n ?? 0) + (l.baseline_n ?? 0) !== l.step_requests)
    .map((l) => ({ requests: l.requests, step_requests: l.step_requests, counted: (l.treatment_n ?? 0) + (l.baseline_n ?? 0) }));
}

/** The isolate's failed flushes and share reads (each logged; a failed flush loses its counts). */
function storeFailures(lab) {
  const n = (e) => lab.worker.logs.filter((l) => l.event === e).length;
  return { flush_failed: n("rollout_flush_failed"), read_failed: n("rollout_read_failed") };
}

/** How many decisions each (arm, model version) made. */
function servedBy(records, byId) {
  const out = {};
  for (const r of records) {
    const d = byId.get(r.id);
    const k = `${d.arm} ${d.model_version ?? "(no model)"}`;
    out[k] = (out[k] ?? 0) + 1;
  }
  return out;
}

/**
 * One rollout to its end: a fresh Worker from `script`, the stream in chunks of `chunk` with a
 * look after each until the judge decides (or `cap` requests), then `after` more requests once
 * the isolate has read the final share.
 */
async function rollout({ name, seed, script, champion, challenger, cap, chunk, after, dir, log }) {
  const t0 = Date.now();
  const lab = await startLab({ seed, script, vars: VARS, rollout: PLANE });
  const logFile = path.join(dir, `${name}.log`);
  let run, afterRecords, final, byId, changes, config, failures;
  try {
    const h0 = await healthHeard(lab);
    if (h0.model?.version !== champion.version || h0.challenger?.version !== challenger.version || !h0.rollout?.automatic) {
      throw new Error(`${name}: the Worker serves ${JSON.stringify({ model: h0.model, challenger: h0.challenger, rollout: h0.rollout })}`);
    }
    config = h0.rollout.store.config;
    lab.firstSetting = h0.rollout.setting;
    // The rollout began with that read; a step counts only the windows that begin after it
    // began, so the traffic starts once the current window has ended.
    await sleep(1100);
    const batches = makeStream({ seed, n: cap + after });
    run = await drive(lab, batches, { total: cap, chunk, untilDecided: true, log, name: `C ${name}` });
    // The final share reaches the isolate within ROLLOUT_CACHE_S; then the traffic after it.
    await sleep(1100);
    afterRecords = await runStream(lab, slice(batches, run.records.length, run.records.length + after));
    final = (await (await lab.worker.health()).json()).rollout;
    changes = lab.worker.logs.filter((l) => l.event === "rollout");
    failures = storeFailures(lab);
    writeRawLog(lab, logFile);
    byId = decisionsById(lab);
  } finally {
    await stopLab(lab);
  }
  const rep = report([logFile]);
  // Ground truth: what each model's choices are worth on the states this run's requests had.
  const states = run.records.map((r) => byId.get(r.id).state);
  const worth = (m) => {
    const choices = decideStates(m.path, states);
    return trueValue(states.map((s, i) => [s, choices[i].action]));
  };
  return {
    seed,
    champion_version: champion.version,
    challenger_version: challenger.version,
    chunk,
    cap,
    requests: run.records.length,
    looks: run.looks,
    policy: policyOf(config),
    changes: steps(run.looks, changes, policyOf(config).steps[0]),
    final: { phase: final.phase, setting: final.setting, effective_champion: final.effective_champion, history: final.store.state.history.map((c) => ({ from: c.from, to: c.to, why: c.why })) },
    after: { requests: afterRecords.length, served_by: servedBy(afterRecords, byId) },
    report: {
      rollout: rep.verdicts.find((v) => v.kind === "rollout"),
      by_arm: rep.by_arm,
    },
    truth: { champion: worth(champion), challenger: worth(challenger), states: states.length },
    integrity: checkIntegrity([...run.records, ...afterRecords], byId),
    store_failures: failures,
    uncounted: uncounted(run.looks),
    seconds: Math.round((Date.now() - t0) / 1000),
  };
}

/** One A/A rollout: a fresh Worker, `n` requests of its own seed, a look every `chunk`. */
async function aaRun({ seed, script, version, n, chunk }) {
  const lab = await startLab({ seed, script, vars: VARS, rollout: PLANE });
  try {
    const h0 = await healthHeard(lab);
    if (h0.model?.version !== version || h0.challenger?.version !== version || h0.rollout?.phase !== "ramping") {
      throw new Error(`A/A seed ${seed}: the Worker serves ${JSON.stringify({ model: h0.model, challenger: h0.challenger, rollout: h0.rollout })}`);
    }
    lab.firstSetting = h0.rollout.setting;
    await sleep(1100); // as in rollout(): the window in which the rollout began ends first
    const { records, looks } = await drive(lab, makeStream({ seed, n }), { total: n, chunk, untilDecided: false });
    const history = (await (await lab.worker.health()).json()).rollout.store.state.history;
    const changes = lab.worker.logs.filter((l) => l.event === "rollout");
    const last = looks.at(-1);
    return {
      seed,
      policy: policyOf(h0.rollout.store.config),
      first_setting: h0.rollout.setting,
      history: history.length,
      requests: records.length,
      looks: looks.length,
      changes: changes.map((c) => ({ from: c.from, to: c.to, why: c.why, statistics: stats(c.statistics) })),
      final_phase: last.phase,
      final_setting: last.setting,
      // Requests sent and outcomes the judge had counted in the step, look by look.
      uncounted: uncounted(looks),
      store_failures: storeFailures(lab),
      last_look: { verdict: last.verdict, treatment_n: last.treatment_n, baseline_n: last.baseline_n, lo: last.lo, hi: last.hi },
    };
  } finally {
    await stopLab(lab);
  }
}

const f4 = (x) => (x == null ? "—" : x.toFixed(4));

export async function scenarioC({
  log = console.log,
  aaSeeds = Number(process.env.LAB_C_AA_SEEDS ?? 20),
  aaRequests = Number(process.env.LAB_C_AA_REQUESTS ?? 3000),
  aaChunk = 500,
  aaParallel = Number(process.env.LAB_C_AA_PARALLEL ?? 2),
} = {}) {
  const t0 = Date.now();
  const dir = path.join(WORK, "c");
  mkdirSync(dir, { recursive: true });
  const rel = (p) => path.relative(ROOT, p);

  // The models: the shipped one, and scenario A's deliberately worse one (same recipe).
  const { model: worsePath, training } = trainWorse(dir, decider);
  const shipped = { path: SHIPPED, version: readJsonFile(SHIPPED).model_version };
  const worse = { path: worsePath, version: readJsonFile(worsePath).model_version };
  log(`C: shipped model ${shipped.version}, worse model ${worse.version}`);
  const tb = Date.now();
  const builds = {
    better: buildWithChallenger(shipped.path, rel(path.join(dir, "build-better")), worse.path),
    worse: buildWithChallenger(worse.path, rel(path.join(dir, "build-worse"))),
    aa: buildWithChallenger(shipped.path, rel(path.join(dir, "build-aa"))),
  };
  const buildSeconds = Math.round((Date.now() - tb) / 1000);

  // 1. A better challenger: the shipped model against the worse one as the champion.
  const better = await rollout({
    name: "better", seed: 31, script: builds.better, champion: worse, challenger: shipped,
    cap: Number(process.env.LAB_C_CAP ?? 60000), chunk: 1000, after: 500, dir, log,
  });
  // 2. A worse challenger: the worse model against the shipped champion.
  const worseRun = await rollout({
    name: "worse", seed: 32, script: builds.worse, champion: shipped, challenger: worse,
    cap: Number(process.env.LAB_C_CAP ?? 60000), chunk: 1000, after: 500, dir, log,
  });

  // 3. A/A over fresh Workers, `aaParallel` at a time (while one waits for its windows to
  // end, another sends traffic).
  const ta = Date.now();
  const seeds = Array.from({ length: aaSeeds }, (_, i) => 1001 + i);
  const aa = [];
  let next = 0;
  await Promise.all(Array.from({ length: aaParallel }, async () => {
    while (next < seeds.length) {
      const seed = seeds[next++];
      const r = await aaRun({ seed, script: builds.aa, version: shipped.version, n: aaRequests, chunk: aaChunk });
      aa.push(r);
      log(`C A/A: seed ${seed}: ${r.looks} looks, ${r.changes.length} changes, ${r.final_phase} at ${r.final_setting} (${aa.length}/${seeds.length})`);
    }
  }));
  aa.sort((a, b) => a.seed - b.seed);
  const aaSecondsTotal = Math.round((Date.now() - ta) / 1000);
  // A false decision: any change of the setting (a record, an entry in the object's history,
  // or a setting or phase other than the first).
  const falseSeeds = aa.filter((r) => r.changes.length > 0 || r.history > 0 || r.final_setting !== r.first_setting || r.final_phase !== "ramping");
  const alpha = aa[0]?.policy.alpha;
  const allowed = Math.floor(alpha * aaSeeds + 1e-9);

  const stepsOf = (r) => r.changes.map((c) => `${c.from}→${c.to} (${c.why})`).join(", ") || "none";
  const perStep = (r) => r.changes.map((c) => `${c.from}→${c.to} after ${c.requests} requests (challenger ${c.statistics.treatment.n} outcomes, mean ${f4(c.statistics.treatment.mean)}; champion ${c.statistics.baseline.n}, ${f4(c.statistics.baseline.mean)})`).join("; ");
  const st = better.policy.steps;
  const wantSteps = st.slice(1).map((to, i) => [st[i], to]);
  const must = [
    {
      name: "a better challenger ramps through every step to 100%, driven only by cron runs",
      pass: better.truth.challenger > better.truth.champion &&
        better.changes.length === wantSteps.length &&
        better.changes.every((c, i) => c.from === wantSteps[i][0] && c.to === wantSteps[i][1] && c.why === "better") &&
        better.final.phase === "promoted" && better.final.setting === 100 &&
        better.report.rollout?.action === "ship the challenger" &&
        better.report.rollout?.evidence?.agrees_with_records === true &&
        Object.keys(better.after.served_by).every((k) => k.startsWith("challenger ")),
      detail: `${better.requests} requests, ${better.looks.length} looks: ${perStep(better)}; phase ${better.final.phase}, setting ${better.final.setting}; after it ${better.after.requests} requests served by ${JSON.stringify(better.after.served_by)}; decider report on its own counts: ${better.report.rollout?.action} (agrees with the records: ${better.report.rollout?.evidence?.agrees_with_records}); true value of the choices: challenger ${f4(better.truth.challenger)} vs champion ${f4(better.truth.champion)}`,
    },
    {
      name: "a worse challenger is rolled back to 0, and serves nothing after",
      pass: worseRun.truth.challenger < worseRun.truth.champion &&
        worseRun.changes.length === 1 && worseRun.changes[0].to === 0 && worseRun.changes[0].why === "worse" &&
        worseRun.final.phase === "rolled_back" && worseRun.final.setting === 0 &&
        worseRun.report.rollout?.action === "rolled back" &&
        worseRun.report.rollout?.evidence?.agrees_with_records === true &&
        Object.keys(worseRun.after.served_by).every((k) => !k.startsWith("challenger ") && !k.endsWith(` ${worse.version}`)),
      detail: `${worseRun.requests} requests, ${worseRun.looks.length} looks: ${perStep(worseRun)}; phase ${worseRun.final.phase}, setting ${worseRun.final.setting}; after it ${worseRun.after.requests} requests served by ${JSON.stringify(worseRun.after.served_by)}; decider report on its own counts: ${worseRun.report.rollout?.action} (agrees with the records: ${worseRun.report.rollout?.evidence?.agrees_with_records}); true value of the choices: challenger ${f4(worseRun.truth.challenger)} vs champion ${f4(worseRun.truth.champion)}`,
    },
    {
      name: `A/A (challenger = champion) over ${aaSeeds} seeds: false decisions ≤ α × seeds`,
      pass: aa.length === aaSeeds && aaSeeds >= 20 && aa.every((r) => r.policy.alpha === alpha) && falseSeeds.length <= allowed,
      detail: `${falseSeeds.length} of ${aa.length} rollouts changed anything${falseSeeds.length ? ` (seeds ${falseSeeds.map((r) => `${r.seed}: ${stepsOf(r)}`).join("; ")})` : ""}; allowed ${allowed} (ROLLOUT_ALPHA ${alpha} × ${aaSeeds} seeds); ${aaRequests} requests and ${[...new Set(aa.map((r) => r.looks))].join("/")} looks per seed`,
    },
    {
      name: "lab integrity: every decision logged with the intended state, every request at the decided origin, every outcome of a step in the judge's counts at each look",
      pass: [better, worseRun].every((r) => r.integrity.missing_decisions === 0 && r.integrity.state_mismatches === 0 && r.integrity.origin_mismatches === 0) &&
        [better, worseRun, ...aa].every((r) => r.uncounted.length === 0 && r.store_failures.flush_failed === 0),
      detail: `better ${JSON.stringify(better.integrity)}; worse ${JSON.stringify(worseRun.integrity)}; looks whose counts differ from the step's requests: ${[["better", better], ["worse", worseRun], ...aa.map((r) => [`A/A ${r.seed}`, r])].filter(([, r]) => r.uncounted.length).map(([k, r]) => `${k} ${JSON.stringify(r.uncounted)}`).join("; ") || "none"}; failed flushes ${[better, worseRun, ...aa].reduce((a, r) => a + r.store_failures.flush_failed, 0)}, failed share reads ${[better, worseRun, ...aa].reduce((a, r) => a + r.store_failures.read_failed, 0)}`,
    },
  ];
  const result = {
    scenario: "C",
    seconds: Math.round((Date.now() - t0) / 1000),
    build_seconds: buildSeconds,
    vars: VARS,
    plane_vars: PLANE_VARS,
    shipped_version: shipped.version,
    worse_version: worse.version,
    worse_training: training,
    better,
    worse: worseRun,
    aa: {
      seeds: aaSeeds,
      requests_per_seed: aaRequests,
      chunk: aaChunk,
      parallel: aaParallel,
      seconds: aaSecondsTotal,
      false_decisions: falseSeeds.length,
      false_seeds: falseSeeds.map((r) => r.seed),
      alpha,
      allowed,
      runs: aa,
    },
    must_show: must,
  };
  writeJson(path.join(RESULTS, "scenario-c.json"), result);
  return result;
}

if (import.meta.url === `file://${process.argv[1]}`) {
  const r = await scenarioC();
  for (const m of r.must_show) console.log(`${m.pass ? "PASS" : "FAIL"} ${m.name}: ${m.detail}`);
  process.exit(r.must_show.every((m) => m.pass) ? 0 : 1);
}

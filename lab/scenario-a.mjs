// Scenario A: champion/challenger with a rules holdout.
//
// A deliberately worse challenger (trained on simulator labels the lab corrupts) is embedded
// in the Worker and serves CHALLENGER_PERCENT=20 of the routing keys; CANARY_PERCENT=90 holds
// 10% out on the rules. The lab's stream goes through the Worker to the ground-truth origins,
// and `decider report` on the Worker's raw log must: rank the champion first with separated
// 95% intervals and say to roll the challenger back; show the model-vs-rules difference on the
// holdout arm with the sign the ground truth gives; count per origin exactly what the origins
// counted.
import { mkdirSync } from "node:fs";
import path from "node:path";
import { trainWorse } from "./corrupt.mjs";
import {
  RESULTS, ROOT, WORK, buildWithChallenger, checkIntegrity, decideStates, decider, decisionsById,
  makeStream, readJsonFile, report, runStream, startLab, stopLab, trueValue, writeJson, writeRawLog,
} from "./lib.mjs";
import { ROUTES, succeeds, successProb } from "./truth.mjs";

const SHIPPED = path.join(ROOT, "model/decision-model.json");

/** Options: n requests, seed (stream and outcomes), quiet. Returns the result object. */
export async function scenarioA({ n = Number(process.env.LAB_A_REQUESTS ?? 5000), seed = 1, log = console.log } = {}) {
  const t0 = Date.now();
  const dir = path.join(WORK, "a");
  mkdirSync(dir, { recursive: true });
  // 1. The worse challenger: simulator data, light types' labels rotated two clusters on.
  const { model: challenger, training } = trainWorse(dir, decider);
  const challengerVersion = readJsonFile(challenger).model_version;
  const championVersion = readJsonFile(SHIPPED).model_version;
  log(`A: challenger ${challengerVersion} trained on ${training.rotated} of ${training.rows} labels rotated`);
  const script = buildWithChallenger(challenger, path.relative(ROOT, path.join(dir, "build")));

  // 2. The traffic.
  const vars = { CANARY_PERCENT: "90", CHALLENGER_PERCENT: "20" };
  const lab = await startLab({ seed, script, vars });
  const logFile = path.join(dir, "worker.log");
  let records, health, byId, originCounts;
  try {
    health = await (await lab.worker.health()).json();
    if (!health.challenger?.loaded || health.challenger.version !== challengerVersion) {
      throw new Error(`the Worker did not load the challenger: ${JSON.stringify(health.challenger)}`);
    }
    const batches = makeStream({ seed, n });
    const t1 = Date.now();
    records = await runStream(lab, batches, { onBatch: (i, all) => i % 25 === 0 && log(`A: batch ${i}/${all}`) });
    log(`A: ${records.length} requests in ${((Date.now() - t1) / 1000).toFixed(1)} s`);
    writeRawLog(lab, logFile);
    byId = decisionsById(lab);
  } finally {
    originCounts = Object.fromEntries(lab.origins.map((o, i) => [ROUTES[i], { ...o.counts }]));
    await stopLab(lab);
  }

  // 3. The report on the raw log, and the ground truth's view of the same decisions.
  const rep = report([logFile]);
  const integrity = checkIntegrity(records, byId);
  const lines = records.map((r) => byId.get(r.id));
  const states = lines.map((d) => d.state);
  const model = decideStates(SHIPPED, states);
  const rules = decideStates(SHIPPED, states, ["--threshold", "1"]);
  const allRules = rules.every((d) => d.source !== "model");
  const arms = {};
  for (const arm of ["champion", "challenger", "holdout"]) {
    const idx = lines.map((d, i) => [d, i]).filter(([d]) => d.arm === arm).map(([, i]) => i);
    arms[arm] = {
      n: idx.length,
      true_value_of_logged_actions: trueValue(idx.map((i) => [states[i], lines[i].action])),
      true_value_model: trueValue(idx.map((i) => [states[i], model[i].action])),
      true_value_rules: trueValue(idx.map((i) => [states[i], rules[i].action])),
    };
  }
  const all = {
    n: states.length,
    true_value_model: trueValue(states.map((s, i) => [s, model[i].action])),
    true_value_rules: trueValue(states.map((s, i) => [s, rules[i].action])),
  };
  // The holdout arm's logged actions are the rules' by construction; check that the native
  // rules agree with what the Worker did there (same code, so they must).
  const holdoutIdx = lines.map((d, i) => [d, i]).filter(([d]) => d.arm === "holdout").map(([, i]) => i);
  const holdoutRulesAgree = holdoutIdx.filter((i) => rules[i].action === lines[i].action).length;

  // The run's decisions depend on the UTC hour (the model's spill thresholds move in hours
  // 14–20); the ground truth does not. Replaying the same requests, arms and outcome draws
  // with every hour of the day shows whether the must-shows depend on when the lab runs.
  const hourReplay = [];
  for (let h = 0; h < 24; h++) {
    const hs = states.map((s) => ({ ...s, hour: h }));
    const choice = {
      champion: decideStates(SHIPPED, hs),
      holdout: decideStates(SHIPPED, hs, ["--threshold", "1"]),
      challenger: decideStates(challenger, hs),
    };
    const tally = { champion: [0, 0], holdout: [0, 0], challenger: [0, 0] };
    let trueGap = 0;
    lines.forEach((d, i) => {
      tally[d.arm][0] += succeeds(seed, d.request_id, hs[i], choice[d.arm][i].action) ? 1 : 0;
      tally[d.arm][1]++;
      if (d.arm === "holdout") trueGap += successProb(hs[i], choice.champion[i].action) - successProb(hs[i], choice.holdout[i].action);
    });
    const rate = (k) => tally[k][0] / tally[k][1];
    hourReplay.push({
      hour: h,
      champion: rate("champion"), challenger: rate("challenger"), holdout: rate("holdout"),
      measured_gap: rate("champion") - rate("holdout"),
      true_gap: trueGap / tally.holdout[1],
    });
  }

  const cc = rep.verdicts.find((v) => v.kind === "champion_vs_challenger");
  const mr = rep.verdicts.find((v) => v.kind === "model_vs_rules");
  // The report's comparisons are the control plane's (treatment − baseline).
  const measuredDiff = mr.evidence.comparison.delta;
  const trueDiff = arms.holdout.true_value_model - arms.holdout.true_value_rules;
  const originRows = ROUTES.map((r) => ({
    origin: r,
    lab_requests: originCounts[r].requests,
    lab_successes: originCounts[r].successes,
    report_with_outcome: rep.by_origin[r]?.with_outcome ?? 0,
    report_successes: rep.by_origin[r]?.successes ?? 0,
  }));
  const must = [
    {
      name: "report ranks the champion first, the challenger decided worse, verdict: roll the challenger back",
      pass: cc.evidence.ranking?.[0] === "champion" && cc.evidence.comparison.verdict === "worse" && cc.evidence.comparison.hi < 0 && cc.action === "roll the challenger back",
      detail: cc.text,
    },
    {
      name: "model − rules on the holdout arm has the ground truth's sign",
      pass: Math.sign(measuredDiff) === Math.sign(trueDiff) && trueDiff !== 0,
      detail: `measured (champion arm − holdout arm) ${measuredDiff.toFixed(4)}; true (model − rules on the holdout arm's states) ${trueDiff.toFixed(4)}`,
    },
    {
      name: "report's per-origin counts equal the origins' own counts",
      pass: originRows.every((o) => o.lab_requests === o.report_with_outcome && o.lab_successes === o.report_successes),
      detail: originRows.map((o) => `${o.origin} ${o.report_successes}/${o.report_with_outcome} vs ${o.lab_successes}/${o.lab_requests}`).join("; "),
    },
    {
      name: "lab integrity: every decision logged with the intended state, every request at the decided origin",
      pass: integrity.missing_decisions === 0 && integrity.state_mismatches === 0 && integrity.origin_mismatches === 0 && allRules && holdoutRulesAgree === holdoutIdx.length,
      detail: `${JSON.stringify(integrity)}; native rules-only decisions: ${allRules ? "all rules" : "SOME MODEL"}; holdout arm's logged actions equal to the native rules' ${holdoutRulesAgree}/${holdoutIdx.length}`,
    },
  ];
  const result = {
    scenario: "A",
    seed,
    requests: n,
    seconds: Math.round((Date.now() - t0) / 1000),
    vars,
    champion_version: championVersion,
    challenger_version: challengerVersion,
    challenger_training: training,
    hours: [...new Set(states.map((s) => s.hour))],
    report: {
      verdict: rep.verdict,
      verdicts: rep.verdicts,
      by_arm: rep.by_arm,
      by_source: rep.by_source,
      by_model_version: rep.by_model_version,
      by_origin: rep.by_origin,
      skipped: rep.skipped,
      decisions: rep.decisions,
    },
    origin_counts: originRows,
    truth: { arms, all },
    hour_replay: hourReplay,
    integrity,
    must_show: must,
  };
  writeJson(path.join(RESULTS, "scenario-a.json"), result);
  return result;
}

if (import.meta.url === `file://${process.argv[1]}`) {
  const r = await scenarioA();
  for (const m of r.must_show) console.log(`${m.pass ? "PASS" : "FAIL"} ${m.name}: ${m.detail}`);
  process.exit(r.must_show.every((m) => m.pass) ? 0 : 1);
}

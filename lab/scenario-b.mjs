// Scenario B: the learning loop.
//
// 1. The shipped model serves with EXPLORE_PERCENT=20 (logged propensities).
// 2. From those logs `decider train --logs` trains a candidate and `decider ope` estimates its
//    value (doubly robust, with a 95% interval).
// 3. The candidate is embedded as the challenger (exploration off, CHALLENGER_PERCENT=50) and
//    serves fresh lab traffic; its measured success is compared with the shipped model's
//    (the champion arm) and with the estimate.
import { mkdirSync } from "node:fs";
import path from "node:path";
import {
  RESULTS, ROOT, WORK, buildWithChallenger, checkIntegrity, decideStates, decider, decisionsById,
  makeStream, readJsonFile, report, runStream, startLab, stopLab, trueValue, writeJson, writeRawLog,
} from "./lib.mjs";
import { ROUTES } from "./truth.mjs";

const SHIPPED = path.join(ROOT, "model/decision-model.json");
export const NEEDS = "needs decider ope/train --logs";

/** Whether this CLI has `decider ope` and `decider train --logs`; the missing ones otherwise. */
export function missingCommands() {
  const missing = [];
  try {
    decider(["ope", "--help"]);
  } catch {
    missing.push("decider ope");
  }
  try {
    if (!decider(["train", "--help"]).includes("--logs")) missing.push("decider train --logs");
  } catch {
    missing.push("decider train --logs");
  }
  return missing;
}

/** Runs one phase of traffic; returns its records, decision lines, origin counts and log file. */
async function traffic({ seed, n, script, vars, logFile, log, name }) {
  const lab = await startLab({ seed, script, vars });
  let records, byId, origins;
  try {
    const t1 = Date.now();
    records = await runStream(lab, makeStream({ seed, n }), { onBatch: (i, all) => i % 25 === 0 && log(`${name}: batch ${i}/${all}`) });
    log(`${name}: ${records.length} requests in ${((Date.now() - t1) / 1000).toFixed(1)} s`);
    writeRawLog(lab, logFile);
    byId = decisionsById(lab);
  } finally {
    origins = Object.fromEntries(lab.origins.map((o, i) => [ROUTES[i], { ...o.counts }]));
    await stopLab(lab);
  }
  return { records, byId, origins, integrity: checkIntegrity(records, byId) };
}

/** The value of an OPE estimate key, whether it is a number or {value, …}. */
const val = (x) => (typeof x === "number" ? x : x?.value ?? null);

export async function scenarioB({ n = Number(process.env.LAB_B_REQUESTS ?? 5000), nNewer = Math.round(n / 2), log = console.log } = {}) {
  const t0 = Date.now();
  const missing = missingCommands();
  if (missing.length) {
    const result = { scenario: "B", status: NEEDS, missing, must_show: [{ name: "scenario B ran", pass: false, detail: `${NEEDS}: this CLI lacks ${missing.join(" and ")}` }] };
    writeJson(path.join(RESULTS, "scenario-b.json"), result);
    return result;
  }
  const dir = path.join(WORK, "b");
  mkdirSync(dir, { recursive: true });
  const championVersion = readJsonFile(SHIPPED).model_version;

  // 1. Exploration logs from the shipped model.
  const exploreVars = { EXPLORE_PERCENT: "20" };
  const exploreLog = path.join(dir, "explore.log");
  const p1 = await traffic({ seed: 2, n, script: path.join(ROOT, "build/index.js"), vars: exploreVars, logFile: exploreLog, log, name: "B explore" });
  const exploreReport = report([exploreLog]);

  // 2. Learn a candidate and estimate its value off-policy; the shipped model's estimate too.
  const cand = path.join(dir, "candidate.json");
  const trainOut = decider(["train", "--logs", exploreLog, "--out", cand, "--quiet"]);
  const candidateVersion = readJsonFile(cand).model_version;
  // The candidate's training ranges are those of one run's logs: a single UTC hour, the loads
  // that run saw. Served in the next hour, the Worker's out-of-distribution check would send
  // every decision to the rules, although nothing in the lab depends on the hour. So the serve
  // phase runs with OOD_CHECK=false, and every estimate is made with --no-ood to match.
  const ope = JSON.parse(decider(["ope", "--logs", exploreLog, "--model", cand, "--no-ood", "--json"]));
  const opeShipped = JSON.parse(decider(["ope", "--logs", exploreLog, "--model", SHIPPED, "--no-ood", "--json"]));
  log(`B: candidate ${candidateVersion}; DR estimate ${val(ope.dr)} ${JSON.stringify(ope.dr?.ci95)}`);
  // The same estimate on newer exploration logs the candidate was not trained on (the CLI's
  // own advice): shown beside the in-sample one, to see how optimistic that one is.
  const newerLog = path.join(dir, "explore-newer.log");
  const p1b = await traffic({ seed: 4, n: nNewer, script: path.join(ROOT, "build/index.js"), vars: exploreVars, logFile: newerLog, log, name: "B explore (newer)" });
  const opeNewer = JSON.parse(decider(["ope", "--logs", newerLog, "--model", cand, "--no-ood", "--json"]));

  // 3. The candidate as the challenger on fresh traffic.
  const script = buildWithChallenger(cand, path.relative(ROOT, path.join(dir, "build")));
  const abVars = { CHALLENGER_PERCENT: "50", EXPLORE_PERCENT: "0", OOD_CHECK: "false" };
  const abLog = path.join(dir, "ab.log");
  const p2 = await traffic({ seed: 3, n, script, vars: abVars, logFile: abLog, log, name: "B serve" });
  const abReport = report([abLog]);
  const cc = abReport.verdicts.find((v) => v.kind === "champion_vs_challenger");
  const measuredCand = abReport.by_arm.challenger;
  const measuredChamp = abReport.by_arm.champion;

  // Ground truth: what each model's choices are worth on each phase's states (the estimates
  // and the measurement are on different streams; this shows how much the streams differ).
  const statesOf = (p) => p.records.map((r) => p.byId.get(r.id).state);
  const worth = (model, states) => {
    const choices = decideStates(model, states, ["--no-ood"]);
    return trueValue(states.map((s, i) => [s, choices[i].action]));
  };
  const truth = {};
  for (const [name, p] of [["explore", p1], ["explore_newer", p1b], ["serve", p2]]) {
    const states = statesOf(p);
    truth[name] = { shipped: worth(SHIPPED, states), candidate: worth(cand, states) };
  }
  // The must-show reads the estimate on the newer logs: the candidate's labels were chosen by a
  // reward model fitted on the training logs, so an estimate on those same logs can be
  // optimistic (its error against the ground truth is recorded beside it).
  const [lo, hi] = opeNewer.dr.ci95;
  const originsMatch = (p, rep) => ROUTES.every((r) => (rep.by_origin[r]?.with_outcome ?? 0) === p.origins[r].requests && (rep.by_origin[r]?.successes ?? 0) === p.origins[r].successes);
  const must = [
    {
      name: "the candidate's measured value beats the shipped model's",
      pass: measuredCand.success_rate > measuredChamp.success_rate,
      detail: `challenger ${candidateVersion} ${measuredCand.success_rate.toFixed(4)} [${measuredCand.ci95.map((x) => x.toFixed(4)).join(", ")}] (n ${measuredCand.with_outcome}) vs champion ${championVersion} ${measuredChamp.success_rate.toFixed(4)} [${measuredChamp.ci95.map((x) => x.toFixed(4)).join(", ")}] (n ${measuredChamp.with_outcome}); report: ${cc.text}`,
    },
    {
      name: "the candidate's measured value lies inside the DR estimate's 95% interval (on exploration logs it was not trained on)",
      pass: measuredCand.success_rate >= lo && measuredCand.success_rate <= hi,
      detail: `measured ${measuredCand.success_rate.toFixed(4)}; DR on the newer logs ${val(opeNewer.dr).toFixed(4)} [${lo.toFixed(4)}, ${hi.toFixed(4)}]; in-sample DR on the training logs ${val(ope.dr).toFixed(4)} [${ope.dr.ci95[0].toFixed(4)}, ${ope.dr.ci95[1].toFixed(4)}] (${measuredCand.success_rate >= ope.dr.ci95[0] && measuredCand.success_rate <= ope.dr.ci95[1] ? "inside" : "outside"})`,
    },
    {
      name: "lab integrity in every phase (decisions logged with the intended state, origins' counts equal the report's)",
      pass: [p1, p1b, p2].every((p) => p.integrity.missing_decisions === 0 && p.integrity.state_mismatches === 0 && p.integrity.origin_mismatches === 0) && originsMatch(p1, exploreReport) && originsMatch(p1b, report([newerLog])) && originsMatch(p2, abReport),
      detail: `explore ${JSON.stringify(p1.integrity)}; newer explore ${JSON.stringify(p1b.integrity)}; serve ${JSON.stringify(p2.integrity)}`,
    },
  ];
  const result = {
    scenario: "B",
    status: "ran",
    requests_per_phase: n,
    seconds: Math.round((Date.now() - t0) / 1000),
    champion_version: championVersion,
    candidate_version: candidateVersion,
    explore: {
      seed: 2,
      vars: exploreVars,
      by_arm: exploreReport.by_arm,
      by_source: exploreReport.by_source,
      explored: p1.records.filter((r) => p1.byId.get(r.id)?.explored).length,
      origins: p1.origins,
    },
    train_output: trainOut.trim().split("\n").slice(-3),
    ope_candidate: ope,
    ope_shipped: opeShipped,
    ope_candidate_newer_logs: { seed: 4, requests: nNewer, ...opeNewer },
    serve: {
      seed: 3,
      vars: abVars,
      verdict: abReport.verdict,
      champion_vs_challenger: cc,
      by_arm: abReport.by_arm,
      by_origin: abReport.by_origin,
      origins: p2.origins,
    },
    truth,
    must_show: must,
  };
  writeJson(path.join(RESULTS, "scenario-b.json"), result);
  return result;
}

if (import.meta.url === `file://${process.argv[1]}`) {
  const r = await scenarioB();
  for (const m of r.must_show) console.log(`${m.pass ? "PASS" : "FAIL"} ${m.name}: ${m.detail}`);
  process.exit(r.must_show.every((m) => m.pass) ? 0 : 1);
}

// Scenario E: failover rescues the client, not the decision.
//
// The challenger sends nearly everything to route_b, whose origin fails one request in three
// with a 503 on top of the ground truth; the champion is the shipped model. The same rollout
// runs twice on fresh Workers, failover on (the shipped a → b → c → a map: a failed route_b
// request is retried on route_c) and off. A decision is scored by its decided origin's first
// attempt, so the judge must roll the challenger back in about as many requests either way,
// while with failover on the clients hardly see a failure. Then, on the failover-on log:
// `decider report` must show route_b's real success rate, every rescued record must keep both
// attempts, and a policy `decider train --logs` learns from it (10% exploration on both
// runs) must avoid route_b.
//
// usage: LAB_ONLY=e node lab/run.mjs
import { mkdirSync, readFileSync, writeFileSync } from "node:fs";
import path from "node:path";
import {
  RESULTS, ROOT, WORK, buildWithChallenger, decideStates, decider, decisionsById, makeStream,
  report, runStream, startLab, stopLab, writeJson, writeRawLog,
} from "./lib.mjs";
import { PLANE_VARS, VARS, healthHeard, look, slice } from "./scenario-c.mjs";
import { hash01 } from "./truth.mjs";

const SHIPPED = path.join(ROOT, "model/decision-model.json");
const FAILOVER_ON = JSON.stringify({ route_a: "route_b", route_b: "route_c", route_c: "route_a" });
// Share of route_b's requests that fail with a 503 on purpose.
const FAIL = 1 / 3;
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

/** A challenger that answers route_b nearly everywhere: the simulator's data, every routed
 * label set to route_b (rejects kept), trained as usual. */
function trainRouteB(dir) {
  const sim = path.join(dir, "sim.jsonl");
  const relabelled = path.join(dir, "route-b.jsonl");
  const model = path.join(dir, "challenger.json");
  decider(["simulate", "--rows", "20000", "--seed", "12", "--out", sim]);
  const rows = readFileSync(sim, "utf8").split("\n").filter((l) => l.trim()).map((l) => {
    const row = JSON.parse(l);
    if (row.action !== "reject") row.action = "route_b";
    return JSON.stringify(row);
  });
  writeFileSync(relabelled, rows.join("\n") + "\n");
  decider(["train", "--data", relabelled, "--out", model, "--quiet"]);
  return model;
}

/** One rollout to its end, failover `on` or off. */
async function run({ on, seed, script, chunk, cap, dir, log }) {
  const name = on ? "failover on" : "failover off";
  // Exploration (10%, both arms) gives the learner every route in every kind of state.
  const lab = await startLab({ seed, script, vars: { ...VARS, EXPLORE_PERCENT: "10", FAILOVER: on ? FAILOVER_ON : "{}" }, rollout: { vars: PLANE_VARS } });
  const file = path.join(dir, on ? "failover-on.log" : "failover-off.log");
  const clients = {};
  const looks = [];
  let records = [];
  try {
    lab.shared.fail = (req, action) => action === "route_b" && hash01(`${seed}:e:${req.id}`) < FAIL;
    lab.shared.failStatus = 503;
    await healthHeard(lab);
    await sleep(1100);
    const batches = makeStream({ seed, n: cap });
    for (let start = 0; start < cap; start += chunk) {
      const got = await runStream(lab, slice(batches, start, start + chunk));
      for (const r of got) clients[r.status] = (clients[r.status] ?? 0) + 1;
      records = records.concat(got);
      const r = await look(lab);
      const c = r.store.state.last?.challenger;
      looks.push({ requests: records.length, setting: r.setting, phase: r.phase, challenger: c?.treatment?.mean ?? null, champion: c?.baseline?.mean ?? null });
      log(`E ${name}: ${records.length} requests, ${r.phase} at ${r.setting}`);
      if (r.phase !== "ramping") break;
    }
    writeRawLog(lab, file);
    const byId = decisionsById(lab);
    const decisions = records.map((r) => byId.get(r.id)).filter(Boolean);
    const rescued = decisions.filter((d) => d.outcome?.attempts?.length === 2);
    const rescuedOk = rescued.filter((d) => d.outcome.attempts[0].origin === d.action && d.outcome.attempts[0].status === 503 &&
      d.outcome.attempts[0].error === "upstream_status" && d.outcome.attempts[1].origin === "route_c").length;
    const rep = report([file]);
    return {
      failover: on, seed, chunk, requests: records.length, looks, final: looks.at(-1), clients,
      rescued: rescued.length, rescued_with_both_attempts: rescuedOk,
      report: { rescued_by_failover: rep.rescued_by_failover, by_origin: rep.by_origin, by_arm: rep.by_arm },
      states: decisions.map((d) => d.state), log: path.relative(ROOT, file),
    };
  } finally {
    await stopLab(lab);
  }
}

export async function scenarioE({ log = console.log } = {}) {
  const t0 = Date.now();
  const dir = path.join(WORK, "e");
  mkdirSync(dir, { recursive: true });
  const challenger = trainRouteB(dir);
  const script = buildWithChallenger(challenger, path.relative(ROOT, path.join(dir, "build")));
  const args = { seed: 51, script, chunk: 1000, cap: 20000, dir, log };
  const on = await run({ ...args, on: true });
  const off = await run({ ...args, on: false });

  // What a policy learned from the failover-on log does with route_b, on the states it logged.
  const cand = path.join(dir, "learned.json");
  decider(["train", "--logs", path.join(ROOT, on.log), "--out", cand, "--quiet"]);
  const states = on.states;
  const shareB = (model) => {
    const choices = decideStates(model, states, ["--no-ood"]);
    return choices.filter((c) => c.action === "route_b").length / choices.length;
  };
  const learned = { states: states.length, learned: shareB(cand), champion: shareB(SHIPPED), challenger: shareB(challenger) };
  const rateB = (r) => r.report.by_origin.route_b?.success_rate ?? null;
  const rolledBack = (r) => r.final?.phase === "rolled_back" && r.final?.setting === 0;
  const pct = (x) => `${(100 * x).toFixed(1)}%`;
  const must = [
    {
      name: "failover on and off: the challenger is rolled back in about as many requests",
      pass: rolledBack(on) && rolledBack(off) && Math.abs(on.looks.length - off.looks.length) <= 1,
      detail: `on: ${on.final?.phase} after ${on.requests} requests, ${on.looks.length} looks (challenger ${on.final?.challenger?.toFixed(3)} vs champion ${on.final?.champion?.toFixed(3)}); off: ${off.final?.phase} after ${off.requests} requests, ${off.looks.length} looks (${off.final?.challenger?.toFixed(3)} vs ${off.final?.champion?.toFixed(3)})`,
    },
    {
      name: "with failover on the clients see fewer of route_b's failures (idempotent requests rescued)",
      pass: (off.clients["502"] ?? 0) > 0 && (on.clients["502"] ?? 0) / on.requests < 0.5 * (off.clients["502"] / off.requests),
      detail: `client statuses on ${JSON.stringify(on.clients)}, off ${JSON.stringify(off.clients)}`,
    },
    {
      name: "every rescued record keeps both attempts",
      pass: on.rescued > 0 && on.rescued_with_both_attempts === on.rescued && on.report.rescued_by_failover >= on.rescued,
      detail: `${on.rescued} rescued decisions, ${on.rescued_with_both_attempts} with route_b's 503 then route_c's answer; decider report counts ${on.report.rescued_by_failover} rescued_by_failover`,
    },
    {
      name: "decider report scores route_b by its first attempt, failover on as off",
      pass: rateB(on) !== null && rateB(off) !== null && Math.abs(rateB(on) - rateB(off)) < 0.06,
      detail: `route_b success rate: failover on ${rateB(on)?.toFixed(3)} (n ${on.report.by_origin.route_b?.with_outcome}), off ${rateB(off)?.toFixed(3)} (n ${off.report.by_origin.route_b?.with_outcome})`,
    },
    {
      name: "a policy learned from the failover-on log avoids route_b",
      pass: learned.learned < learned.champion && learned.learned < learned.challenger,
      detail: `share of the ${learned.states} logged states sent to route_b: learned ${pct(learned.learned)}, champion ${pct(learned.champion)}, challenger ${pct(learned.challenger)}`,
    },
  ];
  const strip = ({ states: _, ...r }) => r;
  const result = { scenario: "E", seconds: Math.round((Date.now() - t0) / 1000), fail_share: FAIL, on: strip(on), off: strip(off), learned, must_show: must };
  writeJson(path.join(RESULTS, "scenario-e.json"), result);
  return result;
}

if (import.meta.url === `file://${process.argv[1]}`) {
  const r = await scenarioE();
  for (const m of r.must_show) console.log(`${m.pass ? "PASS" : "FAIL"} ${m.name}: ${m.detail}`);
  process.exit(r.must_show.every((m) => m.pass) ? 0 : 1);
}

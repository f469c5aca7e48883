// Scenario D: the rollout as an operator runs it, across the two Workers against the
// ground-truth origins.
//
// 1. Time on a step and the bake: a better challenger under ROLLOUT_MIN_STEP_S; once it bakes
//    (past the last step, the previous champion keeping ROLLOUT_BAKE_PERCENT), the origins start
//    failing half of the challenger's requests: it must be rolled back from the bake.
// 2. Controls: pause, resume, abort, restart, promote and promote --skip-bake through
//    `decider rollout` against the serving Worker, each visible in /v1/health and in the log;
//    a webhook receiver gets every change once.
// 3. A webhook that fails, and one that hangs: the same verbs and looks, answered as fast, with
//    the same settings.
//
// usage: LAB_ONLY=d node lab/run.mjs
import { execFile } from "node:child_process";
import { mkdirSync } from "node:fs";
import http from "node:http";
import path from "node:path";
import { trainWorse } from "./corrupt.mjs";
import {
  RESULTS, ROOT, WORK, buildWithChallenger, canaryBucket, decider, deciderBin, makeStream,
  runStream, startLab, stopLab, writeJson,
} from "./lib.mjs";
import { VARS, healthHeard, look, slice } from "./scenario-c.mjs";
import { hash01 } from "./truth.mjs";

const SHIPPED = path.join(ROOT, "model/decision-model.json");
const TOKEN = "lab-plane-token";
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

/** A webhook receiver on loopback: records each notification; `behave`: ok, fail or hang. */
async function receiver(behave = "ok") {
  const r = { got: [], behave, url: "" };
  const server = http.createServer((req, res) => {
    let body = "";
    req.on("data", (c) => (body += c));
    req.on("end", () => {
      if (r.behave === "hang") return;
      r.got.push(JSON.parse(body));
      res.writeHead(r.behave === "fail" ? 500 : 200).end();
    });
  });
  await new Promise((ok) => server.listen(0, "127.0.0.1", ok));
  r.url = `http://127.0.0.1:${server.address().port}/hook`;
  r.close = () => new Promise((ok) => { server.closeAllConnections?.(); server.close(() => ok()); });
  return r;
}

/** `decider rollout ARGS… --url` the lab's Worker, asynchronously (the receiver lives here). */
function cli(lab, args) {
  return new Promise((resolve) => {
    const t0 = Date.now();
    execFile(deciderBin(), ["rollout", ...args, "--url", lab.worker.url, "--json"], { env: { ...process.env, ROLLOUT_ADMIN_TOKEN: TOKEN } },
      (e, out, err) => resolve({ status: e ? e.code : 0, ms: Date.now() - t0, json: e ? null : JSON.parse(out), err: err.trim() }));
  });
}

/** 1. A better challenger, a minimum step, a bake, and a degradation during the bake. */
async function bake({ script, seed, minStepS, bakePercent, chunk, cap, log }) {
  const lab = await startLab({
    seed, script, vars: VARS,
    rollout: { vars: { ROLLOUT_WINDOW_S: "1", ROLLOUT_MIN_OUTCOMES: "100", ROLLOUT_MIN_STEP_S: String(minStepS), ROLLOUT_BAKE_PERCENT: String(bakePercent), ROLLOUT_BAKE_S: "3600" } },
  });
  try {
    await healthHeard(lab);
    await sleep(1100);
    const batches = makeStream({ seed, n: cap });
    const looks = [];
    let degradedAt = null;
    for (let start = 0; start < cap; start += chunk) {
      await runStream(lab, slice(batches, start, start + chunk));
      const r = await look(lab);
      looks.push({ requests: start + chunk, phase: r.phase, setting: r.setting, at: Date.now() });
      if (r.phase === "baking" && degradedAt === null) {
        // The challenger serves the keys below its share: half of its requests now fail.
        const share = r.setting;
        lab.shared.fail = (req) => canaryBucket(req.id) < share && hash01(`${seed}:degrade:${req.id}`) < 0.5;
        degradedAt = start + chunk;
        log(`D bake: baking at ${share}% after ${degradedAt} requests; the challenger's origins now fail half its requests`);
        await sleep(1100);
      }
      if (r.phase === "rolled_back" || r.phase === "promoted") break;
      if (looks.length % 5 === 0) log(`D bake: ${start + chunk} requests, ${r.phase} at ${r.setting}`);
    }
    const changes = lab.worker.logs.filter((l) => l.event === "rollout");
    const lasted = changes.map((c) => ({ from: c.from, to: c.to, why: c.why, step_s: (Date.parse(c.ts) - Date.parse(c.step_since)) / 1000 }));
    return { min_step_s: minStepS, bake_percent: bakePercent, looks: looks.length, requests: looks.at(-1)?.requests, degraded_at: degradedAt, changes: lasted, final: looks.at(-1) };
  } finally {
    await stopLab(lab);
  }
}

/** 2 and 3. The verbs through the CLI with a webhook that answers, fails or hangs. */
async function controls({ script, seed, behave }) {
  const hook = await receiver(behave);
  const lab = await startLab({
    seed, script, vars: VARS,
    rollout: { vars: { ROLLOUT_WINDOW_S: "1", ROLLOUT_MIN_STEP_S: "0", ROLLOUT_BAKE_PERCENT: "10", ROLLOUT_BAKE_S: "3600", ADMIN_TOKEN: TOKEN, ROLLOUT_WEBHOOK_URL: hook.url } },
  });
  try {
    await healthHeard(lab);
    const verbs = [
      ["pause", "--reason", "origin B maintenance"], ["resume"], ["abort", "--reason", "bad deploy"],
      ["restart", "--reason", "the outage was elsewhere"], ["promote", "--reason", "verified"], ["promote", "--skip-bake"],
    ];
    const steps = [];
    for (const v of verbs) {
      const r = await cli(lab, v);
      const h = await (await lab.worker.health()).json();
      const t0 = Date.now();
      const judged = await lab.worker.judge();
      steps.push({
        verb: v.join(" "), status: r.status, ms: r.ms, err: r.err, setting: r.json?.setting, phase: r.json?.phase, paused: r.json?.paused,
        health_history: h.rollout.store.state.history.at(-1)?.why, look_ms: Date.now() - t0, look: judged,
      });
    }
    const records = lab.worker.logs.filter((l) => l.event === "rollout");
    if (behave === "ok") for (let i = 0; i < 50 && hook.got.length < records.length; i++) await sleep(100);
    return {
      behave, steps,
      records: records.map((r) => ({ why: r.why, from: r.from, to: r.to, reason: r.reason ?? null })),
      notifications: hook.got.map((n) => ({ id: n.id, why: n.record?.why, text: n.text })),
      webhook_failures: lab.worker.logs.filter((l) => l.event === "rollout_webhook_failed").length,
    };
  } finally {
    await stopLab(lab);
    await hook.close();
  }
}

export async function scenarioD({ log = console.log, minStepS = Number(process.env.LAB_D_MIN_STEP_S ?? 15) } = {}) {
  const t0 = Date.now();
  const dir = path.join(WORK, "d");
  mkdirSync(dir, { recursive: true });
  const rel = (p) => path.relative(ROOT, p);
  // Scenario A's deliberately worse model as the champion, the shipped one as the challenger.
  const { model: worse } = trainWorse(dir, decider);
  const script = buildWithChallenger(SHIPPED, rel(path.join(dir, "build-better")), worse);
  const b = await bake({ script, seed: 41, minStepS, bakePercent: 10, chunk: 1000, cap: 60000, log });
  const ok = await controls({ script, seed: 42, behave: "ok" });
  const fail = await controls({ script, seed: 43, behave: "fail" });
  const hang = await controls({ script, seed: 44, behave: "hang" });

  const judgeSteps = b.changes.filter((c) => c.why === "better");
  const settings = (r) => r.steps.map((s) => `${s.setting}/${s.phase}/${s.paused}`).join(" ");
  const must = [
    {
      name: "a step never ends before ROLLOUT_MIN_STEP_S",
      pass: judgeSteps.length >= 2 && judgeSteps.every((c) => c.step_s >= minStepS),
      detail: `ROLLOUT_MIN_STEP_S=${minStepS}: ${judgeSteps.map((c) => `${c.from}→${c.to} after ${c.step_s.toFixed(1)} s`).join(", ")}`,
    },
    {
      name: "a challenger that degrades during the bake is rolled back after the last step",
      pass: b.degraded_at !== null && b.final?.phase === "rolled_back" && b.changes.at(-1)?.why === "worse" && b.changes.at(-1)?.from === 100 - b.bake_percent,
      detail: `baking at ${100 - b.bake_percent}% after ${b.degraded_at} requests; then ${b.changes.slice(-1).map((c) => `${c.from}→${c.to} (${c.why})`).join("")}, ${b.final?.phase} after ${b.requests} requests, ${b.looks} looks`,
    },
    {
      name: "pause, resume, abort, restart and promote through the CLI, each in /v1/health and the log",
      pass: ok.steps.every((s) => s.status === 0) && ok.records.map((r) => r.why).join() === "pause,resume,abort,restart,promote,promote" &&
        ok.steps.map((s) => s.health_history).join() === "pause,resume,abort,restart,promote,promote" &&
        settings(ok) === "5/ramping/true 5/ramping/false 0/rolled_back/false 5/ramping/false 90/baking/false 100/promoted/false",
      detail: ok.steps.map((s) => `${s.verb} → ${s.setting}% ${s.phase}${s.paused ? " paused" : ""} (health: ${s.health_history})`).join("; "),
    },
    {
      name: "the webhook receiver gets every change once",
      pass: ok.notifications.length === ok.records.length && new Set(ok.notifications.map((n) => n.id)).size === ok.notifications.length &&
        ok.notifications.map((n) => n.why).join() === ok.records.map((r) => r.why).join(),
      detail: `${ok.notifications.length} notifications for ${ok.records.length} changes, ${new Set(ok.notifications.map((n) => n.id)).size} distinct ids; first: ${ok.notifications[0]?.text}`,
    },
    {
      name: "a webhook that fails or hangs changes nothing else",
      pass: [fail, hang].every((r) => settings(r) === settings(ok) && r.steps.every((s) => s.status === 0 && s.ms < 1500 && s.look_ms < 1500 && s.look === "ok")) && fail.webhook_failures > 0,
      detail: [fail, hang].map((r) => `${r.behave}: same settings ${settings(r) === settings(ok)}, slowest verb ${Math.max(...r.steps.map((s) => s.ms))} ms, slowest look ${Math.max(...r.steps.map((s) => s.look_ms))} ms, webhook failures logged ${r.webhook_failures}`).join("; "),
    },
  ];
  const result = { scenario: "D", seconds: Math.round((Date.now() - t0) / 1000), bake: b, controls: { ok, fail, hang }, must_show: must };
  writeJson(path.join(RESULTS, "scenario-d.json"), result);
  return result;
}

if (import.meta.url === `file://${process.argv[1]}`) {
  const r = await scenarioD();
  for (const m of r.must_show) console.log(`${m.pass ? "PASS" : "FAIL"} ${m.name}: ${m.detail}`);
  process.exit(r.must_show.every((m) => m.pass) ? 0 : 1);
}

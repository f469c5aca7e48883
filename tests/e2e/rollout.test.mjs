// Gradual rollout and observation: canary share with sticky buckets, champion/challenger,
// shadow mode, and one Analytics Engine data point per decision.
import { afterAll, beforeAll, describe, expect, test } from "vitest";
import { spawnSync } from "node:child_process";
import { mkdtempSync, readFileSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { EXAMPLE_STATE, ROOT, startOrigin, startWorker } from "./helpers.mjs";

const TOKEN = "rollout-token";
const HEALTHY = { current_load: 0.35, recent_success_rate: 0.99, queue_depth: 4 };
const US = { country: "US", continent: "NA" };

// A stand-in for the Analytics Engine binding: each data point becomes a JSON log line of
// the stub (same workerd, so the test reads it with the Worker's logs).
const AE_STUB = `
class AnalyticsEngineDataset {
  writeDataPoint(p) { console.log(JSON.stringify({ event: "ae_point", point: p })); }
}
export default function () { return new AnalyticsEngineDataset(); }
`;

let origin;
const started = [];
async function worker(vars, extra = {}, workers = []) {
  const w = await startWorker({
    vars: {
      ORIGIN_ROUTE_A: origin.url,
      ORIGIN_ROUTE_B: origin.url,
      ORIGIN_ROUTE_C: origin.url,
      ADMIN_TOKEN: TOKEN,
      ...vars,
    },
    extra: { kvNamespaces: ["SIGNALS"], ...extra },
    workers,
  });
  started.push(w);
  const res = await w.fetch("/v1/admin/signals", {
    method: "PUT",
    headers: { authorization: `Bearer ${TOKEN}`, "content-type": "application/json" },
    body: JSON.stringify(HEALTHY),
  });
  expect(res.status).toBe(200);
  return w;
}

let seq = 0;
/** One routed GET; returns its log line. */
async function routed(w, headers = {}) {
  const id = `rollout-${++seq}`;
  const res = await w.fetch("/page", { cf: US, headers: { ...headers, "cf-ray": id } });
  expect(res.status).toBe(200);
  await res.arrayBuffer();
  const line = await w.waitForLog((l) => l.event === "decision" && l.request_id === id);
  expect(line.source).toBe(res.headers.get("x-decision-source"));
  return line;
}

beforeAll(async () => {
  origin = await startOrigin("O");
});
afterAll(async () => {
  await Promise.all(started.map((w) => w.dispose()));
  await origin?.close();
});

describe("canary", () => {
  test("CANARY_PERCENT=100 (default): the model decides", async () => {
    const w = await worker({});
    for (let i = 0; i < 5; i++) {
      const line = await routed(w, { "cf-connecting-ip": `203.0.113.${i}` });
      expect(line.arm).toBe("champion");
      expect(line.fallback_reason).not.toBe("holdout");
      expect(line.source).toBe("model");
    }
  });

  test("CANARY_PERCENT=0: everything is held out on rules", async () => {
    const w = await worker({ CANARY_PERCENT: "0" });
    for (let i = 0; i < 5; i++) {
      const line = await routed(w, { "cf-connecting-ip": `203.0.113.${i}` });
      expect(line).toMatchObject({ source: "rules", fallback_reason: "holdout" });
      expect(line.arm).toBe("holdout");
    }
    const h = await (await w.health()).json();
    expect(h.routing.canary_percent).toBe(0);
  });

  test.each([
    ["client IP", {}, (i) => ({ "cf-connecting-ip": `198.51.100.${i}` })],
    ["a named header", { CANARY_KEY: "header:x-user-id" }, (i) => ({ "x-user-id": `user-${i}` })],
  ])("CANARY_PERCENT=50 by %s: sticky per key, both groups present", async (_name, vars, headersFor) => {
    const w = await worker({ CANARY_PERCENT: "50", ...vars });
    const groups = { held: 0, canary: 0 };
    for (let i = 0; i < 24; i++) {
      const first = await routed(w, headersFor(i));
      const second = await routed(w, headersFor(i));
      expect(second.arm, `key ${i}`).toBe(first.arm);
      expect(second.fallback_reason === "holdout").toBe(first.arm === "holdout");
      groups[first.arm === "holdout" ? "held" : "canary"]++;
    }
    expect(groups.held).toBeGreaterThan(2);
    expect(groups.canary).toBeGreaterThan(2);
  });

  test("the canary applies to routing only, not to /v1/decide", async () => {
    const w = await worker({ CANARY_PERCENT: "0" });
    const d = await (await w.decide({ state: EXAMPLE_STATE })).json();
    expect(d.source).toBe("model");
  });
});

describe("shadow mode", () => {
  test("rules decide, the log line records both actions and whether they agree", async () => {
    const w = await worker({ SHADOW: "true" });
    const agree = await routed(w);
    expect(agree).toMatchObject({ source: "rules" });
    // A shadow line over 1 KB is written without its nulls: absent is null.
    expect(agree.fallback_reason ?? null).toBeNull();
    expect(agree.shadow).toEqual({ model_action: agree.shadow.model_action, agree: agree.shadow.model_action === agree.action });
    expect(["route_a", "route_b", "route_c", "reject"]).toContain(agree.shadow.model_action);
    // A rule table that disagrees with the model on purpose: the model still only shadows.
    const w2 = await worker({ SHADOW: "true", RULES: JSON.stringify({ version: "all-c", rules: [{ name: "c", when: {}, action: "route_c" }] }) });
    const line = await routed(w2);
    expect(line).toMatchObject({ action: "route_c", source: "rules", rule: "c" });
    expect(line).toMatchObject({ action: "route_c", shadow: { model_action: "route_a", agree: false } });
    // /v1/decide shows the same record in its body.
    const d = await (await w2.decide({ state: EXAMPLE_STATE })).json();
    expect(d).toMatchObject({ action: "route_c", source: "rules", shadow: { model_action: expect.any(String), agree: false } });
  });
});

describe("Analytics Engine", () => {
  test("one data point per decision when DECISIONS is bound", async () => {
    const w = await worker({}, { wrappedBindings: { DECISIONS: { scriptName: "ae-stub" } } }, [
      { name: "ae-stub", modules: true, script: AE_STUB },
    ]);
    const before = w.logs.filter((l) => l.event === "ae_point").length;
    const line = await routed(w);
    const d = await (await w.decide({ state: EXAMPLE_STATE })).json();
    await w.waitForLog(() => w.logs.filter((l) => l.event === "ae_point").length >= before + 2);
    const points = w.logs.filter((l) => l.event === "ae_point").slice(before).map((l) => l.point);
    expect(points).toHaveLength(2);
    expect(points[0]).toEqual({
      indexes: [line.action],
      blobs: [line.action, line.source, line.fallback_reason ?? "", line.model_version],
      doubles: [line.confidence, line.decision_us],
    });
    expect(points[1].blobs).toEqual([d.action, d.source, "", d.model_version]);
  });

  test("without the binding nothing is written and nothing breaks", async () => {
    const w = await worker({});
    await routed(w);
    expect(w.logs.filter((l) => l.event === "ae_point" || l.event === "analytics_error")).toEqual([]);
  });
});

describe("champion/challenger", () => {
  // build/challenger is this Worker with tests/fixtures/challenger-model.json embedded as the
  // challenger (`make build/challenger/index.js`): model_version "challenger-test", which
  // answers route_b for the example state where the shipped champion answers route_a.
  const CHALLENGER_BUILD = { scriptPath: path.join(ROOT, "build/challenger/index.js") };
  const vars = { CHALLENGER_PERCENT: "30", CANARY_PERCENT: "90", CANARY_KEY: "header:x-user" };

  test("the challenger serves its sticky share; every record names its arm and model", async () => {
    const w = await worker(vars, CHALLENGER_BUILD);
    const h = await (await w.health()).json();
    expect(h.challenger).toMatchObject({ loaded: true, version: "challenger-test", percent: 30, error: null });
    expect(h.model.version).not.toBe("challenger-test");
    const arms = { champion: 0, challenger: 0, holdout: 0 };
    for (let i = 0; i < 200; i++) {
      const line = await routed(w, { "x-user": `user-${i}` });
      arms[line.arm]++;
      if (line.arm === "challenger") expect(line.model_version).toBe("challenger-test");
      if (line.arm === "champion") expect(line.model_version).toBe(h.model.version);
      if (line.arm === "holdout") expect(line).toMatchObject({ source: "rules", fallback_reason: "holdout" });
      if (i < 20) expect((await routed(w, { "x-user": `user-${i}` })).arm, "sticky").toBe(line.arm);
    }
    // Buckets 0–29 challenger, 30–89 champion, 90–99 held out (binomial, 200 keys).
    expect(arms.challenger).toBeGreaterThan(35);
    expect(arms.challenger).toBeLessThan(85);
    expect(arms.holdout).toBeGreaterThan(5);
    expect(arms.holdout).toBeLessThan(40);
    // /v1/decide: the same buckets, never held out; the body names the model that decided.
    const seen = new Set();
    for (let i = 0; i < 60; i++) {
      const res = await w.decide({ state: EXAMPLE_STATE }, { "x-user": `user-${i}` });
      const d = await res.json();
      const line = await w.waitForLog((l) => l.event === "decision" && l.decision_id === d.decision_id);
      expect(line.arm).not.toBe("holdout");
      expect(d.model_version).toBe(line.arm === "challenger" ? "challenger-test" : h.model.version);
      expect(d.action).toBe(line.arm === "challenger" ? "route_b" : "route_a");
      seen.add(line.arm);
    }
    expect([...seen].sort()).toEqual(["challenger", "champion"]);
  });

  test("a challenger with a linear base and a hidden layer decides in the Worker as in the CLI", async () => {
    // The fixture's network moves decisions the trees alone would not: high queues to
    // route_c (a tanh unit), the small hours to route_a (the linear base).
    const states = readFileSync(path.join(ROOT, "tests/fixtures/skew_states.jsonl"), "utf8").split("\n").filter(Boolean).slice(0, 120);
    const cli = process.env.DECIDER_BIN || path.join(ROOT, "target/debug/decider");
    const run = spawnSync(cli, ["decide", "--model", path.join(ROOT, "tests/fixtures/challenger-model.json"), "--rules", path.join(ROOT, "rules/default.json")],
      { input: states.join("\n") + "\n", encoding: "utf8" });
    expect(run.status, run.stderr).toBe(0);
    const native = run.stdout.split("\n").filter(Boolean).map((l) => JSON.parse(l));
    const w = await worker({ CHALLENGER_PERCENT: "100" }, CHALLENGER_BUILD);
    const actions = new Set();
    for (let i = 0; i < states.length; i++) {
      const d = await (await w.decide(`{"state": ${states[i]}}`)).json();
      const n = native[i];
      expect(d.model_version, states[i]).toBe("challenger-test");
      expect([d.action, d.source, d.fallback_reason], states[i]).toEqual([n.action, n.source, n.fallback_reason]);
      if (n.confidence !== null) expect(Math.abs(d.confidence - n.confidence), states[i]).toBeLessThanOrEqual(1e-12);
      else expect(d.confidence).toBeNull();
      if (d.source === "model") actions.add(d.action);
    }
    expect([...actions].sort()).toEqual(expect.arrayContaining(["route_a", "route_b", "route_c"]));
  });

  test("without an embedded challenger, CHALLENGER_PERCENT serves everything from the champion", async () => {
    const w = await worker(vars);
    const h = await (await w.health()).json();
    expect(h.challenger).toBeUndefined();
    for (let i = 0; i < 40; i++) {
      const line = await routed(w, { "x-user": `user-${i}` });
      expect(line.arm).not.toBe("challenger");
    }
  });
});

describe("automatic rollout (the ROLLOUT Durable Object)", () => {
  const CHALLENGER_BUILD = { scriptPath: path.join(ROOT, "build/challenger/index.js") };
  const STORE = { durableObjects: { ROLLOUT: "Rollout" } };
  // Small windows, frequent flushes and share reads, so that a test sees several cron runs.
  const FAST = {
    CANARY_KEY: "header:x-user",
    ROLLOUT_WINDOW_S: "1",
    ROLLOUT_FLUSH_S: "1",
    ROLLOUT_FLUSH_OUTCOMES: "10",
    ROLLOUT_CACHE_S: "1",
    ROLLOUT_MIN_OUTCOMES: "20",
  };

  /** A rollout store stand-in in its own worker: `fetch` throws, hangs, or answers late. */
  function brokenStore(kind) {
    const behave = {
      throws: `throw new Error("store: boom");`,
      hangs: `return new Promise(() => {});`,
      slow: `await new Promise((r) => setTimeout(r, 3000));
        const path = new URL(request.url).pathname;
        return Response.json(path === "/setting" ? { setting: 30, phase: "ramping" } : { accepted: true }, { status: path === "/setting" ? 200 : 202 });`,
    }[kind];
    return {
      extra: { durableObjects: { ROLLOUT: { className: "Store", scriptName: `store-${kind}` } } },
      workers: [{
        name: `store-${kind}`,
        modules: true,
        compatibilityDate: "2026-07-30",
        script: `export class Store { async fetch(request) { ${behave} } }
          export default { fetch() { return new Response("store"); } };`,
        durableObjects: { SELF: "Store" },
      }],
    };
  }

  /** What a client sees of an answer, less what differs by design (ids, the Date, and the
   * time spent deciding: the Workers clock moves with I/O, not with the store). */
  async function seen(res) {
    const headers = [...res.headers].filter(([k]) => !["x-decision-id", "date"].includes(k));
    let body = await res.text();
    try {
      const j = JSON.parse(body);
      delete j.decision_id;
      delete j.decision_us;
      body = j;
    } catch { /* the origin's or an error's text */ }
    return { status: res.status, headers, body };
  }

  test("routing answers identically with the store absent, throwing, hanging or slow, and never waits on it", async () => {
    const vars = { ...FAST, CHALLENGER_PERCENT: "30", CANARY_PERCENT: "90" };
    const setups = {
      absent: { extra: CHALLENGER_BUILD, workers: [] },
      ...Object.fromEntries(["throws", "hangs", "slow"].map((k) => {
        const b = brokenStore(k);
        return [k, { extra: { ...CHALLENGER_BUILD, ...b.extra }, workers: b.workers }];
      })),
    };
    const answers = {};
    for (const [name, s] of Object.entries(setups)) {
      const w = await worker(vars, s.extra, s.workers);
      const got = [];
      const started = Date.now();
      for (let i = 0; i < 40; i++) {
        const user = { "x-user": `user-${i}` };
        const t0 = Date.now();
        got.push(await seen(await w.fetch("/page", { cf: US, headers: user })));
        got.push(await seen(await w.decide({ state: EXAMPLE_STATE }, user)));
        // No request waits on the store: a hung or 3 s store would show here.
        expect(Date.now() - t0, `${name} request ${i}`).toBeLessThan(1500);
        if (i === 20) await new Promise((r) => setTimeout(r, 1100)); // a flush and a share read fall due
      }
      answers[name] = got;
      if (name !== "absent") {
        // The counts were sent (and lost), the share read failed or came late: said in the log.
        if (name !== "slow") await w.waitForLog((l) => l.event === "rollout_flush_failed" || l.event === "rollout_read_failed", 6000);
      }
      expect(Date.now() - started).toBeLessThan(20_000);
    }
    for (const name of ["throws", "hangs", "slow"]) {
      answers.absent.forEach((a, i) => expect(answers[name][i], `${name}, answer ${i}`).toEqual(a));
    }
    expect(new Set(answers.absent.map((a) => a.status))).toEqual(new Set([200]));
  });

  /** `decider report`'s rollout verdict on the Worker's own log lines. */
  function rolloutVerdict(w) {
    const file = path.join(mkdtempSync(path.join(tmpdir(), "rollout-")), "worker.log");
    writeFileSync(file, w.stdoutLines.join("\n") + "\n");
    const cli = process.env.DECIDER_BIN || path.join(ROOT, "target/debug/decider");
    const run = spawnSync(cli, ["report", "--json", "--logs", file], { encoding: "utf8" });
    expect(run.status, run.stderr).toBe(0);
    return JSON.parse(run.stdout).verdicts.find((v) => v.kind === "rollout");
  }

  /**
   * Drives a rollout: `/v1/decide` calls from fresh users with their outcomes reported
   * (reward 1 for `good` actions), a cron run after each round, until the share stops
   * moving or `rounds` pass. Returns the shares seen after each run and the requests sent.
   */
  async function drive(w, good, rounds) {
    const cronWorker = await w.mf.getWorker();
    const shares = [];
    let requests = 0;
    let user = 0;
    for (let r = 0; r < rounds; r++) {
      for (let i = 0; i < 250; i++) {
        const d = await (await w.decide({ state: EXAMPLE_STATE }, { "x-user": `u-${r}-${user++}` })).json();
        const res = await w.fetch("/v1/outcome", {
          method: "POST",
          headers: { authorization: `Bearer ${TOKEN}`, "content-type": "application/json" },
          body: JSON.stringify({ decision_id: d.decision_id, reward: good.includes(d.action) ? 1 : 0 }),
        });
        expect(res.status).toBe(202);
        requests += 2;
      }
      // Let the last window end and the last counts flush (the next request sends them).
      await new Promise((r) => setTimeout(r, 1100));
      await (await w.fetch("/v1/health")).arrayBuffer();
      await new Promise((r) => setTimeout(r, 1100));
      expect((await cronWorker.scheduled({ cron: "* * * * *" })).outcome).toBe("ok");
      const h = await (await w.health()).json();
      shares.push(h.rollout.setting);
      if (h.rollout.phase !== "ramping") break;
    }
    return { shares, requests };
  }

  test("a better challenger ramps through every step to 100%, each change a rollout record", async () => {
    // The challenger answers route_b where the champion answers route_a; route_b pays.
    const w = await worker(FAST, { ...CHALLENGER_BUILD, ...STORE });
    const before = await (await w.health()).json();
    expect(before.rollout).toMatchObject({ automatic: true, challenger_version: "challenger-test" });
    const { shares } = await drive(w, ["route_b"], 30);
    expect(shares.at(-1)).toBe(100);
    const changes = w.logs.filter((l) => l.event === "rollout");
    expect(changes.map((c) => [c.from, c.to, c.why])).toEqual([[5, 20, "better"], [20, 50, "better"], [50, 100, "better"]]);
    for (const c of changes) {
      expect(c).toMatchObject({ log_version: 1, challenger_version: "challenger-test" });
      expect(c.statistics.verdict).toBe("better");
      expect(c.statistics.treatment.n).toBeGreaterThanOrEqual(20);
    }
    const h = await (await w.health()).json();
    expect(h.rollout).toMatchObject({ phase: "promoted", setting: 100, effective_champion: "challenger-test" });
    expect(h.rollout.store.state.history.map((c) => c.to)).toEqual([20, 50, 100]);
    expect(h.challenger.percent).toBe(100);
    const pub = await (await w.fetch("/v1/health")).json();
    expect(pub.rollout.effective_champion).toBe("challenger-test");
    // Every decision now comes from the challenger.
    for (let i = 0; i < 10; i++) {
      const d = await (await w.decide({ state: EXAMPLE_STATE }, { "x-user": `after-${i}` })).json();
      expect(d.model_version).toBe("challenger-test");
    }
    // decider report, on the Worker's own log lines, says to ship it.
    const verdict = rolloutVerdict(w);
    expect(verdict.action).toBe("ship the challenger");
  }, 180_000);

  test("a worse challenger is rolled back to 0 at once", async () => {
    const w = await worker(FAST, { ...CHALLENGER_BUILD, ...STORE });
    const { shares } = await drive(w, ["route_a"], 10);
    expect(shares.at(-1)).toBe(0);
    const changes = w.logs.filter((l) => l.event === "rollout");
    expect(changes.map((c) => [c.from, c.to, c.why])).toEqual([[5, 0, "worse"]]);
    expect(changes[0].statistics.verdict).toBe("worse");
    const h = await (await w.health()).json();
    expect(h.rollout).toMatchObject({ phase: "rolled_back", setting: 0, effective_champion: null });
    for (let i = 0; i < 40; i++) {
      const d = await (await w.decide({ state: EXAMPLE_STATE }, { "x-user": `after-${i}` })).json();
      expect(d.model_version).not.toBe("challenger-test");
    }
  }, 120_000);

  test("with ROLLOUT_AUTO=false the judge only reports, and CHALLENGER_PERCENT applies", async () => {
    const w = await worker({ ...FAST, ROLLOUT_AUTO: "false", CHALLENGER_PERCENT: "50" }, { ...CHALLENGER_BUILD, ...STORE });
    await drive(w, ["route_a"], 1);
    expect(w.logs.filter((l) => l.event === "rollout")).toEqual([]);
    const judged = await w.waitForLog((l) => l.event === "rollout_judged");
    expect(judged.judgement.proposals).toEqual([expect.objectContaining({ to: 0, why: "worse", applied: false })]);
    const h = await (await w.health()).json();
    expect(h.rollout).toMatchObject({ automatic: false, setting: 50 });
    expect(h.challenger.percent).toBe(50);
  }, 60_000);

  test("a malformed flush is refused with 400 naming its field", async () => {
    const w = await worker(FAST, { ...CHALLENGER_BUILD, ...STORE });
    const ns = await w.mf.getDurableObjectNamespace("ROLLOUT");
    const stub = ns.get(ns.idFromName("rollout"));
    const post = (body) => stub.fetch("https://rollout/flush", { method: "POST", headers: { "content-type": "application/json" }, body });
    for (const [body, field] of [
      ['{"v": 1, "rows": [{"arm": "sideways", "mv": null, "src": "model", "d": 1, "o": 0, "s": 0, "q": 0}]}', "rows[0].arm"],
      ["not json", "body"],
      ['{"v": 2, "rows": []}', "v"],
    ]) {
      const res = await post(body);
      expect(res.status, body).toBe(400);
      const e = (await res.json()).error;
      expect(e.code).toBe("invalid_batch");
      expect(e.field, body).toBe(field);
    }
    expect((await post('{"v": 1, "rows": []}')).status).toBe(202);
  });

  /**
   * Rules beating the model on the holdout arm. The model routes the test's state to
   * route_a and a rule table sends everything to route_c; route_a's origin answers after
   * 120 ms, beyond ROLLOUT_SLO_MS, so every model decision fails and every held-out one
   * succeeds. Routed requests from fresh users (half of them held out), a cron run after
   * each round, until the setting is "rules" or `rounds` pass.
   */
  async function holdoutLoses(switchToRules, rounds) {
    const slow = await startOrigin("SLOW");
    slow.behave = (_req, res) => setTimeout(() => res.writeHead(200, { "content-type": "text/plain" }).end("slow"), 120);
    try {
      const w = await worker({
        ...FAST,
        CANARY_PERCENT: "50",
        ROLLOUT_SLO_MS: "50",
        ROLLOUT_RULES_SWITCH: String(switchToRules),
        ORIGIN_ROUTE_A: slow.url,
        RULES: JSON.stringify({ version: "all-c", rules: [{ name: "c", when: {}, action: "route_c" }] }),
      }, STORE);
      const cronWorker = await w.mf.getWorker();
      const arms = { holdout: 0, champion: 0 };
      let user = 0;
      for (let r = 0; r < rounds; r++) {
        for (let i = 0; i < 40; i++) {
          const line = await routed(w, { "x-user": `h-${r}-${user++}` });
          expect(line.action).toBe(line.arm === "holdout" ? "route_c" : "route_a");
          arms[line.arm]++;
        }
        await new Promise((res) => setTimeout(res, 1100));
        await (await w.fetch("/v1/health")).arrayBuffer();
        await new Promise((res) => setTimeout(res, 1100));
        expect((await cronWorker.scheduled({ cron: "* * * * *" })).outcome).toBe("ok");
        const h = await (await w.health()).json();
        if (h.rollout.store.state.alarms.some((a) => a.kind === "holdout") && (!switchToRules || h.rollout.setting === "rules")) break;
      }
      expect(arms.holdout).toBeGreaterThan(10);
      expect(arms.champion).toBeGreaterThan(10);
      return w;
    } finally {
      await slow.close();
    }
  }

  test("rules beating the model on the holdout arm raise an alarm; ROLLOUT_RULES_SWITCH puts every decision on rules", async () => {
    const w = await holdoutLoses(true, 8);
    const alarm = await w.waitForLog((l) => l.event === "rollout_alarm");
    expect(alarm.alarm).toMatchObject({ kind: "holdout", holdout: { verdict: "worse" } });
    expect(alarm.alarm.text).toMatch(/^rules beat the model on the holdout arm/);
    const changes = w.logs.filter((l) => l.event === "rollout");
    expect(changes.map((c) => [c.to, c.why])).toEqual([["rules", "rules_beat_model"]]);
    const h = await (await w.health()).json();
    expect(h.rollout.setting).toBe("rules");
    // Every decision now comes from rules: routed ones held out, /v1/decide ones too.
    for (let i = 0; i < 10; i++) {
      const line = await routed(w, { "x-user": `after-${i}` });
      expect(line).toMatchObject({ arm: "holdout", source: "rules", fallback_reason: "holdout", action: "route_c" });
    }
    const d = await (await w.decide({ state: EXAMPLE_STATE }, { "x-user": "after-decide" })).json();
    expect(d).toMatchObject({ source: "rules", action: "route_c" });
    // decider report, on the Worker's own log lines, says the same.
    const verdict = rolloutVerdict(w);
    expect(verdict.action).toBe("switched to rules");
  }, 120_000);

  test("without ROLLOUT_RULES_SWITCH the holdout alarm is raised and the model keeps deciding", async () => {
    const w = await holdoutLoses(false, 8);
    const alarm = await w.waitForLog((l) => l.event === "rollout_alarm");
    expect(alarm.alarm.kind).toBe("holdout");
    expect(w.logs.filter((l) => l.event === "rollout")).toEqual([]);
    const h = await (await w.health()).json();
    expect(h.rollout.setting).not.toBe("rules");
    expect(h.rollout.store.state.alarms.map((a) => a.kind)).toContain("holdout");
    const d = await (await w.decide({ state: EXAMPLE_STATE }, { "x-user": "after-decide" })).json();
    expect(d.source).toBe("model");
  }, 120_000);
});

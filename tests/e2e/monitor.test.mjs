// The scheduled origin monitor: Cron Trigger runs (Miniflare's `scheduled()` on the Worker)
// against loopback origins and a metrics endpoint that go up, down, slow and garbled.
//
// Time: a Worker's clock is the real one, so a "simulated minute" is made as the other
// tests make old signals: every stamp the Worker stored (the snapshot's `updated_at`, the
// monitor's run stamps) is moved 60 s into the past, then the cron runs once.
import { afterAll, afterEach, beforeAll, describe, expect, test } from "vitest";
import { startOrigin, startWorker } from "./helpers.mjs";

const TOKEN = "e2e-monitor-token-42";
const METRICS = { current_load: 0.3, recent_success_rate: 0.98, queue_depth: 6 };
const ADMIN = { current_load: 0.7, recent_success_rate: 0.91, queue_depth: 20 };
const US = { country: "US", continent: "NA" };
// Every decision is route_a: a one-rule table, with every key held out on rules.
const ALWAYS_A = JSON.stringify({ version: "always-a", rules: [{ name: "all", when: {}, action: "route_a" }] });

let A, B, C, M;

async function monitorWorker(vars = {}) {
  return startWorker({
    vars: {
      ORIGIN_ROUTE_A: A.url,
      ORIGIN_ROUTE_B: B.url,
      ORIGIN_ROUTE_C: C.url,
      ORIGIN_TIMEOUT_MS: "1000",
      ADMIN_TOKEN: TOKEN,
      SIGNALS_CACHE_S: "0",
      SIGNALS_MAX_AGE_S: "90",
      MONITOR_TIMEOUT_MS: "300",
      ...vars,
    },
    extra: { kvNamespaces: ["SIGNALS"] },
  });
}

/** One Cron Trigger run; the handler must never fail. */
async function cron(w) {
  const worker = await w.mf.getWorker();
  const result = await worker.scheduled({ cron: "* * * * *", scheduledTime: new Date() });
  expect(result.outcome).toBe("ok");
  const state = JSON.parse(await (await w.mf.getKVNamespace("SIGNALS")).get("monitor"));
  return state.last_run;
}

/** Moves every stamp the Worker stored `seconds` into the past. */
async function age(w, seconds) {
  const kv = await w.mf.getKVNamespace("SIGNALS");
  const ms = seconds * 1000;
  const s = await kv.get("signals");
  if (s) {
    const v = JSON.parse(s);
    v.updated_at -= ms;
    await kv.put("signals", JSON.stringify(v));
  }
  const m = await kv.get("monitor");
  if (m) {
    const v = JSON.parse(m);
    v.at -= ms;
    if (v.last_run?.at) v.last_run.at -= ms;
    await kv.put("monitor", JSON.stringify(v));
  }
}

async function stored(w) {
  return JSON.parse(await (await w.mf.getKVNamespace("SIGNALS")).get("signals"));
}

async function route(w, id) {
  const res = await w.fetch("/app/page", { cf: US, headers: { "cf-ray": id } });
  await res.arrayBuffer();
  const line = await w.waitForLog((l) => l.event === "decision" && l.request_id === id);
  return { res, line };
}

const healthDoc = async (w) => (await w.health()).json();
const appRequests = (o) => o.requests.filter((r) => !r.url.startsWith("/healthz"));

/** A health endpoint that answers `status` (and the app 503 when failing). */
function serve(origin, status) {
  origin.behave = (req, res) => {
    res.writeHead(req.url.startsWith("/healthz") ? status : status === 200 ? 200 : 503, { "content-type": "text/plain" });
    res.end("x");
  };
}

/** The metrics endpoint answers `body` (a string) with `status`, after `delayMs`. */
function metrics(body, { status = 200, delayMs = 0 } = {}) {
  M.behave = (req, res) => {
    setTimeout(() => {
      if (res.destroyed) return;
      res.writeHead(status, { "content-type": "application/json" });
      res.end(body);
    }, delayMs);
  };
}

beforeAll(async () => {
  [A, B, C, M] = await Promise.all([startOrigin("A"), startOrigin("B"), startOrigin("C"), startOrigin("M")]);
});
afterAll(async () => {
  await Promise.all([A, B, C, M].map((o) => o?.close()));
});
afterEach(() => {
  for (const o of [A, B, C, M]) o.reset();
});

describe("signals without a pusher", () => {
  test("fresh through 10 simulated minutes of cron runs; stale, and said why, when the source is unreachable", async () => {
    metrics(JSON.stringify({
      route_a: { current_load: 0.2, recent_success_rate: 1, queue_depth: 2 },
      route_b: { current_load: 0.4, recent_success_rate: 0.96, queue_depth: 10 },
    }));
    const w = await monitorWorker({ SIGNALS_URL: `${M.url}/metrics`, HEALTH_PATH: "/healthz" });
    try {
      const before = await route(w, "nothing-yet");
      expect(before.line.fallback_reason).toBe("stale_signals");
      for (let minute = 0; minute < 10; minute++) {
        if (minute > 0) await age(w, 60);
        const run = await cron(w);
        expect(run).toMatchObject({ written: true, signals_from: "signals_url", down: [] });
        const { line } = await route(w, `minute-${minute}`);
        expect(line.fallback_reason).not.toBe("stale_signals");
        expect(line.request.signals_age_s).toBeLessThan(5);
      }
      expect(M.requests.length).toBe(10);
      const snap = await stored(w);
      // The mean over the routes the document gives.
      expect(snap).toMatchObject({ source: "monitor", queue_depth: 6 });
      expect(snap.current_load).toBeCloseTo(0.3, 12);
      expect(snap.recent_success_rate).toBeCloseTo(0.98, 12);
      let h = await healthDoc(w);
      expect(h.routing.signals).toMatchObject({ fresh: true, source: "monitor", detail: null });
      expect(h.routing.monitor.enabled).toBe(true);
      expect(h.routing.monitor.last_run.per_route.route_b.queue_depth).toBe(10);
      expect(Object.keys(h.routing.monitor.last_run.origins)).toEqual(["route_a", "route_b", "route_c"]);
      expect(h.config).toMatchObject({ HEALTH_PATH: "/healthz", HEALTH_WINDOW: 10, MONITOR_TIMEOUT_MS: 300 });

      // Without the minute's run the same aging makes them stale: the runs kept them fresh.
      await age(w, 100);
      expect((await route(w, "skipped-run")).line.fallback_reason).toBe("stale_signals");

      // The metrics endpoint goes away: the runs go on, store nothing, and health says why.
      await M.close();
      const run = await cron(w);
      expect(run.written).toBe(false);
      expect(run.not_written).toMatch(/^SIGNALS_URL failed: /);
      expect((await route(w, "source-gone")).line.fallback_reason).toBe("stale_signals");
      h = await healthDoc(w);
      expect(h.routing.signals.fresh).toBe(false);
      expect(h.routing.signals.detail).toMatch(/older than SIGNALS_MAX_AGE_S \(90 s\); the monitor's last run stored nothing: SIGNALS_URL failed: /);
    } finally {
      await w.dispose();
      M = await startOrigin("M");
    }
  });

  test("probes alone give signals: success rate over the window, load from latency", async () => {
    const w = await monitorWorker({ HEALTH_PATH: "/healthz", HEALTH_LOAD_BASELINE_MS: "1000" });
    try {
      serve(C, 500);
      await cron(w);
      const run = await cron(w);
      expect(run).toMatchObject({ written: true, signals_from: "probes", down: ["route_c"] });
      expect(run.origins.route_c).toMatchObject({ ok: false, status: 500, down: true, success_rate: 0, error: "answered 500, expected 200" });
      expect(run.origins.route_a).toMatchObject({ ok: true, status: 200, down: false, success_rate: 1 });
      const snap = await stored(w);
      expect(snap.source).toBe("monitor");
      // A and B pass every probe, C none: (1 + 1 + 0) / 3.
      expect(snap.recent_success_rate).toBeCloseTo(2 / 3, 12);
      expect(snap.current_load).toBeGreaterThanOrEqual(0);
      expect(snap.current_load).toBeLessThan(0.3);
    } finally {
      await w.dispose();
    }
  });
});

describe("a failing origin", () => {
  test("loses its traffic to its failover within two runs, and gets it back when it recovers", async () => {
    const w = await monitorWorker({ HEALTH_PATH: "/healthz", RULES: ALWAYS_A, CANARY_PERCENT: "0" });
    try {
      await cron(w);
      let r = await route(w, "all-up");
      expect(r.res.headers.get("x-origin")).toBe("A");
      expect(r.line.outcome).toMatchObject({ origin: "route_a", failover: null });
      expect(r.line.outcome.origin_down).toBeUndefined();

      serve(A, 503);
      let run = await cron(w);
      expect(run.origins.route_a).toMatchObject({ ok: false, down: false });
      // One failed probe is not down yet: A is still tried (and the request fails over).
      r = await route(w, "one-failure");
      expect(r.line.outcome.attempts.map((a) => a.origin)).toEqual(["route_a", "route_b"]);

      run = await cron(w);
      expect(run.down).toEqual(["route_a"]);
      A.requests.length = 0;
      for (let i = 0; i < 5; i++) {
        r = await route(w, `down-${i}`);
        expect(r.res.status).toBe(200);
        expect(r.res.headers.get("x-origin")).toBe("B");
        expect(r.res.headers.get("x-decision-failover")).toBe("route_b");
        expect(r.line.action).toBe("route_a");
        expect(r.line.outcome).toMatchObject({ origin: "route_b", failover: "route_b", origin_down: "route_a", status: 200 });
        expect(r.line.outcome.attempts.map((a) => a.origin)).toEqual(["route_b"]);
      }
      expect(appRequests(A)).toEqual([]);
      let h = await healthDoc(w);
      expect(h.routing.monitor.down).toEqual(["route_a"]);
      expect(h.routing.monitor.last_run.origins.route_a).toMatchObject({ down: true, status: 503 });

      // Recovery: one passing probe is not enough, two are.
      A.reset();
      run = await cron(w);
      expect(run.down).toEqual(["route_a"]);
      expect(appRequests(A)).toEqual([]);
      expect((await route(w, "still-down")).res.headers.get("x-origin")).toBe("B");
      run = await cron(w);
      expect(run.down).toEqual([]);
      r = await route(w, "back-up");
      expect(r.res.headers.get("x-origin")).toBe("A");
      expect(r.line.outcome.origin_down).toBeUndefined();
      h = await healthDoc(w);
      expect(h.routing.monitor.down).toEqual([]);
    } finally {
      await w.dispose();
    }
  });
});

describe("garbled and slow answers", () => {
  test("are recorded, never crash the run, never replace a fresher admin push", async () => {
    metrics(JSON.stringify(METRICS));
    const w = await monitorWorker({ SIGNALS_URL: `${M.url}/metrics`, HEALTH_PATH: "/healthz" });
    const kv = await w.mf.getKVNamespace("SIGNALS");
    try {
      expect((await cron(w)).written).toBe(true);
      const good = await stored(w);

      // Garbled metrics: recorded; the stored snapshot stays as it was.
      for (const [body, status, want] of [
        ["<html>oops</html>", 200, /^SIGNALS_URL bad document: not json/],
        [JSON.stringify({ current_load: 0.3, recent_success_rate: 7, queue_depth: 1 }), 200, /recent_success_rate/],
        [JSON.stringify({ route_x: METRICS }), 200, /^SIGNALS_URL bad document: .*route_x/],
        ["{}", 502, /^SIGNALS_URL answered 502, expected 200$/],
      ]) {
        metrics(body, { status });
        const run = await cron(w);
        expect(run.written).toBe(false);
        expect(run.not_written).toMatch(want);
        expect(await stored(w)).toEqual(good);
      }
      // Slow metrics: a timeout, recorded.
      metrics(JSON.stringify(METRICS), { delayMs: 1500 });
      let run = await cron(w);
      expect(run.not_written).toBe("SIGNALS_URL timed out after 300 ms");
      expect(await stored(w)).toEqual(good);

      // Slow and garbled probes: each recorded against its origin.
      B.behave = (req, res) => setTimeout(() => !res.destroyed && res.end("late"), 1500);
      C.behave = (req) => req.socket.end("NOT HTTP AT ALL\r\n\r\n");
      metrics(JSON.stringify(METRICS));
      run = await cron(w);
      expect(run.written).toBe(true);
      expect(run.origins.route_b).toMatchObject({ ok: false, error: "timed out after 300 ms", status: null });
      expect(run.origins.route_c.ok).toBe(false);
      expect(run.origins.route_c.error).toMatch(/^failed: /);
      expect(run.origins.route_a.ok).toBe(true);

      // Stored state the monitor cannot read is replaced, not a crash.
      await kv.put("monitor", "{not json");
      run = await cron(w);
      expect(run.errors[0]).toMatch(/^monitor state: stored state is invalid/);

      // A fresher admin push is the override until it is older than SIGNALS_MAX_AGE_S.
      const pushed = await w.fetch("/v1/admin/signals", {
        method: "PUT",
        headers: { "content-type": "application/json", authorization: `Bearer ${TOKEN}` },
        body: JSON.stringify(ADMIN),
      });
      expect(pushed.status).toBe(200);
      expect((await pushed.json()).stored).toMatchObject({ ...ADMIN, source: "admin" });
      run = await cron(w);
      expect(run.written).toBe(false);
      expect(run.not_written).toMatch(/^an admin push \d+ s old is the override until it is 90 s old$/);
      expect(await stored(w)).toMatchObject({ ...ADMIN, source: "admin" });
      let h = await healthDoc(w);
      expect(h.routing.signals).toMatchObject({ fresh: true, source: "admin" });
      await age(w, 91);
      run = await cron(w);
      expect(run.written).toBe(true);
      expect(await stored(w)).toMatchObject({ ...METRICS, source: "monitor" });
      h = await healthDoc(w);
      expect(h.routing.signals).toMatchObject({ fresh: true, source: "monitor" });
      // Every run was logged.
      await w.waitForLog(() => w.logs.filter((l) => l.event === "monitor_run").length >= 10);
      expect(w.logs.filter((l) => l.event === "monitor_run").length).toBe(10);
    } finally {
      await w.dispose();
    }
  });

  test("without SIGNALS_URL or HEALTH_PATH a run does nothing", async () => {
    const w = await monitorWorker();
    try {
      const worker = await w.mf.getWorker();
      expect((await worker.scheduled({ cron: "* * * * *" })).outcome).toBe("ok");
      expect(await (await w.mf.getKVNamespace("SIGNALS")).get("monitor")).toBeNull();
      const h = await healthDoc(w);
      expect(h.routing.monitor).toMatchObject({ enabled: false, last_run: null });
    } finally {
      await w.dispose();
    }
  });
});

// Sends every case of tests/fixtures/bad_inputs.json to the Worker and checks the answer:
// the expected status (never a 5xx) and, for errors, the JSON error's code and field.
//
//   node scripts/check-bad-inputs.mjs                      # the built Worker (build/) in workerd
//   BASE_URL=http://127.0.0.1:8787 node scripts/check-bad-inputs.mjs   # a running `make dev`
//
// Then the same valid body is decided with spoofed client headers (forwarding, Cloudflare,
// decision headers): the decision must not change.
//
// With BODIES_DIR=<dir> (e.g. a fuzzer's corpus), every file in it is also POSTed as a
// JSON body (BODIES_WRAP=state sends {"state": <file>} instead): inputs nobody wrote by
// hand must get a 200 or a 4xx, never a 5xx.
//
// Every request also carries a canary bearer token and cookie: neither may appear in a
// response, nor (in workerd, where the log is captured) in any log line, and no error may
// leak a panic or runtime message. Prints one line per mismatch and "N passed, N failed";
// exits non-zero on any failure.
import { readFileSync } from "node:fs";
import path from "node:path";
import { fileURLToPath } from "node:url";

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "..");
const table = JSON.parse(readFileSync(path.join(ROOT, "tests/fixtures/bad_inputs.json"), "utf8"));

/** The request body of a case as bytes (never a string: the client must add no content-type). */
export function bodyBytes(c) {
  let bytes;
  if (c.body_base64 !== undefined) bytes = Buffer.from(c.body_base64, "base64");
  else if (c.body === null || c.body === undefined) return undefined;
  else bytes = Buffer.from(c.body, "utf8");
  if (c.pad_to_bytes && bytes.length < c.pad_to_bytes) {
    bytes = Buffer.concat([bytes, Buffer.alloc(c.pad_to_bytes - bytes.length, 0x20)]);
  }
  return new Uint8Array(bytes);
}

/** Secrets a client may send; they must never be echoed or logged. */
export const CANARY = `canary-${process.pid}-${Date.now()}`;
export const SECRET_HEADERS = { authorization: `Bearer ${CANARY}`, cookie: `session=${CANARY}` };
const LEAKS = [CANARY, "panicked", "RuntimeError", "unreachable", "wasm-function", "stack backtrace"];

/** Client headers that must not influence a decision (each sent alone, then all together). */
export const SPOOFED_HEADERS = {
  "x-forwarded-for": "203.0.113.7",
  "x-real-ip": "203.0.113.7",
  "cf-connecting-ip": "203.0.113.7",
  "cf-ipcountry": "KP",
  "cf-ray": "spoofed-ray",
  "x-decision-action": "reject",
  "x-decision-source": "model",
  "x-region-id": "9",
  forwarded: "for=203.0.113.7;proto=https",
  host: "evil.example",
};

/** What a decision is, without its timing. */
function decisionCore(d) {
  const { decision_us: _t, decision_id: _id, ...rest } = d;
  return JSON.stringify(rest);
}

/** Decides one valid body plainly and with each spoofed header; returns the problems. */
export async function checkHeaderIndependence(fetchFn) {
  const body = JSON.stringify({
    state: { request_type: 1, region_id: 3, current_load: 0.4, recent_success_rate: 0.97, queue_depth: 12, hour: 14 },
  });
  const send = async (extra) => {
    const res = await fetchFn("/v1/decide", {
      method: "POST",
      headers: { "content-type": "application/json", ...extra },
      body: new Uint8Array(Buffer.from(body)),
    });
    return [res.status, await res.text()];
  };
  const [status, base] = await send({});
  if (status !== 200) return [`baseline status ${status}`];
  const want = decisionCore(JSON.parse(base));
  const problems = [];
  const variants = [...Object.entries(SPOOFED_HEADERS).map(([k, v]) => ({ [k]: v })), SPOOFED_HEADERS];
  for (const extra of variants) {
    const [st, text] = await send(extra);
    if (st !== 200 || decisionCore(JSON.parse(text)) !== want) {
      problems.push(`${Object.keys(extra).join("+")}: ${st} ${text.slice(0, 120)}`);
    }
  }
  return problems;
}

/** Log lines that contain the canary (must be none). */
export function leakedLogLines(lines) {
  return lines.filter((l) => l.includes(CANARY));
}

/** Checks one response against a case; returns the list of problems. */
export async function check(c, res) {
  const problems = [];
  const text = await res.text();
  for (const leak of LEAKS) {
    if (text.includes(leak)) problems.push(`response contains ${JSON.stringify(leak)}`);
  }
  if (res.status >= 500) problems.push(`5xx: ${res.status}`);
  if (res.status !== c.expect.status) problems.push(`status ${res.status}, expected ${c.expect.status}`);
  if (c.expect.code !== null) {
    let error;
    try {
      ({ error } = JSON.parse(text));
    } catch {
      problems.push(`body is not JSON: ${text.slice(0, 80)}`);
    }
    if (error && error.code !== c.expect.code) problems.push(`code ${error.code}, expected ${c.expect.code}`);
    if (error && (error.field ?? null) !== c.expect.field) problems.push(`field ${error.field}, expected ${c.expect.field}`);
    if (!(res.headers.get("content-type") ?? "").startsWith("application/json")) problems.push("content-type is not JSON");
    if (res.headers.get("x-decision-action") !== null) problems.push("an error carries x-decision-action");
  }
  return problems;
}

async function main() {
  let fetchFn;
  let logLines = null;
  let dispose = async () => {};
  if (process.env.BASE_URL) {
    fetchFn = (p, init) => fetch(new URL(p, process.env.BASE_URL), init);
  } else {
    const { startWorker } = await import(path.join(ROOT, "tests/e2e/helpers.mjs"));
    const w = await startWorker();
    fetchFn = w.fetch;
    logLines = w.stdoutLines;
    dispose = w.dispose;
  }
  let passed = 0;
  let failed = 0;
  try {
    for (const c of table.cases) {
      const headers = { ...SECRET_HEADERS };
      if (c.content_type !== null) headers["content-type"] = c.content_type;
      const res = await fetchFn(c.path, { method: c.method, headers, body: bodyBytes(c) });
      const problems = await check(c, res);
      if (problems.length) {
        failed++;
        console.log(`FAIL ${c.name}: ${problems.join("; ")}`);
      } else {
        passed++;
      }
    }
    if (process.env.BODIES_DIR) {
      const { readdirSync } = await import("node:fs");
      const dir = process.env.BODIES_DIR;
      const counts = {};
      const bad = [];
      for (const f of readdirSync(dir)) {
        let bytes = readFileSync(path.join(dir, f));
        if (process.env.BODIES_WRAP === "state") {
          bytes = Buffer.concat([Buffer.from('{"state": '), bytes, Buffer.from("}")]);
        }
        const res = await fetchFn("/v1/decide", {
          method: "POST",
          headers: { ...SECRET_HEADERS, "content-type": "application/json" },
          body: new Uint8Array(bytes),
        });
        const text = await res.text();
        counts[res.status] = (counts[res.status] ?? 0) + 1;
        if (res.status >= 500 || LEAKS.some((l) => text.includes(l))) bad.push(`${f}: ${res.status} ${text.slice(0, 80)}`);
      }
      console.log(`bodies: ${JSON.stringify(counts)} from ${dir}`);
      if (bad.length) {
        failed++;
        console.log(`FAIL ${bad.length} bodies: ${bad.slice(0, 5).join("; ")}`);
      } else {
        passed++;
      }
    }
    const spoofed = await checkHeaderIndependence(fetchFn);
    if (spoofed.length) {
      failed++;
      console.log(`FAIL spoofed headers changed the decision: ${spoofed.join("; ")}`);
    } else {
      passed++;
    }
    if (logLines) {
      // Log lines arrive asynchronously; give the last ones a moment.
      await new Promise((r) => setTimeout(r, 200));
      const leaked = leakedLogLines(logLines);
      if (leaked.length) {
        failed++;
        console.log(`FAIL secrets in the log: ${leaked.length} line(s), e.g. ${leaked[0].slice(0, 120)}`);
      } else {
        passed++;
        console.log(`log: ${logLines.length} line(s) checked, no canary`);
      }
    }
  } finally {
    await dispose();
  }
  console.log(`${passed} passed, ${failed} failed`);
  process.exitCode = failed ? 1 : 0;
}

if (process.argv[1] && path.resolve(process.argv[1]) === fileURLToPath(import.meta.url)) {
  await main();
}

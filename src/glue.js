// Worker glue written in JS, imported by src/http.rs through wasm-bindgen.
//
// Each call from wasm into JS costs a crossing, and each string a UTF-8 decode; a body read
// loop or a header set done call by call from Rust cost more CPU than the decision itself
// (bench/cpu_probe.mjs measures it). These functions do that work in one call each. They
// hold no decision logic and no error text: Rust decides what to answer.

// The x-decision-* response headers (DESIGN §7): action, source, model version.
const ACTION = "x-decision-action";
const SOURCE = "x-decision-source";
const MODEL_VERSION = "x-decision-model-version";

// Reads a request body of at most `max` bytes, whatever content-length says (a
// service-binding caller can declare a length its stream does not keep, and arrayBuffer()
// would buffer all of it before any check). Resolves to the bytes, or to null as soon as
// the body passes `max` (the stream is then cancelled); rejects when the stream fails or
// yields a non-byte chunk. The reader is never released: releasing it would reject its
// `closed` promise for nothing.
//
// workerd's BYOB `readAtLeast` fills a buffer and answers short only at the end of the
// stream, so a body takes one read instead of two (a read of the stream's end costs another
// trip through the runtime); streams without it (not bytes, or another runtime) are read
// chunk by chunk. The buffer is the declared length plus one byte when a length within the
// limit is declared, else the limit plus one: a 16 KiB buffer per request counted against
// V8's heap limits and made the isolate run several times as many full (mark-compact)
// collections, 4–7 ms pauses each (V8's --trace-gc-nvp under bench load).
//
// Not an async function, and one promise reaction on the hot path: every promise, await
// and async frame here is garbage on every decision, and young-generation collections
// are most of the tail latency (bench/alloc_probe.mjs shows the allocations by call site).
export function readBounded(request, max) {
  try {
    const body = request.body;
    if (body === null) return Promise.resolve(new Uint8Array(0));
    let byob = null;
    try {
      byob = body.getReader({ mode: "byob" });
    } catch {
      // not a byte stream
    }
    if (byob && typeof byob.readAtLeast === "function") return readAtMost(byob, max, declaredLength(request, max));
    if (byob) {
      // Another runtime's BYOB reader: read chunk by chunk with a default reader instead.
      byob.closed.catch(() => {});
      byob.releaseLock();
    }
    return readChunks(body.getReader(), max);
  } catch (e) {
    // A body already used or locked: a failed read, never an exception thrown into wasm.
    return Promise.reject(e);
  }
}

// `readBounded` chunk by chunk.
async function readChunks(reader, max) {
  const chunks = [];
  let total = 0;
  for (;;) {
    const { done, value } = await reader.read();
    if (done) break;
    if (!(value instanceof Uint8Array)) throw new TypeError("request body chunk is not bytes");
    total += value.byteLength;
    if (total > max) return cancelled(reader);
    chunks.push(value);
  }
  if (chunks.length === 1) return chunks[0];
  const out = new Uint8Array(total);
  let at = 0;
  for (const c of chunks) {
    out.set(c, at);
    at += c.byteLength;
  }
  return out;
}

// `readBounded` with `readAtLeast`. `declared` is the declared length (at most `max`), or
// -1. The first read fills a buffer one byte longer than the body can be: short means the
// stream ended and this is the whole body. Full at max + 1 bytes means over the limit;
// full at declared + 1 means the stream goes on past its declared length, and the rest is
// read (up to max + 1 bytes in all) into a second buffer.
function readAtMost(reader, max, declared) {
  const size = declared >= 0 ? declared + 1 : max + 1;
  return reader.readAtLeast(size, new Uint8Array(size)).then(({ value }) => {
    const got = value ? value.byteLength : 0;
    if (got < size) return value ?? new Uint8Array(0);
    if (got > max) return cancelled(reader);
    return reader.readAtLeast(max + 1 - got, new Uint8Array(max + 1 - got)).then(({ value: rest }) => {
      const total = got + (rest ? rest.byteLength : 0);
      if (total > max) return cancelled(reader);
      const all = new Uint8Array(total);
      all.set(value);
      if (rest) all.set(rest, got);
      return all;
    });
  });
}

// The request's declared content-length when it is a number of at most `max`, else -1.
function declaredLength(request, max) {
  const text = request.headers.get("content-length");
  return text !== null && isLengthAtMost(text, max) ? Number(text) : -1;
}

// Stops the sender of a body over the limit; the answer does not depend on how cancelling goes.
function cancelled(reader) {
  reader.cancel().catch(() => {});
  return null;
}

// A 200 decision response: the JSON API's content type and cache policy, and the decision
// headers, in one `Response` construction. The init object is made once and its three
// decision headers overwritten on each call: the constructor copies it before returning,
// and a per-call object literal is garbage on every decision.
const DECISION_HEADERS = {
  "content-type": "application/json",
  "cache-control": "no-store",
  [ACTION]: "",
  [SOURCE]: "",
  [MODEL_VERSION]: "",
};
const DECISION_INIT = { status: 200, headers: DECISION_HEADERS };

export function decisionResponse(body, action, source, modelVersion) {
  DECISION_HEADERS[ACTION] = action;
  DECISION_HEADERS[SOURCE] = source;
  DECISION_HEADERS[MODEL_VERSION] = modelVersion;
  return new Response(body, DECISION_INIT);
}

// Sets the decision headers on an existing header map (rejections, edge-routing answers).
export function setDecisionHeaders(headers, action, source, modelVersion) {
  headers.set(ACTION, action);
  headers.set(SOURCE, source);
  headers.set(MODEL_VERSION, modelVersion);
}

// Whether `request` takes the decide fast path (src/lib.rs `decide_fast`): a `POST` to
// exactly `/v1/decide` (no query) with a content type spelled `application/json`
// (parameters allowed) and no declared length or one of at most `max` bytes, all of which
// the router's checks (src/body.rs) accept. Anything else, errors and other spellings
// included, goes to the router, which checks and answers it in Rust. Done here, the test
// costs no trip of the method, URL and headers into wasm memory.
export function isPlainDecide(request, max) {
  if (request.method !== "POST" || !isDecideUrl(request.url)) return false;
  const headers = request.headers;
  const type = headers.get("content-type");
  if (type !== "application/json" && !(type !== null && type.startsWith("application/json;"))) return false;
  const length = headers.get("content-length");
  return length === null || isLengthAtMost(length, max);
}

// Whether a serialised URL's path is exactly `/v1/decide`, with no query or fragment.
function isDecideUrl(url) {
  const scheme = url.indexOf("://");
  const path = url.length - "/v1/decide".length;
  if (scheme < 0 || path <= scheme + 3 || !url.endsWith("/v1/decide")) return false;
  // The authority must not hold a `/`, `?` or `#`: the path starts at the first of them.
  for (let i = scheme + 3; i < path; i++) {
    const c = url.charCodeAt(i);
    if (c === 0x2f || c === 0x3f || c === 0x23) return false;
  }
  return true;
}

// Whether `text` is 1–9 ASCII digits with a value of at most `max`.
function isLengthAtMost(text, max) {
  if (text.length === 0 || text.length > 9) return false;
  let n = 0;
  for (let i = 0; i < text.length; i++) {
    const d = text.charCodeAt(i) - 0x30;
    if (d < 0 || d > 9) return false;
    n = n * 10 + d;
  }
  return n <= max;
}

// The body half of the `POST /v1/decide` fast path (src/lib.rs `fetch`): reads the body
// here, then hands it to `answer` (a Rust closure, called synchronously: the embedded
// model needs no I/O) with env and the `cf-ray` header (or null). `answer` gets the bytes,
// null over the limit, or undefined when the body could not be read, and returns the
// Response.
export function serveBody(request, env, max, answer) {
  const ray = request.headers.get("cf-ray");
  return readBounded(request, max).then(
    (bytes) => answer(bytes, env, ray),
    () => answer(undefined, env, ray),
  );
}

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
// workerd's BYOB `readAtLeast` fills one buffer of max + 1 bytes and answers short only at
// the end of the stream, so a small body takes one read instead of two (a read of the
// stream's end costs another trip through the runtime); streams without it (not bytes, or
// another runtime) are read chunk by chunk.
export async function readBounded(request, max) {
  const body = request.body;
  if (body === null) return new Uint8Array(0);
  let byob = null;
  try {
    byob = body.getReader({ mode: "byob" });
  } catch {
    // not a byte stream
  }
  if (byob && typeof byob.readAtLeast === "function") return readAtMost(byob, max);
  if (byob) {
    // Another runtime's BYOB reader: read chunk by chunk with a default reader instead.
    byob.closed.catch(() => {});
    byob.releaseLock();
  }
  return readChunks(body.getReader(), max);
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

// `readBounded` with `readAtLeast`: one read into a buffer of max + 1 bytes. It answers
// short of that only at the end of the stream, so short means the whole body; full means
// the body is over the limit.
async function readAtMost(reader, max) {
  const view = new Uint8Array(max + 1);
  const { value } = await reader.readAtLeast(view.byteLength, view);
  if (value && value.byteLength > max) return cancelled(reader);
  return value ?? new Uint8Array(0);
}

// Stops the sender of a body over the limit; the answer does not depend on how cancelling goes.
function cancelled(reader) {
  reader.cancel().catch(() => {});
  return null;
}

// A 200 decision response: the JSON API's content type and cache policy, and the decision
// headers, in one `Response` construction.
export function decisionResponse(body, action, source, modelVersion) {
  return new Response(body, {
    status: 200,
    headers: {
      "content-type": "application/json",
      "cache-control": "no-store",
      [ACTION]: action,
      [SOURCE]: source,
      [MODEL_VERSION]: modelVersion,
    },
  });
}

// Sets the decision headers on an existing header map (rejections, edge-routing answers).
export function setDecisionHeaders(headers, action, source, modelVersion) {
  headers.set(ACTION, action);
  headers.set(SOURCE, source);
  headers.set(MODEL_VERSION, modelVersion);
}

// The body half of the `POST /v1/decide` fast path (src/lib.rs `fetch`): reads the body
// here, then hands it to `answer` (a Rust closure, called synchronously: the embedded
// model needs no I/O) with the request and env. `answer` gets the bytes, null over the
// limit, or undefined when the body could not be read, and returns the Response.
export function serveBody(request, env, max, answer) {
  return readBounded(request, max).then(
    (bytes) => answer(bytes, request, env),
    () => answer(undefined, request, env),
  );
}

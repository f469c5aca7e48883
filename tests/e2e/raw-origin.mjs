// Raw HTTP/1.1 on both sides of the Worker, for the protocol suite (protocol.test.mjs).
//
// - startRawOrigin: a node:net origin that parses requests itself (so it sees exactly what
//   arrived: request line, every header, the body and whether it was complete) and answers
//   with scripted bytes, including answers no HTTP library would write: interim 1xx
//   responses, invalid status lines, content-length that lies, bodies on HEAD/204, stalls,
//   half-written responses. Connections stay open (keep-alive) like a real origin's, so a
//   response left half-read on a pooled connection shows up as the wrong answer to a later
//   request.
// - rawRequest: a client that writes any bytes (absolute-form targets, Expect, a lying
//   content-length, chunked uploads) and parses whatever comes back, interim responses
//   included.
//
// Every request of the suite carries a unique token in its query (`t=`); the origin's
// default answer echoes the token of the request it is answering, so a response delivered
// to the wrong request is visible by its body.
import net from "node:net";
import { createHash } from "node:crypto";

const CRLF = "\r\n";

/** The token a request target carries in its query (`t=`), or null. */
export function tokenOf(target) {
  const q = target.indexOf("?");
  if (q < 0) return null;
  for (const part of target.slice(q + 1).split("&")) {
    const [k, v] = part.split("=");
    if (k === "t") return v ?? "";
  }
  return null;
}

const sha256 = (b) => createHash("sha256").update(b).digest("hex");

/**
 * The echo body: what the origin received, as JSON.
 * @param {object} rec a request record
 */
export function echoOf(origin, rec) {
  return {
    origin: origin.name,
    token: rec.token,
    method: rec.method,
    target: rec.target,
    headers: rec.headerMap,
    body_bytes: rec.body.length,
    body_sha256: sha256(rec.body),
    conn: rec.conn,
    seq: rec.seq,
  };
}

/** Replaces `${TOKEN}` (the request's token) and `${TOKEN_LEN}` (its length) in a scripted string. */
function fill(text, rec) {
  const token = rec.token ?? "none";
  return text.replaceAll("${TOKEN_LEN}", String(Buffer.byteLength(token))).replaceAll("${TOKEN}", token);
}

/**
 * A well-formed (or deliberately mis-framed) response carrying `body`. A response to HEAD
 * has the headers only, as HTTP requires, unless `spec.head_body` asks for the body anyway.
 */
function response(spec, body, method) {
  const status = spec.status ?? 200;
  const reason = spec.reason ?? (status === 200 ? "OK" : "Status");
  const headers = [["content-type", spec.content_type ?? "application/json"], ...Object.entries(spec.headers ?? {})];
  const framing = spec.framing ?? "length";
  let payload;
  if (framing === "length") {
    headers.push(["content-length", String(body.length + (spec.cl_delta ?? 0))]);
    payload = body;
  } else if (framing === "chunked") {
    headers.push(["transfer-encoding", "chunked"]);
    const half = Math.floor(body.length / 2);
    const chunks = [body.subarray(0, half), body.subarray(half)].filter((c) => c.length > 0);
    payload = Buffer.concat([
      ...chunks.map((c) => Buffer.concat([Buffer.from(c.length.toString(16) + CRLF), c, Buffer.from(CRLF)])),
      Buffer.from("0" + CRLF + (spec.trailers ?? "") + CRLF),
    ]);
  } else if (framing === "close") {
    headers.push(["connection", "close"]);
    payload = body;
  } else if (framing === "none") {
    payload = Buffer.alloc(0);
  } else {
    throw new Error(`unknown framing ${framing}`);
  }
  const head = `HTTP/1.1 ${status} ${reason}${CRLF}` + headers.map(([k, v]) => `${k}: ${v}${CRLF}`).join("") + CRLF;
  if (method === "HEAD" && !spec.head_body) payload = Buffer.alloc(0);
  return Buffer.concat([Buffer.from(head), payload, Buffer.from(spec.extra ?? "")]);
}

/**
 * Starts a raw origin on 127.0.0.1.
 *
 * Answers are scripted per request token: `origin.script(token, steps)`; a request whose
 * token has no script gets the default answer, `[{echo: {}}]` (200, content-length, the
 * echo JSON). Steps, run in order:
 * - `{raw: "text"}`: writes the text (`${TOKEN}` and `${TOKEN_LEN}` replaced)
 * - `{echo: {status, reason, headers, framing: length|chunked|close|none, cl_delta, extra, trailers, head_body}}`:
 *   waits for the whole request body, then writes a response whose body is the echo JSON
 *   (and whose `x-echo-token` header is the request's token);
 *   `cl_delta` makes content-length lie by that many bytes, `extra` is written after the
 *   body, `head_body` sends the body even to HEAD
 * - `{body_wait: true}`: waits for the whole request body
 * - `{sleep: ms}`, `{end: true}` (half-close), `{destroy: true}` (reset the connection)
 * - `{pause: ms}`: stops reading the connection for ms (an origin that takes no more of
 *   the request body: once the socket buffers are full, the sender's writes wait)
 * - `{stream: {bytes}}`: a 200 with `content-length: bytes` and that many bytes of a fixed
 *   pattern, written 1 MiB at a time as fast as the connection takes them (waiting for
 *   `drain`); the record's `streamed` counts the bytes handed to the socket so far and
 *   `streamedSha256` is the body's hash once all is written
 *
 * Like Node's http server, the origin answers `Expect: 100-continue` with an interim
 * `100 Continue` at once, unless `origin.autoContinue` is false.
 */
export async function startRawOrigin(name) {
  const origin = {
    name,
    url: "",
    /** Every request head received, in order (records fill in as bodies arrive). */
    requests: [],
    connections: 0,
    autoContinue: true,
    scripts: new Map(),
    script(token, steps) {
      this.scripts.set(token, steps);
    },
    reset() {
      this.requests.length = 0;
      this.scripts.clear();
      this.autoContinue = true;
    },
    /** Closes every open connection (a clean connection pool for the next test). */
    dropConnections() {
      for (const s of sockets) s.destroy();
    },
    /** Records of requests carrying `token`. */
    byToken(token) {
      return this.requests.filter((r) => r.token === token);
    },
  };
  const sockets = new Set();
  const server = net.createServer((sock) => {
    sockets.add(sock);
    sock.on("close", () => sockets.delete(sock));
    sock.on("error", () => {});
    const conn = ++origin.connections;
    let buf = Buffer.alloc(0);
    let seq = 0;
    let current = null; // the request whose body is being read
    let chain = Promise.resolve(); // answers go out in request order
    const feed = () => {
      for (;;) {
        if (!current) {
          let end = buf.indexOf("\r\n\r\n");
          let sepLen = 4;
          if (end < 0) {
            const lf = buf.indexOf("\n\n");
            if (lf < 0) return;
            end = lf;
            sepLen = 2;
          }
          const head = buf.subarray(0, end).toString("latin1");
          buf = buf.subarray(end + sepLen);
          const lines = head.split(/\r?\n/);
          const [method = "", target = "", version = ""] = lines[0].split(" ");
          const headers = lines.slice(1).filter(Boolean).map((l) => {
            const i = l.indexOf(":");
            return [l.slice(0, i).trim().toLowerCase(), l.slice(i + 1).trim()];
          });
          const headerMap = {};
          for (const [k, v] of headers) headerMap[k] = k in headerMap ? `${headerMap[k]}, ${v}` : v;
          const te = (headerMap["transfer-encoding"] ?? "").toLowerCase();
          const cl = headerMap["content-length"];
          const rec = {
            conn, seq: ++seq, method, target, version, headers, headerMap,
            token: tokenOf(target),
            chunks: [], body: Buffer.alloc(0), complete: false,
            framing: te.includes("chunked") ? "chunked" : cl !== undefined ? "length" : "none",
            remaining: cl !== undefined ? Number(cl) : 0,
          };
          let done;
          rec.bodyDone = new Promise((r) => (done = r));
          rec.finish = () => {
            rec.body = Buffer.concat(rec.chunks);
            rec.complete = true;
            done(true);
          };
          rec.abort = () => done(false);
          origin.requests.push(rec);
          current = rec;
          if (origin.autoContinue && (headerMap.expect ?? "").toLowerCase() === "100-continue") {
            sock.write("HTTP/1.1 100 Continue\r\n\r\n");
          }
          const steps = origin.scripts.get(rec.token) ?? [{ echo: {} }];
          chain = chain.then(() => run(steps, rec)).catch(() => {});
          if (rec.framing === "none" || (rec.framing === "length" && rec.remaining === 0)) {
            rec.finish();
            current = null;
          }
          continue;
        }
        const rec = current;
        if (rec.framing === "length") {
          const take = buf.subarray(0, rec.remaining);
          rec.chunks.push(take);
          rec.remaining -= take.length;
          buf = buf.subarray(take.length);
          if (rec.remaining > 0) return;
          rec.finish();
          current = null;
          continue;
        }
        // chunked: size line, data, CRLF; a zero size line then trailers up to an empty line
        if (rec.inTrailers) {
          const e = buf.indexOf("\r\n");
          if (e < 0) return;
          const line = buf.subarray(0, e);
          buf = buf.subarray(e + 2);
          if (line.length === 0) {
            rec.finish();
            current = null;
          }
          continue;
        }
        if (rec.chunkLeft > 0) {
          const take = buf.subarray(0, rec.chunkLeft);
          rec.chunks.push(take);
          rec.chunkLeft -= take.length;
          buf = buf.subarray(take.length);
          if (rec.chunkLeft > 0) return;
          rec.needCrlf = true;
          continue;
        }
        if (rec.needCrlf) {
          if (buf.length < 2) return;
          buf = buf.subarray(2);
          rec.needCrlf = false;
          continue;
        }
        const e = buf.indexOf("\r\n");
        if (e < 0) return;
        const size = parseInt(buf.subarray(0, e).toString("latin1").split(";")[0], 16);
        buf = buf.subarray(e + 2);
        if (!Number.isFinite(size)) {
          rec.abort();
          sock.destroy();
          return;
        }
        if (size === 0) rec.inTrailers = true;
        else rec.chunkLeft = size;
      }
    };
    const run = async (steps, rec) => {
      for (const step of steps) {
        if (sock.destroyed) return;
        if (step.raw !== undefined) sock.write(fill(step.raw, rec), "latin1");
        else if (step.echo) {
          if (!(await rec.bodyDone)) return;
          const body = Buffer.from(JSON.stringify(echoOf(origin, rec)));
          // The token also in a header: an answer to HEAD has no body to carry it.
          const headers = { "x-echo-token": rec.token ?? "none", ...Object.fromEntries(Object.entries(step.echo.headers ?? {}).map(([k, v]) => [k, fill(v, rec)])) };
          sock.write(response({ ...step.echo, headers }, body, rec.method));
          if (step.echo.framing === "close") sock.end();
        } else if (step.body_wait) {
          if (!(await rec.bodyDone)) return;
        } else if (step.sleep) await new Promise((r) => setTimeout(r, step.sleep));
        else if (step.pause) {
          sock.pause();
          await new Promise((r) => setTimeout(r, step.pause));
          if (!sock.destroyed) sock.resume();
        }
        else if (step.stream) await streamBody(sock, rec, step.stream.bytes);
        else if (step.end) sock.end();
        else if (step.destroy) sock.destroy();
        else throw new Error(`unknown step ${JSON.stringify(step)}`);
      }
    };
    sock.on("data", (d) => {
      buf = Buffer.concat([buf, d]);
      feed();
    });
    sock.on("end", () => current?.abort());
    sock.on("close", () => current?.abort());
  });
  await new Promise((r) => server.listen(0, "127.0.0.1", r));
  origin.url = `http://127.0.0.1:${server.address().port}`;
  origin.close = () => new Promise((r) => {
    for (const s of sockets) s.destroy();
    server.close(() => r());
  });
  return origin;
}

/**
 * One request written byte for byte on a fresh connection, and the response parsed.
 * @param {{hostname: string, port: string|number, host?: string}} base where to connect
 * @param {object} r
 * @param {string} r.method
 * @param {string} r.target  the request-target exactly as written on the request line
 * @param {[string, string][]} [r.headers]  written in order after Host (unless r.host === null)
 * @param {Buffer} [r.body]
 * @param {"length"|"chunked"|"none"} [r.framing]  how the body is declared (default: length when a body is given)
 * @param {number} [r.declaredLength]  a content-length to declare instead of the body's length
 * @param {number} [r.continueWaitMs]  with `Expect: 100-continue`: how long to wait for the
 *   interim 100 before sending the body anyway (what curl does; default 1000)
 * @param {boolean} [r.closeAfterBody]  half-close once the body is written
 * @param {number} [r.timeoutMs]  give up (the result then has `timedOut`)
 * @param {boolean} [r.head]  the response has no body whatever it says (a HEAD request)
 * @param {number} [r.lingerMs]  keep the connection open this long after the answer (so that
 *   bytes the server reads as a pipelined next request are still served)
 * @param {string|null} [r.host]  the Host header (null: none)
 * @param {{pieces: number, ms: number}} [r.pace]  send the body in pieces, ms apart
 */
export function rawRequest(base, r) {
  const t0 = performance.now();
  const body = r.body ?? null;
  const framing = r.framing ?? (body ? "length" : "none");
  const headers = [];
  if (r.host !== null) headers.push(["host", r.host ?? `${base.hostname}:${base.port}`]);
  headers.push(...(r.headers ?? []));
  if (framing === "length") headers.push(["content-length", String(r.declaredLength ?? body?.length ?? 0)]);
  if (framing === "chunked") headers.push(["transfer-encoding", "chunked"]);
  const expectsContinue = headers.some(([k, v]) => k.toLowerCase() === "expect" && v.toLowerCase() === "100-continue");
  const head = `${r.method} ${r.target} HTTP/1.1${CRLF}` + headers.map(([k, v]) => `${k}: ${v}${CRLF}`).join("") + CRLF;
  const encoded = !body
    ? Buffer.alloc(0)
    : framing === "chunked"
      ? Buffer.concat([
          ...chunk(body, 64 * 1024).map((c) => Buffer.concat([Buffer.from(c.length.toString(16) + CRLF), c, Buffer.from(CRLF)])),
          Buffer.from("0" + CRLF + CRLF),
        ])
      : body;
  return new Promise((resolve) => {
    const out = {
      interim: [], status: null, reason: null, headers: {}, rawHead: "", body: Buffer.alloc(0),
      bodyError: null, timedOut: false, error: null, ms: 0, sentBody: false,
    };
    let buf = Buffer.alloc(0);
    let settled = false;
    let bodySent = false;
    const sock = net.connect(Number(base.port), base.hostname);
    const finish = () => {
      if (settled) return;
      settled = true;
      clearTimeout(timer);
      out.ms = performance.now() - t0;
      if (r.lingerMs) setTimeout(() => sock.destroy(), r.lingerMs);
      else sock.destroy();
      resolve(out);
    };
    const sendBody = async () => {
      if (bodySent || sock.destroyed) return;
      bodySent = true;
      out.sentBody = encoded.length > 0;
      if (r.pace && encoded.length) {
        // The body in `pieces` writes, `ms` apart (a slow client).
        const size = Math.ceil(encoded.length / r.pace.pieces);
        for (let i = 0; i < encoded.length && !sock.destroyed; i += size) {
          if (i > 0) await new Promise((ok) => setTimeout(ok, r.pace.ms));
          if (!sock.destroyed) sock.write(encoded.subarray(i, i + size));
        }
      } else if (encoded.length) sock.write(encoded);
      if (r.closeAfterBody && !sock.destroyed) sock.end();
    };
    const timer = setTimeout(() => {
      out.timedOut = true;
      if (out.status !== null) out.bodyError ??= "timed out reading the body";
      finish();
    }, r.timeoutMs ?? 5000);
    sock.on("connect", () => {
      sock.write(head, "latin1");
      if (!expectsContinue) sendBody();
      else if (body) setTimeout(sendBody, r.continueWaitMs ?? 1000);
    });
    let framingOut = null; // {kind: length|chunked|close|none, left}
    const parse = () => {
      for (;;) {
        if (out.status === null) {
          const e = buf.indexOf("\r\n\r\n");
          if (e < 0) return;
          const text = buf.subarray(0, e).toString("latin1");
          buf = buf.subarray(e + 4);
          const [line, ...rest] = text.split("\r\n");
          const m = /^HTTP\/1\.[01] (\d{3})(?: (.*))?$/.exec(line);
          if (!m) {
            out.error = `unparseable status line ${JSON.stringify(line.slice(0, 80))}`;
            return finish();
          }
          const status = Number(m[1]);
          const hs = {};
          for (const l of rest) {
            const i = l.indexOf(":");
            const k = l.slice(0, i).trim().toLowerCase();
            const v = l.slice(i + 1).trim();
            hs[k] = k in hs ? `${hs[k]}, ${v}` : v;
          }
          if (status >= 100 && status < 200) {
            out.interim.push(status);
            if (status === 100) sendBody();
            continue;
          }
          out.status = status;
          out.reason = m[2] ?? "";
          out.headers = hs;
          out.rawHead = text;
          if (r.head || status === 204 || status === 304) framingOut = { kind: "none" };
          else if ((hs["transfer-encoding"] ?? "").toLowerCase().includes("chunked")) framingOut = { kind: "chunked", left: 0, chunks: [] };
          else if (hs["content-length"] !== undefined) framingOut = { kind: "length", left: Number(hs["content-length"]) };
          else framingOut = { kind: "close" };
          // A final answer before the body was sent: the body is not sent (as curl does).
          bodySent = true;
        }
        const f = framingOut;
        if (f.kind === "none") return finish();
        if (f.kind === "close") {
          out.body = Buffer.concat([out.body, buf]);
          buf = Buffer.alloc(0);
          return;
        }
        if (f.kind === "length") {
          const take = buf.subarray(0, f.left);
          out.body = Buffer.concat([out.body, take]);
          f.left -= take.length;
          buf = buf.subarray(take.length);
          if (f.left === 0) return finish();
          return;
        }
        // chunked
        if (f.left > 0) {
          const take = buf.subarray(0, f.left);
          out.body = Buffer.concat([out.body, take]);
          f.left -= take.length;
          buf = buf.subarray(take.length);
          if (f.left > 0) return;
          f.crlf = true;
          continue;
        }
        if (f.crlf) {
          if (buf.length < 2) return;
          buf = buf.subarray(2);
          f.crlf = false;
          continue;
        }
        const e = buf.indexOf("\r\n");
        if (e < 0) return;
        const size = parseInt(buf.subarray(0, e).toString("latin1"), 16);
        buf = buf.subarray(e + 2);
        if (!Number.isFinite(size)) {
          out.bodyError = "bad chunk size";
          return finish();
        }
        if (size === 0) return finish(); // trailers are not needed
        f.left = size;
      }
    };
    sock.on("data", (d) => {
      buf = Buffer.concat([buf, d]);
      parse();
    });
    const ended = () => {
      if (out.status === null) out.error ??= "connection closed before a response";
      else if (framingOut && framingOut.kind !== "close" && framingOut.kind !== "none") out.bodyError ??= "connection closed mid-body";
      finish();
    };
    sock.on("end", ended);
    sock.on("close", ended);
    sock.on("error", (e) => {
      out.error ??= e.code ?? e.message;
    });
  });
}

/**
 * A clean connection pool between tests: what one test left on a pooled connection must not be
 * read by the next. Closing the origins' connections is not enough when workerd has already
 * buffered an answer nobody asked for (a pooled connection left an answer behind): the next
 * request on that connection still reads it. So requests are sent through `entry` until one
 * gets its own answer from the decided origin, with the origins' connections closed before each.
 * @param {{hostname: string, port: string|number}} entry where the Worker listens
 * @param {object[]} origins raw origins (startRawOrigin)
 * @param {() => string} newToken a fresh request token
 */
export async function cleanPool(entry, origins, newToken) {
  for (const o of origins) o.reset();
  for (let i = 0; i < 8; i++) {
    for (const o of origins) o.dropConnections();
    // workerd notices a closed idle connection within milliseconds; until then it may still
    // pick it for the next request.
    await new Promise((r) => setTimeout(r, 30));
    const D = newToken();
    const res = await rawRequest(entry, { method: "GET", target: `/drain?t=${D}`, timeoutMs: 3000 });
    let got = null;
    try {
      got = JSON.parse(res.body.toString()).token;
    } catch {
      // not an echo
    }
    if (got === D && res.headers["x-decision-failover"] === undefined) break;
  }
  for (const o of origins) {
    o.dropConnections();
    o.reset();
  }
  await new Promise((r) => setTimeout(r, 30));
}

/** The `stream` step: `bytes` of a fixed pattern after a 200 head, paced by the socket. */
async function streamBody(sock, rec, bytes) {
  const piece = Buffer.alloc(1 << 20);
  for (let i = 0; i < piece.length; i++) piece[i] = (i * 31 + 7) & 0xff;
  const hash = createHash("sha256");
  rec.streamed = 0;
  sock.write(`HTTP/1.1 200 OK${CRLF}content-type: application/octet-stream${CRLF}content-length: ${bytes}${CRLF}x-echo-token: ${rec.token}${CRLF}${CRLF}`);
  while (rec.streamed < bytes && !sock.destroyed) {
    const part = piece.subarray(0, Math.min(piece.length, bytes - rec.streamed));
    hash.update(part);
    rec.streamed += part.length;
    if (!sock.write(part)) await new Promise((r) => { sock.once("drain", r); sock.once("close", r); });
  }
  rec.streamedSha256 = hash.digest("hex");
}

function chunk(buf, size) {
  const out = [];
  for (let i = 0; i < buf.length; i += size) out.push(buf.subarray(i, i + size));
  return out;
}

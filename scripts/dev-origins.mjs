#!/usr/bin/env node
// Loopback echo origins for trying edge routing locally (README, "Routing quick-start").
//   node scripts/dev-origins.mjs [9001 9002 9003]
// Origin i answers every request with JSON describing what it received (method, path,
// query, headers, body size and sha256) and logs one line per request. Ctrl-C stops them.
import http from "node:http";
import { createHash } from "node:crypto";

const ports = process.argv.slice(2).map(Number);
const list = ports.length ? ports : [9001, 9002, 9003];
const names = ["A", "B", "C", "D", "E"];

list.forEach((port, i) => {
  const name = names[i] ?? String(i);
  http
    .createServer((req, res) => {
      const chunks = [];
      req.on("data", (c) => chunks.push(c));
      req.on("end", () => {
        const body = Buffer.concat(chunks);
        const url = new URL(req.url, `http://127.0.0.1:${port}`);
        const seen = {
          origin: name,
          method: req.method,
          path: url.pathname,
          query: url.search,
          headers: req.headers,
          body_bytes: body.length,
          body_sha256: createHash("sha256").update(body).digest("hex"),
        };
        console.log(JSON.stringify({ origin: name, method: req.method, url: req.url, body_bytes: body.length }));
        res.writeHead(200, { "content-type": "application/json", "x-origin": name });
        res.end(JSON.stringify(seen, null, 2) + "\n");
      });
    })
    .listen(port, "127.0.0.1", () => console.log(`origin ${name} on http://127.0.0.1:${port}`));
});

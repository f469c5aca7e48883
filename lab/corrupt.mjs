// Makes a deliberately worse training set for scenario A's challenger: the label of every
// row whose request type is in `types` is rotated `steps` clusters along route_a → route_b →
// route_c → route_a (reject stays). The rotation is systematic, not random, so the model
// learns it with confidence and serves it instead of falling back to the rules.
import { readFileSync, writeFileSync } from "node:fs";

const ROUTES = ["route_a", "route_b", "route_c"];

/** Rewrites the JSONL dataset `src` into `dst`; returns the row and rotated-label counts. */
export function rotateLabels(src, dst, { types, steps }) {
  const set = new Set(types);
  let rotated = 0, rows = 0;
  const out = [];
  for (const line of readFileSync(src, "utf8").split("\n")) {
    if (!line.trim()) continue;
    const row = JSON.parse(line);
    rows++;
    const i = ROUTES.indexOf(row.action);
    if (set.has(row.state.request_type) && i >= 0) {
      row.action = ROUTES[(i + steps) % 3];
      rotated++;
    }
    out.push(JSON.stringify(row));
  }
  writeFileSync(dst, out.join("\n") + "\n");
  return { rows, rotated };
}

// Makes a deliberately worse training set for scenario A's challenger: the label of every
// row whose request type is in `types` is rotated `steps` clusters along route_a → route_b →
// route_c → route_a (reject stays). The rotation is systematic, not random, so the model
// learns it with confidence and serves it instead of falling back to the rules.
import { readFileSync, writeFileSync } from "node:fs";
import path from "node:path";

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

/**
 * Scenario A's deliberately worse model, trained into `dir`: `decider simulate --rows 20000
 * --seed 11`, the labels of request types 0–2 rotated two clusters on, `decider train`.
 * `decider` is lib.mjs's CLI runner (passed in: this module stays free of the lab's imports).
 * Returns the artifact's path and how it was made.
 */
export function trainWorse(dir, decider) {
  const sim = path.join(dir, "sim.jsonl");
  const bad = path.join(dir, "corrupted.jsonl");
  const model = path.join(dir, "challenger.json");
  decider(["simulate", "--rows", "20000", "--seed", "11", "--out", sim]);
  const corruption = { types: [0, 1, 2], steps: 2 };
  const rotated = rotateLabels(sim, bad, corruption);
  decider(["train", "--data", bad, "--out", model, "--quiet"]);
  return { model, training: { simulate: "--rows 20000 --seed 11", rotated_types: corruption.types, rotate_steps: corruption.steps, ...rotated } };
}

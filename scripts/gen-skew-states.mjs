#!/usr/bin/env node
// Generates tests/fixtures/skew_states.jsonl: the states of the training/serving skew test
// (tests/e2e/skew.test.mjs). Fixed seed, so the file is reproducible:
//   node scripts/gen-skew-states.mjs [--seed 20261130] [--rows 240] [--out FILE]
// Covers every region, request type and hour, loads above 1, deep queues, and values on
// the default rule table's thresholds (0.8, 0.95, 50, 100, 0.15, 0.5).
import { writeFileSync } from "node:fs";
// The e2e tests' seeded PRNG (mulberry32): one implementation for both.
import { rng } from "../tests/e2e/helpers.mjs";

const args = Object.fromEntries(
  process.argv.slice(2).reduce((acc, a, i, all) => (a.startsWith("--") ? [...acc, [a.slice(2), all[i + 1]]] : acc), []),
);
const seed = Number(args.seed ?? 20261130);
const rows = Number(args.rows ?? 240);
const out = args.out ?? "tests/fixtures/skew_states.jsonl";

const rand = rng(seed);
const pick = (xs) => xs[Math.floor(rand() * xs.length)];
const uniform = (lo, hi) => lo + (hi - lo) * rand();

function load() {
  const r = rand();
  if (r < 0.65) return uniform(0, 1);
  if (r < 0.8) return uniform(1, 3); // bursts: legal, clipped by the encoder
  if (r < 0.85) return pick([25, 1e3]);
  return pick([0, 1, 0.8, 0.95, 0.7999999, 0.9500001]);
}
function success() {
  const r = rand();
  if (r < 0.7) return uniform(0.8, 1);
  if (r < 0.9) return uniform(0, 0.8);
  return pick([0, 1, 0.5, 0.15, 0.4999999]);
}
function queue() {
  const r = rand();
  if (r < 0.55) return uniform(0, 60);
  if (r < 0.75) return uniform(60, 200);
  if (r < 0.9) return uniform(200, 5000); // deep queues
  return pick([0, 50, 100, 49.999, 1e6]);
}

const lines = [];
for (let i = 0; i < rows; i++) {
  lines.push(JSON.stringify({
    request_type: Math.floor(i / 10) % 6,
    region_id: i % 10,
    current_load: load(),
    recent_success_rate: success(),
    queue_depth: rand() < 0.3 ? Math.round(queue()) : queue(),
    hour: (i * 7) % 24, // 7 is coprime with 24: every hour appears
  }));
}
writeFileSync(out, lines.join("\n") + "\n");
console.log(`wrote ${rows} states to ${out} (seed ${seed})`);

// The lab's ground truth: how likely a request is to succeed, and how long it takes, on each
// cluster. The loopback origins answer from it; the lab computes true expected values from it.
//
// It differs on purpose from the simulator the shipped model was trained on
// (crates/decider-cli/src/simulate.rs), in three places, so that a policy learned from the
// lab's own logs can beat the shipped model:
//  1. Light and batch requests (types 0–3): the home cluster saturates at load 0.80 for every
//     hour (the simulator spills at 0.85, 0.80 only in hours 14–20); above it the spill target
//     (the next cluster, a → b → c → a) is far better.
//  2. Heavy requests (types 4–5): cluster B has the compute (the simulator sends them to C).
//     C is good until load 0.80, then saturates; A is poor for heavy work at any load (the
//     simulator spills heavy work to A from load 0.70).
//  3. Nothing depends on the hour or on the queue depth; the backends' recent success rate
//     scales every cluster alike (it cannot change which cluster is best).
// A rejected request never reaches an origin and counts as a failure (reward 0).

export const ROUTES = ["route_a", "route_b", "route_c"];
export const ACTIONS = [...ROUTES, "reject"];
export const HEAVY_FROM = 4;
export const SATURATION = 0.8;

/** Home cluster of a region: 0–3 → A, 4–6 → B, 7–9 → C (as in the simulator). */
export function home(region) {
  return region <= 3 ? 0 : region <= 6 ? 1 : 2;
}

/**
 * Probability that `action` succeeds for `state` (the state as the Worker logs it).
 * Returns 0 for `reject`.
 */
export function successProb(state, action) {
  const c = ROUTES.indexOf(action);
  if (c < 0) return 0;
  const load = state.current_load;
  const health = 0.5 + 0.5 * state.recent_success_rate;
  let p;
  if (state.request_type >= HEAVY_FROM) {
    p = [
      0.4, // A: no compute for heavy work
      load < 0.9 ? 0.95 : 0.7, // B: the compute cluster
      load < SATURATION ? 0.85 : 0.45, // C
    ][c];
  } else {
    const h = home(state.region_id);
    if (c === h) p = load < SATURATION ? 0.97 : 0.55;
    else if (c === (h + 1) % 3) p = 0.9; // the spill target
    else p = 0.75;
  }
  return p * health;
}

/** Latency of an answer in ms (informational: success is the status only). */
export function latencyMs(state, action, u) {
  const c = ROUTES.indexOf(action);
  const base = [2, 4, 6][c];
  const far = state.request_type < HEAVY_FROM && c !== home(state.region_id) ? 6 : 0;
  const saturated = state.current_load >= SATURATION ? 4 : 0;
  return base + far + saturated + Math.floor(u * 4);
}

/** Whether the request `id` succeeds on `action`: its one draw against the success probability. */
export function succeeds(seed, id, state, action) {
  return hash01(`${seed}:${id}`) < successProb(state, action);
}

/** The action the ground truth says is best, and its success probability. */
export function best(state) {
  let top = ROUTES[0];
  for (const a of ROUTES) if (successProb(state, a) > successProb(state, top)) top = a;
  return { action: top, p: successProb(state, top) };
}

/** 64-bit FNV-1a of a string, as a uniform number in [0, 1): the lab's seeded randomness. */
export function hash01(text) {
  let h = 0xcbf29ce484222325n;
  for (const ch of Buffer.from(text)) {
    h ^= BigInt(ch);
    h = (h * 0x100000001b3n) & 0xffffffffffffffffn;
  }
  // Finalise (splitmix64) so that similar ids give unrelated numbers.
  h ^= h >> 30n;
  h = (h * 0xbf58476d1ce4e5b9n) & 0xffffffffffffffffn;
  h ^= h >> 27n;
  h = (h * 0x94d049bb133111ebn) & 0xffffffffffffffffn;
  h ^= h >> 31n;
  return Number(h >> 11n) / 2 ** 53;
}

/** A Markdown description of the ground truth, for docs/reports/LAB.md. */
export const TRUTH_MD = `Success probability of a request on a cluster, times the health factor
\`0.5 + 0.5 × recent_success_rate\` (the same for every cluster). Load is \`current_load\`.

| request | cluster | success before the health factor |
|---|---|---|
| light or batch (types 0–3) | home (regions 0–3 → A, 4–6 → B, 7–9 → C) | 0.97 below load 0.80, 0.55 from 0.80 |
| light or batch | next cluster (A → B → C → A) | 0.90 |
| light or batch | the third cluster | 0.75 |
| heavy (types 4–5) | A | 0.40 |
| heavy | B | 0.95 below load 0.90, 0.70 from 0.90 |
| heavy | C | 0.85 below load 0.80, 0.45 from 0.80 |
| any | reject | 0 (never reaches an origin) |

Where it differs from the simulator the shipped model learned from: the simulator's home
cluster saturates at 0.85 (0.80 only in hours 14–20), heavy work goes to C and spills to A from
load 0.70; the shipped rule table spills at 0.80 everywhere and spills heavy work to A from
0.80. Nothing in the lab depends on the hour or the queue depth. Latency (informational; success
is the status only): 2/4/6 ms on A/B/C, +6 ms for light work off its home cluster, +4 ms from
load 0.80, +0–3 ms jitter.

Each request's outcome is drawn once, deterministically: the origin answers 200 when
\`u < p\`, else 500, where \`u\` is a 64-bit hash of the lab seed and the request's id.`;

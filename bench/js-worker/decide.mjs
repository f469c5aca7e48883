// The decision written by hand in plain JavaScript, the way a team would without Rust:
// validate the state, encode it (encoder v1), run the same artifact's gradient-boosted
// trees, temperature softmax, confidence threshold, out-of-distribution check, and the
// same first-hit rule table as fallback. It is the "JS" baseline of the side-by-side
// benchmark, and bench/check-js.mjs checks that it decides exactly like decider-core.

export const ACTIONS = ["route_a", "route_b", "route_c", "reject"];
const FIELDS = ["request_type", "region_id", "current_load", "recent_success_rate", "queue_depth", "hour"];
const ENCODER_VERSION = 1;

class StateError extends Error {
  constructor(code, field, message) {
    super(message);
    this.code = code;
    this.field = field;
  }
}

function intField(obj, field, max) {
  if (!(field in obj)) return undefined;
  const v = obj[field];
  if (typeof v !== "number" || !Number.isInteger(v)) {
    throw new StateError("invalid_type", field, `${field} must be an integer, got ${JSON.stringify(v)}`);
  }
  if (v < 0 || v > max) throw new StateError("out_of_range", field, `${field} must be an integer 0..=${max}, got ${v}`);
  return v;
}

function numField(obj, field, max) {
  if (!(field in obj)) return undefined;
  const v = obj[field];
  if (typeof v !== "number") throw new StateError("invalid_type", field, `${field} must be a number, got ${JSON.stringify(v)}`);
  if (!Number.isFinite(v) || v < 0 || (max !== undefined && v > max)) {
    throw new StateError("out_of_range", field, `${field} is out of range, got ${v}`);
  }
  return v;
}

function required(v, field) {
  if (v === undefined) throw new StateError("missing_field", field, `${field} is required`);
  return v;
}

/** Validates a parsed state object (DESIGN §2). Throws StateError naming the field. */
export function parseState(obj, defaultHour) {
  if (obj === null || typeof obj !== "object" || Array.isArray(obj)) {
    throw new StateError("invalid_type", "state", "state must be a json object");
  }
  for (const k of Object.keys(obj)) {
    if (!FIELDS.includes(k)) throw new StateError("unknown_field", k, `unknown field ${k}`);
  }
  const request_type = required(intField(obj, "request_type", 5), "request_type");
  const region_id = required(intField(obj, "region_id", 9), "region_id");
  const current_load = required(numField(obj, "current_load"), "current_load");
  const recent_success_rate = required(numField(obj, "recent_success_rate", 1), "recent_success_rate");
  const queue_depth = required(numField(obj, "queue_depth"), "queue_depth");
  const hour = intField(obj, "hour", 23) ?? Math.min(defaultHour, 23);
  return { request_type, region_id, current_load, recent_success_rate, queue_depth, hour };
}

// sin/cos(2π·hour/24) as the encoder's table (crates/decider-core/src/features.rs): libm
// implementations differ in the last bit for some hours (V8's Math.sin(2π·16/24) is one ulp
// off glibc's), and a tree split sitting on a training value then flips. A JS port has to
// carry the same table to agree with the model; the skew check in bench/micro.mjs found it.
const HOUR_SIN_COS = [
  [0.0, 1.0],
  [0.25881904510252074, 0.9659258262890683],
  [0.49999999999999994, 0.8660254037844387],
  [0.7071067811865475, 0.7071067811865476],
  [0.8660254037844386, 0.5000000000000001],
  [0.9659258262890683, 0.25881904510252074],
  [1.0, 6.123233995736766e-17],
  [0.9659258262890683, -0.25881904510252063],
  [0.8660254037844387, -0.4999999999999998],
  [0.7071067811865476, -0.7071067811865475],
  [0.49999999999999994, -0.8660254037844387],
  [0.258819045102521, -0.9659258262890682],
  [1.2246467991473532e-16, -1.0],
  [-0.2588190451025208, -0.9659258262890683],
  [-0.4999999999999997, -0.8660254037844388],
  [-0.7071067811865471, -0.7071067811865479],
  [-0.8660254037844384, -0.5000000000000004],
  [-0.9659258262890683, -0.25881904510252063],
  [-1.0, -1.8369701987210297e-16],
  [-0.9659258262890684, 0.2588190451025203],
  [-0.8660254037844386, 0.5000000000000001],
  [-0.7071067811865477, 0.7071067811865474],
  [-0.5000000000000004, 0.8660254037844384],
  [-0.25881904510252157, 0.9659258262890681],
];

const clip01 = (v) => (Number.isNaN(v) ? 0 : Math.min(Math.max(v, 0), 1));

/** Encoder v1: 16 floats. */
export function encode(s) {
  const x = new Float64Array(16);
  x[0] = s.request_type / 5;
  x[1] = clip01(s.current_load);
  x[2] = clip01(s.recent_success_rate);
  x[3] = clip01(s.queue_depth / 100);
  const [sin, cos] = HOUR_SIN_COS[Math.min(s.hour, 23)];
  x[4] = sin;
  x[5] = cos;
  x[6 + Math.min(s.region_id, 9)] = 1;
  return x;
}

/** Loads an artifact (object from JSON.parse): checks what matters and flattens the trees. */
export function loadModel(a) {
  if (JSON.stringify(a.actions) !== JSON.stringify(ACTIONS)) throw new Error("artifact action list differs");
  if (a.encoder_version !== ENCODER_VERSION) throw new Error("artifact encoder version differs");
  // Flat typed arrays: feature (-1 leaf), threshold, left, right; leaf values per action.
  let n = 0;
  for (const t of a.model.trees) n += t.feature.length;
  const feature = new Int32Array(n);
  const threshold = new Float64Array(n);
  const left = new Uint32Array(n);
  const right = new Uint32Array(n);
  const value = new Float64Array(n * 4);
  const roots = new Uint32Array(a.model.trees.length);
  let base = 0;
  a.model.trees.forEach((t, ti) => {
    roots[ti] = base;
    for (let i = 0; i < t.feature.length; i++) {
      const j = base + i;
      feature[j] = t.feature[i];
      threshold[j] = t.threshold[i];
      left[j] = base + t.left[i];
      right[j] = base + t.right[i];
      const v = t.value[i];
      if (Array.isArray(v)) {
        for (let k = 0; k < 4; k++) value[j * 4 + k] = v[k];
      } else {
        value[j * 4 + t.class] = v; // one-output trees (older artifacts)
      }
    }
    base += t.feature.length;
  });
  const r = a.feature_ranges;
  return {
    version: a.model_version,
    threshold: a.threshold,
    temperature: a.calibration.temperature,
    baseScore: Float64Array.from(a.model.base_score),
    ranges: FIELDS.map((f) => [f, r[f][0], r[f][1]]),
    feature,
    thresholdArr: threshold,
    left,
    right,
    value,
    roots,
  };
}

/** Calibrated probabilities per action. */
export function predict(m, x) {
  const margin = Float64Array.from(m.baseScore);
  for (let t = 0; t < m.roots.length; t++) {
    let i = m.roots[t];
    while (m.feature[i] >= 0) i = x[m.feature[i]] <= m.thresholdArr[i] ? m.left[i] : m.right[i];
    const o = i * 4;
    margin[0] += m.value[o];
    margin[1] += m.value[o + 1];
    margin[2] += m.value[o + 2];
    margin[3] += m.value[o + 3];
  }
  const max = Math.max(margin[0], margin[1], margin[2], margin[3]);
  const p = [0, 0, 0, 0];
  let sum = 0;
  for (let k = 0; k < 4; k++) {
    p[k] = Math.exp((margin[k] - max) / m.temperature);
    sum += p[k];
  }
  for (let k = 0; k < 4; k++) p[k] /= sum;
  // Renormalise once more, as decider-core does for any probability vector it is handed.
  const s2 = p[0] + p[1] + p[2] + p[3];
  for (let k = 0; k < 4; k++) p[k] /= s2;
  return p;
}

/** Checks and flattens a rule table (DESIGN §6). */
export function loadRules(spec) {
  return {
    version: spec.version,
    rules: spec.rules.map((r) => ({
      name: r.name,
      action: r.action,
      conds: Object.entries(r.when ?? {}).map(([field, c]) => ({
        field,
        lo: c.gt ?? c.gte ?? -Infinity,
        loIncl: c.gt === undefined,
        hi: c.lt ?? c.lte ?? Infinity,
        hiIncl: c.lt === undefined,
        set: c.in,
      })),
    })),
  };
}

function evaluateRules(rules, s) {
  for (const r of rules.rules) {
    let ok = true;
    for (const c of r.conds) {
      const v = s[c.field];
      if (!(c.loIncl ? v >= c.lo : v > c.lo) || !(c.hiIncl ? v <= c.hi : v < c.hi) || (c.set && !c.set.includes(v))) {
        ok = false;
        break;
      }
    }
    if (ok) return r;
  }
  return null;
}

/** The decision (DESIGN §5) for a validated state. */
export function decideState(m, rules, s, { threshold = m.threshold, defaultAction = "route_a", oodCheck = true } = {}) {
  const p = predict(m, encode(s));
  let best = 0;
  for (let k = 1; k < 4; k++) if (p[k] > p[best]) best = k;
  const confidence = p[best];
  let reason = null;
  if (oodCheck && m.ranges.some(([f, lo, hi]) => !(s[f] >= lo && s[f] <= hi))) reason = "out_of_distribution";
  else if (!(confidence >= threshold)) reason = "low_confidence";
  const d = {
    action: ACTIONS[best],
    confidence,
    source: "model",
    fallback_reason: reason,
    model_version: m.version,
    encoder_version: ENCODER_VERSION,
    probabilities: { route_a: p[0], route_b: p[1], route_c: p[2], reject: p[3] },
    decision_us: 0,
  };
  if (reason !== null) {
    const hit = evaluateRules(rules, s);
    if (hit) {
      d.action = hit.action;
      d.source = "rules";
      d.rule = hit.name;
    } else {
      d.action = defaultAction;
      d.source = "default";
    }
  }
  return d;
}

/** Request body text → { status, body } with the decision or a JSON error naming the field. */
export function decideBody(m, rules, text, hour) {
  let v;
  try {
    v = JSON.parse(text);
  } catch (e) {
    return { status: 400, body: { error: { code: "invalid_json", message: e.message, field: null } } };
  }
  try {
    if (v === null || typeof v !== "object" || !("state" in v)) throw new StateError("missing_field", "state", "state is required");
    const s = parseState(v.state, hour);
    return { status: 200, body: decideState(m, rules, s) };
  } catch (e) {
    if (e instanceof StateError) {
      return { status: 400, body: { error: { code: e.code, message: e.message, field: e.field } } };
    }
    throw e;
  }
}

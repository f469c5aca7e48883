//! The whole decision of edge-decider as a plain wasm module (no wasm-bindgen, no imports),
//! so V8 (node) or workerd can time it without any HTTP or JS glue in the way.
//!
//! Exports, all `extern "C"`:
//! - `init() -> i32`: parses and validates the embedded artifact and the default rule table
//!   (what a Worker isolate does once); 0 on success.
//! - `artifact_is_shipped() -> i32`: 1 for `model/decision-model.json`, 0 for the tiny
//!   test artifact used while the shipped one does not load.
//! - `alloc(len) -> ptr`: a buffer the host writes a request body into.
//! - `decide(len) -> len`: one whole decision on the body in the buffer (parse, validate,
//!   encode, infer, policy, serialise); the decision JSON is at `output_ptr()`.
//! - `copy_artifact() -> len`: the artifact text in use into the output buffer.
//! - `copy_body(i) -> len`: seeded body `i` into the output buffer (for the JS baseline).
//! - `bench_whole(iters) -> checksum`: `iters` whole decisions over the built-in seeded
//!   bodies (the host times the call; the checksum keeps the work observable).
//! - `bench_decide(iters) -> checksum`: the same without JSON text in or out (validated
//!   value → decision), to split the cost.
//!
//! The bodies are the seeded states of `crates/decider-core/benches/decision.rs`, so native
//! criterion numbers and wasm numbers are for the same inputs.

use decider_core::model::tests_support::BenchFixture;
use decider_core::{Decision, Model, State};
use serde_json::Value;
use std::sync::OnceLock;

/// The artifact the Worker embeds.
pub const ARTIFACT_JSON: &str = include_str!("../../../model/decision-model.json");

/// Number of distinct seeded states.
pub const N_STATES: usize = 256;

/// Model, rules and configuration (the core's bench fixture, the criterion benches' too),
/// and the seeded inputs; built once.
pub struct Engine {
    fx: BenchFixture,
    shipped: bool,
    bodies: Vec<String>,
    values: Vec<Value>,
}

impl std::ops::Deref for Engine {
    type Target = BenchFixture;
    fn deref(&self) -> &BenchFixture {
        &self.fx
    }
}

static ENGINE: OnceLock<Result<Engine, String>> = OnceLock::new();

impl Engine {
    /// Parses the artifact and rules.
    ///
    /// # Errors
    /// The artifact or rule table error, as text.
    pub fn new() -> Result<Engine, String> {
        // The shipped artifact; the core's tiny test artifact while the shipped one is
        // missing or from another format version (reported through `artifact_is_shipped`).
        let (model, shipped) = match Model::from_json(ARTIFACT_JSON) {
            Ok(m) => (m, true),
            Err(_) => (
                Model::from_json(decider_core::model::tests_support::TINY_ARTIFACT)
                    .map_err(|e| e.to_string())?,
                false,
            ),
        };
        let bodies: Vec<String> = states()
            .iter()
            .map(|s| serde_json::json!({ "state": s.to_value() }).to_string())
            .collect();
        let values = bodies
            .iter()
            .map(|b| {
                serde_json::from_str::<Value>(b)
                    .map(|v| v["state"].clone())
                    .map_err(|e| e.to_string())
            })
            .collect::<Result<Vec<_>, _>>()?;
        Ok(Engine {
            fx: BenchFixture::new(model).map_err(|e| e.to_string())?,
            shipped,
            bodies,
            values,
        })
    }

    /// Whether the shipped artifact (not the tiny fallback) is in use.
    pub fn shipped(&self) -> bool {
        self.shipped
    }

    /// The seeded request bodies.
    pub fn bodies(&self) -> &[String] {
        &self.bodies
    }
}

/// The seeded states (the criterion benches' inputs too).
pub fn states() -> Vec<State> {
    decider_core::model::tests_support::seeded_states(N_STATES)
}

fn engine() -> Option<&'static Engine> {
    ENGINE.get_or_init(Engine::new).as_ref().ok()
}

static mut INPUT: Vec<u8> = Vec::new();
static mut OUTPUT: Vec<u8> = Vec::new();

/// Parses the artifact and rules; 0 on success, 1 when either is refused.
#[no_mangle]
pub extern "C" fn init() -> i32 {
    i32::from(engine().is_none())
}

/// 1 when the shipped artifact is in use, 0 for the tiny fallback, -1 before a successful `init`.
#[no_mangle]
pub extern "C" fn artifact_is_shipped() -> i32 {
    engine().map_or(-1, |e| i32::from(e.shipped()))
}

/// Makes the input buffer `len` bytes long and returns its address.
#[no_mangle]
pub extern "C" fn alloc(len: usize) -> *mut u8 {
    // SAFETY: wasm is single-threaded and the host calls exports one at a time.
    #[allow(static_mut_refs)]
    unsafe {
        INPUT.resize(len, 0);
        INPUT.as_mut_ptr()
    }
}

/// Address of the last decision's JSON.
#[no_mangle]
pub extern "C" fn output_ptr() -> *const u8 {
    // SAFETY: as in `alloc`.
    #[allow(static_mut_refs)]
    unsafe {
        OUTPUT.as_ptr()
    }
}

/// One whole decision on the first `len` bytes of the input buffer; returns the output length.
#[no_mangle]
pub extern "C" fn decide(len: usize) -> usize {
    let Some(e) = engine() else { return 0 };
    // SAFETY: as in `alloc`.
    #[allow(static_mut_refs)]
    unsafe {
        let text = std::str::from_utf8(&INPUT[..len.min(INPUT.len())]).unwrap_or("");
        OUTPUT = e.decide_body(text).into_bytes();
        OUTPUT.len()
    }
}

/// Copies the artifact in use (the embedded one, or the tiny fallback) to the output buffer;
/// returns its length. The JS baseline loads exactly this text.
#[no_mangle]
pub extern "C" fn copy_artifact() -> usize {
    let Some(e) = engine() else { return 0 };
    let text = if e.shipped {
        ARTIFACT_JSON
    } else {
        decider_core::model::tests_support::TINY_ARTIFACT
    };
    // SAFETY: as in `alloc`.
    #[allow(static_mut_refs)]
    unsafe {
        OUTPUT = text.as_bytes().to_vec();
        OUTPUT.len()
    }
}

/// Copies seeded body `i` (mod [`N_STATES`]) to the output buffer; returns its length.
#[no_mangle]
pub extern "C" fn copy_body(i: usize) -> usize {
    let Some(e) = engine() else { return 0 };
    // SAFETY: as in `alloc`.
    #[allow(static_mut_refs)]
    unsafe {
        OUTPUT = e.bodies[i % N_STATES].clone().into_bytes();
        OUTPUT.len()
    }
}

/// `iters` whole decisions (body text → decision JSON) over the seeded bodies.
#[no_mangle]
pub extern "C" fn bench_whole(iters: u32) -> u32 {
    let Some(e) = engine() else { return 0 };
    let mut sum = 0u32;
    for i in 0..iters as usize {
        let out = e.decide_body(&e.bodies[i % N_STATES]);
        sum = sum.wrapping_add(out.len() as u32);
    }
    sum
}

/// `iters` decisions from already-parsed state values (validate, encode, infer, policy).
#[no_mangle]
pub extern "C" fn bench_decide(iters: u32) -> u32 {
    let Some(e) = engine() else { return 0 };
    let mut sum = 0u32;
    for i in 0..iters as usize {
        if let Ok(s) = State::from_value(&e.values[i % N_STATES], 12) {
            sum = sum.wrapping_add(e.decide_state(&s).action.index() as u32 + 1);
        }
    }
    sum
}

/// Stages of the whole decision, timed one at a time by [`bench_stage`].
pub const STAGES: [&str; 6] = [
    "parse: body text → state (typed fast path)",
    "parse: body text → state (through serde_json::Value)",
    "model: state → outcome (encode, infer, check)",
    "policy: state + outcome → decision",
    "serialise: decision → JSON text",
    "trees: features → margins (the tree walk alone)",
];

/// `iters` runs of stage `stage` (an index into [`STAGES`]) over the seeded inputs; 0 for
/// an unknown stage.
#[no_mangle]
pub extern "C" fn bench_stage(stage: u32, iters: u32) -> u32 {
    let Some(e) = engine() else { return 0 };
    let states: Vec<State> = e
        .bodies
        .iter()
        .filter_map(|b| State::from_body(b.as_bytes(), 12).ok())
        .collect();
    let outcomes: Vec<_> = states.iter().map(|s| e.model.outcome(s)).collect();
    let features: Vec<_> = states.iter().map(decider_core::encode).collect();
    let decisions: Vec<Decision> = states.iter().map(|s| e.decide_state(s)).collect();
    let n = states.len().max(1);
    let mut sum = 0u32;
    for i in 0..iters as usize {
        let k = i % n;
        sum = sum.wrapping_add(match stage {
            0 => State::from_body(e.bodies[k].as_bytes(), 12).map_or(0, |s| u32::from(s.hour)),
            1 => {
                State::from_body_value(e.bodies[k].as_bytes(), 12).map_or(0, |s| u32::from(s.hour))
            }
            2 => match e.model.outcome(std::hint::black_box(&states[k])) {
                decider_core::ModelOutcome::Output(o) => o.action.index() as u32 + 1,
                _ => 0,
            },
            3 => e.policy(&states[k], &outcomes[k]).action.index() as u32 + 1,
            4 => decisions[k].to_json().len() as u32,
            5 => e.model.margins(std::hint::black_box(&features[k]))[0].to_bits() as u32,
            _ => return 0,
        });
    }
    sum
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn body_and_state_paths_agree() {
        let e = Engine::new().unwrap();
        // serde_json's default float parsing is not round-trip exact, so compare with the
        // state as parsed from the body, not the generated one.
        for (b, v) in e.bodies().iter().zip(&e.values) {
            let s = State::from_value(v, 12).unwrap();
            let direct = serde_json::to_string(&e.decide_state(&s)).unwrap();
            assert_eq!(e.decide_body(b), direct);
        }
        let bad: Value = serde_json::from_str(&e.decide_body("{\"state\": {}}")).unwrap();
        assert!(bad["error"].as_str().unwrap().contains("request_type"));
    }

    #[test]
    fn exports_round_trip() {
        assert_eq!(init(), 0);
        let body = &Engine::new().unwrap().bodies()[3].clone();
        let p = alloc(body.len());
        unsafe { std::ptr::copy_nonoverlapping(body.as_ptr(), p, body.len()) };
        let n = decide(body.len());
        let out = unsafe { std::slice::from_raw_parts(output_ptr(), n) };
        let v: Value = serde_json::from_slice(out).unwrap();
        assert!(v["action"].is_string(), "{v}");
        assert!(bench_whole(10) > 0 && bench_decide(10) > 0);
    }
}

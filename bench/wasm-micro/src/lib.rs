//! The whole decision as a plain wasm module (no wasm-bindgen, no imports), timed in V8 by
//! bench/micro.mjs with nothing of HTTP or JS glue in the way.
//!
//! What is timed is what `/v1/decide` computes between reading the body and writing the
//! response: `State::from_body`, then `decider_core::request::decide` (the one composition
//! of decision, record and answer the Worker calls) and the answer's text, through the
//! `Decider` the Worker builds from the shipped model and the default rules, on the criterion
//! bench's seeded states. Exports: `init() -> i32` (0, or 1 when the shipped model or the
//! rules are refused: the claim is about that model, so there is no fallback) and
//! `bench_whole(iters) -> checksum`.

use decider_core::decision_id::DecisionKeys;
use decider_core::record::{Endpoint, RoutingKey};
use decider_core::request::{self, Request};
use decider_core::rollout::Arm;
use decider_core::{Decider, Gates, Model, ModelSource, Params, RuleTable, State};
use std::sync::{Arc, OnceLock};

const ARTIFACT_JSON: &str = include_str!("../../../model/decision-model.json");
/// Distinct seeded states, cycled through so branchy code is not timed on one lucky path.
const N_STATES: usize = 256;

struct Engine {
    decider: Decider,
    bodies: Vec<String>,
    keys: DecisionKeys,
}

fn engine() -> Option<&'static Engine> {
    static ENGINE: OnceLock<Option<Engine>> = OnceLock::new();
    ENGINE
        .get_or_init(|| {
            let model = Model::from_json(ARTIFACT_JSON).ok()?;
            let rules = RuleTable::from_json(decider_core::DEFAULT_RULES_JSON).ok()?;
            let model = ModelSource::Local(Arc::new(model));
            let bodies = decider_core::model::tests_support::seeded_states(N_STATES)
                .iter()
                .map(|s| serde_json::json!({ "state": s.to_value() }).to_string())
                .collect();
            Some(Engine {
                decider: Decider::new(model, Some(rules.into()), Params::default()),
                bodies,
                // As deployed: every decision id signed (DECISION_ID_KEY).
                keys: DecisionKeys::new(b"bench-decision-id-key-0123456789abcdef", None).ok()?,
            })
        })
        .as_ref()
}

/// One `/v1/decide` body → its answer, as the Worker computes it (a fixed id and clock).
fn decide_body(decider: &Decider, keys: &DecisionKeys, body: &[u8]) -> String {
    match State::from_body(body, 12) {
        Ok(state) => {
            let req = Request {
                state,
                gates: Gates::default(),
                endpoint: Endpoint::Decide,
                arm: Arm::Champion,
                key: RoutingKey::Given,
                decision_id: "4ae12971-112e-44b1-a38b-7063b8e5186f".to_string(),
                keys: Some(keys),
                request_id: None,
                backend: "embedded",
                now_ms: 1_796_205_600_000.0,
                decision_us: 0,
            };
            request::decide(decider, req, None).answer()
        }
        Err(e) => e.to_string(),
    }
}

/// 0 when the shipped model and the default rules load, 1 otherwise.
#[no_mangle]
pub extern "C" fn init() -> i32 {
    i32::from(engine().is_none())
}

/// `iters` whole decisions over the seeded bodies; the summed output lengths keep the work
/// observable to the optimiser. 0 when `init` fails.
#[no_mangle]
pub extern "C" fn bench_whole(iters: u32) -> u32 {
    let Some(e) = engine() else { return 0 };
    (0..iters as usize).fold(0u32, |sum, i| {
        let out = decide_body(&e.decider, &e.keys, e.bodies[i % N_STATES].as_bytes());
        sum.wrapping_add(out.len() as u32)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn seeded_bodies_are_decided_mostly_by_the_model() {
        assert_eq!(init(), 0);
        let e = engine().unwrap();
        let mut by_model = 0;
        for b in &e.bodies {
            let v: serde_json::Value =
                serde_json::from_str(&decide_body(&e.decider, &e.keys, b.as_bytes())).unwrap();
            assert!(v["action"].is_string(), "{b}: {v}");
            by_model += usize::from(v["source"] == "model");
        }
        // The timing is meant to cover the model's path, not the rules' shortcut.
        assert!(by_model > N_STATES / 2, "{by_model} of {N_STATES}");
        assert!(bench_whole(10) > 0);
    }
}

//! Criterion micro-benchmarks of the decision path, stage by stage and whole.
//!
//! Stages: `parse` (request body text → JSON value, keys given twice refused;
//! `parse_serde_value` is serde_json's own reading beside it), `validate` (value → [`State`]),
//! `encode` (state → 16 features), `infer` (features → calibrated probabilities),
//! `policy` (model output + rules → [`Decision`]), `parse_validate` (body text → [`State`], the
//! Worker's path), `serialise` (decision → JSON text), `read_line` (a decision record's log line
//! → [`decider_core::record::Record`], what `decider report` does per line), and `whole` (body text → the answer's
//! text through [`decider_core::request::decide`], everything the Worker's `/v1/decide` does
//! between reading the body and writing the response). Each iteration cycles through a fixed, seeded set of states so branchy
//! code (tree traversal, rule hits, fallbacks) is not measured on one lucky path.
//!
//! The model is `model/decision-model.json` (the artifact the Worker embeds); when it is
//! missing the tiny test artifact is used and the benchmark names say so.

use criterion::{criterion_group, criterion_main, Criterion, Throughput};
use decider_core::model::tests_support::TINY_ARTIFACT;
use decider_core::policy::{decide, Inputs};
use decider_core::record::{Endpoint, RoutingKey};
use decider_core::request::{self, Request};
use decider_core::rollout::Arm;
use decider_core::{
    encode, Decider, Decision, Gates, Model, ModelOutcome, ModelSource, Params, RuleTable, Rules,
    State, DEFAULT_RULES_JSON,
};
use serde_json::Value;
use std::hint::black_box;
use std::sync::Arc;

/// Number of distinct states cycled through.
const N_STATES: usize = 256;

fn artifact() -> (String, &'static str) {
    let path = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../model/decision-model.json"
    );
    match std::fs::read_to_string(path) {
        Ok(text) if Model::from_json(&text).is_ok() => (text, "shipped"),
        _ => (TINY_ARTIFACT.to_string(), "tiny"),
    }
}

/// Seeded states covering every region, request type and hour (the wasm micro-benchmark's
/// inputs too).
fn states() -> Vec<State> {
    decider_core::model::tests_support::seeded_states(N_STATES)
}

fn body(s: &State) -> String {
    serde_json::json!({ "state": s.to_value() }).to_string()
}

fn benches(c: &mut Criterion) {
    let (text, which) = artifact();
    let model = Arc::new(Model::from_json(&text).expect("artifact loads"));
    let rules = Rules::from(RuleTable::from_json(DEFAULT_RULES_JSON).expect("default rules load"));
    // The same decider and decision as the wasm micro-benchmark (bench/wasm-micro).
    let decider = Decider::new(
        ModelSource::Local(Arc::clone(&model)),
        Some(rules.clone()),
        Params::default(),
    );
    let policy = |s: &State, outcome: &ModelOutcome| {
        decide(
            Inputs {
                state: s,
                outcome,
                gates: Gates::default(),
                rules: Some(&rules),
                ranges: Some(model.ranges()),
                model_version: Some(model.version()),
            },
            decider.policy(),
        )
    };
    let states = states();
    let bodies: Vec<String> = states.iter().map(body).collect();
    let values: Vec<Value> = bodies
        .iter()
        .map(|b| serde_json::from_str::<Value>(b).expect("body parses")["state"].clone())
        .collect();
    let features: Vec<_> = states.iter().map(encode).collect();
    let outcomes: Vec<_> = states
        .iter()
        .map(|s| ModelOutcome::of_model(&model, s))
        .collect();

    let mut g = c.benchmark_group(format!("decision/{which}-model"));
    g.throughput(Throughput::Elements(1));
    let mut i = 0usize;
    let mut tick = move || {
        i = (i + 1) % N_STATES;
        i
    };
    g.bench_function("parse", |b| {
        b.iter(|| decider_core::json::parse_text(black_box(bodies[tick()].as_bytes())))
    });
    // The reference: serde_json's own reading (a key given twice: the last one wins), so one
    // run shows what refusing duplicates costs beside it.
    g.bench_function("parse_serde_value", |b| {
        b.iter(|| serde_json::from_slice::<Value>(black_box(bodies[tick()].as_bytes())))
    });
    g.bench_function("parse_validate", |b| {
        b.iter(|| State::from_body(black_box(bodies[tick()].as_bytes()), 12))
    });
    g.bench_function("validate", |b| {
        b.iter(|| State::from_value(black_box(&values[tick()]), 12))
    });
    g.bench_function("encode", |b| b.iter(|| encode(black_box(&states[tick()]))));
    g.bench_function("infer", |b| {
        b.iter(|| model.predict(black_box(&features[tick()])))
    });
    g.bench_function("policy", |b| {
        b.iter(|| {
            let k = tick();
            policy(black_box(&states[k]), black_box(&outcomes[k]))
        })
    });
    let decisions: Vec<Decision> = states
        .iter()
        .zip(&outcomes)
        .map(|(s, o)| policy(s, o))
        .collect();
    g.bench_function("serialise", |b| {
        b.iter(|| serde_json::to_string(black_box(&decisions[tick()])))
    });
    // One request of the Worker's, a fixed id and clock.
    let request = |state: State, endpoint: Endpoint| Request {
        state,
        gates: Gates::default(),
        endpoint,
        arm: Arm::Champion,
        key: RoutingKey::Given,
        decision_id: "4ae12971-112e-44b1-a38b-7063b8e5186f".to_string(),
        keys: None,
        request_id: None,
        backend: "embedded",
        now_ms: 1_796_205_600_000.0,
        decision_us: 0,
    };
    let lines: Vec<String> = states
        .iter()
        .map(|s| {
            let req = request(*s, Endpoint::Route);
            request::decide(&decider, req, None).record.to_line()
        })
        .collect();
    g.bench_function("read_line", |b| {
        b.iter(|| decider_core::record::Record::from_line(black_box(&lines[tick()])))
    });
    g.bench_function("whole", |b| {
        b.iter(|| {
            let state = State::from_body(black_box(bodies[tick()].as_bytes()), 12)?;
            let req = request(state, Endpoint::Decide);
            Ok::<_, decider_core::FieldError>(request::decide(&decider, req, None).answer())
        })
    });
    g.finish();

    let mut g = c.benchmark_group(format!("startup/{which}-model"));
    g.bench_function("artifact_parse_validate", |b| {
        b.iter(|| Model::from_json(black_box(&text)))
    });
    g.bench_function("rules_parse_validate", |b| {
        b.iter(|| RuleTable::from_json(black_box(DEFAULT_RULES_JSON)))
    });
    g.finish();
}

criterion_group!(decision, benches);
criterion_main!(decision);

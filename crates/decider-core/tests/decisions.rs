//! Golden decisions: the shipped model and rule table on the skew states
//! (`tests/fixtures/skew_states.jsonl`) must decide exactly as recorded in
//! `tests/fixtures/golden_decisions.jsonl`, byte for byte. The Worker's end-to-end tests
//! (`tests/e2e/records.test.mjs`) hold its wasm build to the same file: serving computes the
//! same bits on every target. A change in serving (a new model, a new policy step such as
//! exploration) shows up here first; regenerate only on purpose:
//! `UPDATE_GOLDEN=1 cargo test -p decider-core --test decisions`.

use decider_core::{Decider, Gates, Model, ModelSource, Params, Rules, State};
use std::path::PathBuf;
use std::sync::Arc;

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn shipped_decider(params: Params) -> Decider {
    let text = std::fs::read_to_string(root().join("model/decision-model.json")).unwrap();
    let model = Arc::new(Model::from_json(&text).unwrap());
    Decider::new(ModelSource::Local(model), Some(Rules::Shipped), params)
}

fn states() -> Vec<State> {
    std::fs::read_to_string(root().join("tests/fixtures/skew_states.jsonl"))
        .unwrap()
        .lines()
        .filter(|l| !l.trim().is_empty())
        .map(|l| State::parse_json(l, 0).unwrap())
        .collect()
}

#[test]
fn shipped_decisions_are_the_golden_ones() {
    let decider = shipped_decider(Params::default());
    let got: String = states()
        .iter()
        .map(|s| serde_json::to_string(&decider.decide(s, Gates::default())).unwrap() + "\n")
        .collect();
    let path = root().join("tests/fixtures/golden_decisions.jsonl");
    if std::env::var("UPDATE_GOLDEN").as_deref() == Ok("1") {
        std::fs::write(&path, &got).unwrap();
    }
    let want = std::fs::read_to_string(&path).unwrap();
    for (i, (g, w)) in got.lines().zip(want.lines()).enumerate() {
        assert_eq!(g, w, "state {} of skew_states.jsonl", i + 1);
    }
    assert_eq!(got.lines().count(), want.lines().count());
}

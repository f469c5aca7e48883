//! Golden vectors for encoder v1: `tests/fixtures/golden_features.json` at the repo root
//! holds states and the 16 floats they must encode to. The Worker's end-to-end tests check
//! the same file. Regenerate only on purpose: `UPDATE_GOLDEN=1 cargo test -p decider-core --test golden`
//! (a changed encoder is a new encoder version).

use decider_core::{encode, State, ENCODER_VERSION, FEATURE_DIM};
use serde_json::{json, Value};
use std::path::PathBuf;

fn fixture() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../tests/fixtures/golden_features.json")
}

/// The golden states: every region, every hour, load above 1, queue above 100,
/// success-rate edges, every request type.
fn cases() -> Vec<Value> {
    let mut out = Vec::new();
    for region in 0..10u8 {
        let hour = [0, 6, 12, 18, 23][region as usize % 5];
        out.push(json!({"request_type": region % 6, "region_id": region, "current_load": 0.1 * f64::from(region),
                        "recent_success_rate": 0.9, "queue_depth": f64::from(region) * 7.0, "hour": hour}));
    }
    for hour in [0, 6, 12, 18, 23] {
        out.push(json!({"request_type": 2, "region_id": 4, "current_load": 0.5, "recent_success_rate": 0.95,
                        "queue_depth": 10, "hour": hour}));
    }
    for (load, queue, success) in [
        (1.0, 100.0, 1.0),
        (1.7, 250.0, 0.0),
        (3.0, 100.5, 0.5),
        (0.0, 0.0, 0.0),
        (0.999, 99.9, 0.999),
        (25.0, 1e6, 0.01),
        (1.0000001, 1e-9, 1.0),
    ] {
        out.push(json!({"request_type": 5, "region_id": 9, "current_load": load, "recent_success_rate": success,
                        "queue_depth": queue, "hour": 3}));
    }
    // Every hour: sin/cos must be bit-identical natively and in wasm (the Worker's e2e
    // tests compare these exactly).
    for hour in 0..24 {
        out.push(json!({"request_type": 1, "region_id": 6, "current_load": 0.5, "recent_success_rate": 0.9,
                        "queue_depth": 10, "hour": hour}));
    }
    for rt in 0..6 {
        out.push(json!({"request_type": rt, "region_id": 0, "current_load": 0.33, "recent_success_rate": 0.77,
                        "queue_depth": 42, "hour": 9}));
    }
    out
}

#[test]
fn golden_features_match() {
    let generated: Vec<Value> = cases()
        .into_iter()
        .map(|state| {
            let s = State::from_value(&state, 0).unwrap();
            json!({"state": state, "features": encode(&s).to_vec()})
        })
        .collect();
    let doc =
        json!({"encoder_version": ENCODER_VERSION, "feature_dim": FEATURE_DIM, "cases": generated});
    let path = fixture();
    if std::env::var("UPDATE_GOLDEN").as_deref() == Ok("1") {
        std::fs::write(&path, serde_json::to_string_pretty(&doc).unwrap() + "\n").unwrap();
    }
    let text = std::fs::read_to_string(&path)
        .expect("golden fixture missing: run with UPDATE_GOLDEN=1 once");
    let golden: Value = serde_json::from_str(&text).unwrap();
    assert_eq!(
        golden["encoder_version"], ENCODER_VERSION,
        "fixture is for another encoder version"
    );
    let cases = golden["cases"].as_array().unwrap();
    assert!(
        cases.len() >= 24,
        "at least 24 golden cases, got {}",
        cases.len()
    );
    for (i, c) in cases.iter().enumerate() {
        let s = State::from_value(&c["state"], 0).unwrap();
        let got = encode(&s);
        let want: Vec<f64> = serde_json::from_value(c["features"].clone()).unwrap();
        assert_eq!(want.len(), FEATURE_DIM);
        for (j, (g, w)) in got.iter().zip(&want).enumerate() {
            assert!(
                (g - w).abs() <= 1e-12,
                "case {i} feature {j}: got {g}, golden {w}"
            );
        }
    }
}

//! Regression tests, one per bug found by fuzzing, property tests or review, each named
//! after the bug it pins down.

use decider_core::model::tests_support::TINY_ARTIFACT;
use decider_core::{encode, ArtifactError, Model, State};
use serde_json::Value;

fn state(region_id: u8, current_load: f64) -> State {
    State {
        request_type: 1,
        region_id,
        current_load,
        recent_success_rate: 0.9,
        queue_depth: 10.0,
        hour: 3,
    }
}

/// Every leaf and base score was checked finite, but not their sum: two finite leaves of
/// 1e308 on the same action overflowed the margin to +inf, and softmax turned `inf - inf`
/// into NaN probabilities that the policy then served as a (never-confident) model answer.
#[test]
fn margin_overflow_from_finite_leaves_gave_nan_probabilities() {
    /// The tiny artifact with every base score and leaf value set to `v`.
    fn with_leaves(v: f64) -> String {
        fn set_numbers(x: &mut Value, v: f64) {
            match x {
                Value::Number(_) => *x = v.into(),
                Value::Array(items) => items.iter_mut().for_each(|i| set_numbers(i, v)),
                _ => {}
            }
        }
        let mut a: Value = serde_json::from_str(TINY_ARTIFACT).unwrap();
        set_numbers(&mut a["model"]["base_score"], v);
        for t in a["model"]["trees"].as_array_mut().unwrap() {
            set_numbers(&mut t["value"], v);
        }
        a.to_string()
    }
    let e = Model::from_json(&with_leaves(1e308)).unwrap_err();
    assert!(matches!(e, ArtifactError::NonFinite(_)), "{e:?}");
    assert!(e.to_string().contains("margin of"), "{e}");
    // The same shape with room to spare still loads and predicts finite probabilities.
    let m = Model::from_json(&with_leaves(1e300)).unwrap();
    let p = m.predict(&encode(&state(3, 0.2)));
    assert!(p.iter().all(|v| v.is_finite()), "{p:?}");
    assert!((p.iter().sum::<f64>() - 1.0).abs() < 1e-6, "{p:?}");
}

/// serde_json's default float parser is best-effort: about one f64 in ten in the shortest
/// round-trip form the trainer writes (16–17 digits) came back one ulp off, so a loaded
/// artifact was not the model that was trained, and a state not what the client sent.
/// Found by `valid_states_pass_validation_unchanged` (queue_depth 1.4623148183304882e190).
#[test]
fn json_floats_came_back_one_ulp_off() {
    let parsed: f64 = serde_json::from_str("0.18017933438838418").unwrap();
    assert_eq!(parsed.to_bits(), 0.180_179_334_388_384_18_f64.to_bits());

    let s = State::parse_json(
        r#"{"request_type": 0, "region_id": 0, "current_load": 0.18017933438838418,
            "recent_success_rate": 0.0, "queue_depth": 1.4623148183304882e190}"#,
        0,
    )
    .unwrap();
    assert_eq!(s.current_load, 0.180_179_334_388_384_18);
    assert_eq!(s.queue_depth, 1.462_314_818_330_488_2e190);

    let text = TINY_ARTIFACT.replace("\"threshold\": 0.6", "\"threshold\": 0.18017933438838418");
    assert_eq!(
        Model::from_json(&text).unwrap().threshold(),
        0.180_179_334_388_384_18
    );
}

//! Regression tests, one per bug found by fuzzing, property tests or review, each named
//! after the bug it pins down.

use decider_core::model::tests_support::TINY_ARTIFACT;
use decider_core::{encode, ArtifactError, Model, State};

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
    let text = TINY_ARTIFACT
        .replace(
            "\"base_score\": [0.0, 0.0, 0.0, 0.0]",
            "\"base_score\": [0.0, 1e308, 0.0, 0.0]",
        )
        .replace("[0, -1.0, 4.0]", "[0, 1e308, 1e308]");
    let e = Model::from_json(&text).unwrap_err();
    assert!(matches!(e, ArtifactError::NonFinite(_)), "{e:?}");
    assert!(e.to_string().contains("margin of route_b"), "{e}");
    // The same leaves with room to spare still load and predict finite probabilities.
    let ok = TINY_ARTIFACT.replace("[0, -1.0, 4.0]", "[0, 1e300, 1e300]");
    let m = Model::from_json(&ok).unwrap();
    let p = m.predict(&encode(&state(3, 0.2)));
    assert!(p.iter().all(|v| v.is_finite()), "{p:?}");
    assert!((p.iter().sum::<f64>() - 1.0).abs() < 1e-6, "{p:?}");
}

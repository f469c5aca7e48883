//! Shared fixtures and invariant checks for the fuzz targets.
//!
//! A target panics (and libFuzzer reports a crash) when decider-core breaks one of the
//! laws below; the same laws are property-tested in `crates/decider-core/tests/`.

use decider_core::model::tests_support::TINY_ARTIFACT;
use decider_core::model::Probabilities;
use decider_core::{Features, Model, State};

/// The shipped artifact's text when `model/decision-model.json` existed at build time.
const SHIPPED_ARTIFACT: &str = include_str!(concat!(env!("OUT_DIR"), "/artifact.json"));

/// The model the decide target runs: the shipped artifact if present, else the tiny one.
pub fn model() -> Model {
    let text = if SHIPPED_ARTIFACT.trim().is_empty() {
        TINY_ARTIFACT
    } else {
        SHIPPED_ARTIFACT
    };
    Model::from_json(text).expect("the embedded artifact loads")
}

/// A handful of valid states spanning the ranges, bursts above nominal included.
pub fn sample_states() -> [State; 6] {
    let s = |request_type, region_id, current_load, recent_success_rate, queue_depth, hour| State {
        request_type,
        region_id,
        current_load,
        recent_success_rate,
        queue_depth,
        hour,
    };
    [
        s(0, 0, 0.0, 0.0, 0.0, 0),
        s(1, 3, 0.4, 0.97, 12.0, 14),
        s(5, 9, 1.0, 1.0, 100.0, 23),
        s(3, 5, 3.5, 0.2, 900.0, 2),
        s(4, 7, 1e300, 0.5, 1e300, 12),
        s(2, 1, 0.96, 0.49, 49.0, 6),
    ]
}

/// Asserts that a validated state is within its documented ranges.
pub fn check_state(s: &State) {
    assert!(s.request_type <= 5, "{s:?}");
    assert!(s.region_id <= 9, "{s:?}");
    assert!(s.hour <= 23, "{s:?}");
    assert!(s.current_load.is_finite() && s.current_load >= 0.0, "{s:?}");
    assert!(
        s.recent_success_rate.is_finite() && (0.0..=1.0).contains(&s.recent_success_rate),
        "{s:?}"
    );
    assert!(s.queue_depth.is_finite() && s.queue_depth >= 0.0, "{s:?}");
}

/// Asserts encoder v1's output ranges: finite, `[0, 1]` except the hour's sin/cos in
/// `[-1, 1]`, and an exact one-hot region.
pub fn check_features(x: &Features) {
    assert!(x.iter().all(|v| v.is_finite()), "{x:?}");
    for (i, v) in x.iter().enumerate() {
        let range = if i == 4 || i == 5 {
            -1.0..=1.0
        } else {
            0.0..=1.0
        };
        assert!(range.contains(v), "feature {i} = {v}");
    }
    assert_eq!(x[6..].iter().filter(|&&v| v == 1.0).count(), 1, "{x:?}");
    assert_eq!(x[6..].iter().sum::<f64>(), 1.0, "{x:?}");
}

/// Asserts a probability vector is finite, in `[0, 1]` and sums to 1 within 1e-6.
pub fn check_probabilities(p: &Probabilities) {
    assert!(
        p.iter().all(|v| v.is_finite() && (0.0..=1.0).contains(v)),
        "{p:?}"
    );
    assert!((p.iter().sum::<f64>() - 1.0).abs() <= 1e-6, "{p:?}");
}

/// Index of the rule a straightforward reading of the table picks for `s`: the first
/// whose every condition holds, each bound and set checked literally.
pub fn reference_rule(spec: &decider_core::rules::RuleTableSpec, s: &State) -> Option<usize> {
    spec.rules.iter().position(|r| {
        r.when.iter().all(|(field, c)| {
            let Some(v) = s.field(field) else {
                return false;
            };
            c.gt.is_none_or(|b| v > b)
                && c.gte.is_none_or(|b| v >= b)
                && c.lt.is_none_or(|b| v < b)
                && c.lte.is_none_or(|b| v <= b)
                && c.one_of
                    .as_ref()
                    .is_none_or(|set| set.iter().any(|&i| i as f64 == v))
        })
    })
}

/// `base` with `field` set to `v`, when that is still a valid state.
pub fn with_field(base: State, field: &str, v: f64) -> Option<State> {
    let mut s = base;
    let int =
        |max: u8| (v.fract() == 0.0 && (0.0..=f64::from(max)).contains(&v)).then_some(v as u8);
    match field {
        "request_type" => s.request_type = int(5)?,
        "region_id" => s.region_id = int(9)?,
        "hour" => s.hour = int(23)?,
        "current_load" if v.is_finite() && v >= 0.0 => s.current_load = v,
        "recent_success_rate" if (0.0..=1.0).contains(&v) => s.recent_success_rate = v,
        "queue_depth" if v.is_finite() && v >= 0.0 => s.queue_depth = v,
        _ => return None,
    }
    Some(s)
}

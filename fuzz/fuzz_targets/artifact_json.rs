//! Artifact JSON → load. A loaded model must predict finite probabilities summing to 1 on
//! every sample state, agree with its own `top`, and survive a JSON round-trip unchanged.
#![no_main]

use decider_core::model::argmax;
use decider_core::{encode, Model};
use decider_fuzz::{check_probabilities, sample_states};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    let model = match Model::from_json(text) {
        Ok(m) => m,
        Err(e) => {
            assert!(!e.to_string().is_empty());
            return;
        }
    };
    assert!((0.0..=1.0).contains(&model.threshold()));
    let again = decider_core::model::parse_json(text)
        .map_err(|e| e.to_string())
        .and_then(|a| serde_json::to_string(&a).map_err(|e| e.to_string()))
        .and_then(|t| Model::from_json(&t).map_err(|e| e.to_string()))
        .expect("a loaded artifact round-trips");
    for s in sample_states() {
        let x = encode(&s);
        let p = model.predict(&x);
        check_probabilities(&p);
        assert_eq!(model.top(&x), argmax(&p));
        assert_eq!(again.predict(&x), p);
        let _ = model.ranges().outlier(&s);
    }
});

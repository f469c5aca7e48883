//! Encoder v1: a [`State`] becomes a fixed 16-dim feature vector (DESIGN §3).
//!
//! One implementation serves training, evaluation, the CLI and the Worker, so the
//! features the model saw in training are the features it sees live. Values are
//! clipped rather than min-max scaled: an out-of-range live value (a load burst of 3.0,
//! a queue of 10 000) must never produce a feature outside what training saw.
//!
//! | idx | feature |
//! |---|---|
//! | 0 | request_type / 5 |
//! | 1 | clip(current_load, 0, 1) |
//! | 2 | clip(recent_success_rate, 0, 1) |
//! | 3 | clip(queue_depth / 100, 0, 1) |
//! | 4 | sin(2π·hour/24) |
//! | 5 | cos(2π·hour/24) |
//! | 6..=15 | one-hot(region_id, 10) |

use crate::state::{State, NUM_REGIONS};

/// Length of the encoded feature vector.
pub const FEATURE_DIM: usize = 16;

/// Version of the encoding below. Any change to [`encode`] is a new version, and
/// artifacts trained with another version are refused.
pub const ENCODER_VERSION: u32 = 1;

/// Human-readable feature names, in vector order (for model cards and tree dumps).
pub const FEATURE_NAMES: [&str; FEATURE_DIM] = [
    "request_type/5",
    "load",
    "success_rate",
    "queue/100",
    "hour_sin",
    "hour_cos",
    "region_0",
    "region_1",
    "region_2",
    "region_3",
    "region_4",
    "region_5",
    "region_6",
    "region_7",
    "region_8",
    "region_9",
];

/// An encoded state.
pub type Features = [f64; FEATURE_DIM];

/// Encodes a validated state (encoder v1).
///
/// ```
/// use decider_core::{features::encode, State};
/// let s = State { request_type: 5, region_id: 2, current_load: 1.7,
///                 recent_success_rate: 0.5, queue_depth: 250.0, hour: 6 };
/// let x = encode(&s);
/// assert_eq!(x[0], 1.0);            // request_type / 5
/// assert_eq!(x[1], 1.0);            // load clipped to 1
/// assert_eq!(x[3], 1.0);            // queue 250/100 clipped to 1
/// assert!((x[4] - 1.0).abs() < 1e-12); // sin(2π·6/24)
/// assert_eq!(x[6 + 2], 1.0);        // one-hot region 2
/// assert_eq!(x.iter().skip(6).sum::<f64>(), 1.0);
/// ```
pub fn encode(s: &State) -> Features {
    let mut x = [0.0; FEATURE_DIM];
    x[0] = f64::from(s.request_type) / 5.0;
    x[1] = clip01(s.current_load);
    x[2] = clip01(s.recent_success_rate);
    x[3] = clip01(s.queue_depth / 100.0);
    let angle = 2.0 * std::f64::consts::PI * f64::from(s.hour) / 24.0;
    x[4] = angle.sin();
    x[5] = angle.cos();
    x[6 + (s.region_id as usize).min(NUM_REGIONS - 1)] = 1.0;
    x
}

fn clip01(v: f64) -> f64 {
    // NaN cannot reach here from a validated state; map it to 0 anyway so the output is finite.
    if v.is_nan() {
        0.0
    } else {
        v.clamp(0.0, 1.0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn features_are_finite_and_bounded_for_extremes() {
        let s = State {
            request_type: 0,
            region_id: 9,
            current_load: 1e300,
            recent_success_rate: 0.0,
            queue_depth: 1e300,
            hour: 23,
        };
        let x = encode(&s);
        assert!(x.iter().all(|v| v.is_finite() && (-1.0..=1.0).contains(v)));
        assert_eq!(x[15], 1.0);
    }
}

//! Encoder v1: a [`State`] becomes a fixed 16-dim feature vector.
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

/// `(sin, cos)` of `2π·hour/24` for each hour, as literals.
///
/// A table, not `f64::sin`/`cos` at run time: the platform's libm and Rust's wasm32 libm
/// differ in the last bit for some angles (hour 16: `-0.8660254037844384` natively on
/// glibc, `-0.8660254037844385` in wasm), and a tree split sitting exactly on a training
/// value then sends the same state down different branches in training and serving.
/// These are the glibc values the golden vectors and the trained models were made with.
// Literal bit patterns on purpose, even where one equals a `std::f64::consts` value.
#[allow(clippy::approx_constant)]
const HOUR_SIN_COS: [(f64, f64); 24] = [
    (0.0, 1.0),
    (0.25881904510252074, 0.9659258262890683),
    (0.49999999999999994, 0.8660254037844387),
    (0.7071067811865475, 0.7071067811865476),
    (0.8660254037844386, 0.5000000000000001),
    (0.9659258262890683, 0.25881904510252074),
    (1.0, 6.123233995736766e-17),
    (0.9659258262890683, -0.25881904510252063),
    (0.8660254037844387, -0.4999999999999998),
    (0.7071067811865476, -0.7071067811865475),
    (0.49999999999999994, -0.8660254037844387),
    (0.258819045102521, -0.9659258262890682),
    (1.2246467991473532e-16, -1.0),
    (-0.2588190451025208, -0.9659258262890683),
    (-0.4999999999999997, -0.8660254037844388),
    (-0.7071067811865471, -0.7071067811865479),
    (-0.8660254037844384, -0.5000000000000004),
    (-0.9659258262890683, -0.25881904510252063),
    (-1.0, -1.8369701987210297e-16),
    (-0.9659258262890684, 0.2588190451025203),
    (-0.8660254037844386, 0.5000000000000001),
    (-0.7071067811865477, 0.7071067811865474),
    (-0.5000000000000004, 0.8660254037844384),
    (-0.25881904510252157, 0.9659258262890681),
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
    let (sin, cos) = HOUR_SIN_COS[usize::from(s.hour.min(23))];
    x[4] = sin;
    x[5] = cos;
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
    fn hour_table_is_the_formula() {
        for (h, &(sin, cos)) in HOUR_SIN_COS.iter().enumerate() {
            let angle = 2.0 * std::f64::consts::PI * h as f64 / 24.0;
            assert!((sin - angle.sin()).abs() < 1e-15, "sin hour {h}");
            assert!((cos - angle.cos()).abs() < 1e-15, "cos hour {h}");
        }
    }

    /// Regression: the skew test (tests/e2e/skew.test.mjs) found hour 16 encoded one bit
    /// apart in wasm and natively, which flipped a tree split of the trained model.
    #[test]
    fn regression_hour_encoding_is_platform_independent() {
        let s = State {
            request_type: 1,
            region_id: 6,
            current_load: 0.5,
            recent_success_rate: 0.9,
            queue_depth: 10.0,
            hour: 16,
        };
        let x = encode(&s);
        assert_eq!(x[4].to_bits(), (-0.8660254037844384f64).to_bits());
        assert_eq!(x[5].to_bits(), (-0.5000000000000004f64).to_bits());
    }

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

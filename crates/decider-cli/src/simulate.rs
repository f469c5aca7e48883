//! The routing simulator: labelled synthetic traffic for training and tests.
//!
//! # Generative story
//! A fleet of three backend clusters (`route_a`, `route_b`, `route_c`) serves ten regions.
//! Each request is drawn as follows.
//!
//! - **Hour** is uniform over the day (UTC).
//! - **Request type** 0..=5: mostly light interactive types 0–2; type 3 is *batch*, far more
//!   common at night (hours 0–5); types 4–5 are *heavy* (compute-bound).
//! - **Region** 0..=9, mildly non-uniform.
//! - **Load** follows a diurnal curve peaking in the afternoon, with noise; 6% of requests
//!   arrive during *bursts* where load exceeds 0.9 and can pass 1.
//! - **Success rate** is near 1 when healthy; 9% of requests see a *degraded* backend
//!   (uniform 0–0.9), more likely under high load.
//! - **Queue depth** grows with load; 5% of requests see a *surge* (80–600 queued).
//!
//! The label is the action a careful operator would take:
//!
//! 1. **Reject under overload**: load ≥ 0.95 with success < 0.5, or a full queue (≥ 100),
//!    or failing backends (success < 0.15).
//! 2. **Base cluster**: night batch (type 3, hours 0–5) → `route_b`; heavy types → `route_c`;
//!    otherwise the region's *home cluster* (regions 0–3 → a, 4–6 → b, 7–9 → c).
//! 3. **Spill-over under load**: when load reaches the spill threshold (0.7 for heavy types,
//!    0.85 otherwise, 0.05 lower at the afternoon peak, hours 14–20) or the queue reaches 50,
//!    move to the next cluster (a → b → c → a).
//! 4. **Label noise**: 0.5% of labels are replaced by a uniformly random action.
//!
//! The shipped rule table (`rules/default.json`) encodes the same story with one coarse spill
//! threshold (0.8), as a hand-written policy would: the model is there to do better than it.

use crate::rng::Rng;
use decider_core::{Action, State};

/// Probability that a label is replaced by a random action.
pub const LABEL_NOISE: f64 = 0.005;

/// Options for [`simulate`].
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct SimOptions {
    /// Rows to generate.
    pub rows: usize,
    /// Seed; same seed, same rows.
    pub seed: u64,
    /// Shifted traffic: far more bursts (load above 1), deep queues and low success rates.
    pub shifted: bool,
    /// Label noise probability.
    pub noise: f64,
}

/// Draws one state.
pub fn sample_state(rng: &mut Rng, shifted: bool) -> State {
    let hour = rng.below(24) as u8;
    let night = hour <= 5;
    let type_w = if night {
        [0.2, 0.15, 0.1, 0.35, 0.12, 0.08]
    } else {
        [0.3, 0.25, 0.15, 0.08, 0.13, 0.09]
    };
    let request_type = rng.weighted(&type_w) as u8;
    let region_id = rng.weighted(&[1.2, 1.0, 1.0, 0.8, 1.1, 1.0, 0.9, 1.0, 1.0, 0.9]) as u8;
    let diurnal = 0.45 + 0.25 * (2.0 * std::f64::consts::PI * (f64::from(hour) - 9.0) / 24.0).sin();
    let burst_p = if shifted { 0.35 } else { 0.06 };
    let current_load = if rng.chance(burst_p) {
        0.88 + rng.exp(if shifted { 0.35 } else { 0.12 })
    } else {
        (diurnal + 0.18 * rng.normal()).clamp(0.0, 0.99)
    };
    let degraded_p = if shifted {
        0.35
    } else {
        0.06 + 0.1 * current_load.min(1.0) * 0.3
    };
    let recent_success_rate = if rng.chance(degraded_p) {
        rng.range(0.0, 0.9)
    } else {
        (1.0 - (0.03 * rng.normal()).abs()).clamp(0.0, 1.0)
    };
    let surge_p = if shifted { 0.3 } else { 0.05 };
    let queue_depth = if rng.chance(surge_p) {
        rng.range(80.0, if shifted { 5000.0 } else { 600.0 })
    } else {
        (current_load.min(1.2) * 35.0 + rng.exp(8.0)).min(99.0)
    };
    State {
        request_type,
        region_id,
        current_load: round(current_load, 4),
        recent_success_rate: round(recent_success_rate, 4),
        queue_depth: queue_depth.round(),
        hour,
    }
}

fn round(v: f64, digits: i32) -> f64 {
    let p = 10f64.powi(digits);
    (v * p).round() / p
}

/// The base cluster of the story, before spill-over (step 2 in the module docs): night batch
/// → `route_b`, heavy types → `route_c`, otherwise the region's home cluster.
pub fn home_action(s: &State) -> Action {
    if s.request_type == 3 && s.hour <= 5 {
        Action::RouteB
    } else if s.request_type >= 4 {
        Action::RouteC
    } else {
        match s.region_id {
            0..=3 => Action::RouteA,
            4..=6 => Action::RouteB,
            _ => Action::RouteC,
        }
    }
}

/// The simulator's noiseless routing policy (see the module docs).
pub fn label(s: &State) -> Action {
    let (load, success, queue) = (s.current_load, s.recent_success_rate, s.queue_depth);
    if (load >= 0.95 && success < 0.5) || queue >= 100.0 || success < 0.15 {
        return Action::Reject;
    }
    let heavy = s.request_type >= 4;
    let base = home_action(s);
    let mut spill_at = if heavy { 0.7 } else { 0.85 };
    if (14..=20).contains(&s.hour) {
        spill_at -= 0.05;
    }
    if load >= spill_at || queue >= 50.0 {
        match base {
            Action::RouteA => Action::RouteB,
            Action::RouteB => Action::RouteC,
            _ => Action::RouteA,
        }
    } else {
        base
    }
}

/// Generates labelled rows.
pub fn simulate(opt: SimOptions) -> Vec<(State, Action)> {
    let mut rng = Rng::new(opt.seed);
    (0..opt.rows)
        .map(|_| {
            let s = sample_state(&mut rng, opt.shifted);
            let mut a = label(&s);
            if rng.chance(opt.noise) {
                a = Action::ALL[rng.below(4) as usize];
            }
            (s, a)
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn deterministic_per_seed() {
        let o = SimOptions {
            rows: 500,
            seed: 3,
            shifted: false,
            noise: LABEL_NOISE,
        };
        assert_eq!(simulate(o), simulate(o));
        assert_ne!(simulate(o), simulate(SimOptions { seed: 4, ..o }));
    }

    #[test]
    fn every_action_occurs_and_states_are_valid() {
        let rows = simulate(SimOptions {
            rows: 5000,
            seed: 1,
            shifted: false,
            noise: 0.0,
        });
        let mut counts = [0usize; 4];
        for (s, a) in &rows {
            counts[a.index()] += 1;
            let v = s.to_value();
            assert_eq!(State::from_value(&v, 0).unwrap(), *s);
        }
        assert!(counts.iter().all(|&c| c > 200), "{counts:?}");
    }

    #[test]
    fn story_rules() {
        let s = State {
            request_type: 0,
            region_id: 5,
            current_load: 0.3,
            recent_success_rate: 0.99,
            queue_depth: 5.0,
            hour: 10,
        };
        assert_eq!(label(&s), Action::RouteB);
        assert_eq!(
            label(&State {
                current_load: 0.86,
                ..s
            }),
            Action::RouteC
        );
        assert_eq!(
            label(&State {
                current_load: 0.82,
                hour: 15,
                ..s
            }),
            Action::RouteC
        );
        assert_eq!(
            label(&State {
                request_type: 4,
                current_load: 0.72,
                ..s
            }),
            Action::RouteA
        );
        assert_eq!(
            label(&State {
                request_type: 3,
                hour: 2,
                ..s
            }),
            Action::RouteB
        );
        assert_eq!(
            label(&State {
                queue_depth: 900.0,
                ..s
            }),
            Action::Reject
        );
        assert_eq!(
            label(&State {
                current_load: 1.0,
                recent_success_rate: 0.2,
                ..s
            }),
            Action::Reject
        );
    }

    #[test]
    fn shifted_traffic_goes_out_of_range() {
        let rows = simulate(SimOptions {
            rows: 2000,
            seed: 9,
            shifted: true,
            noise: 0.0,
        });
        let over = rows.iter().filter(|(s, _)| s.current_load > 1.0).count();
        let deep = rows.iter().filter(|(s, _)| s.queue_depth > 100.0).count();
        assert!(over > 100 && deep > 100, "{over} {deep}");
    }
}

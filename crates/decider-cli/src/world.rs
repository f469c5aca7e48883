//! A routing world the project's simulator knows nothing about, with a known answer: what a
//! policy learned from logs is scored on (`make value`, `examples/world.rs`).
//!
//! # The world
//! Three origins on three continents — `route_a` in the Americas (UTC−6), `route_b` in Europe
//! (UTC+1), `route_c` in Asia (UTC+8) — serve ten client regions in their own time zones
//! ([`TZ`]). A routed request succeeds when its origin answers below 500 **and** within the
//! 300 ms SLO ([`SLO_MS`]); a rejected one pays 0. Its latency is lognormal around
//! `rtt(region, origin) + service(type, origin) × congestion + queue_depth × drain(origin)`:
//!
//! - **region × local hour**: a region's evening (local 19–23 h) slows its network paths by
//!   60%, which costs far origins more than near ones; each origin has a tenant of its own
//!   whose peak (in the origin's local time) adds to its utilisation;
//! - **load × type × origin**: an origin's utilisation is the load times its size (`route_c`
//!   is small) plus its tenant; congestion grows steeply near saturation, and how steeply
//!   depends on the request class (light 0–2, batch 3, heavy 4–5) and the origin (`route_c`
//!   runs heavy requests fast on accelerators, batch slowly);
//! - **queue depth** adds latency at each origin's drain rate and errors everywhere.
//!
//! Traffic follows each region's local day, so load, queue depth and the region mix move
//! with the UTC hour; weekends are quieter; 4% of moments carry a burst.
//!
//! # Two weeks, one regime shift
//! Week 2 ([`Regime::shifted`]) is not week 1: traffic grew 10% (higher loads, deeper queues
//! than week 1 ever logged), `route_b` grew by a third, and `route_c`'s accelerators took on
//! another tenant (heavy requests 35% slower there). [`WorldOptions::shift`] off
//! keeps week 2 in week 1's regime.
//!
//! # Logs
//! The logging policy is any [`Decider`] (the shipped model with 10% exploration, in the
//! example): every request is routed through it and logged as the Worker logs it (the record
//! codec's decision record, the outcome of the one attempt at the decided origin). Each
//! decision also carries what no log holds — the true success probability of every action in
//! its state ([`q_true`]) — so any policy's **true expected value** on those states is known.

use crate::rng::Rng;
use decider_core::record::{
    Attempt, DecisionRecord, Endpoint, ErrorKind, RouteOutcome, RoutingKey,
};
use decider_core::request::{self, Decided, Request};
use decider_core::rollout::{Arm, Observation, SuccessRule};
use decider_core::{Action, Decider, Gates, State, NUM_ACTIONS};

/// The latency SLO, ms: a slower answer is a failure.
pub const SLO_MS: f64 = 300.0;
/// Monday 2026-11-02T00:00:00Z, ms since the epoch: week 1 starts here, week 2 seven days on.
pub const WEEK1_MS: i64 = 1_793_577_600_000;
const DAY_MS: i64 = 86_400_000;
const WEEK_MS: i64 = 7 * DAY_MS;

/// Each region's UTC offset, hours: four in the Americas, three in Europe, three in Asia.
pub const TZ: [i32; 10] = [-8, -6, -5, -3, 0, 1, 2, 5, 8, 9];
/// Relative traffic of each region at its local peak.
const REGION_WEIGHT: [f64; 10] = [1.0, 0.8, 1.2, 0.6, 1.1, 1.0, 0.7, 0.9, 1.0, 0.8];
/// Network round trip from each region to each origin (a, b, c), ms.
const RTT: [[f64; 3]; 10] = [
    [22.0, 110.0, 140.0],
    [18.0, 95.0, 160.0],
    [20.0, 85.0, 175.0],
    [60.0, 110.0, 200.0],
    [85.0, 15.0, 125.0],
    [95.0, 18.0, 115.0],
    [110.0, 30.0, 105.0],
    [190.0, 90.0, 60.0],
    [150.0, 125.0, 20.0],
    [135.0, 140.0, 28.0],
];
/// Origin UTC offsets (a, b, c), hours.
const ORIGIN_TZ: [i32; 3] = [-6, 1, 8];
/// Service time of each request type at a reference origin, ms.
const SERVICE: [f64; 6] = [20.0, 30.0, 45.0, 100.0, 80.0, 110.0];
/// Service-time multiplier by origin (rows) and class (light, batch, heavy).
const CLASS_SPEED: [[f64; 3]; 3] = [[1.0, 1.1, 1.25], [0.9, 0.75, 1.15], [1.15, 1.3, 0.65]];
/// How much congestion slows each class at each origin.
const SENSITIVITY: [[f64; 3]; 3] = [[1.0, 1.5, 2.0], [1.0, 0.8, 1.8], [1.2, 2.5, 1.0]];
/// Utilisation per unit of load at each origin (the inverse of its size).
const SIZE: [f64; 3] = [0.9, 0.95, 1.05];
/// Queue drain cost at each origin, ms per queued request.
const DRAIN: [f64; 3] = [1.2, 1.6, 2.2];
/// Spread of the log-latency at each origin.
const SIGMA: [f64; 3] = [0.30, 0.35, 0.45];
/// Error probability of each origin when idle.
const BASE_ERROR: [f64; 3] = [0.010, 0.008, 0.015];

/// What differs between weeks.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Regime {
    /// Load multiplier (traffic growth).
    pub load_growth: f64,
    /// Utilisation per unit of load at each origin.
    pub size: [f64; 3],
    /// `route_c`'s service-time multiplier for heavy requests.
    pub c_heavy: f64,
}

impl Regime {
    /// Week 1.
    pub const BASE: Regime = Regime {
        load_growth: 1.0,
        size: SIZE,
        c_heavy: CLASS_SPEED[2][2],
    };

    /// Week 2 after the shift (module docs).
    pub fn shifted() -> Regime {
        Regime {
            load_growth: 1.1,
            size: [SIZE[0], SIZE[1] * 0.75, SIZE[2]],
            c_heavy: CLASS_SPEED[2][2] * 1.35,
        }
    }
}

/// What to generate.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct WorldOptions {
    /// Seed of everything random (the same options give the same decisions).
    pub seed: u64,
    /// Routed decisions in the week.
    pub decisions: usize,
    /// Which week: 1 or 2.
    pub week: u32,
    /// Whether week 2 is in the shifted regime.
    pub shift: bool,
}

impl WorldOptions {
    /// The regime of the week asked for.
    pub fn regime(&self) -> Regime {
        if self.week >= 2 && self.shift {
            Regime::shifted()
        } else {
            Regime::BASE
        }
    }

    /// Checks the options once.
    ///
    /// # Errors
    /// A message naming the option out of range.
    pub fn check(&self) -> Result<(), String> {
        if !(1..=2).contains(&self.week) {
            return Err(format!("week must be 1 or 2, got {}", self.week));
        }
        if !(1..=10_000_000).contains(&self.decisions) {
            return Err(format!(
                "decisions must be 1..=10000000, got {}",
                self.decisions
            ));
        }
        Ok(())
    }
}

fn class(request_type: u8) -> usize {
    match request_type {
        0..=2 => 0,
        3 => 1,
        _ => 2,
    }
}

fn local_hour(utc_hour: f64, tz: i32) -> f64 {
    (utc_hour + f64::from(tz)).rem_euclid(24.0)
}

/// Traffic of a region at a local hour, relative to its peak: a day from 07 h to 23 h
/// peaking mid-afternoon, a night floor of 0.3.
fn diurnal(h: f64) -> f64 {
    let day = if (7.0..23.0).contains(&h) {
        (std::f64::consts::PI * (h - 7.0) / 16.0).sin()
    } else {
        0.0
    };
    0.3 + 0.7 * day
}

/// Total traffic at a UTC time (hours since Monday 00:00 UTC), relative to the week's peak
/// (about 1 at the busiest weekday hour).
fn traffic(hours: f64) -> f64 {
    let h = hours.rem_euclid(24.0);
    let total: f64 = (0..10)
        .map(|r| REGION_WEIGHT[r] * diurnal(local_hour(h, TZ[r])))
        .sum();
    let weekend = if (hours / 24.0).floor() as i64 % 7 >= 5 {
        0.85
    } else {
        1.0
    };
    weekend * total / 6.2
}

/// The standard normal CDF (Abramowitz & Stegun 7.1.26 on erf, |error| < 1.5e-7).
pub fn normal_cdf(z: f64) -> f64 {
    let x = z.abs() / std::f64::consts::SQRT_2;
    let t = 1.0 / (1.0 + 0.327_591_1 * x);
    let poly = t
        * (0.254_829_592
            + t * (-0.284_496_736
                + t * (1.421_413_741 + t * (-1.453_152_027 + t * 1.061_405_429))));
    let erf = 1.0 - poly * (-x * x).exp();
    if z >= 0.0 {
        0.5 * (1.0 + erf)
    } else {
        0.5 * (1.0 - erf)
    }
}

/// An origin's utilisation in state `s` (the UTC hour gives its tenant's local hour).
fn utilisation(s: &State, o: usize, r: &Regime) -> f64 {
    let h = local_hour(f64::from(s.hour), ORIGIN_TZ[o]);
    let tenant = match o {
        // Evening tenants at a and c, a business-hours tenant at b.
        1 if (9.0..18.0).contains(&h) => 0.15,
        0 | 2 if (18.0..23.0).contains(&h) => 0.2,
        _ => 0.0,
    };
    s.current_load * r.size[o] + tenant
}

/// Median latency (ms), log-spread and error probability of origin `o` in state `s`.
fn origin_model(s: &State, o: usize, r: &Regime) -> (f64, f64, f64) {
    let region = usize::from(s.region_id).min(9);
    let evening = (19.0..24.0).contains(&local_hour(f64::from(s.hour), TZ[region]));
    let rtt = RTT[region][o] * if evening { 1.6 } else { 1.0 };
    let c = class(s.request_type);
    let speed = if o == 2 && c == 2 {
        r.c_heavy
    } else {
        CLASS_SPEED[o][c]
    };
    let u = utilisation(s, o, r);
    let excess = (u - 0.55).max(0.0);
    let congestion = 1.0 + SENSITIVITY[o][c] * 2.0 * excess * excess / (1.1 - u).max(0.08);
    let service = SERVICE[usize::from(s.request_type).min(5)] * speed * congestion;
    let queue = s.queue_depth.max(0.0);
    let median = rtt + service + queue * DRAIN[o];
    let error = (BASE_ERROR[o] + 0.3 * (u - 0.9).max(0.0) + 0.0008 * queue).min(0.95);
    (median, SIGMA[o], error)
}

/// The true probability that action `a` succeeds in `s` under regime `r` (0 for `reject`).
pub fn success_probability(s: &State, a: Action, r: &Regime) -> f64 {
    if a == Action::Reject {
        return 0.0;
    }
    let (median, sigma, error) = origin_model(s, a.index(), r);
    (1.0 - error) * normal_cdf((SLO_MS.ln() - median.ln()) / sigma)
}

/// [`success_probability`] of every action, in action order.
pub fn q_true(s: &State, r: &Regime) -> [f64; NUM_ACTIONS] {
    std::array::from_fn(|a| success_probability(s, Action::ALL[a], r))
}

/// Draws what the origin did with a request routed by `a` in `s`: with the error
/// probability a 502/503 or a timeout, otherwise a 200 after a lognormal latency. Whether
/// it met the SLO is for the reader's `--slo-ms` to decide, so `P(success) =`
/// [`success_probability`] exactly.
pub fn draw_outcome(rng: &mut Rng, s: &State, a: Action, r: &Regime) -> RouteOutcome {
    if a == Action::Reject {
        return RouteOutcome::answered_by_worker(503);
    }
    let (median, sigma, error) = origin_model(s, a.index(), r);
    let latency = round2(median * (sigma * rng.normal()).exp());
    let (status, error, latency) = if rng.chance(error) {
        if rng.chance(0.5) {
            let status = if rng.chance(0.5) { 502 } else { 503 };
            (
                Some(status),
                Some(ErrorKind::UpstreamStatus),
                Some(round2(latency * 0.3)),
            )
        } else {
            (None, Some(ErrorKind::Timeout), None)
        }
    } else {
        (Some(200), None, Some(latency))
    };
    RouteOutcome {
        origin: Some(a),
        status,
        latency_ms: latency,
        failover: None,
        origin_down: None,
        error,
        attempts: vec![Attempt {
            origin: a,
            status,
            error,
            latency_ms: latency,
        }],
    }
}

fn round2(x: f64) -> f64 {
    (x * 100.0).round() / 100.0
}

fn round4(x: f64) -> f64 {
    (x * 10_000.0).round() / 10_000.0
}

/// The decision times and states of a week (module docs), in time order.
pub fn states(opts: &WorldOptions) -> Vec<(i64, State)> {
    let r = opts.regime();
    let mut rng = Rng::new(
        opts.seed
            .wrapping_mul(0x9E37_79B9)
            .wrapping_add(u64::from(opts.week)),
    );
    let start = WEEK1_MS + i64::from(opts.week - 1) * WEEK_MS;
    // Arrival times by thinning: uniform over the week, kept in proportion to traffic.
    let mut times = Vec::with_capacity(opts.decisions);
    while times.len() < opts.decisions {
        let t = rng.range(0.0, WEEK_MS as f64) as i64;
        if rng.chance(traffic(t as f64 / 3_600_000.0).min(1.0)) {
            times.push(t);
        }
    }
    times.sort_unstable();
    times
        .into_iter()
        .map(|t| {
            let hours = t as f64 / 3_600_000.0;
            let utc = hours.rem_euclid(24.0);
            let weights: Vec<f64> = (0..10)
                .map(|k| REGION_WEIGHT[k] * diurnal(local_hour(utc, TZ[k])))
                .collect();
            let region = rng.weighted(&weights);
            let night = local_hour(utc, TZ[region]) < 6.0;
            let types = [
                0.26,
                0.22,
                0.14,
                if night { 0.36 } else { 0.12 },
                0.14,
                0.12,
            ];
            let request_type = rng.weighted(&types) as u8;
            let burst = if rng.chance(0.04) {
                rng.range(0.2, 0.6)
            } else {
                0.0
            };
            let load = r.load_growth * (0.1 + 0.6 * traffic(hours) + 0.06 * rng.normal() + burst);
            let load = load.max(0.0);
            let queue = ((1.0 + 150.0 * (load - 0.45).max(0.0).powi(2))
                * (0.7 * rng.normal()).exp())
            .round();
            let success = (0.995 - 0.12 * (load - 0.75).max(0.0) - 0.0008 * queue
                + 0.008 * rng.normal())
            .clamp(0.0, 1.0);
            let state = State {
                request_type,
                region_id: region as u8,
                current_load: round4(load),
                recent_success_rate: round4(success),
                queue_depth: queue,
                hour: utc.floor() as u8,
            };
            (start + t, state)
        })
        .collect()
}

/// One logged decision of the world, with what no log holds.
#[derive(Debug, Clone, PartialEq)]
pub struct WorldDecision {
    /// The record as the Worker writes it.
    pub record: DecisionRecord,
    /// True success probability of every action in the record's state.
    pub q: [f64; NUM_ACTIONS],
    /// The logging policy's distribution over actions in that state.
    pub logger: [f64; NUM_ACTIONS],
    /// The realised reward (success within the SLO; 0 for a reject).
    pub reward: f64,
}

/// A week of decisions by `logger` (its exploration share included), each routed and logged.
///
/// # Errors
/// Options out of range (see [`WorldOptions::check`]).
pub fn log_week(logger: &Decider, opts: &WorldOptions) -> Result<Vec<WorldDecision>, String> {
    opts.check()?;
    let r = opts.regime();
    let success = SuccessRule {
        slo_ms: Some(SLO_MS),
        ..SuccessRule::default()
    };
    let mut rng = Rng::new(
        opts.seed
            .wrapping_mul(31)
            .wrapping_add(1000 + u64::from(opts.week)),
    );
    Ok(states(opts)
        .into_iter()
        .enumerate()
        .map(|(i, (ts, state))| {
            // Decided and recorded as the Worker's edge routing does it: an unsigned id, whose
            // last character (here a placeholder) becomes the arm and source's tag.
            let request = Request {
                state,
                gates: Gates::default(),
                endpoint: Endpoint::Route,
                arm: Arm::Champion,
                key: RoutingKey::Given,
                decision_id: format!("w{}-s{}-{i:06}-_", opts.week, opts.seed),
                keys: None,
                request_id: None,
                backend: "embedded",
                now_ms: ts as f64,
                decision_us: 0,
            };
            let Decided {
                decision,
                mut record,
                distribution,
            } = request::decide(logger, request, None);
            let outcome = draw_outcome(&mut rng, &state, decision.action, &r);
            let (status, latency_ms) = outcome.decided(decision.action);
            // The reward as `--slo-ms 300` reads it from the log.
            let reward = success.reward(&Observation {
                reward: None,
                status,
                latency_ms,
                rejected: decision.action == Action::Reject,
            });
            record.outcome = Some(outcome);
            WorldDecision {
                record,
                q: q_true(&state, &r),
                logger: distribution,
                reward,
            }
        })
        .collect())
}

/// Mean true value of a policy's actions over decisions: `mean q[a_i]`.
pub fn true_value(decisions: &[WorldDecision], actions: &[Action]) -> f64 {
    decisions
        .iter()
        .zip(actions)
        .map(|(d, a)| d.q[a.index()])
        .sum::<f64>()
        / decisions.len().max(1) as f64
}

/// Mean true value of the logging policy (its distribution, exploration included).
pub fn logger_value(decisions: &[WorldDecision]) -> f64 {
    decisions
        .iter()
        .map(|d| d.q.iter().zip(&d.logger).map(|(q, p)| q * p).sum::<f64>())
        .sum::<f64>()
        / decisions.len().max(1) as f64
}

/// Mean true value of the best action in every state.
pub fn oracle_value(decisions: &[WorldDecision]) -> f64 {
    decisions
        .iter()
        .map(|d| d.q.iter().copied().fold(0.0, f64::max))
        .sum::<f64>()
        / decisions.len().max(1) as f64
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use decider_core::decider::{Explore, Params};
    use decider_core::decision_id::{base, base_tag};
    use decider_core::record::Record;
    use decider_core::rules::RuleTable;
    use decider_core::{Model, ModelSource};
    use std::collections::HashSet;
    use std::sync::Arc;

    /// The shipped model with 10% exploration and the shipped rules: the example's logger.
    fn logger() -> Decider {
        let text = include_str!("../../../model/decision-model.json");
        let rules = RuleTable::from_json(decider_core::DEFAULT_RULES_JSON).unwrap();
        Decider::new(
            ModelSource::Local(Arc::new(Model::from_json(text).unwrap())),
            Some(rules.into()),
            Params {
                explore: Explore::from_percent(10.0).unwrap(),
                ..Params::default()
            },
        )
    }

    /// The world logs what the Worker logs: every line reads back as the same record, ids
    /// are unique and carry the tag of their arm and source, and each propensity is the
    /// logger's probability of the logged action.
    #[test]
    fn logs_are_the_workers_records() {
        let opts = WorldOptions {
            seed: 7,
            decisions: 2_000,
            week: 1,
            shift: true,
        };
        let logged = log_week(&logger(), &opts).unwrap();
        assert_eq!(logged.len(), 2_000);
        let mut ids = HashSet::new();
        let mut explored = 0;
        for d in &logged {
            let r = &d.record;
            let Record::Decision(back) = Record::from_line(&r.to_line()).unwrap() else {
                panic!("not a decision record: {}", r.to_line());
            };
            assert_eq!(&back, r);
            assert!(ids.insert(r.decision_id.clone()), "{} twice", r.decision_id);
            assert_eq!(base(&r.decision_id), r.decision_id, "unsigned");
            assert_eq!(base_tag(&r.decision_id), Some((r.arm, r.source)));
            assert_eq!(
                r.propensity,
                d.logger[r.action.index()],
                "{}",
                r.decision_id
            );
            assert!(r.outcome.is_some());
            explored += usize::from(r.explored);
        }
        // 10% exploration of the decisions the model makes: some, not most.
        assert!((50..400).contains(&explored), "{explored} explored");
    }
}

//! Known-answer tests: logs simulated from known logging policies and a known reward
//! function ([`super::synthetic`]), checked against the exact value of the target.

use super::synthetic::{
    best, best_or_reject, greedy, simulate_logs, soft, soft_or_reject, true_value, Logging,
};
use super::*;
use decider_core::{Action, State, NUM_ACTIONS};

fn route_a(_: &State) -> [f64; NUM_ACTIONS] {
    one_hot(Action::RouteA)
}

fn route_c(_: &State) -> [f64; NUM_ACTIONS] {
    one_hot(Action::RouteC)
}

/// IPS, SNIPS and DR cover the truth; DR is tighter than IPS; the logged value covers the
/// logging policy's own value.
fn assert_known_answer(logging: Logging, seed: u64, targets: &[(&str, &dyn TargetPolicy)]) {
    let samples = simulate_logs(20_000, seed, logging);
    let logged_truth = true_value(&samples, &logging);
    for (name, target) in targets {
        let truth = true_value(&samples, *target);
        let r = evaluate(&samples, *target, &OpeOptions::default()).unwrap();
        let snips = r.snips.unwrap();
        let ctx = format!("{logging:?} {name}: truth {truth:.4}, report {r:#?}");
        assert!(r.ips.covers(truth), "IPS misses; {ctx}");
        assert!(snips.covers(truth), "SNIPS misses; {ctx}");
        assert!(r.dr.covers(truth), "DR misses; {ctx}");
        assert!(r.dr.se < r.ips.se, "DR not tighter than IPS; {ctx}");
        assert!(r.reward_model.mse < r.reward_model.mse_action_mean, "{ctx}");
        assert!(
            r.logged_value.covers(logged_truth),
            "logged value misses; {ctx}"
        );
        assert_eq!((r.n, r.refused.total()), (20_000, 0));
        assert!(r.warnings.is_empty(), "unexpected warnings; {ctx}");
    }
}

#[test]
fn uniform_logging_intervals_cover_the_true_value() {
    assert_known_answer(
        Logging::UniformRoutes,
        1,
        &[("best", &best), ("soft", &soft), ("route_a", &route_a)],
    );
}

#[test]
fn epsilon_greedy_logging_intervals_cover_the_true_value() {
    let targets: [(&str, &dyn TargetPolicy); 3] = [
        ("best_or_reject", &best_or_reject),
        ("soft_or_reject", &soft_or_reject),
        ("greedy", &Logging::Greedy),
    ];
    assert_known_answer(Logging::EpsilonGreedy(0.1), 2, &targets);
    assert_known_answer(Logging::EpsilonGreedy(0.2), 3, &targets);
}

/// Over many seeds the 95% intervals cover the population value about 95% of the time, and
/// the reported standard errors match the spread of the estimates across seeds.
#[test]
fn intervals_are_calibrated_across_seeds() {
    const REPS: usize = 40;
    let logging = Logging::EpsilonGreedy(0.2);
    // The population value, from one large sample of states.
    let truth = true_value(&simulate_logs(200_000, 999, logging), &best_or_reject);
    let opts = OpeOptions::default();
    let mut est: [Vec<Estimate>; 3] = Default::default();
    for seed in 0..REPS as u64 {
        let samples = simulate_logs(3_000, 100 + seed, logging);
        let r = evaluate(&samples, &best_or_reject, &opts).unwrap();
        est[0].push(r.ips);
        est[1].push(r.snips.unwrap());
        est[2].push(r.dr);
    }
    for (name, e) in ["IPS", "SNIPS", "DR"].iter().zip(&est) {
        let covered = e.iter().filter(|x| x.covers(truth)).count();
        let mean = e.iter().map(|x| x.value).sum::<f64>() / REPS as f64;
        let sd =
            (e.iter().map(|x| (x.value - mean).powi(2)).sum::<f64>() / (REPS - 1) as f64).sqrt();
        let se = e.iter().map(|x| x.se).sum::<f64>() / REPS as f64;
        let msg = format!("{name}: covered {covered}/{REPS}, sd {sd:.4}, mean se {se:.4}");
        assert!(covered >= 34, "{msg}");
        assert!((0.7..1.4).contains(&(se / sd)), "{msg}");
        // Unbiased: the mean over seeds is within 3 standard errors of the mean of the truth.
        assert!(
            (mean - truth).abs() < 3.0 * sd / (REPS as f64).sqrt(),
            "{msg}"
        );
    }
}

#[test]
fn a_target_equal_to_the_logging_policy_gives_ips_equal_to_the_logged_value() {
    for (logging, seed) in [
        (Logging::UniformRoutes, 4),
        (Logging::EpsilonGreedy(0.1), 5),
        (Logging::EpsilonGreedy(0.2), 6),
    ] {
        let samples = simulate_logs(5_000, seed, logging);
        let r = evaluate(&samples, &logging, &OpeOptions::default()).unwrap();
        assert_eq!(r.ips.value, r.logged_value.value, "{logging:?}");
        assert_eq!(r.ips.se, r.logged_value.se, "{logging:?}");
        assert_eq!(r.snips.unwrap().value, r.logged_value.value, "{logging:?}");
        assert_eq!((r.ess, r.weights.max), (5_000.0, 1.0), "{logging:?}");
    }
}

#[test]
fn no_exploration_is_reported_as_matched_only() {
    let samples = simulate_logs(5_000, 7, Logging::Greedy);
    let r = evaluate(&samples, &best_or_reject, &OpeOptions::default()).unwrap();
    let agree = samples
        .iter()
        .filter(|s| best_or_reject(&s.state)[s.action.index()] == 1.0)
        .count();
    assert!(agree > 1_000 && agree < 5_000, "{agree}");
    assert_eq!(r.weights.matched, agree);
    assert_eq!(r.support.deterministic, 5_000);
    assert_eq!(r.support.unsupported_samples, 5_000 - agree);
    let w = r.warnings.join("\n");
    assert!(w.contains("no exploration: every propensity is 1"), "{w}");
    assert!(w.contains(&format!("({agree} of 5000 samples")), "{w}");
    // Without exploration IPS is the matched rewards over all samples: biased low.
    let truth = true_value(&samples, &best_or_reject);
    assert!(r.ips.ci95[1] < truth, "{truth} {:?}", r.ips);
}

#[test]
fn candidate_routing_where_the_logger_always_rejected_is_unsupported() {
    let samples = simulate_logs(5_000, 8, Logging::EpsilonGreedy(0.1));
    // `best` routes everything; the logger rejected with propensity 1 where greedy rejects.
    let r = evaluate(&samples, &best, &OpeOptions::default()).unwrap();
    let rejected = samples
        .iter()
        .filter(|s| s.action == Action::Reject)
        .count();
    assert!(rejected > 50, "{rejected}");
    assert!(samples
        .iter()
        .filter(|s| s.action == Action::Reject)
        .all(|s| s.propensity == 1.0 && greedy(&s.state) == Action::Reject));
    assert_eq!(r.support.unsupported_samples, rejected);
    assert!((r.support.unsupported_mass - rejected as f64 / 5_000.0).abs() < 1e-12);
    let w = r.warnings.join("\n");
    assert!(
        w.contains(&format!("no support: on {rejected} of 5000 samples")),
        "{w}"
    );
}

#[test]
fn wrong_propensities_are_flagged_by_the_mean_weight() {
    let mut samples = simulate_logs(5_000, 15, Logging::UniformRoutes);
    let r = evaluate(&samples, &best, &OpeOptions::default()).unwrap();
    assert!(!r.warnings.join("\n").contains("mean importance weight"));
    // A logger that records 1/2 where it drew with 1/3.
    samples.iter_mut().for_each(|s| s.propensity = 0.5);
    let r = evaluate(&samples, &best, &OpeOptions::default()).unwrap();
    assert!(
        (r.weights.mean.value - 2.0 / 3.0).abs() < 0.03,
        "{:?}",
        r.weights
    );
    let w = r.warnings.join("\n");
    assert!(w.contains("mean importance weight 0.6"), "{w}");
}

#[test]
fn candidate_actions_never_logged_in_a_cell_are_counted() {
    let samples = simulate_logs(5_000, 9, Logging::UniformRoutes);
    // Reject is never logged by a route-only logger: every rejecting state is unlogged.
    let r = evaluate(&samples, &best_or_reject, &OpeOptions::default()).unwrap();
    let rejecting = samples
        .iter()
        .filter(|s| greedy(&s.state) == Action::Reject)
        .count();
    assert!(rejecting > 50, "{rejecting}");
    assert_eq!(r.support.unlogged_cell_samples, rejecting);
    assert_eq!(r.support.unsupported_samples, 0);
    let w = r.warnings.join("\n");
    assert!(
        w.contains(&format!("unlogged actions: on {rejecting} of 5000")),
        "{w}"
    );
    // A route the cell saw fewer than 10^6 times: with that bar every target mass is unlogged.
    let strict = OpeOptions {
        min_cell_support: 1_000_000,
        ..OpeOptions::default()
    };
    let r = evaluate(&samples, &best, &strict).unwrap();
    assert_eq!(r.support.unlogged_cell_samples, 5_000);
}

#[test]
fn tiny_effective_sample_size_warns() {
    let samples = simulate_logs(600, 10, Logging::EpsilonGreedy(0.1));
    let r = evaluate(&samples, &route_c, &OpeOptions::default()).unwrap();
    assert!(r.ess < 100.0, "{}", r.ess);
    assert!((r.weights.max - 30.0).abs() < 1e-9, "{}", r.weights.max);
    let w = r.warnings.join("\n");
    assert!(w.contains("small effective sample size"), "{w}");
}

#[test]
fn a_target_that_never_takes_a_logged_action_has_no_snips() {
    let samples = simulate_logs(500, 11, Logging::UniformRoutes);
    let reject = |_: &State| one_hot(Action::Reject);
    let r = evaluate(&samples, &reject, &OpeOptions::default()).unwrap();
    assert_eq!((r.snips, r.ips.value, r.ess), (None, 0.0, 0.0));
    assert_eq!(r.dr.value, r.dm.value);
    let w = r.warnings.join("\n");
    assert!(w.contains("SNIPS is undefined"), "{w}");
    let json = serde_json::to_value(&r).unwrap();
    assert!(json["snips"].is_null());
}

#[test]
fn bad_rows_are_refused_and_counted() {
    let mut samples = simulate_logs(1_000, 12, Logging::UniformRoutes);
    for (i, p) in [0.0, -0.1, 1.5, f64::NAN, f64::INFINITY]
        .into_iter()
        .enumerate()
    {
        samples[i].propensity = p;
    }
    for (i, r) in [-0.1, 1.1, f64::NAN].into_iter().enumerate() {
        samples[10 + i].reward = r;
    }
    let odd = samples[20].state;
    let target = move |s: &State| {
        if *s == odd {
            [0.5, 0.5, 0.5, 0.0]
        } else {
            best(s)
        }
    };
    let r = evaluate(&samples, &target, &OpeOptions::default()).unwrap();
    assert_eq!(
        r.refused,
        Refused {
            propensity: 5,
            reward: 3,
            target: 1
        }
    );
    assert_eq!(r.n, 991);
    assert!(r.warnings[0].starts_with("9 of 1000 samples refused (refused: 5 propensity"));
    assert!(r.ips.value.is_finite() && r.dr.value.is_finite());
    // Nothing usable: an error that says why.
    let err = evaluate(&samples[..5], &best, &OpeOptions::default()).unwrap_err();
    assert_eq!(
        err.to_string(),
        "need at least 2 usable samples, got 0 of 5 (refused: 5 propensity not in (0, 1], \
         0 reward not in [0, 1], 0 invalid target distribution)"
    );
}

#[test]
fn options_are_checked() {
    let samples = simulate_logs(100, 13, Logging::UniformRoutes);
    for (opts, msg) in [
        (
            OpeOptions {
                folds: 1,
                ..Default::default()
            },
            "folds must be 2..=100, got 1",
        ),
        (
            OpeOptions {
                l2: 0.0,
                ..Default::default()
            },
            "l2 must be finite and > 0, got 0",
        ),
        (
            OpeOptions {
                min_ess_fraction: 2.0,
                ..Default::default()
            },
            "min_ess_fraction must be in [0, 1], got 2",
        ),
    ] {
        let err = evaluate(&samples, &best, &opts).unwrap_err();
        assert_eq!(err.to_string(), msg);
    }
}

#[test]
fn results_are_deterministic_and_the_dump_has_every_row() {
    let samples = simulate_logs(2_000, 14, Logging::EpsilonGreedy(0.2));
    let opts = OpeOptions::default();
    let (a, rows) = evaluate_rows(&samples, &soft_or_reject, &opts).unwrap();
    assert_eq!(a, evaluate(&samples, &soft_or_reject, &opts).unwrap());
    let other = evaluate(&samples, &soft_or_reject, &OpeOptions { seed: 7, ..opts }).unwrap();
    assert_eq!(a.ips, other.ips);
    assert_ne!(a.dr, other.dr, "a different fold assignment changes q̂");
    let mut out = Vec::new();
    write_dump(&mut out, &rows).unwrap();
    let text = String::from_utf8(out).unwrap();
    let lines: Vec<serde_json::Value> = text
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(lines.len(), 2_000);
    let first = &lines[0];
    assert_eq!(first["action"], samples[0].action.name());
    assert_eq!(first["propensity"], samples[0].propensity);
    assert_eq!(first["target"].as_array().unwrap().len(), 4);
    assert_eq!(first["q_hat"].as_array().unwrap().len(), 4);
    assert!(first["fold"].as_u64().unwrap() < 5);
    assert_eq!(
        State::from_value(&first["state"], 0).unwrap(),
        samples[0].state
    );
    // The dumped rows reproduce DR by the formula.
    let dr: f64 = rows
        .iter()
        .map(|r| {
            let dm: f64 = (0..4).map(|k| r.target[k] * r.q_hat[k]).sum();
            dm + r.weight() * (r.reward - r.q_hat[r.action.index()])
        })
        .sum::<f64>()
        / 2_000.0;
    assert!((dr - a.dr.value).abs() < 1e-12);
}

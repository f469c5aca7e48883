//! The judge table (`tests/fixtures/judge_cases.json`), read by `decider report`: each case's
//! counts as the report tallies them, judged by its champion-vs-challenger verdict and by its
//! rollout verdict on the step in force. The control plane is held to the same table in
//! `crates/decider-rollout/tests/judge_cases.rs`: on the same counts the two agree.

use decider_cli::logs::{Arm, Endpoint};
use decider_cli::report::join::{Aggregates, Period};
use decider_cli::report::stats::GroupStats;
use decider_cli::report::verdict::{champion_vs_challenger, rollout, Judging};
use decider_rollout::Sample;
use serde_json::Value;

/// An arm's outcomes as the report adds them, one decision at a time: `sum` as whole
/// successes, one fractional reward for the rest, then failures.
fn group(arm: &Value) -> GroupStats {
    let n = arm["n"].as_u64().expect("n");
    let sum = arm["sum"].as_f64().expect("sum");
    let whole = sum.floor() as u64;
    let mut g = GroupStats::default();
    for i in 0..n {
        let r = match i {
            i if i < whole => 1.0,
            i if i == whole => sum - whole as f64,
            _ => 0.0,
        };
        g.add(Some(r), None, false);
    }
    g
}

fn sample(g: &GroupStats) -> Sample {
    Sample {
        n: g.with_outcome,
        sum: g.successes,
        sum_sq: g.sum_sq(),
    }
}

#[test]
fn decider_report_gives_every_case_its_verdict() {
    let text = include_str!("../../../tests/fixtures/judge_cases.json");
    let table: Value = serde_json::from_str(text).expect("the table is JSON");
    let cases = table["cases"].as_array().expect("cases");
    assert!(cases.len() >= 50, "{} cases", cases.len());
    for case in cases {
        let name = case["name"].as_str().expect("name");
        let (alpha, max_loss) = (
            case["alpha"].as_f64().expect("alpha"),
            case["max_loss"].as_f64().expect("max_loss"),
        );
        let want = case["verdict"].as_str().expect("verdict");
        let (t, b) = (group(&case["treatment"]), group(&case["baseline"]));
        let mut agg = Aggregates {
            arm_endpoint: vec![
                (Arm::Challenger, Endpoint::Route, t.clone()),
                (Arm::Champion, Endpoint::Route, b.clone()),
            ],
            ..Aggregates::default()
        };
        // Champion vs challenger over the whole log, at --alpha.
        let v = champion_vs_challenger(&agg, Judging { alpha, max_loss });
        let got = &v.evidence["comparison"]["verdict"];
        if t.with_outcome > 0 && b.with_outcome > 0 {
            assert_eq!(got, want, "{name}: {}", v.text);
        } else {
            assert_eq!(v.action, "no challenger", "{name}");
            assert_eq!(want, "undecided", "{name}");
        }
        // The rollout's step in force (no change recorded: the first step, at --alpha / 2).
        let mut arms = [Sample::default(); 3];
        arms[Arm::Challenger.index()] = sample(&t);
        arms[Arm::Champion.index()] = sample(&b);
        agg.periods = vec![Period {
            ended_by: None,
            from_ms: i64::MIN,
            to_ms: i64::MAX,
            arms,
            decisions: [t.n, b.n, 0],
        }];
        let v = rollout(
            &agg,
            Judging {
                alpha: 2.0 * alpha,
                max_loss,
            },
        );
        let current = &v.evidence["current"];
        if t.with_outcome > 0 && b.with_outcome > 0 {
            assert_eq!(current["verdict"], want, "{name}: {}", v.text);
            assert_eq!(current["alpha"], alpha, "{name}");
        } else {
            assert!(current.is_null(), "{name}");
        }
    }
}

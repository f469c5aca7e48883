//! The judge table (`tests/fixtures/judge_cases.json`), read by `decider report`: each case's
//! counts as the report tallies them, judged by its champion-vs-challenger verdict and by its
//! rollout verdict on the step in force. The control plane is held to the same table in
//! `crates/decider-rollout/tests/judge_cases.rs`: on the same counts the two agree.

use decider_cli::logs::{Arm, Endpoint};
use decider_cli::report::join::{Aggregates, Period};
use decider_cli::report::stats::GroupStats;
use decider_cli::report::verdict::{champion_vs_challenger, rollout, Judging};
use decider_core::record::{RolloutRecord, Why};
use decider_core::rollout::Setting;
use decider_rollout::Sample;
use serde_json::{json, Value};

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
        // Outside a rollout the report has no allocation: the sequences' verdict.
        let union_want = case["union_verdict"].as_str().unwrap_or(want);
        let share = case["share"].as_u64().map(|s| s as u8);
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
            assert_eq!(got, union_want, "{name}: {}", v.text);
        } else {
            assert_eq!(v.action, "no challenger", "{name}");
            assert_eq!(union_want, "undecided", "{name}");
        }
        // The rollout's step in force (no change recorded: the first step, at --alpha / 2).
        let mut arms = [Sample::default(); 3];
        arms[Arm::Challenger.index()] = sample(&t);
        arms[Arm::Champion.index()] = sample(&b);
        let current_period = Period {
            ended_by: None,
            from_ms: i64::MIN,
            to_ms: i64::MAX,
            arms,
            decisions: [t.n, b.n, 0],
        };
        agg.periods = vec![current_period.clone()];
        if let Some(share) = share {
            // A step at `share` that a change from 1% (judged at allocation 0.01, so with
            // every key in the canary) began, its statistics at 2α: the step in force is
            // judged at α with allocation share/100, as the control plane judges it.
            agg.rollouts = vec![RolloutRecord {
                log_version: 1,
                ts: "2026-12-05T10:00:00.000Z".into(),
                challenger_version: Some("m-2".into()),
                from: Setting::Share(1),
                to: Setting::Share(share),
                why: Why::Better,
                text: String::new(),
                step_since: None,
                statistics: Some(
                    json!({"alpha": 2.0 * alpha, "allocation": 0.01, "max_loss": max_loss}),
                ),
                reason: None,
            }];
            agg.periods = vec![
                Period {
                    ended_by: Some(0),
                    arms: [Sample::default(); 3],
                    decisions: [0; 3],
                    ..current_period.clone()
                },
                current_period,
            ];
        }
        let v = rollout(
            &agg,
            Judging {
                alpha: 2.0 * alpha,
                max_loss,
            },
        );
        let judge = if share.is_some() {
            "two_sample"
        } else {
            "union"
        };
        let current = &v.evidence["current"];
        if t.with_outcome > 0 && b.with_outcome > 0 {
            assert_eq!(current["verdict"], want, "{name}: {}", v.text);
            assert_eq!(current["alpha"], alpha, "{name}");
            assert_eq!(current["judge"], judge, "{name}");
        } else {
            assert!(current.is_null(), "{name}");
        }
    }
}

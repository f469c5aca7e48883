//! The judge table (`tests/fixtures/judge_cases.json`): two arms' counts and the verdict an
//! independent implementation of the comparison gives them. Here the control plane's judge
//! reads each case as a step of a rollout (its windows, its state, its look); `decider
//! report` is held to the same table in `crates/decider-cli/tests/judge_cases.rs`.

use decider_core::rollout::{Arm, Counts, REWARD_SCALE};
use decider_core::Source;
use decider_rollout::policy::{parse_steps, Policy};
use decider_rollout::sequential::Judge;
use decider_rollout::state::RolloutState;
use decider_rollout::{step, Tally, Windows};
use serde_json::Value;

const T0: i64 = 1_796_205_600_000;
const MIN: i64 = 60_000;

fn counts(arm: &Value) -> Counts {
    let n = arm["n"].as_u64().expect("n");
    let sum = arm["sum"].as_f64().expect("sum");
    let s = (sum * REWARD_SCALE as f64).round() as u64;
    Counts {
        decisions: n,
        outcomes: n,
        reward_sum: s,
        // The verdict reads n and the sum; the squares are bounded by the sum.
        reward_sq_sum: s,
        ..Counts::default()
    }
}

#[test]
fn the_control_plane_gives_every_case_its_verdict() {
    let text = include_str!("../../../tests/fixtures/judge_cases.json");
    let table: Value = serde_json::from_str(text).expect("the table is JSON");
    let cases = table["cases"].as_array().expect("cases");
    assert!(cases.len() >= 50, "{} cases", cases.len());
    for case in cases {
        let name = case["name"].as_str().expect("name");
        let alpha = case["alpha"].as_f64().expect("alpha");
        // A case with a share is a first step at that share, with every routing key in the
        // canary (the isolates say CANARY_PERCENT=100): the two-sample test at share/100.
        let share = case["share"].as_u64();
        let policy = Policy {
            // The first step is judged at ROLLOUT_ALPHA / 2.
            alpha: 2.0 * alpha,
            max_loss: case["max_loss"].as_f64().expect("max_loss"),
            min_outcomes: 1,
            steps: match share {
                Some(s) => parse_steps(&format!("{s},100")).expect("steps"),
                None => Policy::default().steps,
            },
            ..Policy::default()
        };
        let mut state = RolloutState::start(Some("m-2".into()), &policy, T0);
        if share.is_some() {
            state.hear_canary(Some(100), T0);
        }
        let mut batch = Tally::new();
        batch.add_counts(
            Arm::Challenger,
            Some("m-2"),
            Source::Model,
            &counts(&case["treatment"]),
        );
        batch.add_counts(
            Arm::Champion,
            Some("m-1"),
            Source::Model,
            &counts(&case["baseline"]),
        );
        let mut windows = Windows::default();
        windows.add(&batch, T0 + MIN);
        let (after, _) = step(&state, &policy, &windows, T0 + 2 * MIN);
        let judged = after.last.expect("a judgement");
        let c = judged.challenger.expect("a comparison while ramping");
        assert_eq!(judged.alpha, alpha, "{name}");
        let judge = if share.is_some() {
            Judge::TwoSample
        } else {
            Judge::Union
        };
        assert_eq!(c.judge, judge, "{name}");
        assert_eq!(
            c.verdict.name(),
            case["verdict"],
            "{name}: {}",
            c.describe()
        );
    }
}

//! Where the rollout stands, for an operator (`decider rollout status`, `GET
//! /v1/admin/rollout`): the steps and the share, how long the step has lasted and must last,
//! the bake, each arm's outcomes and interval on the current step, the last look and when the
//! next is due, the alarms and the last changes.

use crate::policy::Policy;
use crate::sequential::{compare, confidence_sequence, Sample};
use crate::state::RolloutState;
use decider_core::rollout::{Arm, Phase};
use decider_core::time::iso_from_ms;
use serde_json::{json, Value};

/// Changes the status lists, newest last.
pub const STATUS_HISTORY: usize = 10;

/// The status of `s` under `policy` at `now_ms` (see the module docs).
pub fn status(s: &RolloutState, policy: &Policy, now_ms: i64) -> Value {
    let alpha = s.period_alpha(policy.alpha);
    let sample = |arm| Sample::from_counts(&s.tally.arm(arm));
    let c = compare(
        &sample(Arm::Challenger),
        &sample(Arm::Champion),
        alpha,
        policy.max_loss,
        s.allocation(Arm::Challenger, Arm::Champion),
    );
    let held = sample(Arm::Holdout);
    let held_cs = confidence_sequence(&held, alpha / 2.0);
    let arm = |a: Arm, lo: f64, hi: f64| {
        let counts = s.tally.arm(a);
        json!({
            "decisions": counts.decisions, "outcomes": counts.outcomes, "mean": counts.mean(),
            "lo": lo, "hi": hi,
        })
    };
    let lasted_s = (now_ms - s.since_ms).max(0) / 1_000;
    let last = s.last.as_ref();
    let next_look = last.and_then(|j| Some(j.at_ms + (j.at_ms - j.previous_at_ms?)));
    let history: Vec<Value> = s
        .history
        .iter()
        .rev()
        .take(STATUS_HISTORY)
        .rev()
        .map(|c| {
            json!({
                "at": iso_from_ms(c.at_ms as f64), "from": c.from, "to": c.to,
                "why": c.why.name(), "reason": c.reason, "text": c.text,
            })
        })
        .collect();
    json!({
        "challenger_version": s.challenger_version,
        "phase": s.phase.name(),
        "setting": s.setting(),
        "paused": s.paused,
        "automatic": policy.auto,
        "steps": policy.steps.as_slice(),
        "step": s.step,
        "step_since": iso_from_ms(s.since_ms as f64),
        "step_lasted_s": lasted_s,
        "min_step_s": policy.min_step_ms / 1_000,
        "bake": {
            "percent": policy.bake_percent,
            "seconds": policy.bake_ms / 1_000,
            "ends_at": (s.phase == Phase::Baking).then(|| iso_from_ms((s.since_ms + policy.bake_ms) as f64)),
        },
        "alpha": alpha,
        "arms": {
            "challenger": arm(Arm::Challenger, c.treatment.lo, c.treatment.hi),
            "champion": arm(Arm::Champion, c.baseline.lo, c.baseline.hi),
            "holdout": arm(Arm::Holdout, held_cs.lo, held_cs.hi),
        },
        "comparison": {"delta": c.delta, "lo": c.lo, "hi": c.hi, "verdict": c.verdict.name()},
        "last_look": last.map(|j| json!({
            "at": iso_from_ms(j.at_ms as f64), "waiting": j.waiting,
            "proposals": j.proposals.iter().map(|p| json!({"to": p.to, "why": p.why.name(), "applied": p.applied})).collect::<Vec<_>>(),
        })),
        "next_look": next_look.map(|t| iso_from_ms(t as f64)),
        "alarms": s.alarms.iter().map(|a| json!({"kind": a.kind.name(), "since": iso_from_ms(a.since_ms as f64), "text": a.text})).collect::<Vec<_>>(),
        "history": history,
        "uncounted": s.uncounted,
    })
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use crate::control::{control, Verb};
    use crate::state::step;
    use crate::tally::{Tally, Windows};
    use decider_core::rollout::Counts;
    use decider_core::Source;

    const T0: i64 = 1_796_205_600_000;
    const MIN: i64 = 60_000;

    #[test]
    fn the_status_says_where_the_rollout_stands() {
        let p = Policy {
            min_outcomes: 1_000_000,
            ..Policy::default()
        };
        let s0 = RolloutState::start(Some("m-2".into()), &p, T0);
        let mut t = Tally::new();
        let mut c = Counts::default();
        for i in 0..100 {
            c.add_reward(if i < 90 { 1.0 } else { 0.0 });
        }
        c.decisions = 120;
        t.add_counts(Arm::Challenger, Some("m-2"), Source::Model, &c);
        let mut w = Windows::default();
        w.add(&t, T0 + 1);
        let (s1, _) = step(&s0, &p, &w, T0 + MIN);
        let (s2, _) = step(&s1, &p, &w, T0 + 2 * MIN);
        let (s3, _) = control(&s2, Verb::Pause, "looking", &p, T0 + 2 * MIN + 5).unwrap();
        let v = status(&s3, &p, T0 + 2 * MIN + 30_000);
        assert_eq!(v["phase"], "ramping");
        assert_eq!(
            (v["setting"].clone(), v["paused"].clone()),
            (json!(5), json!(true))
        );
        assert_eq!(v["steps"], json!([5, 20, 50, 100]));
        assert_eq!(
            (v["step_lasted_s"].clone(), v["min_step_s"].clone()),
            (json!(150), json!(300))
        );
        let ch = &v["arms"]["challenger"];
        assert_eq!(
            (ch["decisions"].clone(), ch["outcomes"].clone()),
            (json!(120), json!(100))
        );
        assert!((ch["mean"].as_f64().unwrap() - 0.9).abs() < 1e-12);
        assert!(ch["lo"].as_f64().unwrap() < 0.9 && ch["hi"].as_f64().unwrap() > 0.9);
        assert_eq!(v["arms"]["champion"]["outcomes"], 0);
        assert_eq!(v["next_look"], iso_from_ms((T0 + 3 * MIN) as f64));
        assert_eq!(v["history"][0]["why"], "pause");
        assert_eq!(v["history"][0]["reason"], "looking");
        assert_eq!(v["bake"]["ends_at"], Value::Null);
    }
}

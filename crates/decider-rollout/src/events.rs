//! What a look did, as record lines through the one record codec
//! ([`decider_core::record`]): a `rollout` record per change, `rollout_alarm` and
//! `rollout_alarm_cleared` per alarm raised or cleared, and one `rollout_judged` per look.
//! The control plane writes them to its log; `decider report` reads them like the
//! decisions.

use crate::state::{Event, RolloutState};
use decider_core::record::{AlarmRecord, JudgedRecord, RolloutRecord};
use serde_json::Value;

fn value(v: &impl serde::Serialize) -> Value {
    // The judge's types are plain numbers, names and strings: serialising cannot fail.
    serde_json::to_value(v).unwrap_or(Value::Null)
}

/// The lines of one look at `now_ms` that left the rollout at `after`, in order: the
/// events, then the judgement.
pub fn lines(after: &RolloutState, events: &[Event], now_ms: i64) -> Vec<String> {
    let mut out = event_lines(after, events, now_ms);
    out.push(
        JudgedRecord::new(
            now_ms,
            after.challenger_version.as_deref(),
            after.phase,
            after.setting(),
            value(&after.last),
        )
        .to_line(),
    );
    out
}

/// The lines of `events` alone (an operator's verb: no look).
pub fn event_lines(after: &RolloutState, events: &[Event], now_ms: i64) -> Vec<String> {
    let version = after.challenger_version.as_deref();
    events
        .iter()
        .map(|e| match e {
            Event::Changed(c) => RolloutRecord::new(
                c.at_ms,
                version,
                c.from,
                c.to,
                c.why,
                &c.text,
                c.step_since_ms,
                c.statistics.as_ref().map(value),
                c.reason.as_deref(),
            )
            .to_line(),
            Event::Raised(a) => {
                let evidence = match (&a.holdout, &a.fallback) {
                    (Some(h), _) => Some(value(h)),
                    (None, Some(f)) => Some(value(f)),
                    (None, None) => None,
                };
                AlarmRecord::new(now_ms, version, a.kind, &a.text, evidence).to_line(false)
            }
            Event::Cleared(kind) => {
                AlarmRecord::new(now_ms, version, *kind, "", None).to_line(true)
            }
        })
        .collect()
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use crate::policy::Policy;
    use crate::state::step;
    use crate::tally::{Tally, Windows};
    use decider_core::record::{AlarmKind, Record, Why};
    use decider_core::rollout::{Arm, Counts, Phase, Setting};
    use decider_core::Source;

    const T0: i64 = 1_796_205_600_000;

    #[test]
    fn every_event_of_a_look_is_a_record_the_codec_reads_back() {
        let p = Policy {
            min_outcomes: 10,
            ..Policy::default()
        };
        let s0 = RolloutState::start(Some("m-2".into()), &p, T0);
        let mut t = Tally::new();
        let mut add = |arm, mv, n: u64, ok: u64| {
            let mut c = Counts::default();
            for i in 0..n {
                c.add_reward(if i < ok { 1.0 } else { 0.0 });
            }
            c.decisions = n;
            t.add_counts(arm, Some(mv), Source::Model, &c);
        };
        add(Arm::Challenger, "m-2", 300, 200);
        add(Arm::Champion, "m-1", 5_000, 4_800);
        let mut w = Windows::default();
        w.add(&t, T0 + 1);
        let (s1, events) = step(&s0, &p, &w, T0 + 60_000);
        let lines = lines(&s1, &events, T0 + 60_000);
        let records: Vec<Record> = lines
            .iter()
            .map(|l| Record::from_line(l).unwrap())
            .collect();
        match &records[..] {
            [Record::Rollout(r), Record::RolloutJudged(j)] => {
                assert_eq!(
                    (r.from, r.to, r.why),
                    (Setting::Share(5), Setting::Share(0), Why::Worse)
                );
                assert_eq!(r.challenger_version.as_deref(), Some("m-2"));
                assert_eq!(r.statistics.as_ref().unwrap()["verdict"], "worse");
                assert_eq!((j.phase, j.setting), (Phase::RolledBack, Setting::Share(0)));
                assert_eq!(
                    j.judgement.as_ref().unwrap()["proposals"][0]["applied"],
                    true
                );
            }
            other => panic!("{other:?}"),
        }
        // An alarm raised, then cleared.
        let mut t = Tally::new();
        let mut c = Counts::default();
        c.add_reward(1.0);
        c.add_reward(1.0);
        c.decisions = 1;
        t.add_counts(Arm::Champion, Some("m-1"), Source::Model, &c);
        let mut w = Windows::default();
        w.add(&t, T0 + 1);
        let s0 = RolloutState::start(None, &p, T0);
        let (s1, events) = step(&s0, &p, &w, T0 + 60_000);
        let read = |lines: Vec<String>| -> Vec<Record> {
            lines
                .iter()
                .map(|l| Record::from_line(l).unwrap())
                .collect()
        };
        match &read(super::lines(&s1, &events, T0 + 60_000))[..] {
            [Record::RolloutAlarm(a), Record::RolloutJudged(_)] => {
                assert_eq!(a.kind, AlarmKind::ExcessOutcomes);
                assert!(a.text.contains("2 outcomes for 1 decisions"), "{}", a.text);
            }
            other => panic!("{other:?}"),
        }
        let mut s2 = s1.clone();
        s2.tally = Tally::new();
        let (s3, events) = step(&s2, &p, &Windows::default(), T0 + 120_000);
        match &read(super::lines(&s3, &events, T0 + 120_000))[..] {
            [Record::RolloutAlarmCleared(a), Record::RolloutJudged(_)] => {
                assert_eq!(a.kind, AlarmKind::ExcessOutcomes)
            }
            other => panic!("{other:?}"),
        }
    }
}

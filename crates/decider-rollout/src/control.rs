//! An operator's verbs on the rollout, as Argo Rollouts users know them from `kubectl argo
//! rollouts …`: pause, resume, abort, promote and restart. Each is a change of the state
//! and a `rollout` record naming the verb and the operator's reason.
//!
//! - **pause**: the judge keeps looking, counting and raising alarms, and changes nothing
//!   until resumed (its proposals say `applied: false`).
//! - **resume**: the judge acts again.
//! - **abort**: the challenger's share is 0 now (phase `rolled_back`).
//! - **promote**: past the last step now: the bake when there is one (the judge can still roll
//!   back), unless it is skipped; 100% at once otherwise.
//! - **restart**: a new rollout of the same challenger from the first step, on fresh counts
//!   and a fresh error budget (the history stays).

use crate::policy::Policy;
use crate::state::{Change, Event, RolloutState, Target};
use decider_core::record::Why;
use decider_core::rollout::{Phase, Setting};
use thiserror::Error;

/// An operator's verb.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Verb {
    /// The judge changes nothing until resumed.
    Pause,
    /// The judge acts again.
    Resume,
    /// The challenger's share is 0 now.
    Abort,
    /// Past the last step now; `skip_bake` goes straight to 100%.
    Promote {
        /// No bake: 100% at once.
        skip_bake: bool,
    },
    /// A new rollout of the same challenger on fresh counts.
    Restart,
}

/// The verbs' wire names.
pub const VERBS: [&str; 5] = ["pause", "resume", "abort", "promote", "restart"];

impl Verb {
    /// The verb of a wire name (`skip_bake` applies to `promote` only).
    pub fn parse(name: &str, skip_bake: bool) -> Option<Verb> {
        Some(match name {
            "pause" => Verb::Pause,
            "resume" => Verb::Resume,
            "abort" => Verb::Abort,
            "promote" => Verb::Promote { skip_bake },
            "restart" => Verb::Restart,
            _ => return None,
        })
    }

    /// The reason recorded for it.
    pub fn why(self) -> Why {
        match self {
            Verb::Pause => Why::Pause,
            Verb::Resume => Why::Resume,
            Verb::Abort => Why::Abort,
            Verb::Promote { .. } => Why::Promote,
            Verb::Restart => Why::Restart,
        }
    }
}

/// Why a verb was refused: it does not apply to the rollout as it stands.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum ControlError {
    /// No challenger is deployed: nothing to abort, promote or restart.
    #[error("there is no challenger to {0}: deploy one first")]
    NoChallenger(&'static str),
    /// Pause on a paused rollout, resume on a running one.
    #[error("the rollout is {0} already")]
    Already(&'static str),
    /// The verb does not apply in this phase.
    #[error("cannot {verb} a rollout that is {phase}")]
    Phase {
        /// The verb.
        verb: &'static str,
        /// The phase it stands in.
        phase: &'static str,
    },
}

/// Applies an operator's `verb` at `now_ms`, with their `reason`: the new state and its
/// `rollout` record.
///
/// # Errors
/// [`ControlError`] when the verb does not apply to the rollout as it stands.
pub fn control(
    state: &RolloutState,
    verb: Verb,
    reason: &str,
    policy: &Policy,
    now_ms: i64,
) -> Result<(RolloutState, Vec<Event>), ControlError> {
    let name = VERBS[match verb {
        Verb::Pause => 0,
        Verb::Resume => 1,
        Verb::Abort => 2,
        Verb::Promote { .. } => 3,
        Verb::Restart => 4,
    }];
    let mut s = state.clone();
    let from = s.setting();
    let since = s.since_ms;
    let needs_challenger = !matches!(verb, Verb::Pause | Verb::Resume);
    if needs_challenger && s.challenger_version.is_none() {
        return Err(ControlError::NoChallenger(name));
    }
    let refuse = |phase: Phase| ControlError::Phase {
        verb: name,
        phase: phase.name(),
    };
    match verb {
        Verb::Pause if s.paused => return Err(ControlError::Already("paused")),
        Verb::Pause => s.paused = true,
        Verb::Resume if !s.paused => return Err(ControlError::Already("running")),
        Verb::Resume => s.paused = false,
        Verb::Abort => match s.phase {
            Phase::Ramping | Phase::Baking | Phase::Promoted => {
                let step = s.step;
                s.apply(
                    Target {
                        setting: Setting::Share(0),
                        phase: Phase::RolledBack,
                        step,
                    },
                    now_ms,
                );
            }
            p => return Err(refuse(p)),
        },
        Verb::Promote { skip_bake } => match s.phase {
            Phase::Ramping => {
                let t = s.next(policy, true, skip_bake);
                s.apply(t, now_ms);
            }
            Phase::Baking if skip_bake => {
                let t = s.next(policy, true, true);
                s.apply(t, now_ms);
            }
            p => return Err(refuse(p)),
        },
        Verb::Restart => {
            let mut fresh = RolloutState::start(s.challenger_version.clone(), policy, now_ms);
            fresh.history = std::mem::take(&mut s.history);
            fresh.retired = std::mem::take(&mut s.retired);
            fresh.paused = s.paused;
            s = fresh;
        }
    }
    let to = s.setting();
    let reason = reason.trim();
    let change = Change {
        at_ms: now_ms,
        from,
        to,
        why: verb.why(),
        text: format!(
            "{from} → {to} ({name} by an operator{})",
            if reason.is_empty() {
                String::new()
            } else {
                format!(": {reason}")
            }
        ),
        step_since_ms: since,
        statistics: None,
        reason: (!reason.is_empty()).then(|| reason.to_owned()),
    };
    s.remember(&change);
    Ok((s, vec![Event::Changed(change)]))
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use crate::state::step;
    use crate::tally::{Tally, Windows};
    use decider_core::rollout::{Arm, Counts};
    use decider_core::Source;

    const T0: i64 = 1_796_205_600_000;
    const MIN: i64 = 60_000;

    fn policy() -> Policy {
        Policy {
            min_outcomes: 10,
            min_step_ms: 0,
            bake_percent: 10,
            bake_ms: 10 * MIN,
            ..Policy::default()
        }
    }

    fn ramping() -> RolloutState {
        RolloutState::start(Some("m-2".into()), &policy(), T0)
    }

    fn change(events: &[Event]) -> &Change {
        match events {
            [Event::Changed(c)] => c,
            other => panic!("{other:?}"),
        }
    }

    /// Windows of a clearly better (`better`) or worse challenger, after `at`.
    fn windows(at: i64, better: bool) -> Windows {
        let mut t = Tally::new();
        let mut add = |arm, n: u64, ok: u64| {
            let mut c = Counts::default();
            for i in 0..n {
                c.add_reward(if i < ok { 1.0 } else { 0.0 });
            }
            c.decisions = n;
            t.add_counts(arm, Some("m"), Source::Model, &c);
        };
        add(Arm::Challenger, 1000, if better { 990 } else { 700 });
        add(Arm::Champion, 1000, 900);
        let mut w = Windows::default();
        w.add(&t, at + MIN);
        w
    }

    #[test]
    fn pause_stops_the_judge_until_resume() {
        let p = policy();
        let (s, ev) = control(&ramping(), Verb::Pause, "origin maintenance", &p, T0 + 1).unwrap();
        let c = change(&ev);
        assert_eq!(
            (c.from, c.to, c.why),
            (Setting::Share(5), Setting::Share(5), Why::Pause)
        );
        assert_eq!(c.reason.as_deref(), Some("origin maintenance"));
        assert_eq!(c.text, "5% → 5% (pause by an operator: origin maintenance)");
        assert!(s.paused);
        assert_eq!(
            control(&s, Verb::Pause, "", &p, T0 + 2).unwrap_err(),
            ControlError::Already("paused")
        );
        // Paused: a clear verdict changes nothing, and says so.
        let (judged, ev) = step(&s, &p, &windows(T0, true), T0 + 2 * MIN);
        assert!(ev.is_empty());
        assert_eq!(judged.share, 5);
        let last = judged.last.as_ref().unwrap();
        assert!(!last.proposals[0].applied);
        assert!(last.waiting.as_deref().unwrap().starts_with("paused"));
        // Resumed, the next look acts.
        let (s, ev) = control(&judged, Verb::Resume, "", &p, T0 + 2 * MIN + 1).unwrap();
        assert_eq!(change(&ev).why, Why::Resume);
        assert!(change(&ev).reason.is_none());
        let (s, ev) = step(&s, &p, &windows(T0 + 2 * MIN + 1, true), T0 + 4 * MIN);
        assert_eq!(change(&ev).to, Setting::Share(20));
        assert_eq!(s.history.len(), 3);
    }

    #[test]
    fn abort_promote_and_restart() {
        let p = policy();
        let (s, ev) = control(&ramping(), Verb::Abort, "bad deploy", &p, T0 + 1).unwrap();
        assert_eq!(
            (change(&ev).to, s.phase),
            (Setting::Share(0), Phase::RolledBack)
        );
        assert_eq!(
            control(&s, Verb::Promote { skip_bake: false }, "", &p, T0 + 2).unwrap_err(),
            ControlError::Phase {
                verb: "promote",
                phase: "rolled_back"
            }
        );
        // A rollback is not final: restart on fresh counts, at the first step.
        let (s, ev) = control(&s, Verb::Restart, "outage was elsewhere", &p, T0 + 3).unwrap();
        assert_eq!(
            (change(&ev).from, change(&ev).to, change(&ev).why),
            (Setting::Share(0), Setting::Share(5), Why::Restart)
        );
        assert_eq!((s.phase, s.period, s.since_ms), (Phase::Ramping, 0, T0 + 3));
        assert_eq!(s.history.len(), 2);
        // Promote: into the bake, where the judge can still roll back.
        let (s, ev) = control(&s, Verb::Promote { skip_bake: false }, "", &p, T0 + 4).unwrap();
        assert_eq!(
            (change(&ev).to, s.phase),
            (Setting::Share(90), Phase::Baking)
        );
        let (rolled, ev) = step(&s, &p, &windows(T0 + 4, false), T0 + 2 * MIN);
        assert_eq!(
            (change(&ev).why, rolled.phase),
            (Why::Worse, Phase::RolledBack)
        );
        // ...or skip it.
        let (s, _) = control(&s, Verb::Promote { skip_bake: true }, "", &p, T0 + 5).unwrap();
        assert_eq!(
            (s.setting(), s.phase),
            (Setting::Share(100), Phase::Promoted)
        );
        // Nothing to act on without a challenger.
        let none = RolloutState::start(None, &p, T0);
        assert_eq!(
            control(&none, Verb::Abort, "", &p, T0).unwrap_err(),
            ControlError::NoChallenger("abort")
        );
        assert!(control(&none, Verb::Pause, "", &p, T0).is_ok());
        assert_eq!(
            Verb::parse("promote", true),
            Some(Verb::Promote { skip_bake: true })
        );
        assert_eq!(Verb::parse("rollback", false), None);
    }
}

//! Which outcomes count: a flush batch received, its counts added to the windows, and each
//! `/v1/decide` caller's outcome counted once, for a decision of the current step.
//!
//! The serving Worker counts a routed request's outcome itself (it proxied the request, so
//! there is exactly one). A caller's outcome comes over the network and may come again (a
//! retry after a timeout, at-least-once delivery) or late. Its decision id is signed by the
//! Worker ([`decider_core::decision_id`]) and carries when the decision was made, so the
//! control plane — where every isolate's counts meet — counts it when:
//!
//! - **it is the first for its decision**: the control plane remembers the ids it counted
//!   (its storage, through the `first` callback of [`receive`]) for a horizon
//!   (`OUTCOME_HORIZON_S`); a repeat is not counted ([`Uncounted::duplicate`]);
//! - **the decision is within the horizon**: an outcome for a decision older than the
//!   memory reaches back ([`Floor`]) cannot be told from a repeat, so it is not counted
//!   ([`Uncounted::beyond_horizon`]); the log still has it, and `decider report` joins it
//!   over the whole log;
//! - **the decision was made on the current step**: what a decision made under an earlier
//!   setting earned is no evidence about this one ([`Uncounted::before_step`]).

use crate::state::RolloutState;
pub use crate::state::Uncounted;
use crate::tally::{Batch, Tally};
use decider_core::decision_id::base_tag;
use decider_core::rollout::{CallerOutcome, Counts};

/// How far back the memory of counted decision ids reaches.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Floor {
    /// Decisions made at or after this (ms since the epoch) are remembered once counted.
    pub ms: i64,
}

impl Floor {
    /// The floor at `now_ms` of a memory that keeps ids `horizon_ms` and had to forget ids
    /// of decisions up to `evicted_ms` early (when it was full).
    pub fn new(now_ms: i64, horizon_ms: i64, evicted_ms: Option<i64>) -> Floor {
        let by_horizon = now_ms.saturating_sub(horizon_ms);
        Floor {
            ms: evicted_ms.map_or(by_horizon, |e| by_horizon.max(e.saturating_add(1))),
        }
    }
}

/// Whether a caller outcome may count (before the memory is asked whether it is a repeat).
fn may_count(o: &CallerOutcome, state: &RolloutState, floor: Floor) -> Result<(), Why> {
    if o.decided_ms < floor.ms {
        Err(Why::BeyondHorizon)
    } else if o.decided_ms < state.since_ms {
        Err(Why::BeforeStep)
    } else {
        Ok(())
    }
}

enum Why {
    BeforeStep,
    BeyondHorizon,
}

/// What a received batch adds to the window of its arrival: its counts, and each caller
/// outcome that counts (module docs) under its decision's arm and source. `first` remembers
/// a decision id and its decision time and answers whether it was new: the control plane's
/// storage. Outcomes that do not count are counted in `state.uncounted`.
pub fn receive(
    state: &mut RolloutState,
    batch: &Batch,
    floor: Floor,
    first: &mut dyn FnMut(&str, i64) -> bool,
) -> Tally {
    let mut tally = batch.tally.clone();
    for o in &batch.outcomes {
        match may_count(o, state, floor) {
            Err(Why::BeforeStep) => state.uncounted.before_step += 1,
            Err(Why::BeyondHorizon) => state.uncounted.beyond_horizon += 1,
            Ok(()) if !first(&o.id, o.decided_ms) => state.uncounted.duplicate += 1,
            Ok(()) => {
                // Batches are checked on entry: every id ends with its tag.
                if let Some((arm, source)) = base_tag(&o.id) {
                    let mut c = Counts::default();
                    c.add_quantised(o.reward);
                    tally.add_counts(arm, None, source, &c);
                }
            }
        }
    }
    tally
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use crate::policy::Policy;
    use crate::tally::Windows;
    use decider_core::decision_id::tag_base;
    use decider_core::rollout::Arm;
    use decider_core::Source;
    use std::collections::HashSet;

    const T0: i64 = 1_796_205_600_000;
    const HOUR: i64 = 3_600_000;

    fn outcome(n: u32, arm: Arm, decided_ms: i64, reward: u64) -> CallerOutcome {
        CallerOutcome {
            id: tag_base(
                format!("0f6c2a9e-8a3b-4c1d-9e2f-{n:011x}0"),
                arm,
                Source::Model,
            ),
            decided_ms,
            reward,
        }
    }

    #[test]
    fn each_decision_counts_once_within_the_horizon_and_the_step() {
        let mut state = RolloutState::start(Some("m-2".into()), &Policy::default(), T0);
        let mut windows = Windows::default();
        let mut seen = HashSet::new();
        let mut first = |id: &str, _: i64| seen.insert(id.to_owned());
        let floor = Floor::new(T0 + HOUR, 24 * HOUR, None);
        let batch = Batch {
            outcomes: vec![
                outcome(1, Arm::Challenger, T0 + 10, 1_000_000),
                // The same decision again, twice: counted once.
                outcome(1, Arm::Challenger, T0 + 10, 1_000_000),
                outcome(1, Arm::Challenger, T0 + 10, 0),
                outcome(2, Arm::Champion, T0 + 20, 250_000),
                // Made before the step began.
                outcome(3, Arm::Champion, T0 - 1, 1_000_000),
            ],
            ..Batch::default()
        };
        windows.add(&receive(&mut state, &batch, floor, &mut first), T0 + HOUR);
        // A later batch repeating an outcome already counted.
        let again = Batch {
            outcomes: vec![outcome(2, Arm::Champion, T0 + 20, 1_000_000)],
            ..Batch::default()
        };
        windows.add(&receive(&mut state, &again, floor, &mut first), T0 + HOUR);
        let t = windows.total();
        let (ch, cp) = (t.arm(Arm::Challenger), t.arm(Arm::Champion));
        assert_eq!((ch.outcomes, ch.reward_sum), (1, 1_000_000));
        assert_eq!((cp.outcomes, cp.reward_sum), (1, 250_000));
        assert_eq!(
            state.uncounted,
            Uncounted {
                duplicate: 3,
                before_step: 1,
                beyond_horizon: 0
            }
        );
    }

    #[test]
    fn beyond_the_horizon_nothing_is_counted() {
        let mut state = RolloutState::start(None, &Policy::default(), T0 - 48 * HOUR);
        let mut windows = Windows::default();
        let mut calls = 0;
        let mut first = |_: &str, _: i64| {
            calls += 1;
            true
        };
        let now = T0;
        // The memory keeps a day, but had to forget decisions up to T0 - 2h early.
        let floor = Floor::new(now, 24 * HOUR, Some(T0 - 2 * HOUR));
        assert_eq!(floor.ms, T0 - 2 * HOUR + 1);
        assert_eq!(Floor::new(now, 24 * HOUR, None).ms, T0 - 24 * HOUR);
        let batch = Batch {
            outcomes: vec![
                outcome(1, Arm::Champion, T0 - 3 * HOUR, 1_000_000),
                outcome(2, Arm::Champion, T0 - 2 * HOUR, 1_000_000),
                outcome(3, Arm::Champion, T0 - HOUR, 1_000_000),
            ],
            ..Batch::default()
        };
        windows.add(&receive(&mut state, &batch, floor, &mut first), now);
        assert_eq!(state.uncounted.beyond_horizon, 2);
        assert_eq!(calls, 1, "the memory is asked only about what may count");
        assert_eq!(windows.total().arm(Arm::Champion).outcomes, 1);
    }
}

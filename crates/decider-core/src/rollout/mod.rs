//! Rollouts: which arm serves a request (champion, challenger, holdout on rules), and
//! rollouts that run themselves: live outcome counters, a sequential judge, and the policy
//! that ramps a challenger model step by step, rolls it back, or raises an alarm.
//!
//! Pure logic, like the rest of the crate: the Worker counts in its isolates, flushes the
//! counts to its rollout store, and on each cron run hands the store's windows and state to
//! [`judge()`]; everything here is tested natively.
//!
//! - [`arm()`]: sticky buckets of a routing key → [`Arm`] (`CANARY_PERCENT`,
//!   `CHALLENGER_PERCENT`, `CANARY_KEY`).
//! - [`success`]: the one definition of a decision's reward ([`SuccessRule`]), shared with
//!   `decider report`.
//! - [`tally`]: counters keyed by (arm, model version, source) that merge exactly in any
//!   order ([`Tally`]), their flush batch and its validation, and the per-window store
//!   ([`Windows`]).
//! - [`sequential`]: an always-valid confidence sequence for a difference of mean rewards
//!   from aggregate counts ([`compare`]), and its verdict.
//! - [`alarm`]: the fallback-rate alarm, shared with `decider report`.
//! - [`policy`]: `ROLLOUT_*` configuration ([`Policy`]) and its parsers.
//! - [`state`]: the rollout's state and the cron run's step ([`judge()`]).

pub mod alarm;
mod arm;
pub mod policy;
pub mod sequential;
pub mod state;
pub mod success;
pub mod tally;

#[cfg(test)]
mod sim;

pub use alarm::{fallback_alarm, FallbackAlarm};
pub use arm::{arm, canary_bucket, decision_tag, in_canary, tag_decision_id, Arm, CanaryKey};
pub use policy::Policy;
pub use sequential::{compare, confidence_sequence, Comparison, Sample, Verdict};
pub use state::{judge, Alarm, AlarmKind, Change, Phase, RolloutState, Setting, Why};
pub use success::{Observation, SuccessRule};
pub use tally::{BatchError, Counts, Tally, Windows};

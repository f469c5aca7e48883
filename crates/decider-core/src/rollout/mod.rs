//! Rollouts that run themselves: live outcome counters, a sequential judge, and the policy
//! that ramps a challenger model step by step, rolls it back, or raises an alarm.
//!
//! Pure logic, like the rest of the crate: the Worker counts in its isolates and flushes
//! the counts to its rollout store; everything here is tested natively.
//!
//! - [`success`]: the one definition of a decision's reward ([`SuccessRule`]), shared with
//!   `decider report`.
//! - [`tally`]: counters keyed by (arm, model version, source) that merge exactly in any
//!   order ([`Tally`]), their flush batch and its validation, and the per-window store
//!   ([`Windows`]).
//! - [`sequential`]: an always-valid confidence sequence for a difference of mean rewards
//!   from aggregate counts ([`compare`]), and its verdict.
//! - [`alarm`]: the fallback-rate alarm, shared with `decider report`.

pub mod alarm;
pub mod sequential;
pub mod success;
pub mod tally;

pub use alarm::{fallback_alarm, FallbackAlarm};
pub use sequential::{compare, confidence_sequence, Comparison, Sample, Verdict};
pub use success::{Observation, SuccessRule};
pub use tally::{BatchError, Counts, Tally, Windows};

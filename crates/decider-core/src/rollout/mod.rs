//! Rollouts that run themselves: live outcome counters, a sequential judge, and the policy
//! that ramps a challenger model step by step, rolls it back, or raises an alarm.
//!
//! Pure logic, like the rest of the crate: the Worker counts in its isolates, flushes the
//! counts to its rollout store, and on each cron run hands the store's windows and state to
//! [`judge()`]; everything here is tested natively.
//!
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
pub mod policy;
pub mod sequential;
pub mod state;
pub mod success;
pub mod tally;

#[cfg(test)]
mod sim;

pub use alarm::{fallback_alarm, FallbackAlarm};
pub use policy::Policy;
pub use sequential::{compare, confidence_sequence, Comparison, Sample, Verdict};
pub use state::{judge, Alarm, AlarmKind, Change, Phase, RolloutState, Setting, Why};
pub use success::{Observation, SuccessRule};
pub use tally::{BatchError, Counts, Tally, Windows};

/// Text quoted back in an error, at most 40 bytes of it, cut on a character boundary.
fn clip(s: &str) -> String {
    if s.len() <= 40 {
        return s.to_owned();
    }
    let end = (0..=40).rev().find(|&i| s.is_char_boundary(i)).unwrap_or(0);
    format!("{}…", &s[..end])
}

//! Rollouts that run themselves: live outcome counters, a sequential judge, and the policy
//! that ramps a challenger model step by step, rolls it back, or raises an alarm.
//!
//! Pure logic, like the rest of the crate; everything here is tested natively.
//!
//! - [`success`]: the one definition of a decision's reward ([`SuccessRule`]), shared with
//!   `decider report`.
//! - [`alarm`]: the fallback-rate alarm, shared with `decider report`.

pub mod alarm;
pub mod success;

pub use alarm::{fallback_alarm, FallbackAlarm};
pub use success::{Observation, SuccessRule};

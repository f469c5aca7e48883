//! Rollouts, the serving side: which arm serves a request (champion, challenger, holdout on
//! rules), the one definition of a decision's reward, the isolate's live counts and their
//! flush batch, and the control plane's answer (the setting in force).
//!
//! Judging the counts (windows, the sequential test, the policy, the rollout's state) is
//! the control plane's, in the `decider-rollout` crate; nothing of it is needed to serve.
//!
//! - [`arm()`]: sticky buckets of a routing key → [`Arm`] (`CANARY_PERCENT`,
//!   `CHALLENGER_PERCENT`, `CANARY_KEY`).
//! - [`success`]: the one definition of a decision's reward ([`SuccessRule`]), shared with
//!   the CLI's readers; [`statuses`]: which statuses succeed ([`Statuses`],
//!   `ROLLOUT_SUCCESS`).
//! - [`live`]: the isolate's counts ([`Live`], [`Counts`]), their flush rule and batch.
//! - [`setting`]: the setting in force ([`Setting`]), the rollout's [`Phase`], and the
//!   control plane's answer to a read ([`SettingAnswer`]).

mod arm;
pub mod live;
pub mod setting;
pub mod statuses;
pub mod success;

pub use arm::{arm, canary_bucket, in_canary, Arm, CanaryKey};
pub use live::{CallerOutcome, Counts, Live, REWARD_SCALE};
pub use setting::{Phase, Setting, SettingAnswer};
pub use statuses::Statuses;
pub use success::{Observation, SuccessRule};

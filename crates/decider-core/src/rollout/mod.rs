//! Rollouts: which arm serves a request (champion, challenger, holdout on rules).

mod arm;

pub use arm::{arm, canary_bucket, in_canary, Arm, CanaryKey};

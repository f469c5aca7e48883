//! decider-rollout: the rollout's control plane, as pure logic — what the rollout Worker
//! (`workers/rollout`) runs on every look, and what `decider report` judges its own counts
//! with. No I/O, no clock, no `worker` dependency; builds for native and wasm32.
//!
//! The serving Worker counts and flushes ([`decider_core::rollout::live`]); everything
//! that judges those counts is here, so that a report and the live rollout can never
//! disagree on the same counts.
//!
//! # Layout
//! - [`tally`]: counters keyed by (arm, model version, source) that merge exactly in any
//!   order ([`Tally`]), the flush batch read and checked ([`Batch`]), and the per-window
//!   store ([`Windows`]).
//! - [`sequential`]: the comparison of two arms ([`compare`]), the one judge: the two-sample
//!   e-process of [`evidence`] when the arms' [`allocation`] is known, else the union of two
//!   always-valid confidence sequences.
//! - [`sample`]: an arm's counts as the tests read them ([`Sample`]).
//! - [`evidence`]: the two-sample e-process from each arm's counts, given the allocation.
//! - [`allocation`]: the arms' shares of the traffic (the challenger's share, the serving
//!   isolates' `CANARY_PERCENT`).
//! - [`alarm`]: the fallback-rate alarm, shared with `decider report`.
//! - [`policy`]: the `ROLLOUT_*` configuration ([`Policy`]) and its parsers.
//! - [`state`]: the rollout's state and the step of every look ([`step`]): counting, the
//!   comparisons, ramping (no step shorter than `ROLLOUT_MIN_STEP_S`), the bake after the
//!   last step, rollback, alarms, a new rollout for a new challenger.
//! - [`succession`]: the new-rollout rule (a new challenger, a superseded one).
//! - [`control`]: an operator's verbs (pause, resume, abort, promote, restart).
//! - [`outcomes`]: which caller outcomes count: once per decision, within a horizon, for
//!   decisions of the step.
//! - [`events`]: every event of a look written through the record codec
//!   ([`decider_core::record`]).
//! - [`notify`]: the webhook's notifications, their outbox and backoff.
//! - [`status`]: where the rollout stands, for an operator.
//! - [`sim`]: simulated rollouts through [`step`], and the plan of many (`decider rollout
//!   plan`).
#![deny(missing_docs)]

pub mod alarm;
pub mod allocation;
pub mod control;
pub mod events;
pub mod evidence;
pub mod notify;
pub mod outcomes;
pub mod policy;
pub mod sample;
pub mod sequential;
pub mod state;
pub mod status;
pub mod succession;
pub mod tally;

pub mod sim;

pub use alarm::{fallback_alarm, FallbackAlarm};
pub use policy::Policy;
pub use sequential::{compare, confidence_sequence, Comparison, Sample, Verdict};
pub use state::{step, Alarm, Change, RolloutState};
pub use tally::{Batch, BatchError, Tally, Windows};

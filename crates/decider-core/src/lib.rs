//! decider-core: the pure decision logic of edge-decider.
//!
//! No I/O, no clock, no `worker` dependency; builds for native and `wasm32-unknown-unknown`.
//! The Worker and the CLI do the I/O (HTTP, AI binding, KV, files) and hand *results* to
//! this crate, so every decision path, fallbacks included, is tested natively.
//!
//! # Layout
//! - [`actions`]: the fixed action space ([`ACTIONS`]).
//! - [`state`]: the request state, parsed and validated with field-naming errors.
//! - [`features`]: encoder v1, state → 16 floats.
//! - [`artifact`]: the JSON artifact's schema (re-exported by [`model`]).
//! - [`model`]: artifact validation and tree-ensemble inference.
//! - [`compact`]: the compact binary form every model is served from (the Worker embeds it).
//! - [`output`]: a model's answer checked into a [`ModelOutcome`] (or why there is none).
//! - [`rules`]: the first-hit rule table.
//! - [`policy`]: model outcome + gates + rules → [`Decision`].
//! - [`decider`]: [`Decider`], the one composition of model, rules and policy that every
//!   caller decides through.
//! - [`record`]: the decision and outcome records the Worker logs and the CLI reads back.
//! - [`routing`]: what a request means for the decision at the edge: request types,
//!   regions, canary buckets, failover, signal freshness.
//! - [`monitor`]: the origin monitor: probe histories with hysteresis, signals estimated from
//!   probes or read from a metrics document, down origins passed over for their failover.
//! - [`rollout`]: live outcome counters, the sequential judge of challenger vs champion and
//!   model vs rules, the rollout policy and state, the fallback-rate alarm, and the one
//!   success definition.
//!
//! Modules depend on each other in this order only (no cycles): `actions`, `state` →
//! `features`, `rules` → `artifact` → `model` → `compact` → `output` → `policy` →
//! `decider`, `record` → `routing` → `monitor`; `policy`, `record` → `rollout`.
#![deny(missing_docs)]

pub mod actions;
pub mod artifact;
pub mod compact;
pub mod decider;
pub mod features;
pub mod model;
pub mod monitor;
pub mod output;
pub mod policy;
pub mod record;
pub mod rollout;
pub mod routing;
pub mod rules;
pub mod state;

pub use actions::{Action, ACTIONS, NUM_ACTIONS};
pub use decider::{Decider, Explore, ModelSource, Params, Served, ThresholdSource};
pub use features::{encode, Features, ENCODER_VERSION, FEATURE_DIM};
pub use model::{Artifact, ArtifactError, Model};
pub use output::{ModelError, ModelOutcome, ModelOutput};
pub use policy::{Decision, FallbackReason, Gates, PolicyConfig, Source, Threshold};
pub use rules::{RuleError, RuleTable};
pub use state::{Signals, State, StateError};

/// The shipped default rule table (`rules/default.json`), embedded at build time.
pub const DEFAULT_RULES_JSON: &str = include_str!("../../../rules/default.json");

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
//! - [`model`]: the artifact format, its validation, and tree-ensemble inference.
//! - [`rules`]: the first-hit rule table.
//! - [`policy`]: model outcome + gates + rules → [`Decision`].
#![deny(missing_docs)]

pub mod actions;
pub mod features;
pub mod json_text;
pub mod model;
pub mod policy;
pub mod rules;
pub mod state;

pub use actions::{Action, ACTIONS, NUM_ACTIONS};
pub use features::{encode, Features, ENCODER_VERSION, FEATURE_DIM};
pub use model::{Artifact, ArtifactError, Model};
pub use policy::{
    decide, Decision, FallbackReason, Gates, Inputs, ModelOutcome, ModelOutput, PolicyConfig,
    Source,
};
pub use rules::{RuleError, RuleTable};
pub use state::{Signals, State, StateError};

/// The shipped default rule table (`rules/default.json`), embedded at build time.
pub const DEFAULT_RULES_JSON: &str = include_str!("../../../rules/default.json");

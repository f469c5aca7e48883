//! decider-core: the pure decision logic of edge-decider.
//!
//! No I/O, no clock, no `worker` dependency; builds for native and `wasm32-unknown-unknown`.
//! The Worker and the CLI do the I/O (HTTP, AI binding, KV, files) and hand *results* to
//! this crate, so every decision path, fallbacks included, is tested natively.
//!
//! # Layout
//! - [`actions`]: the fixed action space ([`ACTIONS`]).
//! - [`json`]: validating JSON input field by field ([`FieldError`] names the field).
//! - [`state`]: the request state, parsed and validated.
//! - [`signals`]: live backend signals, the stored snapshot, the one freshness rule.
//! - [`features`]: encoder v1, state → 16 floats.
//! - [`artifact`]: the JSON artifact's schema (re-exported by [`model`]).
//! - [`model`]: artifact validation and tree-ensemble inference.
//! - [`compact`]: the compact binary form every model is served from (the Worker embeds it).
//! - [`output`]: a model's answer checked into a [`ModelOutcome`] (or why there is none).
//! - [`rules`]: the first-hit rule table.
//! - [`policy`]: model outcome + gates + rules → [`Decision`].
//! - [`decider`]: [`Decider`], model source + rules + checked parameters, and exploration.
//! - [`request`]: one decision request served: decision, record and answer, composed once.
//! - [`record`]: the decision and outcome records the Worker logs and every reader reads
//!   back (one codec, with the lenient [`record::Reader`]).
//! - [`time`]: ISO-8601 timestamps of the records, the UTC hour.
//! - [`auth`]: bearer tokens, compared in constant time.
//! - [`vars`]: configuration from wrangler vars, one table per Worker ([`var!`]).
//! - [`rollout`]: which arm serves a request (champion, challenger, holdout), the one
//!   success definition, the isolate's live counts and their flush batch, the setting the
//!   control plane answers. The judge itself is the `decider-rollout` crate's.
//! - [`decision_id`]: decision ids that carry their arm, source, endpoint, action and issue
//!   time under a keyed tag, checked where an outcome enters.
//! - [`request_types`], [`regions`]: what an edge request means for the state.
//! - [`failover`]: where a routed request goes, its attempts, its outcome, a 502's words.
//! - [`forward`]: what crosses from client to origin and back (headers, bodies, statuses).
//! - [`monitor`]: the origin monitor: probe histories with hysteresis, signals estimated from
//!   probes or read from a metrics document.
//!
//! Modules depend on each other in one direction (no cycles; `make structure` checks it).
#![deny(missing_docs)]

pub mod actions;
pub mod artifact;
pub mod auth;
pub mod compact;
pub mod decider;
pub mod decision_id;
pub mod failover;
pub mod features;
pub mod forward;
pub mod hex;
pub mod json;
pub mod model;
pub mod monitor;
pub mod output;
pub mod policy;
pub mod record;
pub mod regions;
pub mod request;
pub mod request_types;
pub mod rollout;
pub mod rules;
pub mod signals;
pub mod state;
pub mod time;
pub mod vars;

pub use actions::{Action, ACTIONS, NUM_ACTIONS};
pub use decider::{Decider, Explore, ModelSource, Params, Served, ThresholdSource};
pub use features::{encode, Features, ENCODER_VERSION, FEATURE_DIM};
pub use json::FieldError;
pub use model::{Artifact, ArtifactError, Model};
pub use output::{ModelError, ModelOutcome, ModelOutput};
pub use policy::{Decision, FallbackReason, Gates, PolicyConfig, Source, Threshold};
pub use rules::{RuleError, RuleTable, Rules};
pub use signals::Signals;
pub use state::State;

/// The shipped default rule table (`rules/default.json`), embedded at build time.
pub const DEFAULT_RULES_JSON: &str = include_str!("../../../rules/default.json");

//! decider-cli: the native side of edge-decider — simulate data, train and calibrate the
//! model the Worker embeds, evaluate it, and run decisions through the same policy code.
//!
//! # Layout
//! - [`rng`]: a small deterministic PRNG (same seed → same data, same model).
//! - [`simulate`]: the routing simulator that produces labelled datasets.
//! - [`dataset`]: the JSONL dataset format with file:line errors.
//! - [`gbdt`]: histogram gradient-boosted trees (multiclass softmax), the model family.
//! - [`train`]: training pipeline — split, fit, early stop, calibrate, pick the threshold, write.
//! - [`metrics`]: accuracy, confusion, ECE, accuracy–coverage curves, system accuracy.
//! - [`ope`]: off-policy evaluation of a candidate policy on logged decisions (IPS, SNIPS, DR),
//!   and the labelling step of training from logs.
//! - [`card`]: model card (markdown) and accuracy–coverage curve (SVG).
//! - [`svg`]: the small SVG writer the curve and the report's charts share.
//! - [`logs`]: streaming reader of decision/outcome records from every log source.
//! - [`report`]: `decider report` — join, success rates with intervals, fallback over time, verdicts.
//! - [`loadtest`]: the open-loop HTTP load generator behind `decider loadtest`.
#![deny(missing_docs)]

pub mod card;
pub mod dataset;
pub mod gbdt;
pub mod loadtest;
pub mod logs;
pub mod metrics;
pub mod ope;
pub mod report;
pub mod rng;
pub mod simulate;
pub mod svg;
pub mod train;

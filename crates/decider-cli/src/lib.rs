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
//! - [`report`]: the report on decision logs — join, success rates with intervals, fallback
//!   over time, verdicts.
//! - [`serving`]: the serving policy (model, rules, threshold) loaded from files.
//! - [`from_logs`]: logged decisions joined to their rewards, as off-policy samples.
//! - [`train_logs`]: a training set labelled from logged traffic (`decider train --logs`).
//! - [`loadtest`]: the open-loop HTTP load generator behind `decider loadtest`.
//! - [`synth_logs`]: deterministic synthetic Worker logs, written with the record codec, for
//!   `decider report`'s tests and benchmark.
//! - [`commands`]: the `decider` commands, one module each: flags, the call into the modules
//!   above, the output.
#![deny(missing_docs)]

use std::path::Path;
use thiserror::Error;

pub mod base;
pub mod card;
pub mod commands;
pub mod dataset;
pub mod from_logs;
pub mod gbdt;
pub mod loadtest;
pub mod logs;
pub mod metrics;
pub mod ope;
pub mod report;
pub mod rng;
pub mod rollout_ops;
pub mod rollout_plan;
pub mod serving;
pub mod simulate;
pub mod svg;
pub mod synth_logs;
pub mod train;
pub mod train_logs;
pub mod world;

/// Why a command failed; `main` prints it on one line and exits 2 for [`CliError::Usage`],
/// 1 otherwise.
#[derive(Debug, Error)]
pub enum CliError {
    /// A flag or value the command cannot use.
    #[error("{0}")]
    Usage(String),
    /// A file that cannot be read or written (the message names it).
    #[error(transparent)]
    Io(#[from] std::io::Error),
    /// Input that was read but cannot be used (the message names the file and what is wrong).
    #[error("{0}")]
    Input(String),
}

impl CliError {
    /// An I/O error on `path`, naming it.
    pub fn file(path: &Path, e: std::io::Error) -> CliError {
        CliError::Io(std::io::Error::new(
            e.kind(),
            format!("{}: {e}", path.display()),
        ))
    }
}

//! `decider train --logs`: a training set labelled from logged traffic. The logs are read
//! into samples exactly as `decider ope` reads them ([`crate::from_logs`]: the report's
//! reader, join and reward), each sample's state is labelled with its best supported action
//! by [`crate::ope::learn::policy_labels`] (its docs say how and under which assumptions),
//! and the labelled rows go through the same trainer as a dataset file.
//!
//! The artifact's `training` record says where the rows came from: `source: "logs"` and a
//! `logs` object (input file names, decisions read, rows used, what was left out and why,
//! the date range of the logged decisions, the reward definition and the labelling method).

use crate::dataset::{hex, Dataset};
use crate::from_logs::{self, FromLogs};
use crate::ope::{policy_labels, OpeOptions};
use crate::report::join::SuccessRule;
use crate::CliError;
use serde_json::json;
use sha2::{Digest, Sha256};
use std::path::PathBuf;

/// How the labels are made, for the training record and the model card.
pub const LABELS: &str = "argmax of a boosted-tree reward model q(x, a) over the actions \
    logged in the state's request_type x region cell; the logged action where its \
    propensity is 1";

/// Reads `paths` into a labelled dataset; `seed` seeds the reward model.
///
/// # Errors
/// A log file that cannot be opened; fewer than two samples with an outcome (the message
/// says how many decisions were read and why they were left out).
pub fn dataset(
    paths: &[PathBuf],
    rule: SuccessRule,
    seed: u64,
    progress: bool,
) -> Result<(Dataset, FromLogs), CliError> {
    let logs = from_logs::read(paths, rule, progress)?;
    let samples = logs.bare();
    let opts = OpeOptions {
        seed,
        ..OpeOptions::default()
    };
    let rows = policy_labels(&samples, &opts).map_err(|e| {
        CliError::Input(format!(
            "cannot learn from these logs: {e}; {} decision(s) read, {} without an outcome, \
             {} holdout, {} stale signals ({} outcome line(s) read)",
            logs.decisions,
            logs.left_out.no_outcome,
            logs.left_out.holdout,
            logs.left_out.stale_signals,
            logs.read.outcomes
        ))
    })?;
    // The hash names the samples the labels came from (state, action, propensity, reward in
    // reading order), not the log bytes: the same decisions in another envelope hash alike.
    let mut h = Sha256::new();
    for s in &samples {
        h.update(serde_json::to_vec(s).unwrap_or_default());
        h.update(b"\n");
    }
    // The reader admits only propensities in (0, 1] and the success rule only rewards in
    // [0, 1], so every sample is usable and policy_labels keeps them all, in order.
    let relabelled = samples
        .iter()
        .zip(&rows)
        .filter(|(s, (_, a))| s.action != *a)
        .count();
    let span = logs.span_iso();
    let files: Vec<String> = paths
        .iter()
        .map(|p| {
            p.file_name()
                .map_or_else(|| p.display().to_string(), |n| n.to_string_lossy().into())
        })
        .collect();
    let provenance = json!({
        "source": "logs",
        "logs": {
            "files": files,
            "decisions": logs.decisions,
            "rows": rows.len(),
            "left_out": logs.left_out,
            "skipped_lines": logs.read.skipped,
            "from": span.as_ref().map(|s| &s.0),
            "to": span.as_ref().map(|s| &s.1),
            "reward": {
                "statuses": rule.statuses.describe(),
                "slo_ms": rule.slo_ms,
                "reject_reward": rule.reject_reward,
                "definition": rule.describe(),
            },
            "labels": {
                "method": LABELS,
                "relabelled": relabelled,
                "reward_model": opts.reward_model,
                "min_cell_support": opts.min_cell_support,
            },
        },
    });
    let dataset = Dataset {
        rows,
        sha256: hex(&h.finalize()),
        provenance: provenance.as_object().cloned(),
    };
    Ok((dataset, logs))
}

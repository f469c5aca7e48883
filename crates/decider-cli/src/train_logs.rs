//! `decider train --logs`: a training set labelled from logged traffic. The logs are read
//! into samples exactly as `decider ope` reads them ([`crate::from_logs`]: the report's
//! reader, join and reward), each sample's state is labelled with its best supported action
//! by [`crate::ope::learn::policy_labels`] (its docs say how and under which assumptions),
//! and the labelled rows go through the same trainer as a dataset file.
//!
//! The artifact's `training` record says where the rows came from: `source: "logs"` and a
//! `logs` object (input file names, decisions read, rows used, what was left out and why,
//! the date range of the logged decisions, the reward definition and the labelling method).

use crate::dataset::Dataset;
use crate::from_logs::{self, FromLogs};
use crate::ope::gate::{self, GateSample, ValueGate};
use crate::ope::{label, LabelOptions, Labels, OpeOptions};
use crate::report::join::SuccessRule;
use crate::train::Trained;
use crate::CliError;
use decider_core::hex;
use decider_core::{Action, RuleTable};
use serde_json::json;
use sha2::{Digest, Sha256};
use std::path::PathBuf;

/// How the labels are made, for the training record and the model card.
pub const LABELS: &str = "argmax of a boosted-tree reward model q(x, a) (the mean of the \
    five cross-fitting models) over the actions logged in the state's request_type x region \
    cell, fitted on the rows not held out for validation";

/// Reads `paths` into a labelled dataset; `seed` seeds the reward model and chooses the
/// `valid_fraction` of samples the trainer will hold out (the reward model does not see them
/// either, so the gate can score them: [`value_gate`]).
///
/// # Errors
/// A log file that cannot be opened; fewer than two samples with an outcome (the message
/// says how many decisions were read and why they were left out).
pub fn dataset(
    paths: &[PathBuf],
    rule: SuccessRule,
    seed: u64,
    valid_fraction: f64,
    deterministic: Deterministic,
    progress: bool,
) -> Result<(Dataset, FromLogs, Labels), CliError> {
    let logs = from_logs::read(paths, rule, progress)?;
    let samples = logs.bare();
    let opts = OpeOptions {
        seed,
        ..OpeOptions::default()
    };
    let how = LabelOptions {
        holdout: Some((valid_fraction, seed)),
        relabel_deterministic: deterministic == Deterministic::Relabel,
    };
    let labels = label(&samples, &opts, &how).map_err(|e| {
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
    let rows = labels.rows.clone();
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
                "deterministic": deterministic,
                "held_out_from_reward_model": labels.holdout.len(),
            },
        },
    });
    let dataset = Dataset {
        rows,
        sha256: hex::encode(&h.finalize()),
        provenance: provenance.as_object().cloned(),
    };
    Ok((dataset, logs, labels))
}

/// The value gate (module docs of [`crate::ope::gate`]) of a model trained on
/// [`dataset`]'s rows: chooses the threshold and the out-of-distribution bounds from the
/// held-out samples, writes them and the evidence into the artifact (`training.gate`), and
/// names it anew. `None` when the trainer did not hold out the rows `labels` held out
/// (a validation file), which leaves the accuracy gate in place.
///
/// # Errors
/// An artifact that fails validation after the change.
pub fn value_gate(
    trained: &mut Trained,
    labels: &Labels,
    rules: &RuleTable,
    ood: OodBounds,
) -> Result<Option<ValueGate>, String> {
    let h = &trained.held_out;
    if h.index.as_deref() != Some(&labels.holdout[..]) || labels.holdout.is_empty() {
        return Ok(None);
    }
    let samples: Vec<GateSample> = labels
        .holdout
        .iter()
        .map(|&i| {
            let s = &labels.samples[i];
            GateSample {
                state: s.state,
                action: s.action,
                propensity: s.propensity,
                reward: s.reward,
                q_hat: labels.q_hat[i],
            }
        })
        .collect();
    let rules_actions: Vec<Action> = samples
        .iter()
        .map(|s| {
            rules
                .evaluate(&s.state)
                .map_or(Action::RouteA, |h| h.action)
        })
        .collect();
    let Some(g) = gate::choose_threshold(&samples, &h.action, &h.confidence, &rules_actions) else {
        return Ok(None);
    };
    let served: Vec<bool> = h.confidence.iter().map(|&c| c >= g.threshold).collect();
    let art = &mut trained.artifact;
    let (ranges, bounds) = gate::evidence_ranges(
        &art.feature_ranges,
        &samples,
        &served,
        &h.action,
        &rules_actions,
    );
    art.threshold = g.threshold;
    if ood == OodBounds::Evidence {
        art.feature_ranges = ranges;
    }
    if let Some(t) = art.training.as_object_mut() {
        t.insert(
            "gate".into(),
            json!({
                "kind": "value",
                "why": GATE_WHY,
                "threshold": g.threshold,
                "coverage": g.coverage,
                "value": g.value,
                "best": g.best,
                "paired_se": g.paired_se,
                "model_value": g.model_value,
                "rules_value": g.rules_value,
                "held_out": g.n,
                "unsupported": g.unsupported,
                "curve": g.curve,
                "accuracy_threshold": trained.summary["threshold"],
                "ood": ood,
                "ood_bounds": bounds,
            }),
        );
    }
    crate::train::seal(art)?;
    trained.summary["model_version"] = json!(art.model_version);
    trained.summary["threshold"] = json!(art.threshold);
    trained.summary["training"] = art.training.clone();
    Ok(Some(g))
}

/// How deterministic decisions are labelled (`--deterministic`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Deterministic {
    /// By the reward model, like every other decision.
    Relabel,
    /// With the logged action.
    Keep,
}

/// Where the out-of-distribution bounds of a model learned from logs come from
/// (`--ood-bounds`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum OodBounds {
    /// The data's, opened to the field's domain where held-out evidence allows.
    Evidence,
    /// The training data's min and max.
    Data,
}

/// Why a model learned from logs is gated by value, for the record and the card.
pub const GATE_WHY: &str = "labels learned from logs are argmaxes of a reward model, often \
    near-ties between routes that both pay, so accuracy against them says little about what \
    a fallback costs; the threshold is the one whose whole served policy (model above it, \
    rules below) has the highest held-out doubly robust value, moved to the highest coverage \
    within 3.09 paired standard errors of that best (a one-sided 5% test, family-wise over \
    the 50 coverages tried)";

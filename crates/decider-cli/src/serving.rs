//! The policy the Worker would serve, loaded from files: a model artifact, a rule table and
//! the policy flags, composed into one [`decider_core::Decider`]. `decider eval`, `decide` and
//! `ope` share it, so a candidate is evaluated exactly as it would serve.

use crate::CliError;
use clap::Args;
use decider_core::{Decider, Model, ModelSource, Params, RuleTable, Threshold};
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// The flags that name a serving policy.
#[derive(Debug, Clone, Args)]
pub struct ModelArgs {
    /// Model artifact (JSON).
    #[arg(long)]
    pub model: PathBuf,
    /// Rule table for fallbacks (default: the shipped rules/default.json).
    #[arg(long)]
    pub rules: Option<PathBuf>,
    /// Override the artifact's confidence threshold.
    #[arg(long)]
    pub threshold: Option<f64>,
    /// Disable the out-of-distribution check.
    #[arg(long)]
    pub no_ood: bool,
}

/// The rule table at `path`, or the shipped one.
///
/// # Errors
/// A file that cannot be read, or a table that is refused (the message names the file).
pub fn load_rules(path: Option<&Path>) -> Result<RuleTable, CliError> {
    match path {
        None => RuleTable::from_json(decider_core::DEFAULT_RULES_JSON)
            .map_err(|e| CliError::Input(format!("default rules: {e}"))),
        Some(p) => {
            let text = std::fs::read_to_string(p).map_err(|e| CliError::file(p, e))?;
            RuleTable::from_json(&text)
                .map_err(|e| CliError::Input(format!("{}: {e}", p.display())))
        }
    }
}

/// The model and the whole policy the Worker would serve with it (threshold, rules, the
/// out-of-distribution check).
///
/// # Errors
/// An unreadable or refused artifact or rule table, or a threshold outside `[0, 1]` (a usage
/// error).
pub fn load_decider(a: &ModelArgs) -> Result<(Arc<Model>, Decider), CliError> {
    let text = std::fs::read_to_string(&a.model).map_err(|e| CliError::file(&a.model, e))?;
    let model = Model::from_json(&text)
        .map_err(|e| CliError::Input(format!("{}: {e}", a.model.display())))?;
    let model = Arc::new(model);
    let rules = load_rules(a.rules.as_deref())?;
    let threshold = a
        .threshold
        .map(Threshold::new)
        .transpose()
        .map_err(|e| CliError::Usage(format!("--threshold: {e}")))?;
    let params = Params {
        threshold,
        ood_check: !a.no_ood,
        ..Params::default()
    };
    let decider = Decider::new(
        ModelSource::Local(Arc::clone(&model)),
        Some(rules.into()),
        params,
    );
    Ok((model, decider))
}

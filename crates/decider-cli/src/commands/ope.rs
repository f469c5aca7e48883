//! `decider ope`: a candidate model estimated off-policy on logged traffic, served exactly as
//! the Worker would serve it — model, calibrated (or overridden) threshold, rule fallback and
//! out-of-distribution check, through [`decider_core::Decider`] — on the logged decisions
//! that carry a propensity and a joined outcome ([`crate::from_logs`] says which).
//!
//! The candidate is deterministic (a serving configuration without exploration), so its
//! distribution is one-hot on the action `Decider::decide` returns. The estimators, their
//! intervals and the support diagnostics are [`crate::ope`]'s.

use super::reward::RewardArgs;
use crate::from_logs::{self, FromLogs};
use crate::ope::{self, one_hot, Estimate, OpeError, OpeOptions, OpeReport};
use crate::serving::{load_decider, ModelArgs};
use crate::CliError;
use decider_core::{Decider, Gates, State};
use serde_json::{json, Value};
use std::fmt::Write as _;
use std::path::PathBuf;

/// Flags of `decider ope`.
#[derive(Debug, Clone, clap::Args)]
#[command(
    about = "Estimate a candidate model off-policy on logged traffic: logged value, IPS, SNIPS and doubly robust with 95% intervals, effective sample size, support warnings",
    after_help = "Examples:\n  decider ope --logs tail.json --model candidate.json\n  decider ope --logs logpush/*.log.gz --model m.json --slo-ms 250 --json | jq '.dr, .warnings'\n  decider ope --logs newer.log --model m.json --rules rules/default.json --dump rows.jsonl\n\nReads every log format `decider report` reads. Samples: decisions with a joined outcome,\nholdout-arm and stale-signal decisions left out (the rules decide those whatever model\nserves). Reward: as in `decider report` (an outcome's reward, else status < 500 within\n--slo-ms; a reject pays --reject-reward). Exit code 2 for a bad flag or value, 1 when a\nfile cannot be read or the logs hold fewer than two usable samples."
)]
pub struct Args {
    /// Log files, in any mix of formats (as `decider report`); plain or gzip; `-` is stdin.
    #[arg(long, num_args = 1.., required = true, value_name = "FILE")]
    pub logs: Vec<PathBuf>,
    /// The candidate policy.
    #[command(flatten)]
    pub model: ModelArgs,
    /// What an outcome is worth.
    #[command(flatten)]
    pub reward: RewardArgs,
    /// Cross-fitting folds of the reward model (2..=100).
    #[arg(long, default_value_t = OpeOptions::default().folds)]
    pub folds: usize,
    /// Seed of the fold assignment.
    #[arg(long, default_value_t = OpeOptions::default().seed)]
    pub seed: u64,
    /// Print one JSON object.
    #[arg(long)]
    pub json: bool,
    /// Write every sample with its weight terms as JSON lines (state, action, propensity,
    /// reward, target, q_hat, fold).
    #[arg(long, value_name = "FILE")]
    pub dump: Option<PathBuf>,
    /// No progress bar.
    #[arg(long)]
    pub quiet: bool,
}

/// Everything `decider ope` prints.
#[derive(Debug, Clone)]
pub struct OpeOutcome {
    /// The candidate's model version.
    pub model_version: String,
    /// The samples and what the reader saw.
    pub logs: FromLogs,
    /// The estimates.
    pub report: OpeReport,
    /// Warnings about the input and the estimates.
    pub warnings: Vec<String>,
    /// The per-sample rows (what `--dump` writes).
    pub rows: Vec<ope::Row>,
}

/// Runs `decider ope`.
///
/// # Errors
/// A usage error for a flag out of range; an unreadable log, artifact or rule table; fewer
/// than two usable samples.
pub fn run(a: &Args) -> anyhow::Result<()> {
    let out = evaluate(a)?;
    if let Some(p) = &a.dump {
        let f = std::fs::File::create(p).map_err(|e| CliError::file(p, e))?;
        ope::write_dump(std::io::BufWriter::new(f), &out.rows).map_err(|e| CliError::file(p, e))?;
    }
    if a.json {
        println!("{}", to_json(&out));
    } else {
        print!("{}", to_text(&out));
    }
    Ok(())
}

fn options(a: &Args) -> OpeOptions {
    OpeOptions {
        folds: a.folds,
        seed: a.seed,
        ..OpeOptions::default()
    }
}

fn estimate(
    a: &Args,
    decider: &Decider,
    logs: &FromLogs,
) -> Result<(OpeReport, Vec<ope::Row>), CliError> {
    // The gates a logged decision met are left out with it (holdout, stale signals): the
    // candidate decides the rest with none.
    let target = |s: &State| one_hot(decider.decide(s, Gates::default()).action);
    ope::evaluate_rows(&logs.bare(), &target, &options(a)).map_err(|e| match e {
        OpeError::Option { .. } => CliError::Usage(format!("--{e}")),
        OpeError::TooFewSamples { .. } => CliError::Input(format!(
            "{e}: {} decision(s) read, {} left out without an outcome, {} holdout, {} stale \
             signals ({} outcome line(s) read)",
            logs.decisions,
            logs.left_out.no_outcome,
            logs.left_out.holdout,
            logs.left_out.stale_signals,
            logs.read.outcomes
        )),
    })
}

/// Reads the logs and estimates the candidate.
///
/// # Errors
/// As [`run`].
pub fn evaluate(a: &Args) -> Result<OpeOutcome, CliError> {
    let rule = a.reward.rule().map_err(CliError::Usage)?;
    options(a)
        .check()
        .map_err(|e| CliError::Usage(format!("--{e}")))?;
    // Load the candidate before reading what may be gigabytes of logs.
    let (model, decider) = load_decider(&a.model)?;
    let logs = from_logs::read(&a.logs, rule, !a.quiet)?;
    let mut warnings = logs.warnings();
    let (report, rows) = estimate(a, &decider, &logs)?;
    warnings.extend(report.warnings.iter().cloned());
    Ok(OpeOutcome {
        model_version: model.version().to_owned(),
        logs,
        report,
        warnings,
        rows,
    })
}

fn est(e: &Estimate) -> Value {
    json!({"value": e.value, "se": e.se, "ci95": e.ci95})
}

/// The `--json` object: `n`, `logged_value`, `ips`, `snips` (null when undefined), `dr`,
/// `dm` (each `{value, se, ci95}`), `dr_bounds` (`[low, high]`, null without unsupported
/// mass), `ess`, `warnings`, and the details.
pub fn to_json(o: &OpeOutcome) -> Value {
    let r = &o.report;
    let span = o.logs.span_iso();
    json!({
        "model_version": o.model_version,
        "n": r.n,
        "logged_value": est(&r.logged_value),
        "ips": est(&r.ips),
        "snips": r.snips.as_ref().map(est),
        "dr": est(&r.dr),
        "dr_bounds": r.dr_bounds,
        "dm": est(&r.dm),
        "ess": r.ess,
        "warnings": o.warnings,
        "weights": r.weights,
        "support": r.support,
        "reward_model": r.reward_model,
        "refused": r.refused,
        "decisions": o.logs.decisions,
        "left_out": o.logs.left_out,
        "from": span.as_ref().map(|s| &s.0),
        "to": span.as_ref().map(|s| &s.1),
        "reward": {"statuses": o.logs.rule.statuses.describe(), "slo_ms": o.logs.rule.slo_ms, "reject_reward": o.logs.rule.reject_reward},
        "read": {
            "files": o.logs.read.files,
            "lines": o.logs.read.lines,
            "decisions": o.logs.read.decisions,
            "outcomes": o.logs.read.outcomes,
            "skipped": o.logs.read.skipped,
        },
    })
}

fn row(s: &mut String, name: &str, e: &Estimate) {
    let _ = writeln!(
        s,
        "  {name:<15}{:>8.4}   [{:.4}, {:.4}]",
        e.value, e.ci95[0], e.ci95[1]
    );
}

/// The readable summary.
pub fn to_text(o: &OpeOutcome) -> String {
    let r = &o.report;
    let l = &o.logs;
    let mut s = String::new();
    let span = l
        .span_iso()
        .map_or(String::new(), |(a, b)| format!(", {a} to {b}"));
    let _ = writeln!(
        s,
        "candidate {} on {} logged decision(s){span}",
        o.model_version, r.n
    );
    let _ = writeln!(
        s,
        "read {} file(s), {} line(s): {} decision(s), {} outcome line(s), {} line(s) skipped",
        l.read.files,
        l.read.lines,
        l.decisions,
        l.read.outcomes,
        l.read.skipped.total()
    );
    let _ = writeln!(
        s,
        "left out: {} holdout, {} stale signals, {} without outcome",
        l.left_out.holdout, l.left_out.stale_signals, l.left_out.no_outcome
    );
    let _ = writeln!(s, "reward: {}\n", l.rule.describe());
    let _ = writeln!(s, "  {:<15}{:>8}   95% interval", "estimate", "value");
    row(&mut s, "logged policy", &r.logged_value);
    row(&mut s, "IPS", &r.ips);
    match &r.snips {
        Some(e) => row(&mut s, "SNIPS", e),
        None => {
            let _ = writeln!(s, "  {:<15}{:>8}", "SNIPS", "n/a");
        }
    }
    row(&mut s, "DR", &r.dr);
    if let Some([lo, hi]) = r.dr_bounds {
        let _ = writeln!(
            s,
            "  {:<15}{:>8}   [{lo:.4}, {hi:.4}]  (DR, with what the logger could never take valued \
             0 to 1 instead of by the reward model)",
            "DR bounds", ""
        );
    }
    row(&mut s, "DM (model only)", &r.dm);
    let _ = writeln!(
        s,
        "\nESS {:.1} of {} ({:.1}%); mean weight {:.3}, largest {:.1}; the candidate takes the \
         logged action on {} sample(s)",
        r.ess,
        r.n,
        100.0 * r.ess / r.n.max(1) as f64,
        r.weights.mean.value,
        r.weights.max,
        r.weights.matched
    );
    if o.warnings.is_empty() {
        let _ = writeln!(s, "no warnings");
    } else {
        let _ = writeln!(s, "warnings:");
        for w in &o.warnings {
            let _ = writeln!(s, "  - {w}");
        }
    }
    s
}

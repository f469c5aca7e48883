//! `decider train`: the training pipeline ([`crate::train`]) on a dataset file, or on rows
//! labelled from decision logs with `--logs` ([`crate::train_logs`]); writes the artifact, its
//! model card and its accuracy–coverage curve.

use super::reward::RewardArgs;
use crate::gbdt::{Base, GbdtParams};
use crate::serving::load_rules;
use crate::train::{self, TrainOptions};
use crate::{card, dataset, train_logs, CliError};
use anyhow::{anyhow, Context, Result};
use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};
use serde_json::json;
use std::io::IsTerminal;
use std::path::{Path, PathBuf};
use std::time::Instant;

/// Flags of `decider train`.
#[derive(clap::Args)]
#[command(
    about = "Train, early-stop, calibrate and pick the threshold; write artifact, model card and curve",
    after_help = "Examples:\n  decider train --data data/train.jsonl --out model/decision-model.json\n  decider train --data train.jsonl --valid valid.jsonl --seed 7 --target-accuracy 0.995 --out m.json\n  decider train --logs older/*.log.gz --slo-ms 250 --out candidate.json\n\nWith --logs, each logged decision that has an outcome is labelled with the action a reward\nmodel fitted on the logs says pays best among those the logs tried in similar states (the\nlogged action where exploration was off); the model card and the artifact's `training`\nrecord say so (source: logs). Estimate the result with `decider ope` on newer logs."
)]
pub struct Args {
    /// Training dataset (JSONL).
    #[arg(long, required_unless_present = "logs", conflicts_with = "logs")]
    pub data: Option<PathBuf>,
    /// Learn from decision logs instead (any format `decider report` reads; gzip too).
    #[arg(long, num_args = 1.., value_name = "FILE", conflicts_with = "valid")]
    pub logs: Vec<PathBuf>,
    /// With --logs: what an outcome is worth.
    #[command(flatten)]
    pub reward: RewardArgs,
    /// With --logs: label a deterministic decision (propensity 1: the logger could take no
    /// other action there) by the reward model like any other (`relabel`), or keep the logged
    /// action (`keep`).
    #[arg(long, value_enum, default_value_t = train_logs::Deterministic::Relabel, requires = "logs")]
    pub deterministic: train_logs::Deterministic,
    /// With --logs: out-of-distribution bounds from held-out evidence (`evidence`: a numeric
    /// field's bound opens to its domain where the policy is not estimated to pay less than
    /// the rules at that edge) or the training data's min and max (`data`).
    #[arg(long, value_enum, default_value_t = train_logs::OodBounds::Evidence, requires = "logs")]
    pub ood_bounds: train_logs::OodBounds,
    /// Output artifact (JSON). The model card (.md) and curve (.curve.svg) are written beside it.
    #[arg(long)]
    pub out: PathBuf,
    /// Validation dataset; without it, a seeded share of --data is held out.
    #[arg(long)]
    pub valid: Option<PathBuf>,
    /// Seed for the train/validation split.
    #[arg(long, default_value_t = 42)]
    pub seed: u64,
    /// Share held out for validation when --valid is absent.
    #[arg(long, default_value_t = 0.2)]
    pub valid_fraction: f64,
    /// Validation accuracy the model-decided share must keep; sets the threshold.
    #[arg(long, default_value_t = 0.99)]
    pub target_accuracy: f64,
    /// Rule table used for the system-accuracy metrics (default: the shipped table).
    #[arg(long)]
    pub rules: Option<PathBuf>,
    /// Shrinkage per tree.
    #[arg(long, default_value_t = GbdtParams::default().learning_rate)]
    pub learning_rate: f64,
    /// Upper bound on boosting rounds (early stopping usually ends sooner).
    #[arg(long, default_value_t = GbdtParams::default().max_rounds)]
    pub max_rounds: usize,
    /// Leaves per tree.
    #[arg(long, default_value_t = GbdtParams::default().max_leaves)]
    pub max_leaves: usize,
    /// Minimum rows per leaf.
    #[arg(long, default_value_t = GbdtParams::default().min_samples_leaf)]
    pub min_samples_leaf: usize,
    /// What the trees boost from: a softmax regression on the features and 16 tanh units
    /// (`network`, the default), the regression alone (`linear`), or the class priors (the
    /// trees alone). A base draws boundaries that mix features (a score per cluster from
    /// load, queue depth and hour, say), which trees alone draw as staircases that stop
    /// where the training data stops. The artifact gains `model.linear` (and `model.hidden`).
    #[arg(long, value_enum, default_value_t = Base::default())]
    pub base: Base,
    /// Keep the model fitted on the training split instead of refitting on all rows of --data.
    #[arg(long)]
    pub no_refit: bool,
    /// Markdown appended to the model card (e.g. the peer comparison).
    #[arg(long)]
    pub card_extra: Option<PathBuf>,
    /// No progress bar.
    #[arg(long)]
    pub quiet: bool,
    /// Print the training summary as JSON.
    #[arg(long)]
    pub json: bool,
}

/// Runs `decider train`.
///
/// # Errors
/// An unreadable dataset, log file or rule table; logs with too few samples to learn from;
/// options out of range; an output file that cannot be written.
pub fn run(a: &Args) -> Result<()> {
    let started = Instant::now();
    if a.data.is_some() && a.reward.is_set() {
        return Err(CliError::Usage(
            "--success, --slo-ms and --reject-reward score logged outcomes: they go with --logs, not --data".into(),
        )
        .into());
    }
    let mut labels = None;
    let data = match &a.data {
        Some(path) => dataset::read(path)?,
        None => {
            let rule = a.reward.rule().map_err(CliError::Usage)?;
            let (data, logs, l) = train_logs::dataset(
                &a.logs,
                rule,
                a.seed,
                a.valid_fraction,
                a.deterministic,
                !a.quiet,
            )?;
            labels = Some(l);
            if !a.json {
                let span = logs
                    .span_iso()
                    .map_or(String::new(), |(f, t)| format!(", {f} to {t}"));
                println!(
                    "from logs: {} labelled row(s) of {} decision(s){span}",
                    data.rows.len(),
                    logs.decisions
                );
                for w in logs.warnings() {
                    println!("warning: {w}");
                }
            }
            data
        }
    };
    let valid = a.valid.as_deref().map(dataset::read).transpose()?;
    let rules = load_rules(a.rules.as_deref())?;
    let opts = TrainOptions {
        seed: a.seed,
        valid_fraction: a.valid_fraction,
        target_accuracy: a.target_accuracy,
        params: GbdtParams {
            learning_rate: a.learning_rate,
            max_rounds: a.max_rounds,
            max_leaves: a.max_leaves,
            min_samples_leaf: a.min_samples_leaf,
            base: a.base,
            ..GbdtParams::default()
        },
        refit: !a.no_refit,
    };
    let bar = if a.quiet || !std::io::stderr().is_terminal() {
        ProgressBar::hidden()
    } else {
        let b =
            ProgressBar::with_draw_target(Some(a.max_rounds as u64), ProgressDrawTarget::stderr());
        b.set_style(
            ProgressStyle::with_template("{spinner} round {pos}/{len} {bar:30} {msg} [{elapsed}]")
                .expect("static template"),
        );
        b
    };
    let mut trained = train::train(&data, valid.as_ref(), &opts, &rules, |r| {
        bar.set_position(r.round as u64);
        bar.set_message(if r.valid_loss.is_nan() {
            // The refit on all rows has no held-out data to report.
            format!("refit on all rows: loss {:.4}", r.train_loss)
        } else {
            format!(
                "loss {:.4} val_loss {:.4} val_acc {:.2}%",
                r.train_loss,
                r.valid_loss,
                r.valid_accuracy * 100.0
            )
        });
    })
    .map_err(|e| anyhow!(e))?;
    bar.finish_and_clear();
    let gate = match &labels {
        Some(l) => {
            train_logs::value_gate(&mut trained, l, &rules, a.ood_bounds).map_err(|e| anyhow!(e))?
        }
        None => None,
    };
    let art = &trained.artifact;
    std::fs::write(&a.out, train::to_json(art)).with_context(|| format!("{}", a.out.display()))?;
    let svg_path = sibling(&a.out, ".curve.svg");
    let card_path = sibling(&a.out, ".md");
    let title = format!("{}: validation accuracy vs coverage", art.model_version);
    std::fs::write(
        &svg_path,
        card::curve_svg(&trained.curve, art.threshold, &title),
    )
    .with_context(|| format!("{}", svg_path.display()))?;
    let extra = match &a.card_extra {
        Some(p) => std::fs::read_to_string(p).with_context(|| format!("{}", p.display()))?,
        None => String::new(),
    };
    let name = |p: &Path| {
        p.file_name()
            .map_or(String::new(), |s| s.to_string_lossy().to_string())
    };
    let mut written = vec![a.out.clone(), card_path.clone(), svg_path.clone()];
    let value_name = match &gate {
        Some(g) => {
            let value_path = sibling(&a.out, ".value.svg");
            let title = format!("{}: held-out value vs coverage", art.model_version);
            std::fs::write(&value_path, card::value_svg(g, &title))
                .with_context(|| format!("{}", value_path.display()))?;
            written.push(value_path.clone());
            Some(name(&value_path))
        }
        None => None,
    };
    let svg_name = name(&svg_path);
    std::fs::write(
        &card_path,
        card::model_card(art, &svg_name, value_name.as_deref(), &extra),
    )
    .with_context(|| format!("{}", card_path.display()))?;
    let secs = started.elapsed().as_secs_f64();
    if a.json {
        let mut s = trained.summary.clone();
        s["seconds"] = json!(secs);
        s["out"] = json!(a.out);
        println!("{s}");
    } else {
        let m = &art.training["metrics"];
        // A value-gated model's accuracy threshold is the one it does not use.
        let (which, threshold) = match art.training["gate"]["accuracy_threshold"].as_f64() {
            Some(t) => ("accuracy threshold", t),
            None => ("threshold", art.threshold),
        };
        println!(
            "{}: {} rounds in {:.1}s; validation accuracy {:.2}%, {which} {:.3} (coverage {:.1}%, accuracy there {:.2}%), temperature {:.3}",
            art.model_version,
            art.training["rounds"],
            secs,
            m["valid_accuracy"].as_f64().unwrap_or(0.0) * 100.0,
            threshold,
            m["valid_coverage_at_threshold"].as_f64().unwrap_or(0.0) * 100.0,
            m["valid_accuracy_at_threshold"].as_f64().unwrap_or(0.0) * 100.0,
            art.calibration.temperature
        );
        if let Some(g) = &gate {
            println!(
                "value gate: threshold {:.3} (coverage {:.1}%): held-out value {:.4} ± {:.4}; model alone {:.4}, rules alone {:.4}, best {:.4} at coverage {:.1}%",
                g.threshold,
                g.coverage * 100.0,
                g.value.value,
                g.value.se,
                g.model_value.value,
                g.rules_value.value,
                g.best.value,
                g.best.coverage * 100.0
            );
        }
        let names: Vec<String> = written.iter().map(|p| p.display().to_string()).collect();
        println!("wrote {}", names.join(", "));
    }
    Ok(())
}

/// `out` with its extension replaced by `suffix` (`m.json` → `m.md`).
fn sibling(out: &Path, suffix: &str) -> PathBuf {
    let stem = out
        .file_stem()
        .map_or("model".into(), |s| s.to_string_lossy().to_string());
    out.with_file_name(format!("{stem}{suffix}"))
}

//! `decider eval`: a model on a labelled dataset ([`crate::metrics`]), as tables or JSON.

use crate::metrics::{evaluate, Evaluation};
use crate::serving::{load_decider, ModelArgs};
use crate::{card, dataset};
use anyhow::{Context, Result};
use decider_core::ACTIONS;
use std::path::PathBuf;

/// Flags of `decider eval`.
#[derive(clap::Args)]
#[command(
    about = "Evaluate a model on a labelled dataset: accuracy, coverage, fallbacks, confusion, ECE",
    after_help = "Examples:\n  decider eval --model model/decision-model.json --data data/test.jsonl\n  decider eval --model m.json --data test.jsonl --threshold 0.9 --json | jq .system_accuracy"
)]
pub struct Args {
    /// The model to evaluate.
    #[command(flatten)]
    pub model: ModelArgs,
    /// Labelled dataset (JSONL).
    #[arg(long)]
    pub data: PathBuf,
    /// Write the accuracy–coverage curve as SVG.
    #[arg(long)]
    pub curve: Option<PathBuf>,
    /// Print one JSON object.
    #[arg(long)]
    pub json: bool,
}

/// Runs `decider eval`.
///
/// # Errors
/// An unreadable model, rule table or dataset; a curve file that cannot be written.
pub fn run(a: &Args) -> Result<()> {
    let (model, d) = load_decider(&a.model)?;
    let data = dataset::read(&a.data)?;
    let e = evaluate(&model, &d, &data.rows);
    if let Some(p) = &a.curve {
        let title = format!("{} on {}", e.model_version, a.data.display());
        std::fs::write(p, card::curve_svg(&e.curve, e.threshold, &title))
            .with_context(|| format!("{}", p.display()))?;
    }
    if a.json {
        println!("{}", serde_json::to_string(&e)?);
    } else {
        print_eval(&e);
    }
    Ok(())
}

fn print_eval(e: &Evaluation) {
    println!("model {}  rows {}", e.model_version, e.n);
    println!("accuracy (argmax)       {:>7.2}%", e.accuracy * 100.0);
    println!("threshold               {:>8.4}", e.threshold);
    println!("coverage                {:>7.2}%", e.coverage * 100.0);
    println!(
        "accuracy at threshold   {:>7.2}%",
        e.accuracy_at_threshold * 100.0
    );
    println!(
        "system accuracy         {:>7.2}%   (model ≥ threshold, rules below)",
        e.system_accuracy * 100.0
    );
    println!("rules alone             {:>7.2}%", e.rules_accuracy * 100.0);
    println!(
        "fallback rate           {:>7.2}%   {:?}",
        e.fallback_rate * 100.0,
        e.fallback_reasons
    );
    println!("ECE                     {:>8.4}", e.ece);
    println!(
        "\n{:<10}{:>10}{:>10}{:>10}",
        "action", "precision", "recall", "support"
    );
    for name in ACTIONS {
        let m = &e.per_action[name];
        println!(
            "{:<10}{:>9.2}%{:>9.2}%{:>10}",
            name,
            m.precision * 100.0,
            m.recall * 100.0,
            m.support
        );
    }
    println!("\nconfusion (rows: true, columns: predicted)");
    println!(
        "{:<10}{}",
        "",
        ACTIONS
            .iter()
            .map(|a| format!("{a:>9}"))
            .collect::<String>()
    );
    for (i, row) in e.confusion.iter().enumerate() {
        println!(
            "{:<10}{}",
            ACTIONS[i],
            row.iter().map(|c| format!("{c:>9}")).collect::<String>()
        );
    }
}

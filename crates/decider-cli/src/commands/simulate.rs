//! `decider simulate`: a labelled synthetic dataset from the routing simulator
//! ([`crate::simulate`]).

use crate::dataset;
use crate::simulate::{simulate, SimOptions, LABEL_NOISE};
use anyhow::{bail, Result};
use decider_core::ACTIONS;
use serde_json::{json, Value};
use std::path::PathBuf;

/// Flags of `decider simulate`.
#[derive(clap::Args)]
#[command(
    about = "Generate a labelled synthetic dataset from the built-in routing simulator",
    after_help = "Examples:\n  decider simulate --rows 20000 --seed 1 --out data/train.jsonl\n  decider simulate --rows 5000 --seed 9 --shifted --out data/shifted.jsonl"
)]
pub struct Args {
    /// Number of rows.
    #[arg(long)]
    pub rows: usize,
    /// Random seed; the same seed gives the same file.
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
    /// Output JSONL file.
    #[arg(long)]
    pub out: PathBuf,
    /// Shifted traffic: loads above 1, deep queues, low success rates.
    #[arg(long)]
    pub shifted: bool,
    /// Label noise probability.
    #[arg(long, default_value_t = LABEL_NOISE)]
    pub noise: f64,
    /// Print a JSON summary instead of a line of text.
    #[arg(long)]
    pub json: bool,
}

/// Runs `decider simulate`: writes the dataset and prints a summary.
///
/// # Errors
/// `--rows 0`, `--noise` outside [0, 1], or an output file that cannot be written.
pub fn run(a: &Args) -> Result<()> {
    if a.rows == 0 {
        bail!("--rows must be at least 1");
    }
    if !(0.0..=1.0).contains(&a.noise) {
        bail!("--noise must be in [0, 1], got {}", a.noise);
    }
    let rows = simulate(SimOptions {
        rows: a.rows,
        seed: a.seed,
        shifted: a.shifted,
        noise: a.noise,
    });
    dataset::write(&a.out, &rows)?;
    let mut counts = [0usize; 4];
    rows.iter().for_each(|(_, act)| counts[act.index()] += 1);
    if a.json {
        let by: serde_json::Map<String, Value> = ACTIONS
            .iter()
            .zip(counts)
            .map(|(n, c)| (n.to_string(), json!(c)))
            .collect();
        println!(
            "{}",
            json!({"rows": a.rows, "seed": a.seed, "shifted": a.shifted, "out": a.out, "actions": by})
        );
    } else {
        let parts: Vec<String> = ACTIONS
            .iter()
            .zip(counts)
            .map(|(n, c)| format!("{n} {c}"))
            .collect();
        println!(
            "wrote {} rows to {} ({})",
            a.rows,
            a.out.display(),
            parts.join(", ")
        );
    }
    Ok(())
}

//! Developer tool for the off-policy peer check (`bench/ope_peers.py`): simulates logged
//! decisions from a known logging policy, evaluates a known target with
//! `decider_cli::ope::evaluate`, prints the report as JSON on stdout and writes every sample
//! (state, action, propensity, reward, target distribution, cross-fitted q̂, fold) as JSON
//! lines to `--dump`, so another implementation can recompute the estimates from the same
//! numbers.
//!
//! ```text
//! cargo run -p decider-cli --example ope_dump -- \
//!     --logging eps:0.1 --target best_or_reject --rows 20000 --seed 1 --dump /tmp/ope.jsonl
//! ```

use anyhow::{bail, Context, Result};
use clap::Parser;
use decider_cli::ope::synthetic::{self, simulate_logs, Logging};
use decider_cli::ope::{
    evaluate_rows, one_hot, write_dump, OpeOptions, RewardModelKind, TargetPolicy,
};
use decider_core::{Action, State, NUM_ACTIONS};
use std::fs::File;
use std::io::BufWriter;

#[derive(Parser)]
#[command(about = "Simulate logs, evaluate a target off-policy, dump the per-sample terms")]
struct Args {
    /// Logging policy: uniform, greedy, or eps:<ε> (ε-greedy over the routes).
    #[arg(long, default_value = "uniform")]
    logging: String,
    /// Target policy: best, soft, best_or_reject, soft_or_reject, route_a, or logging.
    #[arg(long, default_value = "best")]
    target: String,
    /// Logged decisions to simulate.
    #[arg(long, default_value_t = 20_000)]
    rows: usize,
    /// Seed of the simulation.
    #[arg(long, default_value_t = 1)]
    seed: u64,
    /// Reward model: trees, logistic, or action_mean.
    #[arg(long, default_value = "trees")]
    reward_model: String,
    /// Cross-fitting folds.
    #[arg(long, default_value_t = 5)]
    folds: usize,
    /// Where to write the per-sample JSON lines.
    #[arg(long)]
    dump: std::path::PathBuf,
}

fn logging(name: &str) -> Result<Logging> {
    Ok(match name {
        "uniform" => Logging::UniformRoutes,
        "greedy" => Logging::Greedy,
        _ => match name.strip_prefix("eps:").map(str::parse::<f64>) {
            Some(Ok(eps)) if (0.0..=1.0).contains(&eps) => Logging::EpsilonGreedy(eps),
            _ => bail!("--logging must be uniform, greedy or eps:<0..1>, got {name:?}"),
        },
    })
}

fn route_a(_: &State) -> [f64; NUM_ACTIONS] {
    one_hot(Action::RouteA)
}

fn target(name: &str, logging: Logging) -> Result<Box<dyn TargetPolicy>> {
    Ok(match name {
        "best" => Box::new(synthetic::best),
        "soft" => Box::new(synthetic::soft),
        "best_or_reject" => Box::new(synthetic::best_or_reject),
        "soft_or_reject" => Box::new(synthetic::soft_or_reject),
        "route_a" => Box::new(route_a),
        "logging" => Box::new(logging),
        _ => bail!(
            "--target must be best, soft, best_or_reject, soft_or_reject, route_a or logging, got {name:?}"
        ),
    })
}

fn main() -> Result<()> {
    let args = Args::parse();
    let logging = logging(&args.logging)?;
    let target = target(&args.target, logging)?;
    let reward_model = match args.reward_model.as_str() {
        "trees" => RewardModelKind::Trees,
        "logistic" => RewardModelKind::Logistic,
        "action_mean" => RewardModelKind::ActionMean,
        other => bail!("--reward-model must be trees, logistic or action_mean, got {other:?}"),
    };
    let opts = OpeOptions {
        reward_model,
        folds: args.folds,
        ..OpeOptions::default()
    };
    let samples = simulate_logs(args.rows, args.seed, logging);
    let truth = synthetic::true_value(&samples, target.as_ref());
    let (report, rows) = evaluate_rows(&samples, target.as_ref(), &opts)?;
    let file = File::create(&args.dump)
        .with_context(|| format!("cannot create {}", args.dump.display()))?;
    write_dump(BufWriter::new(file), &rows)
        .with_context(|| format!("cannot write {}", args.dump.display()))?;
    let mut out = serde_json::to_value(&report)?;
    out["true_value"] = serde_json::json!(truth);
    println!("{}", serde_json::to_string_pretty(&out)?);
    Ok(())
}

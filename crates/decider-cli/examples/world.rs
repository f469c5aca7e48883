//! Two weeks of logs from the world of `decider_cli::world` (three origins, local hours, a
//! 300 ms SLO, a regime shift between the weeks), logged by a serving policy with
//! exploration, and the truth no log holds.
//!
//! Writes into `--out DIR`, for each week `N` of 1 and 2:
//! - `weekN.log`: the decision records as the Worker writes them (read them with
//!   `decider train --logs` / `decider ope --logs`, `--slo-ms 300`);
//! - `weekN.truth.jsonl`: one line per decision, in log order: `state`, the logged `action`,
//!   `propensity`, `reward` (as the reader scores it), the true success probability of every
//!   action `q` (route_a, route_b, route_c, reject) and the logger's distribution `logger`;
//!
//! and prints one JSON summary (true value of the logger and of the oracle per week).
//!
//! ```text
//! cargo run --release -p decider-cli --example world -- --seed 1 --out /tmp/world1
//! cargo run --release -p decider-cli --example world -- --seed 1 --no-shift --out /tmp/w
//! ```

use anyhow::{Context, Result};
use clap::Parser;
use decider_cli::world::{self, WorldOptions};
use decider_core::{Decider, Explore, Model, ModelSource, Params, RuleTable};
use serde_json::json;
use std::io::{BufWriter, Write};
use std::path::PathBuf;
use std::sync::Arc;

#[derive(Parser)]
#[command(about = "Write two weeks of logs and truth from the world (decider_cli::world)")]
struct Args {
    /// Seed: the same arguments give the same bytes.
    #[arg(long, default_value_t = 1)]
    seed: u64,
    /// Routed decisions a week.
    #[arg(long, default_value_t = 20_000)]
    decisions: usize,
    /// The logging model (the shipped one by default).
    #[arg(long, default_value = "model/decision-model.json")]
    model: PathBuf,
    /// The logger's exploration share, percent (0..=20).
    #[arg(long, default_value_t = 10.0)]
    explore: f64,
    /// Keep week 2 in week 1's regime (no shift).
    #[arg(long)]
    no_shift: bool,
    /// Output directory (created).
    #[arg(long)]
    out: PathBuf,
}

fn main() -> Result<()> {
    let a = Args::parse();
    let text = std::fs::read_to_string(&a.model)
        .with_context(|| format!("{}: cannot read", a.model.display()))?;
    let model =
        Model::from_json(&text).map_err(|e| anyhow::anyhow!("{}: {e}", a.model.display()))?;
    let rules = RuleTable::from_json(decider_core::DEFAULT_RULES_JSON)
        .map_err(|e| anyhow::anyhow!("shipped rules: {e}"))?;
    let explore =
        Explore::from_percent(a.explore).map_err(|e| anyhow::anyhow!("--explore: {e}"))?;
    let logger = Decider::new(
        ModelSource::Local(Arc::new(model)),
        Some(rules.into()),
        Params {
            explore,
            ..Params::default()
        },
    );
    std::fs::create_dir_all(&a.out).with_context(|| format!("{}", a.out.display()))?;
    let mut summary = serde_json::Map::new();
    for week in 1..=2 {
        let opts = WorldOptions {
            seed: a.seed,
            decisions: a.decisions,
            week,
            shift: !a.no_shift,
        };
        let logged = world::log_week(&logger, &opts).map_err(|e| anyhow::anyhow!(e))?;
        let log_path = a.out.join(format!("week{week}.log"));
        let truth_path = a.out.join(format!("week{week}.truth.jsonl"));
        let mut log = BufWriter::new(std::fs::File::create(&log_path)?);
        let mut truth = BufWriter::new(std::fs::File::create(&truth_path)?);
        for d in &logged {
            writeln!(log, "{}", d.record.to_line())?;
            let line = json!({
                "state": d.record.state.to_value(),
                "action": d.record.action.name(),
                "propensity": d.record.propensity,
                "reward": d.reward,
                "q": d.q,
                "logger": d.logger,
            });
            writeln!(truth, "{line}")?;
        }
        log.flush()?;
        truth.flush()?;
        summary.insert(
            format!("week{week}"),
            json!({
                "decisions": logged.len(),
                "logger_value": world::logger_value(&logged),
                "oracle_value": world::oracle_value(&logged),
                "logged_reward": logged.iter().map(|d| d.reward).sum::<f64>() / logged.len() as f64,
                "shifted": opts.regime() != world::Regime::BASE,
            }),
        );
    }
    println!("{}", serde_json::Value::Object(summary));
    Ok(())
}

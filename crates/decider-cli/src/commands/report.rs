//! `decider report`: the report on decision logs ([`crate::report`]) as tables, one JSON
//! object, or SVG charts.

use super::reward::RewardArgs;
use crate::report::timeline::parse_duration_ms;
use crate::report::{Judging, Report, ReportError};
use std::path::{Path, PathBuf};

/// Flags of `decider report`.
#[derive(Debug, Clone, clap::Args)]
#[command(
    about = "Report on decision logs: success by arm, source, model version, origin and endpoint with 95% intervals; fallbacks by reason and over time; verdicts (retrain, promote, roll back)",
    after_help = "Examples:\n  npx wrangler tail --format json > tail.json   # or: wrangler dev 2>&1 | tee dev.log\n  decider report --logs tail.json\n  decider report --logs logpush/*.log.gz workers-logs-export.json --slo-ms 250 --bucket 5m\n  decider report --logs dev.log --json | jq '.by_arm, .verdicts'\n  decider report --logs tail.json --svg-dir charts/\n\nReads raw wrangler dev/workerd output, wrangler tail --format json, Logpush\nworkers_trace_events NDJSON and Workers Logs exports, plain or gzip. Lines that hold no\nrecord are counted by reason (see `skipped`). Exit code 1 with a one-line error when a file\ncannot be read or an option is out of range."
)]
pub struct Args {
    /// Log files, in any mix of formats: `wrangler dev` output, `wrangler tail --format json`,
    /// Logpush workers_trace_events NDJSON, Workers Logs exports; plain or gzip; `-` is stdin.
    #[arg(long, num_args = 1.., required = true, value_name = "FILE")]
    pub logs: Vec<PathBuf>,
    /// What an outcome is worth.
    #[command(flatten)]
    pub reward: RewardArgs,
    /// Error rate of the comparisons (the control plane's `ROLLOUT_ALPHA`; a recorded rollout
    /// change is judged again at the α its statistics say), in [0.000001, 0.5].
    #[arg(long, value_name = "A", default_value_t = 0.05)]
    pub alpha: f64,
    /// Largest tolerated loss of mean reward before "worse" (`ROLLOUT_MAX_LOSS`), in [0, 1].
    #[arg(long, value_name = "L", default_value_t = 0.0)]
    pub max_loss: f64,
    /// Print one JSON object instead of tables.
    #[arg(long)]
    pub json: bool,
    /// Write the charts (SVG) into this directory.
    #[arg(long, value_name = "DIR")]
    pub svg_dir: Option<PathBuf>,
    /// Width of the fallback-over-time buckets: 30s, 5m, 1h, 1d (default: a round width giving
    /// 20–60 buckets over the span of the logs).
    #[arg(long, value_name = "DURATION", value_parser = parse_duration_ms)]
    pub bucket: Option<i64>,
    /// No progress bar.
    #[arg(long)]
    pub quiet: bool,
}

/// Runs `decider report`.
///
/// # Errors
/// Options out of range, a log file that cannot be opened, a chart that cannot be written.
pub fn run(a: &Args) -> anyhow::Result<()> {
    let rule = a.reward.rule().map_err(ReportError::Arg)?;
    let judging = Judging::new(a.alpha, a.max_loss).map_err(ReportError::Arg)?;
    let report = Report::from_paths(&a.logs, rule, judging, a.bucket, !a.quiet)?;
    if let Some(dir) = &a.svg_dir {
        let named = |e: std::io::Error, p: &Path| {
            std::io::Error::new(e.kind(), format!("{}: {e}", p.display()))
        };
        std::fs::create_dir_all(dir).map_err(|e| named(e, dir))?;
        for (name, svg) in report.charts() {
            let p = dir.join(name);
            std::fs::write(&p, svg).map_err(|e| named(e, &p))?;
        }
    }
    if a.json {
        println!("{}", report.to_json());
    } else {
        print!("{}", report.to_text());
    }
    Ok(())
}

//! `decider report`: decisions and outcomes from the logs — success rates with 95%
//! intervals by source, model version, origin, arm and endpoint; latency percentiles;
//! fallbacks overall, by reason and over time; verdicts on model vs rules, champion vs
//! challenger, and a fallback-rate alarm. Text tables, one JSON object, or SVG charts.
//!
//! Success of a decision: an outcome line's `reward` when it carries one; otherwise 1 when
//! the status is below 500 and (with `--slo-ms`, when the latency is known) the latency is
//! within the SLO, else 0; a rejected request gets `--reject-reward` (0 by default); a
//! decision without any outcome counts in `n` but not in `with_outcome`.

mod charts;
pub mod join;
mod json;
mod render;
pub mod stats;
pub mod timeline;
pub mod verdict;

use crate::logs::{LogReader, ReadOptions, ReadStats, Record};
use clap::Args;
use join::{Aggregates, Join, SuccessRule};
use std::path::{Path, PathBuf};
use thiserror::Error;
use timeline::Bucket;
use verdict::Verdict;

/// Options of `decider report`.
#[derive(Debug, Clone, Args)]
#[command(
    about = "Report on decision logs: success by arm, source, model version, origin and endpoint with 95% intervals; fallbacks by reason and over time; verdicts (retrain, promote, roll back)",
    after_help = "Examples:\n  npx wrangler tail --format json > tail.json   # or: wrangler dev 2>&1 | tee dev.log\n  decider report --logs tail.json\n  decider report --logs logpush/*.log.gz workers-logs-export.json --slo-ms 250 --bucket 5m\n  decider report --logs dev.log --json | jq '.by_arm, .verdicts'\n  decider report --logs tail.json --svg-dir charts/\n\nReads raw wrangler dev/workerd output, wrangler tail --format json, Logpush\nworkers_trace_events NDJSON and Workers Logs exports, plain or gzip. Lines that hold no\nrecord are counted by reason (see `skipped`). Exit code 1 with a one-line error when a file\ncannot be read or an option is out of range."
)]
pub struct ReportArgs {
    /// Log files, in any mix of formats: `wrangler dev` output, `wrangler tail --format json`,
    /// Logpush workers_trace_events NDJSON, Workers Logs exports; plain or gzip; `-` is stdin.
    #[arg(long, num_args = 1.., required = true, value_name = "FILE")]
    pub logs: Vec<PathBuf>,
    /// Latency SLO in ms: a response slower than this is a failure (when its latency is known).
    #[arg(long, value_name = "N")]
    pub slo_ms: Option<f64>,
    /// Reward of a rejected request, 0..=1.
    #[arg(long, value_name = "R", default_value_t = 0.0)]
    pub reject_reward: f64,
    /// Print one JSON object instead of tables.
    #[arg(long)]
    pub json: bool,
    /// Write the charts (SVG) into this directory.
    #[arg(long, value_name = "DIR")]
    pub svg_dir: Option<PathBuf>,
    /// Width of the fallback-over-time buckets: 30s, 5m, 1h, 1d (default: a round width giving
    /// 20–60 buckets over the span of the logs).
    #[arg(long, value_name = "DURATION", value_parser = timeline::parse_duration_ms)]
    pub bucket: Option<i64>,
    /// No progress bar.
    #[arg(long)]
    pub quiet: bool,
}

/// Why the report could not be made.
#[derive(Debug, Error)]
pub enum ReportError {
    /// An option out of range.
    #[error("{0}")]
    Arg(String),
    /// A log file could not be opened, or a chart not written (the message names it).
    #[error(transparent)]
    Io(#[from] std::io::Error),
}

/// Everything the report shows.
#[derive(Debug, Clone)]
pub struct Report {
    /// What the reader saw.
    pub read: ReadStats,
    /// The joined tallies.
    pub agg: Aggregates,
    /// The success definition used.
    pub rule: SuccessRule,
    /// Width of the fallback buckets (ms).
    pub bucket_ms: i64,
    /// Fallbacks over time.
    pub buckets: Vec<Bucket>,
    /// `--bucket` was too fine for the span and was doubled until it fit.
    pub bucket_widened: bool,
    /// One line: the action of each verdict.
    pub verdict: String,
    /// The verdicts.
    pub verdicts: Vec<Verdict>,
}

impl Report {
    /// Reads `paths` and builds the report.
    ///
    /// # Errors
    /// A file that cannot be opened.
    pub fn from_paths<P: AsRef<Path>>(
        paths: &[P],
        rule: SuccessRule,
        bucket_ms: Option<i64>,
        progress: bool,
    ) -> Result<Report, ReportError> {
        let mut reader = LogReader::new(ReadOptions {
            progress,
            ..ReadOptions::default()
        });
        let mut join = Join::new(bucket_ms);
        reader.read_paths(paths, &mut |r: Record| {
            join.add(&r);
        })?;
        Ok(Report::from_join(reader.into_stats(), join, rule))
    }

    /// Finishes a join fed by the caller.
    pub fn from_join(read: ReadStats, join: Join, rule: SuccessRule) -> Report {
        let mut agg = join.finish(&rule);
        let timeline = agg.timeline.take();
        let ((bucket_ms, buckets), widened) = timeline
            .map(|t| (t.buckets(), t.widened()))
            .unwrap_or(((0, Vec::new()), false));
        let (verdict, verdicts) = verdict::verdicts(&agg, &buckets);
        Report {
            read,
            agg,
            rule,
            bucket_ms,
            buckets,
            bucket_widened: widened,
            verdict,
            verdicts,
        }
    }
}

/// Runs `decider report`.
///
/// # Errors
/// Options out of range, a log file that cannot be opened, a chart that cannot be written.
pub fn run(a: &ReportArgs) -> Result<(), ReportError> {
    let rule = SuccessRule::new(a.slo_ms, a.reject_reward).map_err(ReportError::Arg)?;
    let report = Report::from_paths(&a.logs, rule, a.bucket, !a.quiet)?;
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

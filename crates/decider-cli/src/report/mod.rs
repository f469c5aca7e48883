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
use join::{Aggregates, Join, SuccessRule};
use std::path::Path;
use thiserror::Error;
use timeline::Bucket;
pub use verdict::Judging;
use verdict::Verdict;

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
    /// The comparison's error rate and tolerated loss.
    pub judging: Judging,
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
        judging: Judging,
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
        Ok(Report::from_join(reader.into_stats(), join, rule, judging))
    }

    /// Finishes a join fed by the caller.
    pub fn from_join(read: ReadStats, join: Join, rule: SuccessRule, judging: Judging) -> Report {
        let mut agg = join.finish(&rule);
        let timeline = agg.timeline.take();
        let ((bucket_ms, buckets), widened) = timeline
            .map(|t| (t.buckets(), t.widened()))
            .unwrap_or(((0, Vec::new()), false));
        let (verdict, verdicts) = verdict::verdicts(&agg, &buckets, judging);
        Report {
            read,
            agg,
            rule,
            judging,
            bucket_ms,
            buckets,
            bucket_widened: widened,
            verdict,
            verdicts,
        }
    }
}

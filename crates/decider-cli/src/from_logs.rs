//! Logged decisions as off-policy samples: the records `decider report` reads (same reader),
//! joined to their outcomes by its join and rewarded by its success rule, as (state, action,
//! propensity, reward) [`Sample`]s for `decider ope` and `decider train --logs`.
//!
//! Which decisions become samples, and why the others do not:
//! - **holdout arm** (or `fallback_reason: holdout`) and **stale signals**: left out. The
//!   Worker sends these to the rules before it asks any model, so a candidate model would
//!   not decide them either; keeping them would mix the rules' value into both the logged
//!   value and the candidate's, shrinking the difference the estimate is for.
//! - **no outcome joined**: left out (no reward). A `/v1/decide` caller that never reports
//!   outcomes makes its decisions invisible here; if outcomes are missing for reasons tied to
//!   the outcome itself (callers that report only failures), every estimate is biased.
//! - everything else (champion and challenger arms, model and rule decisions, exploration):
//!   a sample, with the propensity the Worker logged.

use crate::logs::{format_iso_s, Arm, LogReader, ReadOptions, ReadStats, Record};
use crate::ope::Sample;
use crate::report::join::{id_key, Join, SuccessRule};
use decider_core::FallbackReason;
use serde::Serialize;
use std::path::Path;

/// One sample and when it was decided.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Logged {
    /// The sample.
    pub sample: Sample,
    /// When the decision was made, ms since the Unix epoch.
    pub ts_ms: i64,
}

/// Decisions read that did not become samples, by reason.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct LeftOut {
    /// Holdout arm: the rules decide there, whatever model serves.
    pub holdout: u64,
    /// Decided by the rules because the backend signals were stale.
    pub stale_signals: u64,
    /// No outcome joined, so no reward.
    pub no_outcome: u64,
}

/// What [`read`] found.
#[derive(Debug, Clone)]
pub struct FromLogs {
    /// The samples, in the order their decisions were read.
    pub samples: Vec<Logged>,
    /// What the reader saw (lines, records, skipped lines by reason).
    pub read: ReadStats,
    /// Distinct decisions read (duplicated ids count once).
    pub decisions: u64,
    /// Decisions left out, by reason.
    pub left_out: LeftOut,
    /// The reward definition used.
    pub rule: SuccessRule,
}

impl FromLogs {
    /// Earliest and latest decision time among the samples, ms since the epoch.
    pub fn span_ms(&self) -> Option<(i64, i64)> {
        let first = self.samples.iter().map(|l| l.ts_ms).min()?;
        let last = self.samples.iter().map(|l| l.ts_ms).max()?;
        Some((first, last))
    }

    /// [`FromLogs::span_ms`] as ISO-8601 UTC seconds.
    pub fn span_iso(&self) -> Option<(String, String)> {
        self.span_ms()
            .map(|(a, b)| (format_iso_s(a), format_iso_s(b)))
    }

    /// The bare samples.
    pub fn bare(&self) -> Vec<Sample> {
        self.samples.iter().map(|l| l.sample).collect()
    }

    /// Warnings about the input itself (the estimators add their own): unreadable or bad
    /// records, decisions without outcomes, nothing to learn from.
    pub fn warnings(&self) -> Vec<String> {
        let mut w = Vec::new();
        let s = &self.read.skipped;
        let bad: u64 = [
            crate::logs::SkipReason::BadRecord,
            crate::logs::SkipReason::TooLong,
            crate::logs::SkipReason::ReadError,
        ]
        .iter()
        .map(|r| s.get(*r))
        .sum();
        if bad > 0 {
            let samples: Vec<&str> = self
                .read
                .samples
                .iter()
                .filter(|m| !m.contains(": not_json: ") && !m.contains(": not_a_record: "))
                .map(String::as_str)
                .collect();
            w.push(format!(
                "{bad} malformed or unreadable record(s) skipped ({} bad_record, {} too_long, \
                 {} read_error), e.g. {}",
                s.get(crate::logs::SkipReason::BadRecord),
                s.get(crate::logs::SkipReason::TooLong),
                s.get(crate::logs::SkipReason::ReadError),
                samples.first().copied().unwrap_or("-")
            ));
        }
        if self.read.outcomes == 0 && self.decisions > 0 && self.left_out.no_outcome > 0 {
            w.push(format!(
                "no outcomes joined for {} decision(s): /v1/decide callers report outcomes with \
                 POST /v1/outcome, routed requests carry theirs; only decisions with an outcome \
                 are samples",
                self.left_out.no_outcome
            ));
        } else if self.left_out.no_outcome > 0 {
            w.push(format!(
                "{} of {} decision(s) have no outcome joined and are left out; if outcomes go \
                 missing for reasons tied to the outcome, every estimate is biased",
                self.left_out.no_outcome, self.decisions
            ));
        }
        w
    }
}

/// Reads `paths` (any log format the report reads, `-` is stdin) into samples; see the
/// module docs for which decisions become samples.
///
/// # Errors
/// A file that cannot be opened (named in the message).
pub fn read<P: AsRef<Path>>(
    paths: &[P],
    rule: SuccessRule,
    progress: bool,
) -> std::io::Result<FromLogs> {
    let mut reader = LogReader::new(ReadOptions {
        progress,
        ..ReadOptions::default()
    });
    let mut join = Join::new(None);
    let mut drafts: Vec<(u64, Logged)> = Vec::new();
    let mut left_out = LeftOut::default();
    let mut decisions = 0u64;
    reader.read_paths(paths, &mut |r: Record<'_>| {
        if !join.add(&r) {
            return;
        }
        let Record::Decision(d) = r else { return };
        decisions += 1;
        if d.arm == Arm::Holdout || d.fallback_reason == Some(FallbackReason::Holdout) {
            left_out.holdout += 1;
        } else if d.fallback_reason == Some(FallbackReason::StaleSignals) {
            left_out.stale_signals += 1;
        } else {
            let sample = Sample {
                state: d.state,
                action: d.action,
                propensity: d.propensity,
                reward: f64::NAN,
            };
            drafts.push((
                id_key(&d.decision_id),
                Logged {
                    sample,
                    ts_ms: d.ts_ms,
                },
            ));
        }
    })?;
    let mut samples = Vec::with_capacity(drafts.len());
    for (key, mut l) in drafts {
        match join.reward_of(key, &rule) {
            Some(r) => {
                l.sample.reward = r;
                samples.push(l);
            }
            None => left_out.no_outcome += 1,
        }
    }
    Ok(FromLogs {
        samples,
        read: reader.into_stats(),
        decisions,
        left_out,
        rule,
    })
}

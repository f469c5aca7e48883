//! What [`write()`](super::write) is asked for ([`Options`]: lines, seed, [`Scenario`],
//! [`Format`]) and what it reports ([`Written`]), with the small helpers the generator and
//! the envelopes share.

use crate::logs::format_iso_s;
use crate::CliError;
use decider_core::record::OutcomeRecord;
use decider_core::FallbackReason;
use serde::Serialize;

/// Time of the first decision: 2026-12-02T10:00:00Z, ms since the Unix epoch.
pub const START_MS: i64 = 1_796_205_600_000;

/// Longest log time [`Options`] may span, seconds (100 years): times stay in four-digit
/// years and in range of the µs clock.
const MAX_SPAN_S: f64 = 100.0 * 365.25 * 86_400.0;

/// The champion's model version.
pub const CHAMPION: &str = "m-2026-11-20";
/// The challenger's model version.
pub const CHALLENGER: &str = "m-2026-12-01";
/// The rule table's version.
pub const RULES: &str = "rules-2026-11-01";

/// Share of champion and challenger decisions falling back, by reason, before a scenario
/// changes it (`stale_signals` only on the routing endpoint).
pub(super) const REASONS: [(FallbackReason, f64); 6] = [
    (FallbackReason::LowConfidence, 0.050),
    (FallbackReason::OutOfDistribution, 0.012),
    (FallbackReason::StaleSignals, 0.008),
    (FallbackReason::ModelError, 0.004),
    (FallbackReason::ModelTimeout, 0.004),
    (FallbackReason::ModelUnavailable, 0.002),
];

/// The shape the statistics take.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Scenario {
    /// Every arm as good as the others: nothing for `decider report` to act on.
    Steady,
    /// The holdout arm (rules) succeeds more often than the model's arms: retrain.
    RulesBetter,
    /// The challenger fails more often than the champion: roll it back.
    ChallengerWorse,
    /// Out-of-distribution fallbacks jump twelvefold over the last tenth of the run.
    OodSpike,
}

impl Scenario {
    /// All scenarios, in documentation order.
    pub const ALL: [Scenario; 4] = [
        Scenario::Steady,
        Scenario::RulesBetter,
        Scenario::ChallengerWorse,
        Scenario::OodSpike,
    ];

    /// Name on the command line.
    pub fn name(self) -> &'static str {
        match self {
            Scenario::Steady => "steady",
            Scenario::RulesBetter => "rules-better",
            Scenario::ChallengerWorse => "challenger-worse",
            Scenario::OodSpike => "ood-spike",
        }
    }

    /// The scenario named `name`.
    pub fn parse_name(name: &str) -> Option<Scenario> {
        Scenario::ALL.into_iter().find(|s| s.name() == name)
    }
}

/// The log source whose envelope each line is written in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Format {
    /// Raw lines, as `wrangler dev` and workerd print them.
    Dev,
    /// `wrangler tail --format json`: one pretty-printed event per line.
    Tail,
    /// Logpush `workers_trace_events`: one JSON event per line (NDJSON).
    Logpush,
    /// A Workers Logs export: one JSON array of events, records parsed into `source`.
    WorkersLogs,
}

impl Format {
    /// All formats, in documentation order.
    pub const ALL: [Format; 4] = [
        Format::Dev,
        Format::Tail,
        Format::Logpush,
        Format::WorkersLogs,
    ];

    /// Name on the command line.
    pub fn name(self) -> &'static str {
        match self {
            Format::Dev => "dev",
            Format::Tail => "tail",
            Format::Logpush => "logpush",
            Format::WorkersLogs => "workers-logs",
        }
    }

    /// The format named `name`.
    pub fn parse_name(name: &str) -> Option<Format> {
        Format::ALL.into_iter().find(|f| f.name() == name)
    }
}

/// What to write.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Options {
    /// Log lines to write (records and noise; a line is one event in an envelope format).
    pub lines: u64,
    /// Seed: the same options give the same bytes.
    pub seed: u64,
    /// The statistics' shape.
    pub scenario: Scenario,
    /// The envelope.
    pub format: Format,
    /// Decisions per second of log time.
    pub rate: f64,
    /// Share of noise lines, `[0, 1)`.
    pub noise: f64,
}

impl Default for Options {
    fn default() -> Self {
        Options {
            lines: 10_000,
            seed: 1,
            scenario: Scenario::Steady,
            format: Format::Dev,
            rate: 200.0,
            noise: 0.08,
        }
    }
}

impl Options {
    /// Checks the options once, before anything is written.
    ///
    /// # Errors
    /// [`CliError::Usage`] naming the first option out of range.
    pub fn check(&self) -> Result<(), CliError> {
        if self.lines < 1 {
            return Err(CliError::Usage(format!(
                "lines must be at least 1, got {}",
                self.lines
            )));
        }
        if !(self.rate.is_finite() && self.rate > 0.0) {
            return Err(CliError::Usage(format!(
                "rate must be a finite number > 0, got {}",
                self.rate
            )));
        }
        if self.lines as f64 / self.rate > MAX_SPAN_S {
            return Err(CliError::Usage(format!(
                "rate must give a log shorter than 100 years, got {} lines at {}/s",
                self.lines, self.rate
            )));
        }
        if !(0.0..1.0).contains(&self.noise) {
            return Err(CliError::Usage(format!(
                "noise must be in [0, 1), got {}",
                self.noise
            )));
        }
        Ok(())
    }
}

/// What [`write()`](super::write) wrote, line by line (before envelopes).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct Written {
    /// Lines written: the sum of all the counts below except the subsets of `outcomes`.
    pub lines: u64,
    /// Decision records (distinct decisions).
    pub decisions: u64,
    /// Outcome records, `duplicate_outcomes` and `orphan_outcomes` included.
    pub outcomes: u64,
    /// Outcome records repeating an earlier one for the same decision.
    pub duplicate_outcomes: u64,
    /// Outcome records for decisions these logs do not hold.
    pub orphan_outcomes: u64,
    /// `[wrangler:info] POST /v1/decide 200 OK (3ms)` lines.
    pub request_lines: u64,
    /// Start-up and reload banners.
    pub banners: u64,
    /// Empty lines.
    pub blank_lines: u64,
    /// Decision records cut short (a process that crashed mid-line).
    pub truncated: u64,
    /// Records with one field out of range (a decision's state, an outcome's reward).
    pub bad_records: u64,
}

/// An outcome's log line as the Worker writes it.
pub(super) fn outcome_line(o: OutcomeRecord) -> String {
    o.to_line()
}

/// `2026-12-02T10:00:00.123Z` for `ms` since the epoch: the reader's own formatter (whole
/// seconds) with the milliseconds the Worker's timestamps carry.
pub(super) fn iso_ms(ms: i64) -> String {
    let mut s = format_iso_s(ms);
    s.pop();
    s.push_str(&format!(".{:03}Z", ms.rem_euclid(1000)));
    s
}

/// `x` rounded to `places` decimals, as log lines carry measured values.
pub(super) fn round(x: f64, places: i32) -> f64 {
    let k = 10f64.powi(places);
    (x * k).round() / k
}

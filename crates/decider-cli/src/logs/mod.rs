//! Reading decision and outcome records (log_version 1) out of whatever the logs came in:
//! raw `wrangler dev`/workerd output, `wrangler tail --format json` (pretty-printed events
//! over several lines), Logpush `workers_trace_events` NDJSON, Workers Logs exports and
//! query results (records parsed into `source`, possibly one JSON array), any of them
//! gzip-compressed (detected by magic bytes, not by name).
//!
//! The reader streams: it holds one line (or one multi-line JSON value) at a time and hands
//! each to decider-core's record reader ([`decider_core::record::Reader`]), the one codec of
//! the records the Worker writes: it finds the records in the unit's envelopes, checks them
//! as the Worker's own `POST /v1/outcome` does, and counts everything that is not a good
//! record in [`ReadStats`] by [`SkipReason`], with a few sample messages (`file:line: …`,
//! naming the field of a bad record). The first outcome read for a decision counts; later
//! ones are skipped as `duplicate_outcome`. This module adds what reading files needs:
//! gzip, lines, multi-line values, size limits, progress. No input makes it panic; only a
//! file that cannot be opened is an error.
//!
//! ```
//! use decider_cli::logs::{LogReader, ReadOptions, Record};
//! let text = r#"[wrangler:info] Ready on http://127.0.0.1:8787
//! {"log_version":1,"event":"outcome","ts":"2026-12-02T10:00:00.000Z","decision_id":"d1","reward":1}
//! "#;
//! let mut reader = LogReader::new(ReadOptions::default());
//! let mut rewards = Vec::new();
//! reader.read_stream("example", text.as_bytes(), &mut |r: Record| {
//!     if let Record::Outcome(o) = r { rewards.push(o.reward); }
//! }).unwrap();
//! assert_eq!(rewards, [Some(1.0)]);
//! assert_eq!(reader.stats().skipped.total(), 1); // the [wrangler:info] line
//! ```

mod frame;
mod multi;

pub use decider_core::record::{
    DecisionRecord, Endpoint, OutcomeRecord, ReadStats, Record, RouteOutcome, SkipReason, Skipped,
    LOG_VERSION,
};
pub use decider_core::rollout::Arm;
pub use decider_core::time::{format_iso_s, parse_iso_ms};
pub use frame::LogReader;

/// Reader settings.
#[derive(Debug, Clone)]
pub struct ReadOptions {
    /// Longest line or multi-line JSON value read; longer ones are skipped as
    /// [`SkipReason::TooLong`] without being held in memory.
    pub max_value_bytes: usize,
    /// Sample messages kept per skip reason.
    pub samples_per_reason: usize,
    /// Draw a progress bar by bytes read (only when stderr is a terminal).
    pub progress: bool,
}

impl Default for ReadOptions {
    fn default() -> Self {
        ReadOptions {
            max_value_bytes: 64 << 20,
            samples_per_reason: 3,
            progress: false,
        }
    }
}

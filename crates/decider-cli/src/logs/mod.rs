//! Reading decision and outcome records (log_version 1) out of whatever the logs came in:
//! raw `wrangler dev`/workerd output, `wrangler tail --format json` (pretty-printed events
//! over several lines), Logpush `workers_trace_events` NDJSON, Workers Logs exports and
//! query results (records parsed into `source`, possibly one JSON array), any of them
//! gzip-compressed (detected by magic bytes, not by name).
//!
//! The reader streams: it holds one line (or one multi-line JSON value) at a time and hands
//! each record to a visitor as decider-core's own [`Record`], the type the Worker writes.
//! Everything that is not a record is counted in [`ReadStats`] by [`SkipReason`], with a
//! few sample messages (`file:line: …`, naming the field of a bad record). No input makes
//! it panic; only a file that cannot be opened is an error.
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
mod raw;
mod record;
mod time;

pub use decider_core::record::{
    Arm, DecisionRecord, Endpoint, OutcomeRecord, Record, RouteOutcome, LOG_VERSION,
};
pub use frame::LogReader;
pub use record::{parse_reason, BadField};
pub use time::{format_iso_s, parse_iso_ms};

use serde::Serialize;

/// Why a line (or a JSON value) yielded no record.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum SkipReason {
    /// No JSON object where one was expected, or malformed JSON (binary noise, truncated
    /// lines, `[wrangler:info]` chatter, nesting beyond the parser's limit).
    NotJson,
    /// Valid JSON holding no decision or outcome record (other log lines, other events).
    NotARecord,
    /// Claims to be a record (`event` and `log_version`) but a field is missing or wrong.
    BadRecord,
    /// A line or a multi-line value longer than [`ReadOptions::max_value_bytes`].
    TooLong,
    /// The input stopped being readable (corrupt or truncated gzip, I/O error): the rest
    /// of that file is not read.
    ReadError,
}

impl SkipReason {
    /// All reasons, in report order.
    pub const ALL: [SkipReason; 5] = [
        SkipReason::NotJson,
        SkipReason::NotARecord,
        SkipReason::BadRecord,
        SkipReason::TooLong,
        SkipReason::ReadError,
    ];

    /// Key in `--json` output.
    pub fn name(self) -> &'static str {
        match self {
            SkipReason::NotJson => "not_json",
            SkipReason::NotARecord => "not_a_record",
            SkipReason::BadRecord => "bad_record",
            SkipReason::TooLong => "too_long",
            SkipReason::ReadError => "read_error",
        }
    }
}

/// Skipped units by reason.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Skipped([u64; 5]);

impl Skipped {
    /// Count for one reason.
    pub fn get(&self, r: SkipReason) -> u64 {
        self.0[r as usize]
    }
    /// All reasons together.
    pub fn total(&self) -> u64 {
        self.0.iter().sum()
    }
    fn add(&mut self, r: SkipReason) {
        self.0[r as usize] += 1;
    }
}

impl Serialize for Skipped {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        use serde::ser::SerializeMap;
        let mut m = s.serialize_map(Some(SkipReason::ALL.len() + 1))?;
        for r in SkipReason::ALL {
            m.serialize_entry(r.name(), &self.get(r))?;
        }
        m.serialize_entry("total", &self.total())?;
        m.end()
    }
}

/// What the reader saw.
#[derive(Debug, Clone, Default, Serialize)]
pub struct ReadStats {
    /// Inputs read.
    pub files: u64,
    /// Bytes read from the inputs (compressed bytes for gzip files).
    pub bytes: u64,
    /// Physical lines read (after decompression). Blank lines count here and nowhere else.
    pub lines: u64,
    /// Decision records handed to the visitor.
    pub decisions: u64,
    /// Outcome records handed to the visitor.
    pub outcomes: u64,
    /// Units that yielded no record, by reason. A unit is a line, or one JSON value when
    /// a value spans several lines (pretty-printed tail events, elements of a JSON array).
    pub skipped: Skipped,
    /// The first few messages per reason, `file:line: message`.
    pub samples: Vec<String>,
}

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

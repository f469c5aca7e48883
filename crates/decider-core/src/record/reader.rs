//! The lenient [`Reader`]: finds records in whatever the logs came in and skips, counts and
//! names everything else.
//!
//! Where records come from, [`Reader::read_unit`] takes one line (or one multi-line JSON
//! value) of: raw `wrangler dev`/workerd output (a record after a prefix), `wrangler tail
//! --format json` events (records in `logs[].message[]`), Logpush `workers_trace_events`
//! (`Logs[].Message[]`), Workers Logs exports and query results (the parsed record in
//! `source`, its text in `$metadata.message`, wrapped in `result`/`events`, or a JSON
//! array of them). Each record found is read by the rules of [`super::read`].

use super::Record;
use crate::json::{parse_first, FieldError};
use serde::Deserialize;
use serde_json::Value;
use std::collections::HashSet;
use std::hash::{DefaultHasher, Hash, Hasher};

/// Why a unit of input (a line, or one JSON value spanning several lines) yielded no record.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum SkipReason {
    /// No JSON object where one was expected, or malformed JSON (binary noise, truncated
    /// lines, `[wrangler:info]` chatter, nesting beyond the parser's limit).
    NotJson,
    /// Valid JSON holding no decision or outcome record (other log lines, other events).
    NotARecord,
    /// Claims to be a record but a field is missing or wrong.
    BadRecord,
    /// An outcome for a decision that already has one: the first outcome read counts.
    DuplicateOutcome,
    /// A line or a multi-line value longer than the reader's limit.
    TooLong,
    /// The input stopped being readable (corrupt or truncated gzip, I/O error): the rest
    /// of that input is not read.
    ReadError,
}

impl SkipReason {
    /// All reasons, in report order.
    pub const ALL: [SkipReason; 6] = [
        SkipReason::NotJson,
        SkipReason::NotARecord,
        SkipReason::BadRecord,
        SkipReason::DuplicateOutcome,
        SkipReason::TooLong,
        SkipReason::ReadError,
    ];

    /// Key in `--json` output.
    pub fn name(self) -> &'static str {
        match self {
            SkipReason::NotJson => "not_json",
            SkipReason::NotARecord => "not_a_record",
            SkipReason::BadRecord => "bad_record",
            SkipReason::DuplicateOutcome => "duplicate_outcome",
            SkipReason::TooLong => "too_long",
            SkipReason::ReadError => "read_error",
        }
    }
}

/// Skipped units (and records) by reason.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Skipped([u64; 6]);

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

impl serde::Serialize for Skipped {
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

/// What a reader saw.
#[derive(Debug, Clone, Default, serde::Serialize)]
pub struct ReadStats {
    /// Inputs read.
    pub files: u64,
    /// Bytes read from the inputs (compressed bytes for gzip files).
    pub bytes: u64,
    /// Physical lines read (after decompression). Blank lines count here and nowhere else.
    pub lines: u64,
    /// Decision records handed on.
    pub decisions: u64,
    /// Outcome records handed on.
    pub outcomes: u64,
    /// Rollout records handed on.
    pub rollouts: u64,
    /// What yielded no record, by reason: units (a line, or one JSON value when a value
    /// spans several lines), and single records inside a unit (a bad record, a duplicate
    /// outcome).
    pub skipped: Skipped,
    /// The first few messages per reason, `at: reason: message`.
    pub samples: Vec<String>,
}

/// How deep envelopes may nest (tail event → message string → record is depth 2).
const MAX_ENVELOPE_DEPTH: u32 = 6;

/// The lenient reader: finds the records in each unit of input, hands on the good ones,
/// and skips, counts and names everything else ([`ReadStats`]). The first outcome read for
/// a `decision_id` counts; later ones are skipped as [`SkipReason::DuplicateOutcome`]. No
/// input makes it panic.
#[derive(Debug, Clone)]
pub struct Reader {
    stats: ReadStats,
    samples_per_reason: u64,
    /// 64-bit hashes of the decision ids that have an outcome (two ids colliding, about
    /// n²/2⁶⁵, would drop the second's outcome).
    outcome_ids: HashSet<u64>,
}

impl Default for Reader {
    fn default() -> Reader {
        Reader::new(3)
    }
}

/// The key a decision id is remembered by (a 64-bit hash, the same on every run).
pub fn id_key(id: &str) -> u64 {
    let mut h = DefaultHasher::new();
    id.hash(&mut h);
    h.finish()
}

impl Reader {
    /// A reader that keeps `samples_per_reason` messages per skip reason.
    pub fn new(samples_per_reason: usize) -> Reader {
        Reader {
            stats: ReadStats::default(),
            samples_per_reason: samples_per_reason as u64,
            outcome_ids: HashSet::new(),
        }
    }

    /// What has been read so far (the caller adds files, bytes and lines).
    pub fn stats(&self) -> &ReadStats {
        &self.stats
    }

    /// The counters, for the caller's framing to update (files, bytes, lines).
    pub fn stats_mut(&mut self) -> &mut ReadStats {
        &mut self.stats
    }

    /// The counters, consuming the reader.
    pub fn into_stats(self) -> ReadStats {
        self.stats
    }

    /// Counts a skipped unit (or record) and keeps its message among the samples.
    pub fn skip(&mut self, reason: SkipReason, at: &str, msg: &str) {
        let kept = self.stats.skipped.get(reason);
        self.stats.skipped.add(reason);
        if kept < self.samples_per_reason {
            let mut msg = msg.to_owned();
            if msg.len() > 200 {
                let cut = (0..=200)
                    .rev()
                    .find(|&i| msg.is_char_boundary(i))
                    .unwrap_or(0);
                msg.truncate(cut);
                msg.push('…');
            }
            self.stats
                .samples
                .push(format!("{at}: {}: {msg}", reason.name()));
        }
    }

    /// One unit of input (`at` names it in messages, e.g. `file:line`): a record line
    /// (possibly after a prefix such as a timestamp), an envelope of records, or a JSON array
    /// of either. Each good record goes to `visit`; the return value says what the unit held.
    pub fn read_unit(&mut self, text: &[u8], at: &str, visit: &mut dyn FnMut(Record)) -> Found {
        let mut found = Found::default();
        self.unit(text, at, &mut found, visit);
        found
    }

    fn unit(&mut self, text: &[u8], at: &str, tally: &mut Found, visit: &mut dyn FnMut(Record)) {
        let text = text.trim_ascii();
        let start = if text.first() == Some(&b'[') {
            Some(0)
        } else {
            text.iter().position(|&c| c == b'{')
        };
        let Some(start) = start else {
            return self.skip(SkipReason::NotJson, at, "no JSON object on the line");
        };
        let value = match std::str::from_utf8(&text[start..]) {
            Ok(s) => first_value(s),
            Err(e) => Err(format!("not UTF-8: {e}")),
        };
        let value = match value {
            Ok(v) => v,
            // A line starting with `[` may be chatter like `[wrangler:info] …` before an
            // object: try from the first brace.
            Err(_) if start == 0 && text.contains(&b'{') => {
                let brace = text.iter().position(|&c| c == b'{').unwrap_or(0);
                match std::str::from_utf8(&text[brace..]).map_err(|e| e.to_string()) {
                    Ok(s) => match first_value(s) {
                        Ok(v) => v,
                        Err(e) => return self.skip(SkipReason::NotJson, at, &e),
                    },
                    Err(e) => return self.skip(SkipReason::NotJson, at, &e),
                }
            }
            Err(e) => return self.skip(SkipReason::NotJson, at, &e),
        };
        self.walk(&value.value, value.twice.as_ref(), 0, tally, at, visit);
        if tally.records == 0 && tally.duplicates == 0 && tally.bad.is_empty() {
            self.skip(
                SkipReason::NotARecord,
                at,
                "no decision, outcome or rollout record in this JSON value",
            );
        }
    }

    /// A JSON value and the envelopes in it. `twice`: the value was read from text that
    /// names a key twice (the error saying where), so every record it holds is refused.
    fn walk(
        &mut self,
        v: &Value,
        twice: Option<&FieldError>,
        depth: u32,
        tally: &mut Found,
        at: &str,
        visit: &mut dyn FnMut(Record),
    ) {
        match v {
            Value::Array(items) => {
                for item in items.iter().filter(|i| !i.is_array()) {
                    self.walk(item, twice, depth, tally, at, visit);
                }
            }
            Value::String(s) => {
                // A console message: our line, possibly after a prefix.
                if let Some(brace) = s.find('{') {
                    if let Ok(inner) = first_value(&s[brace..]) {
                        self.walk(&inner.value, inner.twice.as_ref(), depth, tally, at, visit);
                    }
                }
            }
            Value::Object(map) => {
                if Record::claimed(v) {
                    return self.record(v, twice, tally, at, visit);
                }
                if depth >= MAX_ENVELOPE_DEPTH {
                    return;
                }
                // `wrangler tail`: logs[].message[]; Logpush: Logs[].Message[].
                for (logs, message) in [("logs", "message"), ("Logs", "Message")] {
                    if let Some(Value::Array(entries)) = map.get(logs) {
                        for entry in entries {
                            if let Some(msg) = entry.get(message) {
                                self.walk(msg, twice, depth + 1, tally, at, visit);
                            }
                        }
                    }
                }
                // Workers Logs: the parsed record in `source`, its raw text in
                // `$metadata.message` (read only when `source` held no record, good or bad,
                // or a record would count twice).
                let before = tally.seen();
                if let Some(source) = map.get("source").filter(|s| !s.is_string()) {
                    self.walk(source, twice, depth + 1, tally, at, visit);
                }
                if tally.seen() == before {
                    if let Some(text) = map.get("$metadata").and_then(|m| m.get("message")) {
                        if text.is_string() {
                            self.walk(text, twice, depth + 1, tally, at, visit);
                        }
                    }
                }
                for inner in ["result", "events"] {
                    if let Some(inner) = map.get(inner) {
                        self.walk(inner, twice, depth + 1, tally, at, visit);
                    }
                }
            }
            _ => {}
        }
    }

    fn record(
        &mut self,
        v: &Value,
        twice: Option<&FieldError>,
        tally: &mut Found,
        at: &str,
        visit: &mut dyn FnMut(Record),
    ) {
        let read = match twice {
            Some(e) => Err(e.clone()),
            None => Record::from_value(v),
        };
        match read {
            Ok(Record::Outcome(o)) if !self.outcome_ids.insert(id_key(&o.decision_id)) => {
                tally.duplicates += 1;
                self.skip(
                    SkipReason::DuplicateOutcome,
                    at,
                    &format!(
                        "decision_id {} already has an outcome (the first one read counts)",
                        o.decision_id
                    ),
                );
            }
            Ok(r) => {
                tally.records += 1;
                match r {
                    Record::Decision(_) => self.stats.decisions += 1,
                    Record::Outcome(_) => self.stats.outcomes += 1,
                    Record::Rollout(_)
                    | Record::RolloutJudged(_)
                    | Record::RolloutAlarm(_)
                    | Record::RolloutAlarmCleared(_) => self.stats.rollouts += 1,
                }
                visit(r);
            }
            Err(e) => {
                self.skip(SkipReason::BadRecord, at, &format!("{}: {e}", e.code()));
                tally.bad.push(e);
            }
        }
    }
}

/// What one unit of input held.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Found {
    /// Good records handed on.
    pub records: u32,
    /// Outcomes skipped as duplicates.
    pub duplicates: u32,
    /// Why each bad record was refused.
    pub bad: Vec<FieldError>,
}

impl Found {
    fn seen(&self) -> (u32, u32, usize) {
        (self.records, self.duplicates, self.bad.len())
    }
}

/// A unit's JSON value, and whether its text names a key twice.
struct Unit {
    value: Value,
    /// The refusal of text that names a key twice: the value is then serde_json's reading
    /// (the last of each key), only to find the records it claims to hold and refuse them.
    twice: Option<FieldError>,
}

/// The first JSON value of `s`; text after it is ignored (a log line may carry a suffix).
/// Read by the one rule of every body and line ([`parse_first`]), keys given twice included.
fn first_value(s: &str) -> Result<Unit, String> {
    match parse_first(s) {
        Ok(value) => Ok(Unit { value, twice: None }),
        Err(e @ FieldError::Duplicate { .. }) => {
            let mut de = serde_json::Deserializer::from_slice(s.as_bytes());
            let value = Value::deserialize(&mut de).map_err(|e| e.to_string())?;
            Ok(Unit {
                value,
                twice: Some(e),
            })
        }
        Err(e) => Err(e.to_string()),
    }
}

//! Reading records back: the one set of rules a record must obey, applied to the Worker's
//! `POST /v1/outcome` bodies and to every log line a reader meets, and the lenient
//! [`Reader`] that finds records in whatever the logs came in and skips, counts and names
//! everything else.
//!
//! A body is read strictly (an unknown key or a `null` is an error: a client must learn of
//! its typo). A log line is read leniently where the writer may change without a new
//! `log_version` (unknown keys are ignored, a `null` member is an absent one: the Worker
//! writes long lines without their nulls), and exactly where a learner depends on it: the
//! state, action, propensity, rewards and statuses have the ranges the Worker writes, and a
//! record outside them is refused naming its field.
//!
//! Where records come from, [`Reader::read_unit`] takes one line (or one multi-line JSON
//! value) of: raw `wrangler dev`/workerd output (a record after a prefix), `wrangler tail
//! --format json` events (records in `logs[].message[]`), Logpush `workers_trace_events`
//! (`Logs[].Message[]`), Workers Logs exports and query results (the parsed record in
//! `source`, its text in `$metadata.message`, wrapped in `result`/`events`, or a JSON
//! array of them).

use super::{
    clip_to, valid_decision_id, AlarmKind, AlarmRecord, Attempt, DecisionRecord, Endpoint,
    ErrorKind, JudgedRecord, OutcomeRecord, Record, RequestInfo, RolloutRecord, RouteOutcome,
    RoutingKey, Why, CALLER_STATUS, ECHO_BYTES, LOG_VERSION, MAX_ID_LEN, ORIGIN_STATUS, TEXT_BYTES,
};
use crate::actions::Action;
use crate::json::{parse_first, parse_text, short, FieldError, Fields, Nulls};
use crate::policy::{FallbackReason, ProbabilityMap, Shadow, Source};
use crate::rollout::{Arm, Phase, Setting};
use crate::state::State;
use crate::time::parse_iso_ms;
use serde::Deserialize;
use serde_json::Value;
use std::collections::HashSet;
use std::hash::{DefaultHasher, Hash, Hasher};

const ACTION_NAMES: &str = "one of route_a, route_b, route_c, reject";
const SOURCE_NAMES: &str = "one of model, rules, default";
const REASON_NAMES: &str = "one of low_confidence, model_error, model_timeout, \
    model_unavailable, out_of_distribution, stale_signals, holdout";
const ERROR_NAMES: &str =
    "one of timeout, connect, upstream_status, bad_upstream, no_origin, body_idle";

/// The events a record may be.
pub const EVENTS: [&str; 6] = [
    "decision",
    "outcome",
    "rollout",
    "rollout_judged",
    "rollout_alarm",
    "rollout_alarm_cleared",
];

/// The members of a caller's outcome body.
const OUTCOME_BODY: [&str; 4] = ["decision_id", "reward", "status", "latency_ms"];

impl OutcomeRecord {
    /// Validates a `POST /v1/outcome` body: `{"decision_id", "reward"}` with a reward in
    /// `[0, 1]`, or `{"decision_id", "status", "latency_ms"?}` with what the caller observed.
    /// `ts` stamps the record. The same rules as an outcome line in the logs
    /// ([`Record::from_value`]), read strictly.
    ///
    /// # Errors
    /// A [`FieldError`] naming the field: malformed JSON, a key given twice, an unknown key,
    /// a missing or invalid `decision_id` ([`valid_decision_id`]), a reward outside `[0, 1]`,
    /// a status outside [`CALLER_STATUS`], a negative latency, neither a reward nor a status,
    /// or both (`status` is named: an outcome is a reward or a status, not two answers).
    pub fn from_body(bytes: &[u8], ts: String) -> Result<OutcomeRecord, FieldError> {
        let v = parse_text(bytes)?;
        let f = Fields::of(&v, "body", Nulls::Strict)?;
        f.only(&OUTCOME_BODY)?;
        outcome(&f, ts)
    }
}

/// A `decision_id`, required and valid.
fn decision_id(f: &Fields<'_>) -> Result<String, FieldError> {
    let id = f.require(f.str("decision_id")?, "decision_id")?;
    if !valid_decision_id(id) {
        return Err(FieldError::OutOfRange {
            field: f.path("decision_id"),
            range: "1 to 128 characters of A-Z a-z 0-9 . _ : -",
            got: short(&Value::String(id.chars().take(MAX_ID_LEN / 2).collect())),
        });
    }
    Ok(id.to_owned())
}

/// An outcome's members, after its `decision_id`: the rules of both the body and the line.
fn outcome(f: &Fields<'_>, ts: String) -> Result<OutcomeRecord, FieldError> {
    let decision_id = decision_id(f)?;
    let reward = f.num("reward", Some(1.0), "a number 0..=1")?;
    let status = f.int(
        "status",
        u64::from(*CALLER_STATUS.start()),
        u64::from(*CALLER_STATUS.end()),
        "an integer 100..=599",
    )?;
    let latency_ms = f.num("latency_ms", None, "a number >= 0")?;
    match (reward, status) {
        // A latency alone says nothing of success.
        (None, None) => {
            return Err(FieldError::MissingOneOf {
                fields: &["reward", "status"],
            })
        }
        // Two answers to one question: which one counts would be the reader's guess.
        (Some(_), Some(_)) => {
            return Err(FieldError::Conflict {
                field: f.path("status"),
                other: "reward",
            })
        }
        _ => Ok(()),
    }?;
    Ok(OutcomeRecord {
        log_version: LOG_VERSION,
        ts,
        decision_id,
        reward,
        status: status.map(|s| s as u16),
        latency_ms,
    })
}

impl Record {
    /// Whether a JSON value claims to be a record: an object with an `event` of
    /// [`EVENTS`] and a `log_version`. It is then a good record or a bad one.
    pub fn claimed(v: &Value) -> bool {
        v.get("log_version").is_some()
            && v.get("event")
                .and_then(Value::as_str)
                .is_some_and(|e| EVENTS.contains(&e))
    }

    /// Reads one record line as the Worker writes it (text, nothing around it).
    ///
    /// # Errors
    /// [`FieldError::Json`] for malformed text, else as [`Record::from_value`].
    pub fn from_line(text: &str) -> Result<Record, FieldError> {
        Record::from_value(&parse_text(text.as_bytes())?)
    }

    /// Validates a record.
    ///
    /// # Errors
    /// A [`FieldError`] naming the field (`state.hour`, `outcome.attempts[1].status`): a
    /// `log_version` other than [`LOG_VERSION`], an `event` other than `decision` or
    /// `outcome`, a malformed `ts`, an invalid `decision_id`, an outcome as
    /// [`OutcomeRecord::from_body`] refuses it, or a decision whose state, action, source,
    /// arm, probabilities, propensity or routed outcome is not one the Worker writes.
    pub fn from_value(v: &Value) -> Result<Record, FieldError> {
        let f = Fields::of(v, "record", Nulls::Absent)?;
        let version = f.int("log_version", 0, u64::MAX, "a version number")?;
        if f.require(version, "log_version")? != u64::from(LOG_VERSION) {
            return Err(FieldError::OutOfRange {
                field: "log_version".into(),
                range: "1 (the version this reader knows)",
                got: short(f.get("log_version").unwrap_or(&Value::Null)),
            });
        }
        let ts = f.require(f.str("ts")?, "ts")?;
        if parse_iso_ms(ts).is_err() {
            return Err(FieldError::OutOfRange {
                field: "ts".into(),
                range: TIME_SHAPE,
                got: short(&Value::String(ts.chars().take(64).collect())),
            });
        }
        let ts = ts.to_owned();
        match f.require(f.str("event")?, "event")? {
            "outcome" => Ok(Record::Outcome(outcome(&f, ts)?)),
            "decision" => Ok(Record::Decision(decision(&f, ts)?)),
            "rollout" => Ok(Record::Rollout(rollout_change(&f, ts)?)),
            "rollout_judged" => Ok(Record::RolloutJudged(rollout_judged(&f, ts)?)),
            "rollout_alarm" => Ok(Record::RolloutAlarm(rollout_alarm(&f, ts)?)),
            "rollout_alarm_cleared" => Ok(Record::RolloutAlarmCleared(rollout_alarm(&f, ts)?)),
            other => Err(FieldError::OutOfRange {
                field: "event".into(),
                range: "decision, outcome, rollout, rollout_judged, rollout_alarm or rollout_alarm_cleared",
                got: short(&Value::String(other.chars().take(64).collect())),
            }),
        }
    }
}

const SETTING_SHAPE: &str = "a percent 0..=100 or \"rules\"";
const WHY_NAMES: &str =
    "one of better, worse, rules_beat_model, baked, pause, resume, abort, promote, restart";
const PHASE_NAMES: &str = "one of no_challenger, ramping, baking, promoted, rolled_back";
const KIND_NAMES: &str = "one of holdout, fallback, excess_outcomes";
const TIME_SHAPE: &str = "an ISO-8601 UTC time like 2026-12-02T10:00:00.123Z";

/// A rollout setting: a percent or `"rules"`.
fn setting(f: &Fields<'_>, field: &str) -> Result<Setting, FieldError> {
    let v = f.require(f.get(field), field)?;
    Setting::from_value(v).ok_or_else(|| FieldError::OutOfRange {
        field: f.path(field),
        range: SETTING_SHAPE,
        got: short(v),
    })
}

/// The judge's JSON object under `field`, when present.
fn payload(f: &Fields<'_>, field: &str) -> Result<Option<Value>, FieldError> {
    match f.get(field) {
        None => Ok(None),
        Some(v @ Value::Object(_)) => Ok(Some(v.clone())),
        Some(v) => Err(FieldError::WrongType {
            field: f.path(field),
            expected: "an object",
            got: crate::json::json_type(v).to_owned(),
        }),
    }
}

fn version(f: &Fields<'_>) -> Result<Option<String>, FieldError> {
    Ok(f.str("challenger_version")?.map(|v| clip_to(v, ECHO_BYTES)))
}

fn text(f: &Fields<'_>) -> Result<String, FieldError> {
    Ok(f.str("text")?
        .map_or_else(String::new, |t| clip_to(t, 2 * TEXT_BYTES)))
}

fn rollout_change(f: &Fields<'_>, ts: String) -> Result<RolloutRecord, FieldError> {
    let from = setting(f, "from")?;
    let to = setting(f, "to")?;
    let why = f.require(f.name("why", WHY_NAMES, Why::parse_name)?, "why")?;
    let step_since = f.str("step_since")?;
    if let Some(t) = step_since.filter(|t| parse_iso_ms(t).is_err()) {
        return Err(FieldError::OutOfRange {
            field: "step_since".into(),
            range: TIME_SHAPE,
            got: short(&Value::String(t.chars().take(64).collect())),
        });
    }
    Ok(RolloutRecord {
        log_version: LOG_VERSION,
        ts,
        challenger_version: version(f)?,
        from,
        to,
        why,
        text: text(f)?,
        step_since: step_since.map(str::to_owned),
        statistics: payload(f, "statistics")?,
        reason: f.str("reason")?.map(|r| clip_to(r, TEXT_BYTES)),
    })
}

fn rollout_judged(f: &Fields<'_>, ts: String) -> Result<JudgedRecord, FieldError> {
    Ok(JudgedRecord {
        log_version: LOG_VERSION,
        ts,
        challenger_version: version(f)?,
        phase: f.require(f.name("phase", PHASE_NAMES, Phase::parse_name)?, "phase")?,
        setting: setting(f, "setting")?,
        judgement: payload(f, "judgement")?,
    })
}

fn rollout_alarm(f: &Fields<'_>, ts: String) -> Result<AlarmRecord, FieldError> {
    Ok(AlarmRecord {
        log_version: LOG_VERSION,
        ts,
        challenger_version: version(f)?,
        kind: f.require(f.name("kind", KIND_NAMES, AlarmKind::parse_name)?, "kind")?,
        text: text(f)?,
        evidence: payload(f, "evidence")?,
    })
}

fn decision(f: &Fields<'_>, ts: String) -> Result<DecisionRecord, FieldError> {
    let decision_id = decision_id(f)?;
    let endpoint = f.name("endpoint", "one of decide, route", Endpoint::parse_name)?;
    let endpoint = f.require(endpoint, "endpoint")?;
    let state = State::from_logged(f.require(f.object("state", "state.")?, "state")?)?;
    let action = f.require(
        f.name("action", ACTION_NAMES, Action::parse_name)?,
        "action",
    )?;
    let source = f.require(
        f.name("source", SOURCE_NAMES, Source::parse_name)?,
        "source",
    )?;
    let fallback_reason = f.name("fallback_reason", REASON_NAMES, FallbackReason::parse_name)?;
    let confidence = f.num("confidence", Some(1.0), "a number 0..=1")?;
    let probabilities = match f.object("probabilities", "probabilities.")? {
        None => None,
        Some(p) => {
            let get = |k: &str| {
                let v = p.num(k, Some(1.0), "a number 0..=1")?;
                p.require(v, k)
            };
            Some(ProbabilityMap {
                route_a: get("route_a")?,
                route_b: get("route_b")?,
                route_c: get("route_c")?,
                reject: get("reject")?,
            })
        }
    };
    let propensity = f.num("propensity", Some(1.0), "a number in (0, 1]")?;
    let propensity = f.require(propensity, "propensity")?;
    if propensity <= 0.0 {
        return Err(FieldError::OutOfRange {
            field: "propensity".into(),
            range: "a number in (0, 1]",
            got: propensity.to_string(),
        });
    }
    let arm = f.require(
        f.name(
            "arm",
            "one of champion, challenger, holdout",
            Arm::parse_name,
        )?,
        "arm",
    )?;
    let encoder_version = f.int("encoder_version", 0, u64::from(u32::MAX), "an integer >= 0")?;
    let decision_us = f.int("decision_us", 0, u64::MAX, "an integer >= 0")?;
    Ok(DecisionRecord {
        log_version: LOG_VERSION,
        ts,
        decision_id,
        request_id: f.str("request_id")?.map(str::to_owned),
        endpoint,
        state,
        action,
        source,
        fallback_reason,
        rule: f.str("rule")?.map(str::to_owned),
        confidence,
        probabilities,
        propensity,
        explored: f.bool("explored")?.unwrap_or(false),
        model_version: f.str("model_version")?.map(str::to_owned),
        rules_version: f.str("rules_version")?.map(str::to_owned),
        // Absent in hand-written or trimmed lines: 0 and "" say "not recorded".
        encoder_version: encoder_version.map_or(0, |v| v as u32),
        backend: f.str("backend")?.unwrap_or_default().to_owned(),
        arm,
        // Absent: the request had a key (lines written before the field say nothing else).
        key: f
            .name("key", RoutingKey::NAMES, RoutingKey::parse_name)?
            .unwrap_or_default(),
        decision_us: decision_us.unwrap_or(0),
        outcome: f
            .object("outcome", "outcome.")?
            .map(|o| route_outcome(&o))
            .transpose()?,
        request: f
            .object("request", "request.")?
            .map(|r| request_info(&r))
            .transpose()?,
        shadow: f
            .object("shadow", "shadow.")?
            .map(|s| -> Result<Shadow, FieldError> {
                Ok(Shadow {
                    model_action: s.name("model_action", ACTION_NAMES, Action::parse_name)?,
                    agree: s.bool("agree")?.unwrap_or(false),
                })
            })
            .transpose()?,
        detail: f.str("detail")?.map(str::to_owned),
    })
}

/// An origin's status in a routed outcome.
fn origin_status(f: &Fields<'_>) -> Result<Option<u16>, FieldError> {
    let s = f.int(
        "status",
        u64::from(*ORIGIN_STATUS.start()),
        u64::from(*ORIGIN_STATUS.end()),
        "an integer 100..=999",
    )?;
    Ok(s.map(|s| s as u16))
}

fn route_outcome(o: &Fields<'_>) -> Result<RouteOutcome, FieldError> {
    let attempts = match o.get("attempts") {
        None => Vec::new(),
        Some(Value::Array(items)) => items
            .iter()
            .enumerate()
            .map(|(i, item)| {
                let prefix = format!("outcome.attempts[{i}].");
                let a = Fields::of(item, "attempt", Nulls::Absent)
                    .map_err(|_| FieldError::WrongType {
                        field: format!("outcome.attempts[{i}]"),
                        expected: "an object",
                        got: short(item),
                    })?
                    .prefixed(&prefix);
                Ok(Attempt {
                    origin: a.require(
                        a.name("origin", ACTION_NAMES, Action::parse_name)?,
                        "origin",
                    )?,
                    status: origin_status(&a)?,
                    error: a.name("error", ERROR_NAMES, ErrorKind::parse_name)?,
                    latency_ms: a.num("latency_ms", None, "a number >= 0")?,
                })
            })
            .collect::<Result<_, FieldError>>()?,
        Some(other) => {
            return Err(FieldError::WrongType {
                field: o.path("attempts"),
                expected: "an array",
                got: short(other),
            })
        }
    };
    Ok(RouteOutcome {
        origin: o.name("origin", ACTION_NAMES, Action::parse_name)?,
        status: origin_status(o)?,
        latency_ms: o.num("latency_ms", None, "a number >= 0")?,
        failover: o.name("failover", ACTION_NAMES, Action::parse_name)?,
        origin_down: o.name("origin_down", ACTION_NAMES, Action::parse_name)?,
        error: o.name("error", ERROR_NAMES, ErrorKind::parse_name)?,
        attempts,
    })
}

fn request_info(r: &Fields<'_>) -> Result<RequestInfo, FieldError> {
    Ok(RequestInfo {
        method: r.require(r.str("method")?, "method")?.to_owned(),
        country: r.str("country")?.map(str::to_owned),
        continent: r.str("continent")?.map(str::to_owned),
        signals_age_s: r.num("signals_age_s", None, "a number >= 0")?,
        signals_detail: r.str("signals_detail")?.map(str::to_owned),
    })
}

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
            let mut de = serde_json::Deserializer::from_str(s);
            let value = Value::deserialize(&mut de).map_err(|e| e.to_string())?;
            Ok(Unit {
                value,
                twice: Some(e),
            })
        }
        Err(e) => Err(e.to_string()),
    }
}

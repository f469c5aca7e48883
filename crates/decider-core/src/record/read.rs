//! Reading records back: the one set of rules a record must obey, applied to the Worker's
//! `POST /v1/outcome` bodies and to every log line a reader meets (the lenient
//! [`Reader`](super::Reader), in `reader.rs`, finds the lines in whatever the logs came in).
//!
//! A body is read strictly (an unknown key or a `null` is an error: a client must learn of
//! its typo). A log line is read leniently where the writer may change without a new
//! `log_version` (unknown keys are ignored, a `null` member is an absent one: the Worker
//! writes long lines without their nulls), and exactly where a learner depends on it: the
//! state, action, propensity, rewards and statuses have the ranges the Worker writes, and a
//! record outside them is refused naming its field.

use super::{
    clip_to, valid_decision_id, AlarmKind, AlarmRecord, Attempt, DecisionRecord, Endpoint,
    ErrorKind, JudgedRecord, OutcomeRecord, Record, RequestInfo, RolloutRecord, RouteOutcome,
    RoutingKey, Why, CALLER_STATUS, ECHO_BYTES, LOG_VERSION, MAX_ID_LEN, ORIGIN_STATUS, TEXT_BYTES,
};
use crate::actions::Action;
use crate::json::{parse_text, short, FieldError, Fields, Nulls};
use crate::policy::{FallbackReason, ProbabilityMap, Shadow, Source};
use crate::rollout::{Arm, Phase, Setting};
use crate::state::State;
use crate::time::parse_iso_ms;
use serde_json::Value;

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

//! The state a decision is made on: parsing and validation.
//!
//! Parsing goes through [`serde_json::Value`] rather than a derived `Deserialize` so that
//! every rejection names the field and the rule it broke (`"region_id must be 0..=9,
//! got 12"`), unknown fields are refused (a typo must not be silently ignored), and
//! integral numbers written as `3.0` are still accepted as integers.

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};
use thiserror::Error;

/// Largest valid `request_type`.
pub const MAX_REQUEST_TYPE: u8 = 5;
/// Number of regions; `region_id` is `0..NUM_REGIONS`.
pub const NUM_REGIONS: usize = 10;
/// The state's field names, in schema order.
pub const STATE_FIELDS: [&str; 6] = [
    "request_type",
    "region_id",
    "current_load",
    "recent_success_rate",
    "queue_depth",
    "hour",
];

/// A validated state. Every value is finite and within its documented range; `hour`
/// is resolved (callers supply the current UTC hour when the input has none).
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct State {
    /// Request class, `0..=5`.
    pub request_type: u8,
    /// Source region, `0..=9`.
    pub region_id: u8,
    /// Load of the serving system; nominally `0..=1`, bursts above 1 are legal.
    pub current_load: f64,
    /// Recent success ratio, `0..=1`.
    pub recent_success_rate: f64,
    /// Requests queued, `>= 0`.
    pub queue_depth: f64,
    /// Hour of day, UTC, `0..=23`.
    pub hour: u8,
}

/// Live backend signals: the three state fields the edge does not know by itself.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Signals {
    /// Load of the serving system, `>= 0`.
    pub current_load: f64,
    /// Recent success ratio, `0..=1`.
    pub recent_success_rate: f64,
    /// Requests queued, `>= 0`.
    pub queue_depth: f64,
}

/// Why a state (or a signals object) was refused. Every variant except [`StateError::Json`]
/// and [`StateError::NotObject`] names the offending field.
#[derive(Debug, Clone, PartialEq, Error)]
pub enum StateError {
    /// The text is not valid JSON.
    #[error("malformed json at line {line} column {column}: {message}")]
    Json {
        /// 1-based line of the error.
        line: usize,
        /// 1-based column of the error.
        column: usize,
        /// The parser's description.
        message: String,
        /// The key path whose value is not JSON, when that is the trouble: a `NaN` or
        /// `Infinity` literal, or a number beyond f64 (`state.current_load`).
        field: Option<String>,
    },
    /// The value is not a JSON object.
    #[error("{what} must be a json object, got {got}")]
    NotObject {
        /// What was expected to be an object (`state`, `signals`, `body`).
        what: &'static str,
        /// The JSON type that was found.
        got: &'static str,
    },
    /// A required field is absent.
    #[error("{field} is required")]
    Missing {
        /// The missing field.
        field: String,
    },
    /// A field that the schema does not know.
    #[error("unknown field {field}, expected one of: {expected}")]
    Unknown {
        /// The unknown field.
        field: String,
        /// The accepted field names.
        expected: String,
    },
    /// A field of the wrong JSON type (including non-integral numbers for integer fields).
    #[error("{field} must be {expected}, got {got}")]
    WrongType {
        /// The field.
        field: String,
        /// What the schema wants.
        expected: &'static str,
        /// What was found.
        got: String,
    },
    /// A number outside its valid range.
    #[error("{field} must be {range}, got {got}")]
    OutOfRange {
        /// The field.
        field: String,
        /// The valid range, e.g. `0..=9`.
        range: &'static str,
        /// The value found.
        got: String,
    },
}

impl StateError {
    /// The field this error is about, when there is one.
    pub fn field(&self) -> Option<&str> {
        match self {
            StateError::Missing { field }
            | StateError::Unknown { field, .. }
            | StateError::WrongType { field, .. }
            | StateError::OutOfRange { field, .. } => Some(field),
            StateError::Json { field, .. } => field.as_deref(),
            StateError::NotObject { .. } => None,
        }
    }

    /// A stable machine-readable code for the error.
    pub fn code(&self) -> &'static str {
        match self {
            StateError::Json { .. } => "invalid_json",
            StateError::NotObject { .. } => "invalid_type",
            StateError::Missing { .. } => "missing_field",
            StateError::Unknown { .. } => "unknown_field",
            StateError::WrongType { .. } => "invalid_type",
            StateError::OutOfRange { .. } => "out_of_range",
        }
    }

    /// The same error with its field prefixed by `prefix.` (e.g. `state.region_id`).
    pub fn within(self, prefix: &str) -> StateError {
        let p = |f: String| format!("{prefix}.{f}");
        match self {
            StateError::Missing { field } => StateError::Missing { field: p(field) },
            StateError::Unknown { field, expected } => StateError::Unknown {
                field: p(field),
                expected,
            },
            StateError::WrongType {
                field,
                expected,
                got,
            } => StateError::WrongType {
                field: p(field),
                expected,
                got,
            },
            StateError::OutOfRange { field, range, got } => StateError::OutOfRange {
                field: p(field),
                range,
                got,
            },
            other => other,
        }
    }

    /// A serde_json parse error as [`StateError::Json`]: position kept, the parser's
    /// trailing " at line L column C" dropped from the message.
    pub fn from_serde(e: &serde_json::Error) -> StateError {
        let full = e.to_string();
        // serde_json appends " at line L column C"; keep only the description.
        let message = match full.rfind(" at line ") {
            Some(i) => full[..i].to_string(),
            None => full,
        };
        StateError::Json {
            line: e.line(),
            column: e.column(),
            message,
            field: None,
        }
    }
}

/// The JSON type name of a value, for error messages.
pub fn json_type(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "boolean",
        Value::Number(_) => "number",
        Value::String(_) => "string",
        Value::Array(_) => "array",
        Value::Object(_) => "object",
    }
}

/// Parses JSON text. When the text is JSON but for one number — a `NaN` or `Infinity`
/// literal, or a number beyond f64 — the error names the key that holds it, so a client
/// learns which field to fix rather than only a line and column.
pub(crate) fn parse_text(bytes: &[u8]) -> Result<Value, StateError> {
    serde_json::from_slice(bytes).map_err(|e| {
        let mut err = StateError::from_serde(&e);
        if let StateError::Json { field, message, .. } = &mut err {
            let at = byte_offset(bytes, e.line(), e.column());
            if is_number_trouble(&e, bytes, at) {
                *field = key_path_at(bytes, at);
                if let Some(path) = field {
                    *message = format!("{path} is not a JSON number ({message})");
                }
            }
        }
        err
    })
}

/// Whether a parse error is about a number: one out of f64's range, or a non-JSON
/// literal (`NaN`, `Infinity`, `-Infinity`) where a value belongs.
fn is_number_trouble(e: &serde_json::Error, bytes: &[u8], at: usize) -> bool {
    if e.to_string().starts_with("number out of range") {
        return true;
    }
    // serde_json stops at the literal's first letter (after a `-` for `-Infinity`).
    let word_start = bytes[..at.min(bytes.len())]
        .iter()
        .rposition(|b| !b.is_ascii_alphabetic())
        .map_or(0, |i| i + 1);
    let rest = &bytes[word_start..];
    rest.starts_with(b"NaN") || rest.starts_with(b"Infinity")
}

/// The byte offset of a 1-based line and column as serde_json reports them.
fn byte_offset(bytes: &[u8], line: usize, column: usize) -> usize {
    let line_start = if line <= 1 {
        0
    } else {
        bytes
            .iter()
            .enumerate()
            .filter(|(_, b)| **b == b'\n')
            .nth(line - 2)
            .map_or(bytes.len(), |(i, _)| i + 1)
    };
    (line_start + column.saturating_sub(1)).min(bytes.len())
}

/// The dotted path of object keys whose value contains byte `at`, read by following the
/// text's braces, brackets and keys up to there (`state.current_load`). `None` outside
/// any key's value. Only used to name the field of a syntax error, on text that is valid
/// JSON up to `at`.
fn key_path_at(bytes: &[u8], at: usize) -> Option<String> {
    // One frame per open container: `Some(key)` for an object (its current key), `None`
    // for an array.
    let mut frames: Vec<Option<String>> = Vec::new();
    let mut key_next = false;
    let mut i = 0;
    while i < at {
        match bytes[i] {
            b'"' => {
                let start = i + 1;
                i = start;
                while i < bytes.len() && bytes[i] != b'"' {
                    i += if bytes[i] == b'\\' { 2 } else { 1 };
                }
                if key_next {
                    if let Some(Some(key)) = frames.last_mut() {
                        // Decoded, so that an escaped key (`"st\u0061te"`) reads as itself.
                        let quoted = &bytes[start - 1..(i + 1).min(bytes.len())];
                        *key = serde_json::from_slice(quoted).unwrap_or_else(|_| {
                            String::from_utf8_lossy(&bytes[start..i.min(bytes.len())]).into()
                        });
                    }
                }
            }
            b'{' => {
                frames.push(Some(String::new()));
                key_next = true;
            }
            b'[' => {
                frames.push(None);
                key_next = false;
            }
            b'}' | b']' => {
                frames.pop();
                key_next = false;
            }
            b':' => key_next = false,
            b',' => key_next = matches!(frames.last(), Some(Some(_))),
            _ => {}
        }
        i += 1;
    }
    let keys: Vec<&str> = frames
        .iter()
        .flatten()
        .map(String::as_str)
        .filter(|k| !k.is_empty())
        .collect();
    (!keys.is_empty() && !key_next).then(|| keys.join("."))
}

pub(crate) fn short(v: &Value) -> String {
    let s = v.to_string();
    if s.len() > 40 {
        format!(
            "{}…",
            &s[..s.char_indices().nth(40).map_or(s.len(), |(i, _)| i)]
        )
    } else {
        s
    }
}

/// Reads an integer field in `0..=max`. Integral floats (`3.0`) are accepted.
fn int_field(
    obj: &Map<String, Value>,
    field: &str,
    max: u8,
    range: &'static str,
) -> Result<Option<u8>, StateError> {
    let Some(v) = obj.get(field) else {
        return Ok(None);
    };
    let wrong = || StateError::WrongType {
        field: field.to_string(),
        expected: "an integer",
        got: format!("{} {}", json_type(v), short(v)),
    };
    let out = || StateError::OutOfRange {
        field: field.to_string(),
        range,
        got: short(v),
    };
    let n = v.as_number().ok_or_else(wrong)?;
    if let Some(u) = n.as_u64() {
        return if u <= u64::from(max) {
            Ok(Some(u as u8))
        } else {
            Err(out())
        };
    }
    if n.as_i64().is_some() {
        return Err(out()); // negative integer
    }
    let f = n.as_f64().ok_or_else(wrong)?;
    if f.fract() != 0.0 {
        return Err(wrong());
    }
    if (0.0..=f64::from(max)).contains(&f) {
        Ok(Some(f as u8))
    } else {
        Err(out())
    }
}

/// Reads a finite number field with `min <= x` and, when given, `x <= max`.
pub(crate) fn num_field(
    obj: &Map<String, Value>,
    field: &str,
    max: Option<f64>,
    range: &'static str,
) -> Result<Option<f64>, StateError> {
    let Some(v) = obj.get(field) else {
        return Ok(None);
    };
    let f = v.as_f64().ok_or_else(|| StateError::WrongType {
        field: field.to_string(),
        expected: "a number",
        got: format!("{} {}", json_type(v), short(v)),
    })?;
    // serde_json never yields non-finite numbers from text, but a Value built in code can.
    if !f.is_finite() || f < 0.0 || max.is_some_and(|m| f > m) {
        return Err(StateError::OutOfRange {
            field: field.to_string(),
            range,
            got: short(v),
        });
    }
    Ok(Some(f))
}

pub(crate) fn require<T>(v: Option<T>, field: &str) -> Result<T, StateError> {
    v.ok_or_else(|| StateError::Missing {
        field: field.to_string(),
    })
}

pub(crate) fn check_known(obj: &Map<String, Value>, known: &[&str]) -> Result<(), StateError> {
    // Report unknown fields in a stable order (serde_json's map is sorted).
    if let Some(k) = obj.keys().find(|k| !known.contains(&k.as_str())) {
        return Err(StateError::Unknown {
            field: k.clone(),
            expected: known.join(", "),
        });
    }
    Ok(())
}

pub(crate) fn as_object<'a>(
    v: &'a Value,
    what: &'static str,
) -> Result<&'a Map<String, Value>, StateError> {
    v.as_object().ok_or(StateError::NotObject {
        what,
        got: json_type(v),
    })
}

/// `(current_load, recent_success_rate, queue_depth)`, each present or not.
type SignalFields = (Option<f64>, Option<f64>, Option<f64>);

fn signal_fields(obj: &Map<String, Value>) -> Result<SignalFields, StateError> {
    Ok((
        num_field(obj, "current_load", None, "finite and >= 0")?,
        num_field(obj, "recent_success_rate", Some(1.0), "finite and 0..=1")?,
        num_field(obj, "queue_depth", None, "finite and >= 0")?,
    ))
}

impl State {
    /// Validates a JSON value as a state. `default_hour` is used when `hour` is absent
    /// (callers pass the current UTC hour).
    ///
    /// # Errors
    /// A [`StateError`] naming the first offending field, checked in schema order after
    /// unknown fields.
    pub fn from_value(v: &Value, default_hour: u8) -> Result<State, StateError> {
        let obj = as_object(v, "state")?;
        check_known(obj, &STATE_FIELDS)?;
        let request_type = require(
            int_field(obj, "request_type", MAX_REQUEST_TYPE, "an integer 0..=5")?,
            "request_type",
        )?;
        let region_id = require(
            int_field(
                obj,
                "region_id",
                (NUM_REGIONS - 1) as u8,
                "an integer 0..=9",
            )?,
            "region_id",
        )?;
        let (load, success, queue) = signal_fields(obj)?;
        let hour = int_field(obj, "hour", 23, "an integer 0..=23")?.unwrap_or(default_hour.min(23));
        Ok(State {
            request_type,
            region_id,
            current_load: require(load, "current_load")?,
            recent_success_rate: require(success, "recent_success_rate")?,
            queue_depth: require(queue, "queue_depth")?,
            hour,
        })
    }

    /// Parses and validates a state from JSON text.
    ///
    /// # Errors
    /// [`StateError::Json`] with line and column for malformed text, else as [`State::from_value`].
    pub fn parse_json(text: &str, default_hour: u8) -> Result<State, StateError> {
        let v = parse_text(text.as_bytes())?;
        State::from_value(&v, default_hour)
    }

    /// Parses and validates a decision request body, `{"state": {…}}` and no other key.
    /// `default_hour` (the current UTC hour) fills an absent `hour`.
    ///
    /// # Errors
    /// [`StateError::Json`] for malformed text, [`StateError::NotObject`] for a body that is
    /// not an object, [`StateError::Unknown`] / [`StateError::Missing`] for the envelope,
    /// else the state's error with its field prefixed by `state.`.
    pub fn from_body(bytes: &[u8], default_hour: u8) -> Result<State, StateError> {
        let body = parse_text(bytes)?;
        let obj = as_object(&body, "body")?;
        if let Some(k) = obj.keys().find(|k| k.as_str() != "state") {
            return Err(StateError::Unknown {
                field: k.clone(),
                expected: "state".into(),
            });
        }
        let Some(state) = obj.get("state") else {
            return Err(StateError::Missing {
                field: "state".into(),
            });
        };
        State::from_value(state, default_hour).map_err(|e| e.within("state"))
    }

    /// The state as a JSON value with every field present.
    pub fn to_value(&self) -> Value {
        serde_json::to_value(self).expect("state serialises")
    }

    /// Builds a state from edge-known fields and live signals.
    pub fn from_parts(request_type: u8, region_id: u8, hour: u8, s: Signals) -> State {
        State {
            request_type: request_type.min(MAX_REQUEST_TYPE),
            region_id: region_id.min((NUM_REGIONS - 1) as u8),
            current_load: s.current_load,
            recent_success_rate: s.recent_success_rate,
            queue_depth: s.queue_depth,
            hour: hour.min(23),
        }
    }

    /// The value of a raw state field by name, as a number (used by rules and range checks).
    pub fn field(&self, name: &str) -> Option<f64> {
        Some(match name {
            "request_type" => f64::from(self.request_type),
            "region_id" => f64::from(self.region_id),
            "current_load" => self.current_load,
            "recent_success_rate" => self.recent_success_rate,
            "queue_depth" => self.queue_depth,
            "hour" => f64::from(self.hour),
            _ => return None,
        })
    }
}

impl Signals {
    /// Parses and validates a signals object from JSON text.
    ///
    /// # Errors
    /// [`StateError::Json`] for malformed text, else as [`Signals::from_value`].
    pub fn from_json(bytes: &[u8]) -> Result<Signals, StateError> {
        Signals::from_value(&parse_text(bytes)?)
    }

    /// Validates a JSON value as a signals object (the three live fields, all required,
    /// plus an optional `updated_at` that callers stamp themselves and is ignored here).
    ///
    /// # Errors
    /// A [`StateError`] naming the first offending field.
    pub fn from_value(v: &Value) -> Result<Signals, StateError> {
        let obj = as_object(v, "signals")?;
        check_known(
            obj,
            &[
                "current_load",
                "recent_success_rate",
                "queue_depth",
                "updated_at",
            ],
        )?;
        let (load, success, queue) = signal_fields(obj)?;
        Ok(Signals {
            current_load: require(load, "current_load")?,
            recent_success_rate: require(success, "recent_success_rate")?,
            queue_depth: require(queue, "queue_depth")?,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn ok() -> Value {
        json!({"request_type": 1, "region_id": 3, "current_load": 0.4,
               "recent_success_rate": 0.97, "queue_depth": 12, "hour": 14})
    }

    fn err(v: Value) -> StateError {
        State::from_value(&v, 0).unwrap_err()
    }

    #[test]
    fn valid_state_parses() {
        let s = State::from_value(&ok(), 0).unwrap();
        assert_eq!(s.request_type, 1);
        assert_eq!(s.region_id, 3);
        assert_eq!(s.hour, 14);
        assert_eq!(s.queue_depth, 12.0);
    }

    #[test]
    fn bodies_in_any_layout_parse() {
        let want = State::from_value(&ok(), 0).unwrap();
        for body in [
            r#"{"state":{"request_type":1,"region_id":3,"current_load":0.4,"recent_success_rate":0.97,"queue_depth":12,"hour":14}}"#,
            "{\n  \"state\": {\n    \"hour\": 14,\n    \"queue_depth\": 12.0,\n    \"recent_success_rate\": 9.7e-1,\n    \"current_load\": 0.40,\n    \"region_id\": 3,\n    \"request_type\": 1\n  }\n}\n",
            r#"{"st\u0061te": {"request_type":1,"region_id":3,"current_load":4E-1,"recent_success_rate":0.97,"queue_depth":1.2e1,"hour":14}}"#,
        ] {
            assert_eq!(State::from_body(body.as_bytes(), 0), Ok(want), "{body}");
        }
        assert_eq!(State::parse_json(&ok().to_string(), 0), Ok(want));
    }

    #[test]
    fn duplicate_keys_keep_the_last_value() {
        let body = r#"{"state": {"request_type":1,"region_id":3,"current_load":0.4,"recent_success_rate":0.97,"queue_depth":12,"queue_depth":13}}"#;
        assert_eq!(
            State::from_body(body.as_bytes(), 0).unwrap().queue_depth,
            13.0
        );
    }

    /// Regression: a `NaN` literal or a number beyond f64 inside the state was a 400 with
    /// `field: null`; the client could not tell which field to fix.
    #[test]
    fn regression_non_json_numbers_name_their_field() {
        let s = r#"{"request_type":1,"region_id":3,"current_load":0.4,"recent_success_rate":0.97,"queue_depth":12}"#;
        for (from, to, field) in [
            ("0.4", "NaN", "state.current_load"),
            ("0.4", "Infinity", "state.current_load"),
            ("0.4", "-Infinity", "state.current_load"),
            ("12}", "1e999}", "state.queue_depth"),
            ("12}", "-1e400}", "state.queue_depth"),
            ("0.97", "NaN", "state.recent_success_rate"),
        ] {
            let body = format!(r#"{{"state": {}}}"#, s.replacen(from, to, 1));
            let e = State::from_body(body.as_bytes(), 0).unwrap_err();
            assert_eq!(
                (e.code(), e.field()),
                ("invalid_json", Some(field)),
                "{body}"
            );
        }
        // An escaped key is named as it reads.
        let body = format!(r#"{{"st\u0061te": {}}}"#, s.replace("0.4", "NaN"));
        let e = State::from_body(body.as_bytes(), 0).unwrap_err();
        assert_eq!(e.field(), Some("state.current_load"));
        // A bare state names the field without the envelope.
        let e = State::parse_json(&s.replace("0.4", "NaN"), 0).unwrap_err();
        assert_eq!(e.field(), Some("current_load"));
        // Other syntax errors name no field.
        for (body, want) in [
            (r#"{"state": {"request_type": 1 "region_id": 3}}"#, None),
            (r#"{"state": {"request_type": tru}}"#, None),
            ("", None),
            ("NaN", None),
            (r#"{"state": NaN}"#, Some("state")),
            (r#"{"state": [NaN]}"#, Some("state")),
        ] {
            let e = State::from_body(body.as_bytes(), 0).unwrap_err();
            assert_eq!((e.code(), e.field()), ("invalid_json", want), "{body}");
        }
    }

    #[test]
    fn hour_defaults_to_caller_hour() {
        let mut v = ok();
        v.as_object_mut().unwrap().remove("hour");
        assert_eq!(State::from_value(&v, 7).unwrap().hour, 7);
    }

    #[test]
    fn integral_float_is_an_integer() {
        let mut v = ok();
        v["region_id"] = json!(3.0);
        assert_eq!(State::from_value(&v, 0).unwrap().region_id, 3);
    }

    #[test]
    fn errors_name_the_field_and_value() {
        let mut v = ok();
        v["region_id"] = json!(12);
        let e = err(v);
        assert_eq!(e.field(), Some("region_id"));
        assert_eq!(e.to_string(), "region_id must be an integer 0..=9, got 12");

        let mut v = ok();
        v["request_type"] = json!(2.5);
        assert_eq!(
            err(v).to_string(),
            "request_type must be an integer, got number 2.5"
        );

        let mut v = ok();
        v["recent_success_rate"] = json!(1.01);
        let e = err(v);
        assert_eq!(
            (e.code(), e.field()),
            ("out_of_range", Some("recent_success_rate"))
        );

        let mut v = ok();
        v["current_load"] = json!("0.5");
        let e = err(v);
        assert_eq!(
            (e.code(), e.field()),
            ("invalid_type", Some("current_load"))
        );

        let mut v = ok();
        v["queue_depth"] = json!(-1);
        assert_eq!(err(v).field(), Some("queue_depth"));

        let mut v = ok();
        v["hour"] = json!(24);
        assert_eq!(err(v).field(), Some("hour"));

        let mut v = ok();
        v["region_id"] = json!(-3);
        assert_eq!(err(v).code(), "out_of_range");
    }

    #[test]
    fn unknown_and_missing_fields_are_refused() {
        let mut v = ok();
        v["regoin_id"] = json!(3);
        let e = err(v);
        assert_eq!((e.code(), e.field()), ("unknown_field", Some("regoin_id")));

        let mut v = ok();
        v.as_object_mut().unwrap().remove("queue_depth");
        let e = err(v);
        assert_eq!(
            (e.code(), e.field()),
            ("missing_field", Some("queue_depth"))
        );
        assert_eq!(err(json!([1])).code(), "invalid_type");
    }

    #[test]
    fn load_above_one_is_legal() {
        let mut v = ok();
        v["current_load"] = json!(3.5);
        assert_eq!(State::from_value(&v, 0).unwrap().current_load, 3.5);
    }

    #[test]
    fn malformed_json_reports_position() {
        let e = State::parse_json("{\"request_type\": 1,\n \"x\": NaN}", 0).unwrap_err();
        match e {
            StateError::Json { line, column, .. } => assert_eq!((line, column), (2, 7)),
            other => panic!("unexpected {other:?}"),
        }
        // Numbers too large for f64 are a parse error, not an infinity.
        assert_eq!(
            State::parse_json("{\"queue_depth\": 1e400}", 0)
                .unwrap_err()
                .code(),
            "invalid_json"
        );
    }

    #[test]
    fn non_finite_values_built_in_code_are_refused() {
        let mut obj = ok();
        obj["current_load"] = Value::from(f64::NAN); // serde_json turns NaN into null
        assert_eq!(err(obj).field(), Some("current_load"));
    }

    #[test]
    fn signals_validate_like_state_fields() {
        let s = Signals::from_value(
            &json!({"current_load": 1.0, "recent_success_rate": 0.2, "queue_depth": 900}),
        )
        .unwrap();
        assert_eq!(s.queue_depth, 900.0);
        let e = Signals::from_value(
            &json!({"current_load": 1.0, "recent_success_rate": 2, "queue_depth": 9}),
        )
        .unwrap_err();
        assert_eq!(e.field(), Some("recent_success_rate"));
        let e = Signals::from_value(&json!({"current_load": 1.0, "queue_depth": 9})).unwrap_err();
        assert_eq!(e.code(), "missing_field");
    }
}

//! The state a decision is made on: parsing and validation (DESIGN §2).
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
            StateError::Json { .. } | StateError::NotObject { .. } => None,
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

fn short(v: &Value) -> String {
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
fn num_field(
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

fn require<T>(v: Option<T>, field: &str) -> Result<T, StateError> {
    v.ok_or_else(|| StateError::Missing {
        field: field.to_string(),
    })
}

fn check_known(obj: &Map<String, Value>, known: &[&str]) -> Result<(), StateError> {
    // Report unknown fields in a stable order (serde_json's map is sorted).
    if let Some(k) = obj.keys().find(|k| !known.contains(&k.as_str())) {
        return Err(StateError::Unknown {
            field: k.clone(),
            expected: known.join(", "),
        });
    }
    Ok(())
}

fn as_object<'a>(v: &'a Value, what: &'static str) -> Result<&'a Map<String, Value>, StateError> {
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
        if let Some(s) = fast::state(text.as_bytes(), default_hour) {
            return Ok(s);
        }
        let v: Value = serde_json::from_str(text).map_err(|e| StateError::from_serde(&e))?;
        State::from_value(&v, default_hour)
    }

    /// Parses and validates a decision request body, `{"state": {…}}` and no other key
    /// (DESIGN §6). `default_hour` (the current UTC hour) fills an absent `hour`.
    ///
    /// A valid body is scanned straight into numbers, without building a JSON tree; anything
    /// else is parsed again through [`Value`] so that the error names the field and the
    /// rule, exactly as [`State::from_value`] reports it.
    ///
    /// # Errors
    /// [`StateError::Json`] for malformed text, [`StateError::NotObject`] for a body that is
    /// not an object, [`StateError::Unknown`] / [`StateError::Missing`] for the envelope,
    /// else the state's error with its field prefixed by `state.`.
    pub fn from_body(bytes: &[u8], default_hour: u8) -> Result<State, StateError> {
        if let Some(s) = fast::body(bytes, default_hour) {
            return Ok(s);
        }
        State::from_body_value(bytes, default_hour)
    }

    /// [`State::from_body`] through [`Value`] only: the reference the fast path must agree
    /// with, and the source of every error message.
    ///
    /// # Errors
    /// As [`State::from_body`].
    pub fn from_body_value(bytes: &[u8], default_hour: u8) -> Result<State, StateError> {
        let body: Value = serde_json::from_slice(bytes).map_err(|e| StateError::from_serde(&e))?;
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

/// The fast path of [`State::from_body`] and [`State::parse_json`]: a scanner for the one
/// shape a valid request has, with no JSON tree and no allocation.
///
/// It reads a strict subset of JSON — objects, the known key names without escapes,
/// numbers in JSON's own grammar, JSON whitespace — and gives up (`None`) on anything else:
/// an unknown, duplicate or escaped key, a non-number, a value out of range, text after the
/// end. The caller then parses the same text through [`Value`], so every accepted input
/// yields the same state as [`State::from_value`] and every error comes from there. Numbers
/// are converted by the standard library's parser, correctly rounded like serde_json's
/// `float_roundtrip`.
mod fast {
    use super::{State, MAX_REQUEST_TYPE, NUM_REGIONS, STATE_FIELDS};

    /// A cursor over the text.
    struct Scan<'a> {
        b: &'a [u8],
        i: usize,
    }

    impl<'a> Scan<'a> {
        fn ws(&mut self) {
            while let Some(b' ' | b'\t' | b'\n' | b'\r') = self.b.get(self.i) {
                self.i += 1;
            }
        }

        /// Consumes `c` after optional whitespace.
        fn eat(&mut self, c: u8) -> Option<()> {
            self.ws();
            (self.b.get(self.i) == Some(&c)).then(|| self.i += 1)
        }

        /// A string without escapes, after optional whitespace.
        fn key(&mut self) -> Option<&'a [u8]> {
            self.eat(b'"')?;
            let start = self.i;
            while let Some(&c) = self.b.get(self.i) {
                match c {
                    b'"' => {
                        self.i += 1;
                        return Some(&self.b[start..self.i - 1]);
                    }
                    b'a'..=b'z' | b'_' => self.i += 1,
                    _ => return None,
                }
            }
            None
        }

        fn digits(&mut self) -> usize {
            let start = self.i;
            while self.b.get(self.i).is_some_and(u8::is_ascii_digit) {
                self.i += 1;
            }
            self.i - start
        }

        /// A number in JSON's grammar, after optional whitespace:
        /// `-? (0 | [1-9][0-9]*) (. [0-9]+)? ([eE] [+-]? [0-9]+)?`.
        fn number(&mut self) -> Option<f64> {
            self.ws();
            let start = self.i;
            let negative = self.b.get(self.i) == Some(&b'-');
            if negative {
                self.i += 1;
            }
            let int_start = self.i;
            match self.b.get(self.i) {
                Some(b'0') => self.i += 1,
                Some(b'1'..=b'9') => {
                    self.digits();
                }
                _ => return None,
            }
            let int_end = self.i;
            let mut frac = int_end..int_end;
            if self.b.get(self.i) == Some(&b'.') {
                self.i += 1;
                let from = self.i;
                if self.digits() == 0 {
                    return None;
                }
                frac = from..self.i;
            }
            let mut exponent = false;
            if let Some(b'e' | b'E') = self.b.get(self.i) {
                exponent = true;
                self.i += 1;
                if let Some(b'+' | b'-') = self.b.get(self.i) {
                    self.i += 1;
                }
                if self.digits() == 0 {
                    return None;
                }
            }
            if !exponent {
                if let Some(v) = short_decimal(&self.b[int_start..int_end], &self.b[frac]) {
                    return Some(if negative { -v } else { v });
                }
            }
            std::str::from_utf8(&self.b[start..self.i])
                .ok()?
                .parse()
                .ok()
        }

        /// A state object: known keys, each once, each a number.
        fn state(&mut self) -> Option<[Option<f64>; 6]> {
            let mut out = [None; 6];
            self.eat(b'{')?;
            if self.eat(b'}').is_some() {
                return Some(out);
            }
            loop {
                let k = self.key()?;
                let slot = out.get_mut(field_index(k)?)?;
                self.eat(b':')?;
                if slot.replace(self.number()?).is_some() {
                    return None; // duplicate key
                }
                self.ws();
                match self.b.get(self.i) {
                    Some(b',') => self.i += 1,
                    Some(b'}') => {
                        self.i += 1;
                        return Some(out);
                    }
                    _ => return None,
                }
            }
        }

        /// Only whitespace left.
        fn end(&mut self) -> Option<()> {
            self.ws();
            (self.i == self.b.len()).then_some(())
        }
    }

    /// The most digits [`short_decimal`] takes: any integer of 15 digits is exact in
    /// an `f64` (below 2^53).
    const SHORT_DIGITS: usize = 15;
    /// Powers of ten exact in an `f64` (10^22 is the last), for up to [`SHORT_DIGITS`]
    /// fraction digits.
    const POW10: [f64; SHORT_DIGITS + 1] = [
        1e0, 1e1, 1e2, 1e3, 1e4, 1e5, 1e6, 1e7, 1e8, 1e9, 1e10, 1e11, 1e12, 1e13, 1e14, 1e15,
    ];

    /// The value of a number without exponent whose digits (integer part `int`, fraction
    /// `frac`, both ASCII digits) number at most [`SHORT_DIGITS`], the common case of a
    /// request (`12`, `0.4`, `0.97`); `None` for longer ones, which the standard parser
    /// reads. Exact: the digits as an integer and the power of ten are both exact in an
    /// `f64`, and one IEEE division rounds their quotient correctly, which is the correctly
    /// rounded value of the decimal, as the standard parser gives it (Clinger's fast path).
    fn short_decimal(int: &[u8], frac: &[u8]) -> Option<f64> {
        if int.len() + frac.len() > SHORT_DIGITS {
            return None;
        }
        let m = int
            .iter()
            .chain(frac)
            .fold(0u64, |m, d| m * 10 + u64::from(d - b'0'));
        // Exact: `m` < 10^15 < 2^53.
        #[allow(clippy::cast_precision_loss)]
        let m = m as f64;
        Some(m / POW10[frac.len()])
    }

    /// The index of a key in [`STATE_FIELDS`]: its length and first letter pick the one
    /// candidate, one comparison confirms it.
    fn field_index(k: &[u8]) -> Option<usize> {
        let i = match (k.len(), k.first()?) {
            (12, b'r') => 0,
            (9, _) => 1,
            (12, _) => 2,
            (19, _) => 3,
            (11, _) => 4,
            (4, _) => 5,
            _ => return None,
        };
        (STATE_FIELDS[i].as_bytes() == k).then_some(i)
    }

    /// A bare state object.
    pub(super) fn state(text: &[u8], default_hour: u8) -> Option<State> {
        let mut s = Scan { b: text, i: 0 };
        let fields = s.state()?;
        s.end()?;
        validate(fields, default_hour)
    }

    /// The `{"state": {…}}` envelope.
    pub(super) fn body(text: &[u8], default_hour: u8) -> Option<State> {
        let mut s = Scan { b: text, i: 0 };
        s.eat(b'{')?;
        if s.key()? != b"state" {
            return None;
        }
        s.eat(b':')?;
        s.ws();
        let fields = s.state()?;
        s.eat(b'}')?;
        s.end()?;
        validate(fields, default_hour)
    }

    /// An integral value in `0..=max`.
    fn int(v: f64, max: u8) -> Option<u8> {
        (v.fract() == 0.0 && (0.0..=f64::from(max)).contains(&v)).then_some(v as u8)
    }

    /// The state when every field is present (`hour` may be absent) and valid, by the
    /// rules of [`State::from_value`].
    fn validate(fields: [Option<f64>; 6], default_hour: u8) -> Option<State> {
        let [rt, region, load, success, queue, hour] = fields;
        let load = load.filter(|v| v.is_finite() && *v >= 0.0)?;
        let success = success.filter(|v| (0.0..=1.0).contains(v))?;
        let queue = queue.filter(|v| v.is_finite() && *v >= 0.0)?;
        Some(State {
            request_type: int(rt?, MAX_REQUEST_TYPE)?,
            region_id: int(region?, (NUM_REGIONS - 1) as u8)?,
            current_load: load,
            recent_success_rate: success,
            queue_depth: queue,
            hour: match hour {
                Some(h) => int(h, 23)?,
                None => default_hour.min(23),
            },
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
    fn typical_bodies_take_the_fast_path() {
        let want = State::from_value(&ok(), 0).unwrap();
        for body in [
            r#"{"state":{"request_type":1,"region_id":3,"current_load":0.4,"recent_success_rate":0.97,"queue_depth":12,"hour":14}}"#,
            "{\n  \"state\": {\n    \"hour\": 14,\n    \"queue_depth\": 12.0,\n    \"recent_success_rate\": 9.7e-1,\n    \"current_load\": 0.40,\n    \"region_id\": 3,\n    \"request_type\": 1\n  }\n}\n",
            "\t{ \"state\" :\r\n{\"request_type\":1 , \"region_id\":3,\"current_load\":4E-1,\"recent_success_rate\":0.97,\"queue_depth\":1.2e1,\"hour\":14 } } ",
        ] {
            assert_eq!(fast::body(body.as_bytes(), 0), Some(want), "{body}");
            assert_eq!(State::from_body(body.as_bytes(), 0), Ok(want), "{body}");
        }
        let bare = ok().to_string();
        assert_eq!(fast::state(bare.as_bytes(), 0), Some(want));
    }

    #[test]
    fn the_fast_path_leaves_everything_else_to_the_value_path() {
        let s = r#"{"request_type":1,"region_id":3,"current_load":0.4,"recent_success_rate":0.97,"queue_depth":12}"#;
        for body in [
            format!(r#"{{"st\u0061te": {s}}}"#),
            format!(r#"{{"state": {s}, "state": {s}}}"#),
            format!(r#"[{{"state": {s}}}]"#),
            format!(r#"{{"state": {s}}} x"#),
            format!(r#"{{"state": {s}, "x": 1}}"#),
            s.replace("12}", "12, \"queue_depth\": 12}"),
            s.replace("0.4", "NaN"),
            s.replace("0.4", "+0.4"),
            s.replace("0.4", ".4"),
            s.replace("3,", "3.5,"),
            s.replace("12", "1e400"),
            s.replace("region_id", "regoin_id"),
        ] {
            let body = if body.starts_with("{\"request_type") {
                format!(r#"{{"state": {body}}}"#)
            } else {
                body
            };
            assert_eq!(fast::body(body.as_bytes(), 0), None, "{body}");
            assert_eq!(
                State::from_body(body.as_bytes(), 0),
                State::from_body_value(body.as_bytes(), 0),
                "{body}"
            );
        }
        // Duplicate keys: the value path keeps the last one, so the answer is the same.
        let dup = format!(
            r#"{{"state": {}}}"#,
            s.replace("12}", "12, \"queue_depth\": 13}")
        );
        assert_eq!(
            State::from_body(dup.as_bytes(), 0).unwrap().queue_depth,
            13.0
        );
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

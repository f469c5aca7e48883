//! The state a decision is made on, and its validation from JSON.
//!
//! Every rejection names the field and the rule it broke (`"region_id must be an integer
//! 0..=9, got 12"`), unknown fields are refused (a typo must not be silently ignored), and
//! integral numbers written as `3.0` are still integers: the state is read through
//! [`crate::json`].

use crate::json::{parse_text, FieldError, Fields, Nulls};
use crate::signals::{signal_fields, Signals};
use serde::Serialize;
use serde_json::Value;

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
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
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

impl State {
    /// Validates a JSON value as a state. `default_hour` is used when `hour` is absent
    /// (callers pass the current UTC hour).
    ///
    /// # Errors
    /// A [`FieldError`] naming the first offending field, checked in schema order after
    /// unknown fields.
    pub fn from_value(v: &Value, default_hour: u8) -> Result<State, FieldError> {
        State::read(Fields::of(v, "state", Nulls::Strict)?, Some(default_hour))
    }

    /// Validates a state as a decision record logs it: all six fields, `hour` included.
    ///
    /// # Errors
    /// As [`State::from_value`], and [`FieldError::Missing`] without an `hour`.
    pub fn from_logged(f: Fields<'_>) -> Result<State, FieldError> {
        State::read(f, None)
    }

    fn read(f: Fields<'_>, default_hour: Option<u8>) -> Result<State, FieldError> {
        f.only(&STATE_FIELDS)?;
        let request_type = f.int(
            "request_type",
            0,
            u64::from(MAX_REQUEST_TYPE),
            "an integer 0..=5",
        )?;
        let request_type = f.require(request_type, "request_type")?;
        let region_id = f.int("region_id", 0, NUM_REGIONS as u64 - 1, "an integer 0..=9")?;
        let region_id = f.require(region_id, "region_id")?;
        let (load, success, queue) = signal_fields(&f)?;
        let hour = match (f.int("hour", 0, 23, "an integer 0..=23")?, default_hour) {
            (Some(h), _) => h as u8,
            (None, Some(d)) => d.min(23),
            (None, None) => f.require(None, "hour")?,
        };
        Ok(State {
            request_type: request_type as u8,
            region_id: region_id as u8,
            current_load: f.require(load, "current_load")?,
            recent_success_rate: f.require(success, "recent_success_rate")?,
            queue_depth: f.require(queue, "queue_depth")?,
            hour,
        })
    }

    /// Parses and validates a state from JSON text.
    ///
    /// # Errors
    /// [`FieldError::Json`] with line and column for malformed text, else as [`State::from_value`].
    pub fn parse_json(text: &str, default_hour: u8) -> Result<State, FieldError> {
        let v = parse_text(text.as_bytes())?;
        State::from_value(&v, default_hour)
    }

    /// Parses and validates a decision request body, `{"state": {…}}` and no other key.
    /// `default_hour` (the current UTC hour) fills an absent `hour`.
    ///
    /// # Errors
    /// [`FieldError::Json`] for malformed text, [`FieldError::NotObject`] for a body that is
    /// not an object, [`FieldError::Unknown`] / [`FieldError::Missing`] for the envelope,
    /// else the state's error with its field prefixed by `state.`.
    pub fn from_body(bytes: &[u8], default_hour: u8) -> Result<State, FieldError> {
        let body = parse_text(bytes)?;
        let f = Fields::of(&body, "body", Nulls::Strict)?;
        f.only(&["state"])?;
        let state = f.require(f.get("state"), "state")?;
        State::from_value(state, default_hour).map_err(|e| e.within("state"))
    }

    /// The state as a JSON value with every field present.
    pub fn to_value(&self) -> Value {
        serde_json::json!({
            "request_type": self.request_type,
            "region_id": self.region_id,
            "current_load": self.current_load,
            "recent_success_rate": self.recent_success_rate,
            "queue_depth": self.queue_depth,
            "hour": self.hour,
        })
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

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn ok() -> Value {
        json!({"request_type": 1, "region_id": 3, "current_load": 0.4,
               "recent_success_rate": 0.97, "queue_depth": 12, "hour": 14})
    }

    fn err(v: Value) -> FieldError {
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

    /// Regression: a key given twice was read as its last value (`"request_type":1,
    /// "request_type":5` decided request type 5); a body that says two things is refused,
    /// naming the key, wherever it is.
    #[test]
    fn regression_a_key_given_twice_was_read_as_its_last_value() {
        for (body, field) in [
            (
                r#"{"state": {"request_type":1,"request_type":5,"region_id":3,"current_load":0.4,"recent_success_rate":0.97,"queue_depth":12}}"#,
                "state.request_type",
            ),
            (
                r#"{"state": {"request_type":1,"region_id":3,"current_load":0.4,"recent_success_rate":0.97,"queue_depth":12}, "state": {}}"#,
                "state",
            ),
            // Before any other rule: an unknown key holding a key twice.
            (
                r#"{"state": {}, "x": {"y": [{"z": 1, "z": 1}]}}"#,
                "x.y[0].z",
            ),
        ] {
            let e = State::from_body(body.as_bytes(), 0).unwrap_err();
            assert_eq!(
                (e.code(), e.field()),
                ("duplicate_field", Some(field)),
                "{body}"
            );
        }
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
            FieldError::Json { line, column, .. } => assert_eq!((line, column), (2, 7)),
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
}

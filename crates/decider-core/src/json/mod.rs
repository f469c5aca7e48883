//! Validating JSON input field by field: every body, stored value and log record that
//! decider-core accepts is read through these helpers, so every refusal names the field and
//! the rule it broke (`"state.region_id must be an integer 0..=9, got 12"`).
//!
//! Input goes through [`serde_json::Value`] rather than a derived `Deserialize` so that
//! unknown fields can be refused by name, integral numbers written as `3.0` are still
//! integers, and a `NaN` literal or a number beyond f64 is reported with the key that holds
//! it rather than only a line and column.
//!
//! Text becomes a value in one place, [`parse_text`] (and [`parse_first`] for a value
//! followed by other text), and an object that names a key twice is refused there, at any
//! depth, naming the key's path (`state.request_type`, `outcome.attempts[0].status`). A
//! body that says two things has no one meaning (RFC 8259 §4: names SHOULD be unique), and
//! serde_json alone would keep the last one silently.

use serde_json::{Map, Value};
use thiserror::Error;

mod text;
pub use text::{parse_first, parse_text};

/// Why a JSON input was refused. Every variant except [`FieldError::Json`] (without a key
/// path) and [`FieldError::NotObject`] names the offending field.
#[derive(Debug, Clone, PartialEq, Error)]
pub enum FieldError {
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
    /// None of several fields, one of which is required, is present.
    #[error("one of {} is required", .fields.join(", "))]
    MissingOneOf {
        /// The fields, the first named as the error's field.
        fields: &'static [&'static str],
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
    /// An object names the same key twice (at any depth): the body has no one meaning.
    #[error("{field} is given more than once")]
    Duplicate {
        /// The key's path (`state.request_type`, `outcome.attempts[0].status`).
        field: String,
    },
    /// Two fields that exclude each other are both present.
    #[error("{field} cannot be given with {other}: give one of them")]
    Conflict {
        /// The field named as the error's.
        field: String,
        /// The field it excludes.
        other: &'static str,
    },
    /// A value outside its valid range or set.
    #[error("{field} must be {range}, got {got}")]
    OutOfRange {
        /// The field.
        field: String,
        /// The valid range or set, e.g. `an integer 0..=9`.
        range: &'static str,
        /// The value found.
        got: String,
    },
}

impl FieldError {
    /// The field this error is about, when there is one.
    pub fn field(&self) -> Option<&str> {
        match self {
            FieldError::Missing { field }
            | FieldError::Duplicate { field }
            | FieldError::Conflict { field, .. }
            | FieldError::Unknown { field, .. }
            | FieldError::WrongType { field, .. }
            | FieldError::OutOfRange { field, .. } => Some(field),
            FieldError::MissingOneOf { fields } => fields.first().copied(),
            FieldError::Json { field, .. } => field.as_deref(),
            FieldError::NotObject { .. } => None,
        }
    }

    /// A stable machine-readable code for the error.
    pub fn code(&self) -> &'static str {
        match self {
            FieldError::Json { .. } => "invalid_json",
            FieldError::NotObject { .. } => "invalid_type",
            FieldError::Missing { .. } | FieldError::MissingOneOf { .. } => "missing_field",
            FieldError::Unknown { .. } => "unknown_field",
            FieldError::Duplicate { .. } => "duplicate_field",
            FieldError::Conflict { .. } => "conflicting_fields",
            FieldError::WrongType { .. } => "invalid_type",
            FieldError::OutOfRange { .. } => "out_of_range",
        }
    }

    /// The same error with its field prefixed by `prefix.` (e.g. `state.region_id`).
    pub fn within(self, prefix: &str) -> FieldError {
        let p = |f: String| format!("{prefix}.{f}");
        match self {
            FieldError::Missing { field } => FieldError::Missing { field: p(field) },
            FieldError::Duplicate { field } => FieldError::Duplicate { field: p(field) },
            FieldError::Conflict { field, other } => FieldError::Conflict {
                field: p(field),
                other,
            },
            FieldError::Unknown { field, expected } => FieldError::Unknown {
                field: p(field),
                expected,
            },
            FieldError::WrongType {
                field,
                expected,
                got,
            } => FieldError::WrongType {
                field: p(field),
                expected,
                got,
            },
            FieldError::OutOfRange { field, range, got } => FieldError::OutOfRange {
                field: p(field),
                range,
                got,
            },
            other => other,
        }
    }

    /// A serde_json parse error as [`FieldError::Json`]: position kept, the parser's
    /// trailing " at line L column C" dropped from the message.
    pub fn from_serde(e: &serde_json::Error) -> FieldError {
        let full = e.to_string();
        // serde_json appends " at line L column C"; keep only the description.
        let message = match full.rfind(" at line ") {
            Some(i) => full[..i].to_string(),
            None => full,
        };
        FieldError::Json {
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

/// A value as it is quoted in an error: its JSON text, at most 40 characters.
pub fn short(v: &Value) -> String {
    short_text(&v.to_string())
}

/// Text as it is quoted in an error: at most 40 characters, then `…` when cut.
pub fn short_text(s: &str) -> String {
    match s.char_indices().nth(40) {
        Some((i, _)) => format!("{}…", &s[..i]),
        None => s.to_owned(),
    }
}

/// How an object's fields are read: a request body is strict (a `null` is a value of the
/// wrong type), a log record is lenient (a `null` member is an absent one: records are
/// written without their null members).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Nulls {
    /// `null` is a value, of type null.
    Strict,
    /// `null` reads as absent.
    Absent,
}

/// One JSON object being validated: its members, how nulls read, and the path prefix every
/// error names (`""` at the top, `"outcome."` inside `outcome`).
#[derive(Debug, Clone, Copy)]
pub struct Fields<'a> {
    map: &'a Map<String, Value>,
    nulls: Nulls,
    prefix: &'a str,
}

impl<'a> Fields<'a> {
    /// `v` as an object named `what` in errors.
    ///
    /// # Errors
    /// [`FieldError::NotObject`] when it is not one.
    pub fn of(v: &'a Value, what: &'static str, nulls: Nulls) -> Result<Fields<'a>, FieldError> {
        let map = v.as_object().ok_or(FieldError::NotObject {
            what,
            got: json_type(v),
        })?;
        Ok(Fields {
            map,
            nulls,
            prefix: "",
        })
    }

    /// The same object with every error's field prefixed by `prefix` (which ends in `.`).
    pub fn prefixed(self, prefix: &'a str) -> Fields<'a> {
        Fields { prefix, ..self }
    }

    /// The object's members.
    pub fn map(&self) -> &'a Map<String, Value> {
        self.map
    }

    /// The field's path as errors name it.
    pub fn path(&self, field: &str) -> String {
        format!("{}{field}", self.prefix)
    }

    /// A member's value; a `null` is absent under [`Nulls::Absent`].
    pub fn get(&self, field: &str) -> Option<&'a Value> {
        self.map
            .get(field)
            .filter(|v| !(self.nulls == Nulls::Absent && v.is_null()))
    }

    /// Refuses a member not in `known` (reported in a stable order: serde_json's map is
    /// sorted).
    ///
    /// # Errors
    /// [`FieldError::Unknown`].
    pub fn only(&self, known: &[&str]) -> Result<(), FieldError> {
        if let Some(k) = self.map.keys().find(|k| !known.contains(&k.as_str())) {
            return Err(FieldError::Unknown {
                field: self.path(k),
                expected: known.join(", "),
            });
        }
        Ok(())
    }

    /// A required member.
    ///
    /// # Errors
    /// [`FieldError::Missing`].
    pub fn require<T>(&self, v: Option<T>, field: &str) -> Result<T, FieldError> {
        v.ok_or_else(|| FieldError::Missing {
            field: self.path(field),
        })
    }

    fn wrong(&self, field: &str, expected: &'static str, v: &Value) -> FieldError {
        FieldError::WrongType {
            field: self.path(field),
            expected,
            got: format!("{} {}", json_type(v), short(v)),
        }
    }

    fn out(&self, field: &str, range: &'static str, v: &Value) -> FieldError {
        FieldError::OutOfRange {
            field: self.path(field),
            range,
            got: short(v),
        }
    }

    /// An integer in `lo..=hi`; integral floats (`3.0`) are accepted.
    ///
    /// # Errors
    /// [`FieldError::WrongType`] for a non-number or a fraction, [`FieldError::OutOfRange`]
    /// outside the range (`range` describes it).
    pub fn int(
        &self,
        field: &str,
        lo: u64,
        hi: u64,
        range: &'static str,
    ) -> Result<Option<u64>, FieldError> {
        let Some(v) = self.get(field) else {
            return Ok(None);
        };
        let n = v
            .as_number()
            .ok_or_else(|| self.wrong(field, "an integer", v))?;
        let u = if let Some(u) = n.as_u64() {
            u
        } else if n.as_i64().is_some() {
            return Err(self.out(field, range, v)); // negative
        } else {
            let f = n
                .as_f64()
                .ok_or_else(|| self.wrong(field, "an integer", v))?;
            if f.fract() != 0.0 {
                return Err(self.wrong(field, "an integer", v));
            }
            if !(0.0..=u64::MAX as f64).contains(&f) {
                return Err(self.out(field, range, v));
            }
            f as u64
        };
        if (lo..=hi).contains(&u) {
            Ok(Some(u))
        } else {
            Err(self.out(field, range, v))
        }
    }

    /// A finite number `>= 0` and, when given, `<= max`.
    ///
    /// # Errors
    /// [`FieldError::WrongType`] for a non-number, [`FieldError::OutOfRange`] outside the
    /// range (`range` describes it).
    pub fn num(
        &self,
        field: &str,
        max: Option<f64>,
        range: &'static str,
    ) -> Result<Option<f64>, FieldError> {
        let Some(v) = self.get(field) else {
            return Ok(None);
        };
        let f = v.as_f64().ok_or_else(|| self.wrong(field, "a number", v))?;
        // serde_json never yields non-finite numbers from text, but a Value built in code can.
        if !f.is_finite() || f < 0.0 || max.is_some_and(|m| f > m) {
            return Err(self.out(field, range, v));
        }
        Ok(Some(f))
    }

    /// A string.
    ///
    /// # Errors
    /// [`FieldError::WrongType`] for another type.
    pub fn str(&self, field: &str) -> Result<Option<&'a str>, FieldError> {
        match self.get(field) {
            None => Ok(None),
            Some(Value::String(s)) => Ok(Some(s)),
            Some(v) => Err(self.wrong(field, "a string", v)),
        }
    }

    /// A boolean.
    ///
    /// # Errors
    /// [`FieldError::WrongType`] for another type.
    pub fn bool(&self, field: &str) -> Result<Option<bool>, FieldError> {
        match self.get(field) {
            None => Ok(None),
            Some(Value::Bool(b)) => Ok(Some(*b)),
            Some(v) => Err(self.wrong(field, "a boolean", v)),
        }
    }

    /// One of a set of names (`parse` maps a name to its value; `names` lists them for the
    /// error).
    ///
    /// # Errors
    /// [`FieldError::WrongType`] for a non-string, [`FieldError::OutOfRange`] for an unknown
    /// name.
    pub fn name<T>(
        &self,
        field: &str,
        names: &'static str,
        parse: impl Fn(&str) -> Option<T>,
    ) -> Result<Option<T>, FieldError> {
        let Some(s) = self.str(field)? else {
            return Ok(None);
        };
        match parse(s) {
            Some(t) => Ok(Some(t)),
            None => Err(FieldError::OutOfRange {
                field: self.path(field),
                range: names,
                got: short(&Value::String(s.chars().take(64).collect())),
            }),
        }
    }

    /// A nested object, read with the same null rule and its path as prefix of its errors.
    ///
    /// # Errors
    /// [`FieldError::WrongType`] when the member is not an object.
    pub fn object(&self, field: &str, prefix: &'a str) -> Result<Option<Fields<'a>>, FieldError> {
        match self.get(field) {
            None => Ok(None),
            Some(Value::Object(map)) => Ok(Some(Fields {
                map,
                nulls: self.nulls,
                prefix,
            })),
            Some(v) => Err(self.wrong(field, "an object", v)),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn fields(v: &Value) -> Fields<'_> {
        Fields::of(v, "body", Nulls::Strict).unwrap()
    }

    #[test]
    fn integers_accept_integral_floats_and_name_the_field() {
        let v = json!({"a": 3, "b": 3.0, "c": 2.5, "d": -1, "e": "3", "f": 12, "g": 1e300});
        let f = fields(&v).prefixed("x.");
        assert_eq!(f.int("a", 0, 9, "0..=9"), Ok(Some(3)));
        assert_eq!(f.int("b", 0, 9, "0..=9"), Ok(Some(3)));
        assert_eq!(f.int("absent", 0, 9, "0..=9"), Ok(None));
        for (k, code) in [
            ("c", "invalid_type"),
            ("d", "out_of_range"),
            ("e", "invalid_type"),
            ("f", "out_of_range"),
            ("g", "out_of_range"),
        ] {
            let e = f.int(k, 0, 9, "0..=9").unwrap_err();
            assert_eq!(
                (e.code(), e.field()),
                (code, Some(format!("x.{k}").as_str()))
            );
        }
        assert_eq!(
            f.int("f", 0, 9, "an integer 0..=9")
                .unwrap_err()
                .to_string(),
            "x.f must be an integer 0..=9, got 12"
        );
        let lo = f.int("a", 5, 9, "5..=9").unwrap_err();
        assert_eq!(lo.code(), "out_of_range");
    }

    #[test]
    fn nulls_are_values_in_bodies_and_absent_in_records() {
        let v = json!({"a": null});
        let strict = Fields::of(&v, "body", Nulls::Strict).unwrap();
        assert_eq!(
            strict.num("a", None, ">= 0").unwrap_err().code(),
            "invalid_type"
        );
        let lenient = Fields::of(&v, "record", Nulls::Absent).unwrap();
        assert_eq!(lenient.num("a", None, ">= 0"), Ok(None));
        assert_eq!(lenient.str("a"), Ok(None));
    }

    #[test]
    fn names_strings_booleans_and_objects() {
        let v = json!({"n": "b", "m": "zz", "s": 1, "t": true, "o": {"k": 1}, "p": 2});
        let f = fields(&v);
        let parse = |s: &str| ["a", "b"].iter().position(|x| *x == s);
        assert_eq!(f.name("n", "a or b", parse), Ok(Some(1)));
        let e = f.name("m", "a or b", parse).unwrap_err();
        assert_eq!(e.to_string(), r#"m must be a or b, got "zz""#);
        assert_eq!(f.str("s").unwrap_err().code(), "invalid_type");
        assert_eq!(f.bool("t"), Ok(Some(true)));
        let o = f.object("o", "o.").unwrap().unwrap();
        assert_eq!(
            o.num("k", Some(0.5), "0..=1").unwrap_err().field(),
            Some("o.k")
        );
        assert_eq!(f.object("p", "p.").unwrap_err().field(), Some("p"));
        assert_eq!(f.only(&["n"]).unwrap_err().field(), Some("m"));
    }

    #[test]
    fn a_key_given_twice_is_refused_at_any_depth_naming_its_path() {
        for (text, path) in [
            (r#"{"a": 1, "a": 2}"#, "a"),
            (r#"{"a": 1, "a": 1}"#, "a"),
            (
                r#"{"state": {"request_type": 1, "request_type": 5}}"#,
                "state.request_type",
            ),
            (r#"{"a": {"b": {"c": {"d": 0, "d": 0}}}}"#, "a.b.c.d"),
            (r#"{"o": {"xs": [{}, {"s": 1, "s": 2}]}}"#, "o.xs[1].s"),
            (r#"[[0, {"k": 1, "k": 2}]]"#, "[0][1].k"),
            // The same name, escaped: one key, twice.
            (r#"{"st\u0061te": 1, "state": 2}"#, "state"),
            // The first duplicate met is the one named.
            (r#"{"x": {"y": 1, "y": 2}, "x": 3}"#, "x.y"),
        ] {
            let e = parse_text(text.as_bytes()).unwrap_err();
            assert_eq!(
                (e.code(), e.field()),
                ("duplicate_field", Some(path)),
                "{text}: {e}"
            );
            assert_eq!(e.to_string(), format!("{path} is given more than once"));
            assert_eq!(parse_first(&format!("{text} trailing")).unwrap_err(), e);
        }
        // The same key in different objects, and keys that differ in case, are fine.
        let v = parse_text(br#"{"a": {"k": 1}, "b": {"k": 2}, "K": 3, "k": [{"k": 1}, {"k": 2}]}"#);
        assert_eq!(v.unwrap()["b"]["k"], 2);
    }

    #[test]
    fn parsing_reads_what_serde_json_reads() {
        for text in [
            r#"{"state": {"request_type": 1, "current_load": 0.30000000000000004, "q": -7, "big": 18446744073709551615}}"#,
            r#"[null, true, false, "s\n\u00e9", 1e300, -0.0, [], {}]"#,
            "  \"a string\"  ",
            "12",
        ] {
            let want: Value = serde_json::from_str(text).unwrap();
            assert_eq!(parse_text(text.as_bytes()).unwrap(), want, "{text}");
        }
        // Whole text only, but for parse_first.
        let e = parse_text(br#"{"a": 1} {"b": 2}"#).unwrap_err();
        assert_eq!(e.code(), "invalid_json");
        assert_eq!(parse_first(r#"{"a": 1} {"b": 2}"#).unwrap()["a"], 1);
        // The nesting limit is serde_json's (128).
        let deep = format!("{}{}", "[".repeat(200), "]".repeat(200));
        assert_eq!(
            parse_text(deep.as_bytes()).unwrap_err().code(),
            "invalid_json"
        );
    }

    #[test]
    fn conflicting_fields_name_the_field() {
        let e = FieldError::Conflict {
            field: "status".into(),
            other: "reward",
        };
        assert_eq!(
            (e.code(), e.field(), e.to_string().as_str()),
            (
                "conflicting_fields",
                Some("status"),
                "status cannot be given with reward: give one of them"
            )
        );
        assert_eq!(e.within("body").field(), Some("body.status"));
    }

    #[test]
    fn non_json_numbers_name_their_key() {
        let e = parse_text(br#"{"state": {"current_load": NaN}}"#).unwrap_err();
        assert_eq!(
            (e.code(), e.field()),
            ("invalid_json", Some("state.current_load"))
        );
        let e = parse_text(b"{\"a\": 1 \"b\": 2}").unwrap_err();
        assert_eq!(e.field(), None);
        let e = FieldError::MissingOneOf {
            fields: &["reward", "status"],
        };
        assert_eq!(
            (e.code(), e.field(), e.to_string().as_str()),
            (
                "missing_field",
                Some("reward"),
                "one of reward, status is required"
            )
        );
    }
}

//! JSON text into a [`Value`], by one rule: [`parse_text`] for a body or a line, [`parse_first`]
//! for a value followed by other text. An object that names a key twice is refused at any
//! depth, naming the key's path; a number that is not JSON names the key that holds it.

use super::FieldError;
use serde::de::{self, DeserializeSeed, Deserializer, MapAccess, SeqAccess, Visitor};
use serde_json::map::Entry;
use serde_json::{Map, Number, Value};
use std::cell::RefCell;
use std::fmt;

/// Parses JSON text (one value, nothing but whitespace after it). An object that names a
/// key twice is refused, naming the key's path. When the text is JSON but for one number —
/// a `NaN` or `Infinity` literal, or a number beyond f64 — the error names the key that
/// holds it, so a client learns which field to fix rather than only a line and column.
///
/// # Errors
/// [`FieldError::Duplicate`] for a key given twice; [`FieldError::Json`] with the position
/// (and the key, for a number) for text that is not JSON.
pub fn parse_text(bytes: &[u8]) -> Result<Value, FieldError> {
    let mut de = serde_json::Deserializer::from_slice(bytes);
    parse_one(&mut de, bytes, true)
}

/// Parses the first JSON value of `text`, by the rules of [`parse_text`]; what follows it is
/// ignored (a log line may carry a suffix).
///
/// # Errors
/// As [`parse_text`].
pub fn parse_first(text: &str) -> Result<Value, FieldError> {
    let mut de = serde_json::Deserializer::from_slice(text.as_bytes());
    parse_one(&mut de, text.as_bytes(), false)
}

/// One value from `de`, which reads `bytes`; `whole`: nothing but whitespace may follow.
fn parse_one<'de, R: serde_json::de::Read<'de>>(
    de: &mut serde_json::Deserializer<R>,
    bytes: &[u8],
    whole: bool,
) -> Result<Value, FieldError> {
    let trail = RefCell::new(None);
    let parsed = Unique { trail: &trail }
        .deserialize(&mut *de)
        .and_then(|v| if whole { de.end().map(|()| v) } else { Ok(v) });
    parsed.map_err(|e| match trail.into_inner() {
        Some(path) => FieldError::Duplicate {
            field: path_text(&path),
        },
        None => syntax_error(&e, bytes),
    })
}

/// A serde_json error as [`FieldError::Json`], naming the key of a number that is not JSON.
fn syntax_error(e: &serde_json::Error, bytes: &[u8]) -> FieldError {
    let mut err = FieldError::from_serde(e);
    if let FieldError::Json { field, message, .. } = &mut err {
        let at = byte_offset(bytes, e.line(), e.column());
        if is_number_trouble(e, bytes, at) {
            *field = key_path_at(bytes, at);
            if let Some(path) = field {
                *message = format!("{path} is not a JSON number ({message})");
            }
        }
    }
    err
}

/// One step of a key path: an object's key or an array's index.
enum Step {
    Key(String),
    Index(usize),
}

/// `state.request_type`, `outcome.attempts[0].status` from its steps, innermost first.
fn path_text(innermost_first: &[Step]) -> String {
    let mut out = String::new();
    for step in innermost_first.iter().rev() {
        match step {
            Step::Key(k) => {
                if !out.is_empty() {
                    out.push('.');
                }
                out.push_str(k);
            }
            Step::Index(i) => out.push_str(&format!("[{i}]")),
        }
    }
    out
}

/// A JSON value as [`serde_json::Value`] would read it, except that an object naming a key
/// twice is an error. The duplicate's path is put in `trail` step by step as the error
/// leaves each enclosing value (innermost first), so a good body pays for no path at all.
#[derive(Clone, Copy)]
struct Unique<'t> {
    trail: &'t RefCell<Option<Vec<Step>>>,
}

impl Unique<'_> {
    /// Adds the enclosing step to the duplicate's path, when the error is a duplicate.
    fn enclosing(&self, step: impl FnOnce() -> Step) {
        if let Some(path) = self.trail.borrow_mut().as_mut() {
            path.push(step());
        }
    }
}

impl<'de> DeserializeSeed<'de> for Unique<'_> {
    type Value = Value;

    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<Value, D::Error> {
        d.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for Unique<'_> {
    type Value = Value;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("any JSON value")
    }

    fn visit_bool<E>(self, b: bool) -> Result<Value, E> {
        Ok(Value::Bool(b))
    }

    fn visit_i64<E>(self, n: i64) -> Result<Value, E> {
        Ok(Value::Number(n.into()))
    }

    fn visit_u64<E>(self, n: u64) -> Result<Value, E> {
        Ok(Value::Number(n.into()))
    }

    fn visit_f64<E>(self, n: f64) -> Result<Value, E> {
        Ok(Number::from_f64(n).map_or(Value::Null, Value::Number))
    }

    fn visit_str<E>(self, s: &str) -> Result<Value, E> {
        Ok(Value::String(s.to_owned()))
    }

    fn visit_string<E>(self, s: String) -> Result<Value, E> {
        Ok(Value::String(s))
    }

    fn visit_unit<E>(self) -> Result<Value, E> {
        Ok(Value::Null)
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Value, A::Error> {
        let mut items = Vec::with_capacity(seq.size_hint().unwrap_or(0).min(64));
        loop {
            match seq.next_element_seed(self) {
                Ok(Some(v)) => items.push(v),
                Ok(None) => return Ok(Value::Array(items)),
                Err(e) => {
                    self.enclosing(|| Step::Index(items.len()));
                    return Err(e);
                }
            }
        }
    }

    fn visit_map<A: MapAccess<'de>>(self, mut access: A) -> Result<Value, A::Error> {
        let mut map = Map::new();
        while let Some(key) = access.next_key::<String>()? {
            let value = match access.next_value_seed(self) {
                Ok(v) => v,
                Err(e) => {
                    self.enclosing(|| Step::Key(key));
                    return Err(e);
                }
            };
            match map.entry(key) {
                Entry::Vacant(slot) => {
                    slot.insert(value);
                }
                Entry::Occupied(taken) => {
                    *self.trail.borrow_mut() = Some(vec![Step::Key(taken.key().clone())]);
                    return Err(de::Error::custom("duplicate key"));
                }
            }
        }
        Ok(Value::Object(map))
    }
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

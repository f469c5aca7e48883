//! The lenient first parse of one JSON value: every key a decision record, an outcome record
//! or one of the log envelopes can carry, each read without ever failing on its type.
//!
//! One pass over the bytes serves every source: a record line, a `wrangler tail` event, a
//! Logpush trace event and a Workers Logs event are all objects, and they share key names
//! with different types (`event` is our record's kind but the tail's request object;
//! `outcome` is our routed outcome but the tail's "ok"). Reading each key as "whatever JSON
//! type it holds" keeps the parse to one pass without building a `serde_json::Value` tree,
//! and leaves the type checks to [`super::record`], which can then name the field.

use serde::de::value::MapAccessDeserializer;
use serde::de::{Deserialize, Deserializer, IgnoredAny, MapAccess, SeqAccess, Visitor};
use std::borrow::Cow;
use std::fmt;
use std::marker::PhantomData;

/// A JSON value with containers reduced to their kind (and skipped unread).
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Scalar<'a> {
    Null,
    Bool(bool),
    Num(f64),
    Str(Cow<'a, str>),
    Object,
    Array,
}

impl Scalar<'_> {
    /// "a string", "an object", …: for messages like "expected a number, got a string".
    pub(crate) fn kind(&self) -> &'static str {
        match self {
            Scalar::Null => "null",
            Scalar::Bool(_) => "a boolean",
            Scalar::Num(_) => "a number",
            Scalar::Str(_) => "a string",
            Scalar::Object => "an object",
            Scalar::Array => "an array",
        }
    }
}

/// A value that is hoped to be an object of shape `T` (or an array of such): anything else
/// is kept as a [`Scalar`] so that the caller can say what it was.
#[derive(Debug)]
pub(crate) enum Lax<'a, T> {
    Map(T),
    Seq(Vec<Lax<'a, T>>),
    Scalar(Scalar<'a>),
}

impl<'a, T> Lax<'a, T> {
    pub(crate) fn kind(&self) -> &'static str {
        match self {
            Lax::Map(_) => "an object",
            Lax::Seq(_) => "an array",
            Lax::Scalar(s) => s.kind(),
        }
    }
}

struct ScalarVisitor<'a>(PhantomData<&'a ()>);

impl<'de: 'a, 'a> Visitor<'de> for ScalarVisitor<'a> {
    type Value = Scalar<'a>;

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("any JSON value")
    }
    fn visit_unit<E>(self) -> Result<Self::Value, E> {
        Ok(Scalar::Null)
    }
    fn visit_none<E>(self) -> Result<Self::Value, E> {
        Ok(Scalar::Null)
    }
    fn visit_bool<E>(self, v: bool) -> Result<Self::Value, E> {
        Ok(Scalar::Bool(v))
    }
    fn visit_i64<E>(self, v: i64) -> Result<Self::Value, E> {
        Ok(Scalar::Num(v as f64))
    }
    fn visit_u64<E>(self, v: u64) -> Result<Self::Value, E> {
        Ok(Scalar::Num(v as f64))
    }
    fn visit_f64<E>(self, v: f64) -> Result<Self::Value, E> {
        Ok(Scalar::Num(v))
    }
    fn visit_borrowed_str<E>(self, v: &'de str) -> Result<Self::Value, E> {
        Ok(Scalar::Str(Cow::Borrowed(v)))
    }
    fn visit_str<E>(self, v: &str) -> Result<Self::Value, E> {
        Ok(Scalar::Str(Cow::Owned(v.to_owned())))
    }
    fn visit_string<E>(self, v: String) -> Result<Self::Value, E> {
        Ok(Scalar::Str(Cow::Owned(v)))
    }
    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
        while map.next_entry::<IgnoredAny, IgnoredAny>()?.is_some() {}
        Ok(Scalar::Object)
    }
    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Self::Value, A::Error> {
        while seq.next_element::<IgnoredAny>()?.is_some() {}
        Ok(Scalar::Array)
    }
}

impl<'de: 'a, 'a> Deserialize<'de> for Scalar<'a> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        d.deserialize_any(ScalarVisitor(PhantomData))
    }
}

struct LaxVisitor<'a, T>(PhantomData<(&'a (), T)>);

impl<'de: 'a, 'a, T: Deserialize<'de>> Visitor<'de> for LaxVisitor<'a, T> {
    type Value = Lax<'a, T>;

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("any JSON value")
    }
    fn visit_unit<E>(self) -> Result<Self::Value, E> {
        Ok(Lax::Scalar(Scalar::Null))
    }
    fn visit_none<E>(self) -> Result<Self::Value, E> {
        Ok(Lax::Scalar(Scalar::Null))
    }
    fn visit_bool<E>(self, v: bool) -> Result<Self::Value, E> {
        Ok(Lax::Scalar(Scalar::Bool(v)))
    }
    fn visit_i64<E>(self, v: i64) -> Result<Self::Value, E> {
        Ok(Lax::Scalar(Scalar::Num(v as f64)))
    }
    fn visit_u64<E>(self, v: u64) -> Result<Self::Value, E> {
        Ok(Lax::Scalar(Scalar::Num(v as f64)))
    }
    fn visit_f64<E>(self, v: f64) -> Result<Self::Value, E> {
        Ok(Lax::Scalar(Scalar::Num(v)))
    }
    fn visit_borrowed_str<E>(self, v: &'de str) -> Result<Self::Value, E> {
        Ok(Lax::Scalar(Scalar::Str(Cow::Borrowed(v))))
    }
    fn visit_str<E>(self, v: &str) -> Result<Self::Value, E> {
        Ok(Lax::Scalar(Scalar::Str(Cow::Owned(v.to_owned()))))
    }
    fn visit_string<E>(self, v: String) -> Result<Self::Value, E> {
        Ok(Lax::Scalar(Scalar::Str(Cow::Owned(v))))
    }
    fn visit_map<A: MapAccess<'de>>(self, map: A) -> Result<Self::Value, A::Error> {
        T::deserialize(MapAccessDeserializer::new(map)).map(Lax::Map)
    }
    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Self::Value, A::Error> {
        let mut items = Vec::new();
        while let Some(item) = seq.next_element::<Lax<'a, T>>()? {
            items.push(item);
        }
        Ok(Lax::Seq(items))
    }
}

impl<'de: 'a, 'a, T: Deserialize<'de>> Deserialize<'de> for Lax<'a, T> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        d.deserialize_any(LaxVisitor(PhantomData))
    }
}

type S<'a> = Option<Scalar<'a>>;

/// Every key of interest in one JSON object, whichever source it comes from. Unknown keys
/// are skipped; the only ways this parse fails are malformed JSON, nesting beyond
/// serde_json's recursion limit, and a key given twice.
#[derive(Debug, Default, serde::Deserialize)]
#[serde(default)]
pub(crate) struct RawLine<'a> {
    // Our records.
    #[serde(borrow)]
    pub log_version: S<'a>,
    #[serde(borrow)]
    pub event: S<'a>,
    #[serde(borrow)]
    pub ts: S<'a>,
    #[serde(borrow)]
    pub decision_id: S<'a>,
    #[serde(borrow)]
    pub request_id: S<'a>,
    #[serde(borrow)]
    pub endpoint: S<'a>,
    #[serde(borrow)]
    pub state: Option<Lax<'a, RawState<'a>>>,
    #[serde(borrow)]
    pub action: S<'a>,
    /// Our record's "model"/"rules"/"default", or a Workers Logs event's parsed record.
    #[serde(borrow)]
    pub source: Option<Lax<'a, Box<RawLine<'a>>>>,
    #[serde(borrow)]
    pub fallback_reason: S<'a>,
    #[serde(borrow)]
    pub rule: S<'a>,
    #[serde(borrow)]
    pub confidence: S<'a>,
    #[serde(borrow)]
    pub probabilities: Option<Lax<'a, RawProbabilities<'a>>>,
    #[serde(borrow)]
    pub propensity: S<'a>,
    #[serde(borrow)]
    pub explored: S<'a>,
    #[serde(borrow)]
    pub model_version: S<'a>,
    #[serde(borrow)]
    pub rules_version: S<'a>,
    #[serde(borrow)]
    pub encoder_version: S<'a>,
    #[serde(borrow)]
    pub backend: S<'a>,
    #[serde(borrow)]
    pub arm: S<'a>,
    #[serde(borrow)]
    pub decision_us: S<'a>,
    /// Our routed outcome object, or a tail event's "ok"/"exception".
    #[serde(borrow)]
    pub outcome: Option<Lax<'a, RawOutcome<'a>>>,
    #[serde(borrow)]
    pub request: Option<Lax<'a, RawRequest<'a>>>,
    #[serde(borrow)]
    pub shadow: Option<Lax<'a, RawShadow<'a>>>,
    #[serde(borrow)]
    pub detail: S<'a>,
    #[serde(borrow)]
    pub reward: S<'a>,
    #[serde(borrow)]
    pub status: S<'a>,
    #[serde(borrow)]
    pub latency_ms: S<'a>,
    // Envelopes: `wrangler tail` (logs), Logpush (Logs), Workers Logs ($metadata, and the
    // query API's result/events wrapping).
    #[serde(borrow)]
    pub logs: Option<Lax<'a, RawLog<'a>>>,
    #[serde(borrow, rename = "Logs")]
    pub logs_logpush: Option<Lax<'a, RawLog<'a>>>,
    #[serde(borrow, rename = "$metadata")]
    pub metadata: Option<Lax<'a, RawMetadata<'a>>>,
    #[serde(borrow)]
    pub result: Option<Lax<'a, Box<RawLine<'a>>>>,
    #[serde(borrow)]
    pub events: Option<Lax<'a, Box<RawLine<'a>>>>,
}

/// The six state fields.
#[derive(Debug, Default, serde::Deserialize)]
#[serde(default)]
pub(crate) struct RawState<'a> {
    #[serde(borrow)]
    pub request_type: S<'a>,
    #[serde(borrow)]
    pub region_id: S<'a>,
    #[serde(borrow)]
    pub current_load: S<'a>,
    #[serde(borrow)]
    pub recent_success_rate: S<'a>,
    #[serde(borrow)]
    pub queue_depth: S<'a>,
    #[serde(borrow)]
    pub hour: S<'a>,
}

/// The model's probabilities by action.
#[derive(Debug, Default, serde::Deserialize)]
#[serde(default)]
pub(crate) struct RawProbabilities<'a> {
    #[serde(borrow)]
    pub route_a: S<'a>,
    #[serde(borrow)]
    pub route_b: S<'a>,
    #[serde(borrow)]
    pub route_c: S<'a>,
    #[serde(borrow)]
    pub reject: S<'a>,
}

/// The outcome of a routed request, embedded in its decision record.
#[derive(Debug, Default, serde::Deserialize)]
#[serde(default)]
pub(crate) struct RawOutcome<'a> {
    #[serde(borrow)]
    pub origin: S<'a>,
    #[serde(borrow)]
    pub status: S<'a>,
    #[serde(borrow)]
    pub latency_ms: S<'a>,
    #[serde(borrow)]
    pub failover: S<'a>,
    #[serde(borrow)]
    pub origin_down: S<'a>,
    #[serde(borrow)]
    pub error: S<'a>,
    #[serde(borrow)]
    pub attempts: Option<Lax<'a, RawAttempt<'a>>>,
}

/// One origin contacted for a routed request.
#[derive(Debug, Default, serde::Deserialize)]
#[serde(default)]
pub(crate) struct RawAttempt<'a> {
    #[serde(borrow)]
    pub origin: S<'a>,
    #[serde(borrow)]
    pub status: S<'a>,
    #[serde(borrow)]
    pub error: S<'a>,
    #[serde(borrow)]
    pub latency_ms: S<'a>,
}

/// Where a routed request's state came from.
#[derive(Debug, Default, serde::Deserialize)]
#[serde(default)]
pub(crate) struct RawRequest<'a> {
    #[serde(borrow)]
    pub method: S<'a>,
    #[serde(borrow)]
    pub country: S<'a>,
    #[serde(borrow)]
    pub continent: S<'a>,
    #[serde(borrow)]
    pub signals_age_s: S<'a>,
    #[serde(borrow)]
    pub signals_detail: S<'a>,
}

/// Shadow mode: the model's action beside the rules'.
#[derive(Debug, Default, serde::Deserialize)]
#[serde(default)]
pub(crate) struct RawShadow<'a> {
    #[serde(borrow)]
    pub model_action: S<'a>,
    #[serde(borrow)]
    pub agree: S<'a>,
}

/// One console message of a tail event (`message`) or a Logpush trace event (`Message`):
/// the arguments of one `console.log` call.
#[derive(Debug, Default, serde::Deserialize)]
#[serde(default)]
pub(crate) struct RawLog<'a> {
    #[serde(borrow)]
    pub message: Option<Lax<'a, Box<RawLine<'a>>>>,
    #[serde(borrow, rename = "Message")]
    pub message_logpush: Option<Lax<'a, Box<RawLine<'a>>>>,
}

/// Workers Logs' `$metadata`: `message` may hold the raw text of the line.
#[derive(Debug, Default, serde::Deserialize)]
#[serde(default)]
pub(crate) struct RawMetadata<'a> {
    #[serde(borrow)]
    pub message: S<'a>,
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(text: &str) -> Result<RawLine<'_>, serde_json::Error> {
        serde_json::from_str(text)
    }

    #[test]
    fn every_type_is_accepted_and_remembered_by_kind() {
        let r = parse(
            r#"{"event":{"request":{}},"outcome":"ok","ts":[1,2],"state":7,"source":{"x":1},"decision_id":"a\"b"}"#,
        )
        .unwrap();
        assert_eq!(r.event, Some(Scalar::Object));
        assert!(matches!(r.outcome, Some(Lax::Scalar(Scalar::Str(ref s))) if s == "ok"));
        assert_eq!(r.ts, Some(Scalar::Array));
        assert!(matches!(r.state, Some(Lax::Scalar(Scalar::Num(n))) if n == 7.0));
        assert!(matches!(r.source, Some(Lax::Map(_))));
        // An escaped string cannot borrow; it is owned, with the escape resolved.
        assert_eq!(r.decision_id, Some(Scalar::Str(Cow::Owned("a\"b".into()))));
    }

    #[test]
    fn plain_strings_borrow_from_the_input() {
        let r = parse(r#"{"decision_id":"abc","model_version":null}"#).unwrap();
        assert!(matches!(
            r.decision_id,
            Some(Scalar::Str(Cow::Borrowed("abc")))
        ));
        // Option reads null as absent: the record checks treat both alike.
        assert_eq!(r.model_version, None);
    }

    #[test]
    fn only_syntax_nesting_and_duplicates_fail() {
        assert!(parse(r#"{"a":"#).is_err());
        assert!(parse(r#"{"ts":"a","ts":"b"}"#).is_err());
        // Under an unknown key serde_json skips without recursing: deep is fine there.
        let deep = format!("{{\"x\":{}{}}}", "[".repeat(100_000), "]".repeat(100_000));
        assert!(parse(&deep).is_ok());
        // Under a key this parse descends into, its recursion limit stops it.
        let deep_known = format!("{{\"logs\":{}{}}}", "[".repeat(10_000), "]".repeat(10_000));
        assert!(parse(&deep_known).is_err());
    }
}

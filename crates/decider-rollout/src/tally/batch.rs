//! The flush batch as the control plane reads it: one serving isolate's counts since its
//! last flush ([`decider_core::rollout::live`] writes it), checked field by field. Anything
//! malformed or inconsistent is a [`BatchError`] naming the field (`rows[2].s`,
//! `outcomes[7][0]`), never a panic.

use super::{valid_version, Key, Tally, MAX_ROWS, MAX_VERSIONS, MAX_VERSION_LEN, OTHER_VERSION};
use decider_core::rollout::live::{
    CallerOutcome, Counts, BATCH_FORMAT, FALLBACK_SLOTS, MAX_BATCH_BYTES, MAX_BATCH_OUTCOMES,
    REWARD_SCALE,
};
use decider_core::rollout::Arm;
use serde::de::Error as _;
use serde::{Deserialize, Deserializer};
use serde_json::{Map, Value};
use std::collections::BTreeSet;
use thiserror::Error;

/// Largest count a flush batch may carry in `d` or `o` (an isolate flushes every few
/// seconds; this is far beyond what one can count in a day). Reward sums are bounded by
/// `o` and so stay below 2⁵³, exact in any JSON reader.
pub const MAX_BATCH_COUNT: u64 = 1_000_000_000;

/// One flush batch, checked.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Batch {
    /// The challenger model the isolate serves (None without one).
    pub challenger: Option<String>,
    /// The isolate's `CANARY_PERCENT` (None from an isolate that does not say): with the
    /// challenger's share it gives the arms' allocation the two-sample test needs.
    pub canary: Option<u8>,
    /// Decisions, routed outcomes and fallbacks.
    pub tally: Tally,
    /// `/v1/decide` callers' outcomes, each with its decision's id.
    pub outcomes: Vec<CallerOutcome>,
}

impl Batch {
    /// Reads and checks a flush batch received from a serving isolate (at most
    /// [`MAX_BATCH_BYTES`], counts at most [`MAX_BATCH_COUNT`], at most
    /// [`MAX_BATCH_OUTCOMES`] caller outcomes).
    ///
    /// # Errors
    /// A [`BatchError`] naming the first field that is malformed or inconsistent.
    pub fn from_bytes(bytes: &[u8]) -> Result<Batch, BatchError> {
        if bytes.len() > MAX_BATCH_BYTES {
            return Err(BatchError::new(
                "body",
                format!(
                    "a batch is at most {MAX_BATCH_BYTES} bytes, got {}",
                    bytes.len()
                ),
            ));
        }
        let v: Value = serde_json::from_slice(bytes)
            .map_err(|e| BatchError::new("body", format!("not JSON: {e}")))?;
        let obj = object(&v, "batch")?;
        known(obj, "", &["v", "challenger", "canary", "rows", "outcomes"])?;
        format(obj, BATCH_FORMAT)?;
        let challenger = match obj.get("challenger") {
            None | Some(Value::Null) => None,
            Some(Value::String(s)) if valid_version(s) => Some(s.clone()),
            Some(v) => return Err(BatchError::new("challenger", version_shape(v))),
        };
        let canary = match obj.get("canary") {
            None | Some(Value::Null) => None,
            Some(v) => match v.as_u64() {
                Some(c) if c <= 100 => Some(c as u8),
                _ => {
                    return Err(BatchError::new(
                        "canary",
                        format!("must be an integer 0..=100, got {}", quote(v)),
                    ))
                }
            },
        };
        let tally = rows(obj, MAX_BATCH_COUNT)?;
        let outcomes = match obj.get("outcomes") {
            None => Vec::new(),
            Some(Value::Array(a)) if a.len() <= MAX_BATCH_OUTCOMES => a
                .iter()
                .enumerate()
                .map(|(i, o)| caller_outcome(o, &format!("outcomes[{i}]")))
                .collect::<Result<_, _>>()?,
            Some(Value::Array(a)) => {
                return Err(BatchError::new(
                    "outcomes",
                    format!("at most {MAX_BATCH_OUTCOMES} outcomes, got {}", a.len()),
                ))
            }
            Some(other) => {
                return Err(BatchError::new(
                    "outcomes",
                    format!("must be an array, got {}", type_name(other)),
                ))
            }
        };
        Ok(Batch {
            challenger,
            canary,
            tally,
            outcomes,
        })
    }
}

impl<'de> Deserialize<'de> for Tally {
    /// From the stored form, checked as a batch's rows are but with counts up to `u64::MAX`
    /// (stored totals add up many batches).
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Tally, D::Error> {
        let v = Value::deserialize(d)?;
        stored(&v).map_err(D::Error::custom)
    }
}

/// A tally's stored form (counts up to `u64::MAX`).
fn stored(v: &Value) -> Result<Tally, BatchError> {
    let obj = object(v, "tally")?;
    known(obj, "", &["v", "rows"])?;
    format(obj, super::STORED_FORMAT)?;
    rows(obj, u64::MAX)
}

fn format(obj: &Map<String, Value>, want: u64) -> Result<(), BatchError> {
    match obj.get("v") {
        None => Err(BatchError::new("v", "missing")),
        Some(v) if v.as_u64() == Some(want) => Ok(()),
        Some(v) => Err(BatchError::new(
            "v",
            format!("must be {want}, got {}", quote(v)),
        )),
    }
}

/// `[id, decided_ms, reward]`.
fn caller_outcome(v: &Value, at: &str) -> Result<CallerOutcome, BatchError> {
    let a = match v {
        Value::Array(a) if a.len() == 3 => a,
        other => {
            return Err(BatchError::new(
                at,
                format!(
                    "must be [decision id, decided ms, reward], got {}",
                    quote(other)
                ),
            ))
        }
    };
    let id = match &a[0] {
        Value::String(s) if decider_core::record::valid_decision_id(s) && !s.contains('.') => s,
        other => {
            return Err(BatchError::new(
                format!("{at}[0]"),
                format!("must be a decision id's base, got {}", quote(other)),
            ))
        }
    };
    if decider_core::decision_id::base_tag(id).is_none() {
        return Err(BatchError::new(
            format!("{at}[0]"),
            format!("must end with its arm and source tag, got {}", quote(&a[0])),
        ));
    }
    let decided_ms = a[1].as_i64().filter(|t| *t >= 0).ok_or_else(|| {
        BatchError::new(
            format!("{at}[1]"),
            format!("must be ms since the epoch, got {}", quote(&a[1])),
        )
    })?;
    let reward = a[2]
        .as_u64()
        .filter(|r| *r <= REWARD_SCALE)
        .ok_or_else(|| {
            BatchError::new(
                format!("{at}[2]"),
                format!(
                    "must be a reward in millionths 0..={REWARD_SCALE}, got {}",
                    quote(&a[2])
                ),
            )
        })?;
    Ok(CallerOutcome {
        id: id.clone(),
        decided_ms,
        reward,
    })
}

/// The `rows` of a batch or stored tally; `limit` bounds `d` and `o`.
fn rows(obj: &Map<String, Value>, limit: u64) -> Result<Tally, BatchError> {
    let rows = match obj.get("rows") {
        None => return Err(BatchError::new("rows", "missing")),
        Some(Value::Array(a)) => a,
        Some(other) => {
            return Err(BatchError::new(
                "rows",
                format!("must be an array, got {}", type_name(other)),
            ))
        }
    };
    if rows.len() > MAX_ROWS {
        return Err(BatchError::new(
            "rows",
            format!("at most {MAX_ROWS} rows, got {}", rows.len()),
        ));
    }
    let mut tally = Tally::new();
    let mut versions = BTreeSet::new();
    let mut seen = BTreeSet::new();
    for (i, row) in rows.iter().enumerate() {
        let at = format!("rows[{i}]");
        let (key, counts) = parse_row(row, &at, limit)?;
        if let Some(v) = key.model_version.as_deref().filter(|v| *v != OTHER_VERSION) {
            versions.insert(v.to_owned());
            if versions.len() > MAX_VERSIONS {
                return Err(BatchError::new(
                    format!("{at}.mv"),
                    format!("a batch names at most {MAX_VERSIONS} model versions"),
                ));
            }
        }
        if !seen.insert(key.clone()) {
            return Err(BatchError::new(
                at,
                "repeats the arm, model version and source of an earlier row",
            ));
        }
        // A row of zeros counts nothing; keeping it would only take a version's place.
        if counts != Counts::default() {
            tally.rows.insert(key, counts);
        }
    }
    Ok(tally)
}

/// A flush batch refused: which field, and why.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
#[error("{field}: {message}")]
pub struct BatchError {
    /// The field, as a path: `rows[2].s`, `rows`, `v`, `body`.
    pub field: String,
    /// What is wrong with it.
    pub message: String,
}

impl BatchError {
    fn new(field: impl Into<String>, message: impl Into<String>) -> BatchError {
        BatchError {
            field: field.into(),
            message: message.into(),
        }
    }
}

fn type_name(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}

/// A value quoted back in an error, at most 40 bytes of it.
fn quote(v: &Value) -> String {
    let s = v.to_string();
    if s.len() <= 40 {
        return s;
    }
    let end = (0..=40).rev().find(|&i| s.is_char_boundary(i)).unwrap_or(0);
    format!("{}…", &s[..end])
}

fn object<'a>(v: &'a Value, field: &str) -> Result<&'a Map<String, Value>, BatchError> {
    v.as_object()
        .ok_or_else(|| BatchError::new(field, format!("must be an object, got {}", type_name(v))))
}

fn known(obj: &Map<String, Value>, at: &str, names: &[&str]) -> Result<(), BatchError> {
    match obj.keys().find(|k| !names.contains(&k.as_str())) {
        Some(k) => Err(BatchError::new(
            join(at, &quote_key(k)),
            format!("unknown field; expected one of {}", names.join(", ")),
        )),
        None => Ok(()),
    }
}

/// A key as it appears in a field path, cut to 40 bytes.
fn quote_key(k: &str) -> String {
    if k.len() <= 40 {
        return k.to_owned();
    }
    let end = (0..=40).rev().find(|&i| k.is_char_boundary(i)).unwrap_or(0);
    format!("{}…", &k[..end])
}

fn join(at: &str, name: &str) -> String {
    if at.is_empty() {
        name.to_owned()
    } else {
        format!("{at}.{name}")
    }
}

/// A non-negative integer at most `max`; absent is 0.
fn count(obj: &Map<String, Value>, at: &str, name: &str, max: u64) -> Result<u64, BatchError> {
    let Some(v) = obj.get(name) else {
        return Ok(0);
    };
    match v.as_u64() {
        Some(n) if n <= max => Ok(n),
        Some(n) => Err(BatchError::new(
            join(at, name),
            format!("must be at most {max}, got {n}"),
        )),
        None => Err(BatchError::new(
            join(at, name),
            format!("must be a non-negative integer, got {}", quote(v)),
        )),
    }
}

fn version_shape(v: &Value) -> String {
    format!(
        "must be null or a model version (1..={MAX_VERSION_LEN} visible ASCII characters, not starting with '(' unless {OTHER_VERSION}), got {}",
        quote(v)
    )
}

fn parse_row(row: &Value, at: &str, limit: u64) -> Result<(Key, Counts), BatchError> {
    let obj = object(row, at)?;
    known(obj, at, &["arm", "mv", "src", "d", "o", "s", "q", "fb"])?;
    let arm = match obj.get("arm").and_then(Value::as_str) {
        Some(name) => Arm::ALL.into_iter().find(|a| a.name() == name),
        None => None,
    }
    .ok_or_else(|| {
        BatchError::new(
            join(at, "arm"),
            match obj.get("arm") {
                None => "missing".to_owned(),
                Some(v) => format!("must be champion, challenger or holdout, got {}", quote(v)),
            },
        )
    })?;
    let source = match obj.get("src").and_then(Value::as_str) {
        Some(name) => decider_core::Source::ALL
            .into_iter()
            .find(|s| s.name() == name),
        None => None,
    }
    .ok_or_else(|| {
        BatchError::new(
            join(at, "src"),
            match obj.get("src") {
                None => "missing".to_owned(),
                Some(v) => format!("must be model, rules or default, got {}", quote(v)),
            },
        )
    })?;
    let model_version = match obj.get("mv") {
        None | Some(Value::Null) => None,
        Some(Value::String(s)) if valid_version(s) => Some(s.clone()),
        Some(v) => return Err(BatchError::new(join(at, "mv"), version_shape(v))),
    };
    let decisions = count(obj, at, "d", limit)?;
    let outcomes = count(obj, at, "o", limit)?;
    let reward_sum = count(obj, at, "s", u64::MAX)?;
    let reward_sq_sum = count(obj, at, "q", u64::MAX)?;
    let most = u128::from(outcomes) * u128::from(REWARD_SCALE);
    if u128::from(reward_sum) > most {
        return Err(BatchError::new(
            join(at, "s"),
            format!("a sum of {outcomes} rewards in [0, 1] is at most {most} millionths, got {reward_sum}"),
        ));
    }
    if reward_sq_sum > reward_sum {
        return Err(BatchError::new(
            join(at, "q"),
            format!("a sum of squares of rewards in [0, 1] is at most their sum ({reward_sum}), got {reward_sq_sum}"),
        ));
    }
    // Cauchy–Schwarz: Σr² ≥ (Σr)²/n, less half a millionth per rounded square.
    let (s, q, o, k) = (
        u128::from(reward_sum),
        u128::from(reward_sq_sum),
        u128::from(outcomes),
        u128::from(REWARD_SCALE),
    );
    if outcomes > 0 && (2 * q + o).saturating_mul(o).saturating_mul(k) < 2 * s * s {
        return Err(BatchError::new(
            join(at, "q"),
            format!("{reward_sq_sum} is below the least sum of squares of {outcomes} rewards summing to {reward_sum}"),
        ));
    }
    let mut fallbacks = [0u64; 8];
    if let Some(fb) = obj.get("fb") {
        let fat = join(at, "fb");
        let fb = object(fb, &fat)?;
        known(fb, &fat, &FALLBACK_SLOTS)?;
        for (i, name) in FALLBACK_SLOTS.iter().enumerate() {
            fallbacks[i] = count(fb, &fat, name, limit)?;
        }
        let sum: u128 = fallbacks.iter().map(|&n| u128::from(n)).sum();
        if sum > u128::from(decisions) {
            return Err(BatchError::new(
                fat,
                format!("{sum} fallbacks is more than the row's {decisions} decisions"),
            ));
        }
    }
    Ok((
        Key {
            arm,
            model_version,
            source,
        },
        Counts {
            decisions,
            outcomes,
            reward_sum,
            reward_sq_sum,
            fallbacks,
        },
    ))
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::super::tests::batch_tally;
    use super::*;

    #[test]
    fn malformed_batches_are_refused_naming_the_field() {
        let row =
            r#"{"arm":"champion","mv":"m","src":"model","d":3,"o":2,"s":1500000,"q":1250000}"#;
        let ok = format!(r#"{{"v":2,"rows":[{row}]}}"#);
        assert!(batch_tally(ok.as_bytes()).is_ok());
        let with = |r: &str| format!(r#"{{"v":2,"rows":[{row},{r}]}}"#);
        let many_rows = format!(
            r#"{{"v":2,"rows":[{}]}}"#,
            vec![r#"{"arm":"champion","src":"model"}"#; MAX_ROWS + 1].join(",")
        );
        let many_versions = format!(
            r#"{{"v":2,"rows":[{}]}}"#,
            (0..=MAX_VERSIONS)
                .map(|i| format!(r#"{{"arm":"champion","src":"model","mv":"v{i}"}}"#))
                .collect::<Vec<_>>()
                .join(",")
        );
        let outcome = |o: &str| format!(r#"{{"v":2,"rows":[],"outcomes":[[{o}]]}}"#);
        let many_outcomes = format!(
            r#"{{"v":2,"rows":[],"outcomes":[{}]}}"#,
            vec![r#"["d-1",5,0]"#; MAX_BATCH_OUTCOMES + 1].join(",")
        );
        let b = Batch::from_bytes(outcome(r#""d-1",5,250000"#).as_bytes()).unwrap();
        assert_eq!(
            b.outcomes,
            vec![CallerOutcome {
                id: "d-1".into(),
                decided_ms: 5,
                reward: 250_000
            }]
        );
        let b = Batch::from_bytes(br#"{"v":2,"challenger":"m-2","rows":[]}"#).unwrap();
        assert_eq!(b.challenger.as_deref(), Some("m-2"));
        let cases: Vec<(String, &str)> = vec![
            ("".into(), "body"),
            ("{".into(), "body"),
            ("[]".into(), "batch"),
            (r#"{"rows":[]}"#.into(), "v"),
            (r#"{"v":1,"rows":[]}"#.into(), "v"),
            (r#"{"v":2}"#.into(), "rows"),
            (r#"{"v":2,"rows":{}}"#.into(), "rows"),
            (r#"{"v":2,"rows":[],"extra":1}"#.into(), "extra"),
            (with("7"), "rows[1]"),
            (with(r#"{"src":"model"}"#), "rows[1].arm"),
            (with(r#"{"arm":"canary","src":"model"}"#), "rows[1].arm"),
            (with(r#"{"arm":"champion"}"#), "rows[1].src"),
            (with(r#"{"arm":"champion","src":"ai"}"#), "rows[1].src"),
            (
                with(r#"{"arm":"champion","src":"model","mv":7}"#),
                "rows[1].mv",
            ),
            (
                with(r#"{"arm":"champion","src":"model","mv":""}"#),
                "rows[1].mv",
            ),
            (
                with(r#"{"arm":"champion","src":"model","mv":"a b"}"#),
                "rows[1].mv",
            ),
            (
                with(r#"{"arm":"champion","src":"model","d":-1}"#),
                "rows[1].d",
            ),
            (
                with(r#"{"arm":"champion","src":"model","d":1.5}"#),
                "rows[1].d",
            ),
            (
                with(r#"{"arm":"champion","src":"model","d":"3"}"#),
                "rows[1].d",
            ),
            (
                with(r#"{"arm":"champion","src":"model","d":1e300}"#),
                "rows[1].d",
            ),
            (
                with(r#"{"arm":"champion","src":"model","o":2000000000}"#),
                "rows[1].o",
            ),
            (
                with(r#"{"arm":"champion","src":"model","o":1,"s":1000001}"#),
                "rows[1].s",
            ),
            (
                with(r#"{"arm":"champion","src":"model","o":1,"s":500000,"q":500001}"#),
                "rows[1].q",
            ),
            // Two rewards summing to 1 have squares summing to at least 0.5.
            (
                with(r#"{"arm":"champion","src":"model","o":2,"s":1000000,"q":400000}"#),
                "rows[1].q",
            ),
            (
                with(r#"{"arm":"champion","src":"model","fb":[]}"#),
                "rows[1].fb",
            ),
            (
                with(r#"{"arm":"champion","src":"model","d":1,"fb":{"bogus":1}}"#),
                "rows[1].fb.bogus",
            ),
            (
                with(r#"{"arm":"champion","src":"rules","d":1,"fb":{"low_confidence":2}}"#),
                "rows[1].fb",
            ),
            (
                with(r#"{"arm":"champion","src":"model","x":1}"#),
                "rows[1].x",
            ),
            (with(row), "rows[1]"),
            (many_rows, "rows"),
            (many_versions, "rows[8].mv"),
            (r#"{"v":2,"rows":[],"challenger":7}"#.into(), "challenger"),
            (r#"{"v":2,"rows":[],"outcomes":{}}"#.into(), "outcomes"),
            (r#"{"v":2,"rows":[],"outcomes":[7]}"#.into(), "outcomes[0]"),
            (outcome(r#""d-1",5"#), "outcomes[0]"),
            (outcome(r#"7,5,0"#), "outcomes[0][0]"),
            (outcome(r#""d-1.x.y",5,0"#), "outcomes[0][0]"),
            (outcome(r#""d-x",5,0"#), "outcomes[0][0]"),
            (outcome(r#""d-1",-5,0"#), "outcomes[0][1]"),
            (outcome(r#""d-1",5.5,0"#), "outcomes[0][1]"),
            (outcome(r#""d-1",5,1000001"#), "outcomes[0][2]"),
            (outcome(r#""d-1",5,0.5"#), "outcomes[0][2]"),
            (many_outcomes, "outcomes"),
        ];
        for (body, field) in cases {
            let e = batch_tally(body.as_bytes()).unwrap_err();
            assert_eq!(e.field, field, "{body}: {e}");
            assert!(e.to_string().len() < 400, "{e}");
        }
        let big = format!(
            r#"{{"v":2,"rows":[],"pad":"{}"}}"#,
            "x".repeat(MAX_BATCH_BYTES)
        );
        assert_eq!(batch_tally(big.as_bytes()).unwrap_err().field, "body");
        // Stored totals may exceed a batch's limit.
        let stored = r#"{"v":1,"rows":[{"arm":"champion","src":"model","d":5000000000}]}"#;
        let sent = stored.replace(r#""v":1"#, r#""v":2"#);
        assert_eq!(batch_tally(sent.as_bytes()).unwrap_err().field, "rows[0].d");
        let t: Tally = serde_json::from_str(stored).unwrap();
        assert_eq!(t.total().decisions, 5_000_000_000);
        let bad: Result<Tally, _> = serde_json::from_str(r#"{"v":1,"rows":[{"arm":"x"}]}"#);
        assert!(bad.unwrap_err().to_string().contains("rows[0].arm"));
    }
}

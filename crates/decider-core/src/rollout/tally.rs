//! Decision and outcome counters that add up across isolates and windows.
//!
//! Each isolate counts what it decides and what became of it in a [`Tally`], keyed by
//! (arm, model version, source): decisions, outcomes, the sum of their rewards and of their
//! squares, and fallbacks by reason. It sends the tally as one [flush batch](Tally::to_batch)
//! every few seconds or outcomes, and starts a new one. The rollout's store keeps the
//! batches it receives in [`Windows`]: per-window totals keyed by window start, at most a
//! fixed number of windows, older ones folded into one total.
//!
//! # Exact, order-free arithmetic
//! Rewards are in `[0, 1]` and are counted in millionths ([`REWARD_SCALE`]): a reward adds
//! `round(r · 10⁶)` to the reward sum and `round(q² / 10⁶)` (q the reward in millionths) to
//! the sum of squares. Every count is an integer and adds with saturation at `u64::MAX`, so
//! [`Tally::merge`] is exactly associative and commutative: the store's totals do not depend
//! on the order batches arrive in or on how they were grouped. Quantising costs at most
//! 5·10⁻⁷ per reward.
//!
//! # Bounded size
//! A tally names at most [`MAX_VERSIONS`] model versions. Beyond that, the counts of the
//! versions that sort last (byte order) are merged under [`OTHER_VERSION`]: the totals per
//! arm and source stay exact, only the breakdown of those versions is lost. Which versions
//! are kept depends only on the set of versions seen, never on the order, so merging stays
//! associative and commutative. A tally therefore has at most [`MAX_ROWS`] rows, and a
//! batch at most that many.
//!
//! # The flush batch
//! `{"v":1,"rows":[{"arm":"challenger","mv":"gbdt-2","src":"model","d":120,"o":118,
//! "s":115000000,"q":115000000,"fb":{"low_confidence":2}}]}`: per row the key (arm, model
//! version or null, source), then decisions `d`, outcomes `o`, reward sum `s` and sum of
//! squares `q` in millionths, and fallbacks by reason `fb` (the reasons of
//! [`FallbackReason`] and `unspecified`); zero counts may be left out. A batch received
//! from outside is checked by [`Tally::from_batch`]: anything malformed or inconsistent is
//! a [`BatchError`] naming the field (`rows[2].s`), never a panic.

use super::alarm::Bin;
use super::Arm;
use crate::policy::{FallbackReason, Source};
use serde::de::Error as _;
use serde::{Deserialize, Deserializer, Serialize, Serializer};
use serde_json::{json, Map, Value};
use std::cmp::Ordering;
use std::collections::{BTreeMap, BTreeSet};
use thiserror::Error;

/// Rewards are counted in units of `1 / REWARD_SCALE` (millionths).
pub const REWARD_SCALE: u64 = 1_000_000;

/// Most model versions a tally names; further ones are counted under [`OTHER_VERSION`].
pub const MAX_VERSIONS: usize = 8;

/// The version name under which the versions beyond [`MAX_VERSIONS`] are counted.
pub const OTHER_VERSION: &str = "(other)";

/// Longest model version name, in bytes; a longer one (or one with spaces or control
/// characters, or one starting with `(`) is counted under [`OTHER_VERSION`].
pub const MAX_VERSION_LEN: usize = 64;

/// Most rows of a tally: 3 arms × (the named versions, [`OTHER_VERSION`], none) × 3 sources.
pub const MAX_ROWS: usize = 3 * (MAX_VERSIONS + 2) * 3;

/// Largest count a flush batch may carry in `d` or `o` (an isolate flushes every few
/// seconds; this is far beyond what one can count in a day). Reward sums are bounded by
/// `o` and so stay below 2⁵³, exact in any JSON reader.
pub const MAX_BATCH_COUNT: u64 = 1_000_000_000;

/// Largest flush batch, in bytes.
pub const MAX_BATCH_BYTES: usize = 64 * 1024;

/// Version of the batch format (`"v"`).
pub const BATCH_FORMAT: u64 = 1;

/// Fallback slots of a row: the reasons of [`FallbackReason`] in declaration order, then
/// `unspecified` (rules or the default decided without a recorded reason).
pub const FALLBACK_SLOTS: [&str; 8] = {
    let mut names = ["unspecified"; 8];
    let mut i = 0;
    while i < FallbackReason::ALL.len() {
        names[i] = FallbackReason::ALL[i].name();
        i += 1;
    }
    names
};

const HOLDOUT_SLOT: usize = 6;
const UNSPECIFIED_SLOT: usize = 7;

/// The slot of each of the alarm's [`REASONS`](super::alarm::REASONS) (a test checks the names agree).
const ALARM_SLOTS: [usize; 7] = [0, 1, 2, 3, 4, 5, UNSPECIFIED_SLOT];

fn slot(reason: Option<FallbackReason>) -> usize {
    reason.map_or(UNSPECIFIED_SLOT, |r| {
        FALLBACK_SLOTS
            .iter()
            .position(|n| *n == r.name())
            .unwrap_or(UNSPECIFIED_SLOT)
    })
}

const SOURCES: [Source; 3] = [Source::Model, Source::Rules, Source::Default];

/// What a row counts: one arm, one model version (or none), one source.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Key {
    /// The rollout arm.
    pub arm: Arm,
    /// The model version consulted, [`OTHER_VERSION`] for those beyond the cap.
    pub model_version: Option<String>,
    /// Who decided.
    pub source: Source,
}

impl Ord for Key {
    fn cmp(&self, o: &Key) -> Ordering {
        (self.arm, &self.model_version, self.source.index()).cmp(&(
            o.arm,
            &o.model_version,
            o.source.index(),
        ))
    }
}

impl PartialOrd for Key {
    fn partial_cmp(&self, o: &Key) -> Option<Ordering> {
        Some(self.cmp(o))
    }
}

/// The counts of one row (or of several added up).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Counts {
    /// Decisions.
    pub decisions: u64,
    /// Outcomes (rewards) counted.
    pub outcomes: u64,
    /// Sum of the rewards, in millionths.
    pub reward_sum: u64,
    /// Sum of the squared rewards, in millionths.
    pub reward_sq_sum: u64,
    /// Fallbacks by reason, in [`FALLBACK_SLOTS`] order.
    pub fallbacks: [u64; 8],
}

impl Counts {
    /// Adds another row's counts (saturating).
    pub fn merge(&mut self, o: &Counts) {
        self.decisions = self.decisions.saturating_add(o.decisions);
        self.outcomes = self.outcomes.saturating_add(o.outcomes);
        self.reward_sum = self.reward_sum.saturating_add(o.reward_sum);
        self.reward_sq_sum = self.reward_sq_sum.saturating_add(o.reward_sq_sum);
        for (a, b) in self.fallbacks.iter_mut().zip(o.fallbacks) {
            *a = a.saturating_add(b);
        }
    }

    /// Mean reward, when there are outcomes.
    pub fn mean(&self) -> Option<f64> {
        (self.outcomes > 0)
            .then(|| self.reward_sum as f64 / REWARD_SCALE as f64 / self.outcomes as f64)
    }

    /// Counts one decision by `source`: a fallback is counted when rules or the default
    /// decided, by its reason (`unspecified` without one); `holdout` whoever decided.
    pub fn add_decision(&mut self, source: Source, fallback: Option<FallbackReason>) {
        self.decisions = self.decisions.saturating_add(1);
        let counted = match fallback {
            Some(FallbackReason::Holdout) => Some(HOLDOUT_SLOT),
            _ if source != Source::Model => Some(slot(fallback)),
            _ => None,
        };
        if let Some(i) = counted {
            self.fallbacks[i] = self.fallbacks[i].saturating_add(1);
        }
    }

    /// Adds one reward (clamped into `[0, 1]`; a NaN counts as 0).
    pub fn add_reward(&mut self, reward: f64) {
        let r = if reward.is_nan() {
            0.0
        } else {
            reward.clamp(0.0, 1.0)
        };
        let q = (r * REWARD_SCALE as f64).round() as u64;
        self.outcomes = self.outcomes.saturating_add(1);
        self.reward_sum = self.reward_sum.saturating_add(q);
        self.reward_sq_sum = self
            .reward_sq_sum
            .saturating_add((q * q + REWARD_SCALE / 2) / REWARD_SCALE);
    }
}

/// Counters keyed by (arm, model version, source); see the module docs.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Tally {
    rows: BTreeMap<Key, Counts>,
}

/// A model version as a tally keys it: none stays none, an empty one is none, a name that
/// is not a plain token is [`OTHER_VERSION`].
fn version_key(v: Option<&str>) -> Option<String> {
    let v = v?;
    if v.is_empty() {
        return None;
    }
    if valid_version(v) {
        Some(v.to_owned())
    } else {
        Some(OTHER_VERSION.to_owned())
    }
}

/// A plain token: 1..=[`MAX_VERSION_LEN`] bytes of visible ASCII, not starting with `(`,
/// or [`OTHER_VERSION`] itself.
fn valid_version(v: &str) -> bool {
    v == OTHER_VERSION
        || (!v.is_empty()
            && v.len() <= MAX_VERSION_LEN
            && !v.starts_with('(')
            && v.bytes().all(|b| b.is_ascii_graphic()))
}

impl Tally {
    /// An empty tally.
    pub fn new() -> Tally {
        Tally::default()
    }

    fn row(&mut self, arm: Arm, model_version: Option<&str>, source: Source) -> &mut Counts {
        let key = Key {
            arm,
            model_version: version_key(model_version),
            source,
        };
        if !self.rows.contains_key(&key) {
            let new_version = key
                .model_version
                .as_deref()
                .is_some_and(|v| v != OTHER_VERSION && !self.versions().contains(v));
            self.rows.insert(key.clone(), Counts::default());
            if new_version {
                self.cap_versions();
            }
            // The row may have been folded into OTHER_VERSION.
            let key = if self.rows.contains_key(&key) {
                key
            } else {
                Key {
                    model_version: Some(OTHER_VERSION.to_owned()),
                    ..key
                }
            };
            return self.rows.entry(key).or_default();
        }
        self.rows.entry(key).or_default()
    }

    /// Counts one decision. A fallback is counted when rules or the default decided, by its
    /// reason (`unspecified` without one); `holdout` is counted whoever decided.
    pub fn add_decision(
        &mut self,
        arm: Arm,
        model_version: Option<&str>,
        source: Source,
        fallback: Option<FallbackReason>,
    ) {
        self.row(arm, model_version, source)
            .add_decision(source, fallback);
    }

    /// Counts one outcome of a decision with this key; `reward` from
    /// [`SuccessRule::reward`](super::SuccessRule::reward).
    pub fn add_outcome(
        &mut self,
        arm: Arm,
        model_version: Option<&str>,
        source: Source,
        reward: f64,
    ) {
        self.row(arm, model_version, source).add_reward(reward);
    }

    /// Adds counts to the row of a key, as [`Tally::merge`] would (an isolate may count in
    /// its own fixed slots and hand them over at flush time).
    pub fn add_counts(
        &mut self,
        arm: Arm,
        model_version: Option<&str>,
        source: Source,
        counts: &Counts,
    ) {
        if *counts != Counts::default() {
            self.row(arm, model_version, source).merge(counts);
        }
    }

    /// Adds another tally's counts to this one. Associative and commutative, exactly.
    pub fn merge(&mut self, other: &Tally) {
        let before = self.versions().len();
        for (k, c) in other.rows.iter().filter(|(_, c)| **c != Counts::default()) {
            self.rows.entry(k.clone()).or_default().merge(c);
        }
        if self.versions().len() != before {
            self.cap_versions();
        }
    }

    /// The named versions (not [`OTHER_VERSION`]).
    fn versions(&self) -> BTreeSet<&str> {
        self.rows
            .keys()
            .filter_map(|k| k.model_version.as_deref())
            .filter(|v| *v != OTHER_VERSION)
            .collect()
    }

    /// Folds the versions beyond the first [`MAX_VERSIONS`] (in byte order) into
    /// [`OTHER_VERSION`].
    fn cap_versions(&mut self) {
        let versions = self.versions();
        if versions.len() <= MAX_VERSIONS {
            return;
        }
        let dropped: BTreeSet<String> = versions
            .into_iter()
            .skip(MAX_VERSIONS)
            .map(str::to_owned)
            .collect();
        let rows = std::mem::take(&mut self.rows);
        for (mut k, c) in rows {
            if k.model_version
                .as_ref()
                .is_some_and(|v| dropped.contains(v))
            {
                k.model_version = Some(OTHER_VERSION.to_owned());
            }
            self.rows.entry(k).or_default().merge(&c);
        }
    }

    /// The rows, in key order.
    pub fn rows(&self) -> impl Iterator<Item = (&Key, &Counts)> {
        self.rows.iter()
    }

    /// Whether nothing was counted.
    pub fn is_empty(&self) -> bool {
        self.rows.values().all(|c| *c == Counts::default())
    }

    /// The counts of one arm, every version and source added up.
    pub fn arm(&self, arm: Arm) -> Counts {
        let mut out = Counts::default();
        for (_, c) in self.rows.iter().filter(|(k, _)| k.arm == arm) {
            out.merge(c);
        }
        out
    }

    /// All counts added up.
    pub fn total(&self) -> Counts {
        let mut out = Counts::default();
        for c in self.rows.values() {
            out.merge(c);
        }
        out
    }

    /// The fallback alarm's bin: decisions outside the holdout arm (and not held out by
    /// reason) and their fallbacks by reason, as `decider report` counts them.
    pub fn fallback_bin(&self) -> Bin {
        let mut bin = Bin::default();
        for (_, c) in self.rows.iter().filter(|(k, _)| k.arm != Arm::Holdout) {
            bin.n += c.decisions.saturating_sub(c.fallbacks[HOLDOUT_SLOT]);
            for (n, s) in bin.by_reason.iter_mut().zip(ALARM_SLOTS) {
                *n += c.fallbacks[s];
            }
        }
        bin
    }

    /// The flush batch (see the module docs).
    pub fn to_batch(&self) -> Value {
        let rows: Vec<Value> = self
            .rows
            .iter()
            .filter(|(_, c)| **c != Counts::default())
            .map(|(k, c)| {
                let mut row = Map::new();
                row.insert("arm".into(), json!(k.arm.name()));
                row.insert("mv".into(), json!(k.model_version));
                row.insert("src".into(), json!(k.source.name()));
                for (name, v) in [
                    ("d", c.decisions),
                    ("o", c.outcomes),
                    ("s", c.reward_sum),
                    ("q", c.reward_sq_sum),
                ] {
                    if v > 0 {
                        row.insert(name.into(), json!(v));
                    }
                }
                let fb: Map<String, Value> = FALLBACK_SLOTS
                    .iter()
                    .zip(c.fallbacks)
                    .filter(|(_, n)| *n > 0)
                    .map(|(name, n)| ((*name).to_owned(), json!(n)))
                    .collect();
                if !fb.is_empty() {
                    row.insert("fb".into(), Value::Object(fb));
                }
                Value::Object(row)
            })
            .collect();
        json!({"v": BATCH_FORMAT, "rows": rows})
    }

    /// Reads and checks a flush batch received from outside (at most [`MAX_BATCH_BYTES`],
    /// counts at most [`MAX_BATCH_COUNT`]).
    ///
    /// # Errors
    /// A [`BatchError`] naming the first field that is malformed or inconsistent.
    pub fn from_batch(bytes: &[u8]) -> Result<Tally, BatchError> {
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
        Tally::from_value(&v, MAX_BATCH_COUNT)
    }

    /// Checks a batch's JSON value; `limit` bounds `d` and `o`.
    fn from_value(v: &Value, limit: u64) -> Result<Tally, BatchError> {
        let obj = object(v, "batch")?;
        known(obj, "", &["v", "rows"])?;
        match obj.get("v") {
            None => return Err(BatchError::new("v", "missing")),
            Some(v) if v.as_u64() == Some(BATCH_FORMAT) => {}
            Some(v) => {
                return Err(BatchError::new(
                    "v",
                    format!("must be {BATCH_FORMAT}, got {}", quote(v)),
                ))
            }
        }
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
}

impl Serialize for Tally {
    /// As the flush batch.
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        self.to_batch().serialize(s)
    }
}

impl<'de> Deserialize<'de> for Tally {
    /// From the flush batch form, checked as [`Tally::from_batch`] checks it but with counts
    /// up to `u64::MAX` (stored totals add up many batches).
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Tally, D::Error> {
        let v = Value::deserialize(d)?;
        Tally::from_value(&v, u64::MAX).map_err(D::Error::custom)
    }
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
        Some(name) => SOURCES.into_iter().find(|s| s.name() == name),
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
        Some(v) => {
            return Err(BatchError::new(
                join(at, "mv"),
                format!(
                    "must be null or a model version (1..={MAX_VERSION_LEN} visible ASCII characters, not starting with '(' unless {OTHER_VERSION}), got {}",
                    quote(v)
                ),
            ))
        }
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

/// Default window width: one minute.
pub const DEFAULT_WINDOW_MS: i64 = 60_000;

/// Default number of windows kept: two hours of one-minute windows.
pub const DEFAULT_MAX_WINDOWS: usize = 120;

/// Windows folded into one total, oldest first.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Folded {
    /// Start of the oldest window folded, ms since the epoch.
    pub from_ms: i64,
    /// End of the newest window folded.
    pub to_ms: i64,
    /// Their total.
    pub tally: Tally,
}

/// Per-window totals, keyed by window start (ms since the epoch, a multiple of the width).
///
/// A batch is counted in the window of the time the store received it, so a window is
/// complete once its end has passed. At most `max_windows` windows are kept; adding one
/// more folds the oldest into [`Windows::folded`].
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(try_from = "WindowsRepr", into = "WindowsRepr")]
pub struct Windows {
    width_ms: i64,
    max_windows: usize,
    windows: BTreeMap<i64, Tally>,
    folded: Option<Folded>,
}

#[derive(Serialize, Deserialize)]
struct WindowsRepr {
    width_ms: i64,
    max_windows: usize,
    windows: BTreeMap<i64, Tally>,
    #[serde(default)]
    folded: Option<Folded>,
}

impl TryFrom<WindowsRepr> for Windows {
    type Error = String;
    fn try_from(r: WindowsRepr) -> Result<Windows, String> {
        if r.width_ms < 1 {
            return Err(format!("width_ms must be positive, got {}", r.width_ms));
        }
        if r.max_windows < 1 {
            return Err("max_windows must be at least 1".into());
        }
        if let Some(k) = r.windows.keys().find(|k| k.rem_euclid(r.width_ms) != 0) {
            return Err(format!(
                "window start {k} is not a multiple of width_ms {}",
                r.width_ms
            ));
        }
        let mut w = Windows {
            width_ms: r.width_ms,
            max_windows: r.max_windows,
            windows: r.windows,
            folded: r.folded,
        };
        w.fold_excess();
        Ok(w)
    }
}

impl From<Windows> for WindowsRepr {
    fn from(w: Windows) -> WindowsRepr {
        WindowsRepr {
            width_ms: w.width_ms,
            max_windows: w.max_windows,
            windows: w.windows,
            folded: w.folded,
        }
    }
}

impl Default for Windows {
    fn default() -> Windows {
        Windows::new(DEFAULT_WINDOW_MS, DEFAULT_MAX_WINDOWS)
    }
}

impl Windows {
    /// An empty store of windows `width_ms` wide (at least 1), keeping at most
    /// `max_windows` (at least 1).
    pub fn new(width_ms: i64, max_windows: usize) -> Windows {
        Windows {
            width_ms: width_ms.max(1),
            max_windows: max_windows.max(1),
            windows: BTreeMap::new(),
            folded: None,
        }
    }

    /// The window width, ms.
    pub fn width_ms(&self) -> i64 {
        self.width_ms
    }

    /// The start of the window holding `at_ms`.
    pub fn start_of(&self, at_ms: i64) -> i64 {
        at_ms.div_euclid(self.width_ms) * self.width_ms
    }

    /// Counts a batch received at `at_ms`. A batch for a time already folded (a clock that
    /// went back) is counted in the folded total.
    pub fn add(&mut self, batch: &Tally, at_ms: i64) {
        let start = self.start_of(at_ms);
        if let Some(f) = self.folded.as_mut().filter(|f| start < f.to_ms) {
            f.tally.merge(batch);
            return;
        }
        self.windows.entry(start).or_default().merge(batch);
        self.fold_excess();
    }

    fn fold_excess(&mut self) {
        while self.windows.len() > self.max_windows {
            let Some((start, tally)) = self.windows.pop_first() else {
                break;
            };
            let end = start + self.width_ms;
            match self.folded.as_mut() {
                Some(f) => {
                    f.tally.merge(&tally);
                    f.from_ms = f.from_ms.min(start);
                    f.to_ms = f.to_ms.max(end);
                }
                None => {
                    self.folded = Some(Folded {
                        from_ms: start,
                        to_ms: end,
                        tally,
                    })
                }
            }
        }
    }

    /// The windows kept, oldest first: (start, totals).
    pub fn windows(&self) -> impl Iterator<Item = (i64, &Tally)> {
        self.windows.iter().map(|(k, t)| (*k, t))
    }

    /// The windows folded for lack of room, if any.
    pub fn folded(&self) -> Option<&Folded> {
        self.folded.as_ref()
    }

    /// The complete windows (ended by `now_ms`), oldest first.
    pub fn complete(&self, now_ms: i64) -> impl Iterator<Item = (i64, &Tally)> {
        let width = self.width_ms;
        self.windows().filter(move |(s, _)| s + width <= now_ms)
    }

    /// Everything counted, folded windows included.
    pub fn total(&self) -> Tally {
        let mut t = self
            .folded
            .as_ref()
            .map(|f| f.tally.clone())
            .unwrap_or_default();
        for w in self.windows.values() {
            t.merge(w);
        }
        t
    }
}

#[cfg(test)]
mod tests {
    use super::super::alarm;
    use super::*;
    use proptest::prelude::*;

    fn sample() -> Tally {
        let mut t = Tally::new();
        t.add_decision(Arm::Challenger, Some("gbdt-2"), Source::Model, None);
        t.add_outcome(Arm::Challenger, Some("gbdt-2"), Source::Model, 1.0);
        t.add_decision(
            Arm::Champion,
            Some("gbdt-1"),
            Source::Rules,
            Some(FallbackReason::LowConfidence),
        );
        t.add_outcome(Arm::Champion, Some("gbdt-1"), Source::Rules, 0.25);
        t.add_decision(
            Arm::Holdout,
            Some("gbdt-1"),
            Source::Rules,
            Some(FallbackReason::Holdout),
        );
        t.add_outcome(Arm::Holdout, Some("gbdt-1"), Source::Rules, 0.0);
        t
    }

    #[test]
    fn a_batch_round_trips() {
        let t = sample();
        let text = t.to_batch().to_string();
        assert_eq!(Tally::from_batch(text.as_bytes()).unwrap(), t);
        let via_serde: Tally = serde_json::from_str(&serde_json::to_string(&t).unwrap()).unwrap();
        assert_eq!(via_serde, t);
        let c = t.arm(Arm::Champion);
        assert_eq!(
            (c.decisions, c.outcomes, c.reward_sum, c.reward_sq_sum),
            (1, 1, 250_000, 62_500)
        );
        assert_eq!(c.fallbacks[0], 1);
        assert_eq!(c.mean(), Some(0.25));
        assert_eq!(Tally::new().arm(Arm::Champion).mean(), None);
    }

    #[test]
    fn the_batch_form_is_compact() {
        let t = sample();
        let text = t.to_batch().to_string();
        let want = json!({"v": 1, "rows": [
            {"arm": "champion", "mv": "gbdt-1", "src": "rules", "d": 1, "o": 1, "s": 250_000,
             "q": 62_500, "fb": {"low_confidence": 1}},
            {"arm": "challenger", "mv": "gbdt-2", "src": "model", "d": 1, "o": 1,
             "s": 1_000_000, "q": 1_000_000},
            {"arm": "holdout", "mv": "gbdt-1", "src": "rules", "d": 1, "o": 1,
             "fb": {"holdout": 1}},
        ]});
        assert_eq!(serde_json::from_str::<Value>(&text).unwrap(), want);
        assert_eq!(text.len(), want.to_string().len());
        assert!(text.len() < 300, "{text}");
    }

    #[test]
    fn the_alarm_reasons_map_to_their_slots() {
        for (name, s) in alarm::REASONS.iter().zip(ALARM_SLOTS) {
            let want = if *name == "(none)" {
                "unspecified"
            } else {
                name
            };
            assert_eq!(FALLBACK_SLOTS[s], want);
        }
        for r in FallbackReason::ALL {
            assert_eq!(FALLBACK_SLOTS[slot(Some(r))], r.name());
        }
        assert_eq!(FALLBACK_SLOTS[slot(None)], "unspecified");
    }

    #[test]
    fn fallbacks_are_counted_as_the_report_counts_them() {
        let mut t = Tally::new();
        let mv = Some("m");
        for _ in 0..10 {
            t.add_decision(Arm::Champion, mv, Source::Model, None);
        }
        t.add_decision(
            Arm::Champion,
            mv,
            Source::Rules,
            Some(FallbackReason::OutOfDistribution),
        );
        t.add_decision(Arm::Champion, mv, Source::Default, None);
        // A model decision with a reason is no fallback; holdout traffic is in no bin.
        t.add_decision(
            Arm::Challenger,
            mv,
            Source::Model,
            Some(FallbackReason::LowConfidence),
        );
        t.add_decision(
            Arm::Champion,
            mv,
            Source::Rules,
            Some(FallbackReason::Holdout),
        );
        t.add_decision(
            Arm::Holdout,
            mv,
            Source::Rules,
            Some(FallbackReason::Holdout),
        );
        let bin = t.fallback_bin();
        assert_eq!(bin.n, 13);
        assert_eq!(bin.by_reason[alarm::OOD], 1);
        assert_eq!(bin.by_reason[6], 1);
        assert_eq!(bin.fallbacks(), 2);
    }

    #[test]
    fn versions_beyond_the_cap_are_counted_as_other() {
        let mut t = Tally::new();
        for i in (0..12).rev() {
            let v = format!("v{i:02}");
            t.add_decision(Arm::Champion, Some(&v), Source::Model, None);
            t.add_outcome(Arm::Champion, Some(&v), Source::Model, 1.0);
        }
        let names: BTreeSet<&str> = t
            .rows()
            .filter_map(|(k, _)| k.model_version.as_deref())
            .collect();
        assert_eq!(names.len(), MAX_VERSIONS + 1);
        assert!(names.contains(OTHER_VERSION) && names.contains("v00") && !names.contains("v08"));
        let other = t
            .rows()
            .find(|(k, _)| k.model_version.as_deref() == Some(OTHER_VERSION))
            .unwrap()
            .1;
        assert_eq!((other.decisions, other.outcomes), (4, 4));
        assert_eq!(t.arm(Arm::Champion).decisions, 12);
        // Names that are not plain tokens are counted as other; empty is none.
        let mut t = Tally::new();
        t.add_decision(Arm::Champion, Some("a b"), Source::Model, None);
        t.add_decision(Arm::Champion, Some("(x)"), Source::Model, None);
        t.add_decision(Arm::Champion, Some(&"x".repeat(65)), Source::Model, None);
        t.add_decision(Arm::Champion, Some(""), Source::Model, None);
        let keys: Vec<Option<&str>> = t.rows().map(|(k, _)| k.model_version.as_deref()).collect();
        assert_eq!(keys, vec![None, Some(OTHER_VERSION)]);
        assert!(Tally::from_batch(t.to_batch().to_string().as_bytes()).is_ok());
    }

    #[test]
    fn malformed_batches_are_refused_naming_the_field() {
        let row =
            r#"{"arm":"champion","mv":"m","src":"model","d":3,"o":2,"s":1500000,"q":1250000}"#;
        let ok = format!(r#"{{"v":1,"rows":[{row}]}}"#);
        assert!(Tally::from_batch(ok.as_bytes()).is_ok());
        let with = |r: &str| format!(r#"{{"v":1,"rows":[{row},{r}]}}"#);
        let many_rows = format!(
            r#"{{"v":1,"rows":[{}]}}"#,
            vec![r#"{"arm":"champion","src":"model"}"#; MAX_ROWS + 1].join(",")
        );
        let many_versions = format!(
            r#"{{"v":1,"rows":[{}]}}"#,
            (0..=MAX_VERSIONS)
                .map(|i| format!(r#"{{"arm":"champion","src":"model","mv":"v{i}"}}"#))
                .collect::<Vec<_>>()
                .join(",")
        );
        let cases: Vec<(String, &str)> = vec![
            ("".into(), "body"),
            ("{".into(), "body"),
            ("[]".into(), "batch"),
            (r#"{"rows":[]}"#.into(), "v"),
            (r#"{"v":2,"rows":[]}"#.into(), "v"),
            (r#"{"v":1}"#.into(), "rows"),
            (r#"{"v":1,"rows":{}}"#.into(), "rows"),
            (r#"{"v":1,"rows":[],"extra":1}"#.into(), "extra"),
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
        ];
        for (body, field) in cases {
            let e = Tally::from_batch(body.as_bytes()).unwrap_err();
            assert_eq!(e.field, field, "{body}: {e}");
            assert!(e.to_string().len() < 400, "{e}");
        }
        let big = format!(
            r#"{{"v":1,"rows":[],"pad":"{}"}}"#,
            "x".repeat(MAX_BATCH_BYTES)
        );
        assert_eq!(Tally::from_batch(big.as_bytes()).unwrap_err().field, "body");
        // Stored totals may exceed a batch's limit.
        let stored = r#"{"v":1,"rows":[{"arm":"champion","src":"model","d":5000000000}]}"#;
        assert!(Tally::from_batch(stored.as_bytes()).is_err());
        let t: Tally = serde_json::from_str(stored).unwrap();
        assert_eq!(t.total().decisions, 5_000_000_000);
        let bad: Result<Tally, _> = serde_json::from_str(r#"{"v":1,"rows":[{"arm":"x"}]}"#);
        assert!(bad.unwrap_err().to_string().contains("rows[0].arm"));
    }

    #[test]
    fn windows_keep_the_newest_and_fold_the_rest() {
        let mut w = Windows::new(60_000, 3);
        let t0 = 1_796_205_600_000;
        for i in 0..5 {
            w.add(&sample(), t0 + i * 60_000 + 59_999);
            w.add(&sample(), t0 + i * 60_000);
        }
        let starts: Vec<i64> = w.windows().map(|(s, _)| s).collect();
        assert_eq!(starts, vec![t0 + 120_000, t0 + 180_000, t0 + 240_000]);
        let f = w.folded().unwrap();
        assert_eq!((f.from_ms, f.to_ms), (t0, t0 + 120_000));
        assert_eq!(f.tally.total().decisions, 2 * 2 * 3);
        assert_eq!(w.total().total().decisions, 5 * 2 * 3);
        // A batch for a folded time joins the folded total.
        w.add(&sample(), t0 + 10);
        assert_eq!(w.folded().unwrap().tally.total().decisions, 2 * 2 * 3 + 3);
        assert_eq!(w.complete(t0 + 240_000).count(), 2);
        assert_eq!(w.complete(t0 + 300_000).count(), 3);
        let back: Windows = serde_json::from_str(&serde_json::to_string(&w).unwrap()).unwrap();
        assert_eq!(back, w);
        let bad = r#"{"width_ms":0,"max_windows":3,"windows":{}}"#;
        assert!(serde_json::from_str::<Windows>(bad).is_err());
        let bad = r#"{"width_ms":60000,"max_windows":3,"windows":{"5":{"v":1,"rows":[]}}}"#;
        assert!(serde_json::from_str::<Windows>(bad).is_err());
    }

    fn arb_tally() -> impl Strategy<Value = Tally> {
        let arm = prop::sample::select(Arm::ALL.to_vec());
        let src = prop::sample::select(SOURCES.to_vec());
        // Up to 12 versions, so that the cap is exercised.
        let mv = prop::option::of((0u8..12).prop_map(|i| format!("v{i}")));
        let reason = prop::option::of(prop::sample::select(vec![
            FallbackReason::LowConfidence,
            FallbackReason::OutOfDistribution,
            FallbackReason::Holdout,
        ]));
        let reward = prop::option::of(prop_oneof![Just(0.0), Just(1.0), 0.0f64..=1.0]);
        prop::collection::vec((arm, mv, src, reason, reward), 0..40).prop_map(|events| {
            let mut t = Tally::new();
            for (arm, mv, src, reason, reward) in events {
                t.add_decision(arm, mv.as_deref(), src, reason);
                if let Some(r) = reward {
                    t.add_outcome(arm, mv.as_deref(), src, r);
                }
            }
            t
        })
    }

    fn merged(a: &Tally, b: &Tally) -> Tally {
        let mut m = a.clone();
        m.merge(b);
        m
    }

    proptest! {
        #[test]
        fn merge_is_associative_and_commutative(a in arb_tally(), b in arb_tally(), c in arb_tally()) {
            prop_assert_eq!(merged(&a, &b), merged(&b, &a));
            prop_assert_eq!(merged(&merged(&a, &b), &c), merged(&a, &merged(&b, &c)));
            prop_assert_eq!(merged(&a, &Tally::new()), a.clone());
            // Totals per arm are exact whatever the cap folded.
            for arm in Arm::ALL {
                let mut want = a.arm(arm);
                want.merge(&b.arm(arm));
                prop_assert_eq!(merged(&a, &b).arm(arm), want);
            }
            // Every tally is a valid batch.
            let m = merged(&merged(&a, &b), &c);
            prop_assert_eq!(Tally::from_batch(m.to_batch().to_string().as_bytes()).unwrap(), m);
        }
    }
}

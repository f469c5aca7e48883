//! Decision and outcome counters keyed by (arm, model version, source), that add up
//! exactly across isolates and windows.
//!
//! The control plane keeps what the serving isolates flush ([`decider_core::rollout::live`])
//! in a [`Tally`] per window ([`Windows`]): decisions, outcomes, the sum of their rewards
//! and of their squares, and fallbacks by reason. Counts are integers (rewards in
//! millionths) and add with saturation, so [`Tally::merge`] is exactly associative and
//! commutative: the totals do not depend on the order batches arrive in or on how they
//! were grouped.
//!
//! # Bounded size
//! A tally names at most [`MAX_VERSIONS`] model versions. Beyond that, the counts of the
//! versions that sort last (byte order) are merged under [`OTHER_VERSION`]: the totals per
//! arm and source stay exact, only the breakdown of those versions is lost. Which versions
//! are kept depends only on the set of versions seen, never on the order, so merging stays
//! associative and commutative. A tally therefore has at most [`MAX_ROWS`] rows, and a
//! batch at most that many.
//!
//! # Stored form
//! `{"v":1,"rows":[…]}`, the rows of the flush batch ([`Counts::to_row`]), read back by the
//! checks of a batch ([`batch`]) with counts up to `u64::MAX`.

pub mod batch;
pub mod windows;

pub use batch::{Batch, BatchError};
pub use windows::{Folded, Windows};

use crate::alarm::Bin;
use decider_core::rollout::live::{Counts, HOLDOUT_SLOT, UNSPECIFIED_SLOT};
use decider_core::rollout::Arm;
use decider_core::{FallbackReason, Source};
use serde::{Serialize, Serializer};
use serde_json::{json, Value};
use std::cmp::Ordering;
use std::collections::{BTreeMap, BTreeSet};

/// Version of the stored form (`"v"`).
pub const STORED_FORMAT: u64 = 1;

/// Most model versions a tally names; further ones are counted under [`OTHER_VERSION`].
pub const MAX_VERSIONS: usize = 8;

/// The version name under which the versions beyond [`MAX_VERSIONS`] are counted.
pub const OTHER_VERSION: &str = "(other)";

/// Longest model version name, in bytes; a longer one (or one with spaces or control
/// characters, or one starting with `(`) is counted under [`OTHER_VERSION`].
pub const MAX_VERSION_LEN: usize = 64;

/// Most rows of a tally: 3 arms × (the named versions, [`OTHER_VERSION`], none) × 3 sources.
pub const MAX_ROWS: usize = 3 * (MAX_VERSIONS + 2) * 3;

/// The slot of each of the alarm's [`REASONS`](crate::alarm::REASONS) (a test checks the
/// names agree).
const ALARM_SLOTS: [usize; 7] = [0, 1, 2, 3, 4, 5, UNSPECIFIED_SLOT];

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
    /// [`SuccessRule::reward`](decider_core::rollout::SuccessRule::reward).
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

    /// The stored form (see the module docs).
    pub fn to_value(&self) -> Value {
        let rows: Vec<Value> = self
            .rows
            .iter()
            .filter(|(_, c)| **c != Counts::default())
            .map(|(k, c)| c.to_row(k.arm, k.model_version.as_deref(), k.source))
            .collect();
        json!({"v": STORED_FORMAT, "rows": rows})
    }
}

impl Serialize for Tally {
    /// As the stored form.
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        self.to_value().serialize(s)
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use crate::alarm;
    use decider_core::rollout::live::FALLBACK_SLOTS;
    use proptest::prelude::*;

    /// A tally as the rows of a flush batch.
    pub(crate) fn as_batch(t: &Tally) -> String {
        json!({"v": 2, "rows": t.to_value()["rows"]}).to_string()
    }

    /// The tally of a flush batch.
    pub(crate) fn batch_tally(bytes: &[u8]) -> Result<Tally, BatchError> {
        Batch::from_bytes(bytes).map(|b| b.tally)
    }

    pub(crate) fn sample() -> Tally {
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
        let text = as_batch(&t);
        assert_eq!(batch_tally(text.as_bytes()).unwrap(), t);
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
        let text = as_batch(&t);
        let want = json!({"v": 2, "rows": [
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
        assert!(batch_tally(as_batch(&t).as_bytes()).is_ok());
    }

    fn arb_tally() -> impl Strategy<Value = Tally> {
        let arm = prop::sample::select(Arm::ALL.to_vec());
        let src = prop::sample::select(Source::ALL.to_vec());
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
            prop_assert_eq!(batch_tally(as_batch(&m).as_bytes()).unwrap(), m);
        }
    }
}

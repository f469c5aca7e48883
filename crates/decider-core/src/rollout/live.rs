//! The isolate's live counts, sent to the control plane as flush batches.
//!
//! A serving isolate counts what it decides and what became of it ([`Live`]): decisions,
//! outcomes and rewards per (arm, source), fallbacks by reason, and each `/v1/decide`
//! caller's outcome on its own, with its decision id, so that the control plane can count
//! every decision's outcome once. Every [`ROLLOUT_FLUSH_S`](Live::due) seconds or so many
//! outcomes it sends them as one batch ([`Live::to_batch`]) and starts again. Reading a
//! batch, windows of batches and judging them is the control plane's (the `decider-rollout`
//! crate); only this side of the format lives here.
//!
//! # Exact, order-free arithmetic
//! Rewards are in `[0, 1]` and are counted in millionths ([`REWARD_SCALE`]): a reward adds
//! `round(r · 10⁶)` to the reward sum and `round(q² / 10⁶)` (q the reward in millionths) to
//! the sum of squares. Every count is an integer and adds with saturation at `u64::MAX`, so
//! sums of counts are exactly associative and commutative. Quantising costs at most 5·10⁻⁷
//! per reward.
//!
//! # The flush batch
//! ```text
//! {"v":2,"challenger":"gbdt-2",
//!  "rows":[{"arm":"challenger","mv":"gbdt-2","src":"model","d":120,"o":118,
//!           "s":115000000,"q":115000000,"fb":{"low_confidence":2}}],
//!  "outcomes":[["0f6c2a9e-8a3b-4c1d-9e2f-3b4c5d6e7f83",1796205600000,1000000]]}
//! ```
//! `challenger`: the challenger model this isolate serves (null without one); per row the
//! key (arm, model version or null, source), then decisions `d`, routed outcomes `o`,
//! reward sum `s` and sum of squares `q` in millionths, and fallbacks by reason `fb` (the
//! reasons of [`FallbackReason`] and `unspecified`), zero counts left out; per caller
//! outcome its decision's id (the part the keyed tag signs, [`crate::decision_id`]), when
//! the decision was made (ms since the epoch) and its reward in millionths.

use super::Arm;
use crate::policy::{FallbackReason, Source};
use serde_json::{json, Map, Value};

/// Rewards are counted in units of `1 / REWARD_SCALE` (millionths).
pub const REWARD_SCALE: u64 = 1_000_000;

/// Version of the batch format (`"v"`).
pub const BATCH_FORMAT: u64 = 2;

/// Most caller outcomes one batch carries; an isolate keeps no more between two flushes
/// (more are dropped and logged, see [`Live::add_caller_outcome`]).
pub const MAX_BATCH_OUTCOMES: usize = 1_000;

/// Largest flush batch, in bytes (a batch of [`MAX_BATCH_OUTCOMES`] caller outcomes and
/// every row is far below it).
pub const MAX_BATCH_BYTES: usize = 256 * 1024;

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

/// The slot of `holdout` in [`FALLBACK_SLOTS`].
pub const HOLDOUT_SLOT: usize = 6;

/// The slot of `unspecified` in [`FALLBACK_SLOTS`].
pub const UNSPECIFIED_SLOT: usize = 7;

fn slot(reason: Option<FallbackReason>) -> usize {
    reason.map_or(UNSPECIFIED_SLOT, |r| {
        FALLBACK_SLOTS
            .iter()
            .position(|n| *n == r.name())
            .unwrap_or(UNSPECIFIED_SLOT)
    })
}

/// A reward in millionths: clamped into `[0, 1]`, a NaN counts as 0.
pub fn quantise(reward: f64) -> u64 {
    let r = if reward.is_nan() {
        0.0
    } else {
        reward.clamp(0.0, 1.0)
    };
    (r * REWARD_SCALE as f64).round() as u64
}

/// The counts of one (arm, source), or of several added up.
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
        self.add_quantised(quantise(reward));
    }

    /// Adds one reward already in millionths (at most [`REWARD_SCALE`]).
    pub fn add_quantised(&mut self, q: u64) {
        let q = q.min(REWARD_SCALE);
        self.outcomes = self.outcomes.saturating_add(1);
        self.reward_sum = self.reward_sum.saturating_add(q);
        self.reward_sq_sum = self
            .reward_sq_sum
            .saturating_add((q * q + REWARD_SCALE / 2) / REWARD_SCALE);
    }

    /// The row of a batch for this key (see the module docs), zero counts left out.
    pub fn to_row(&self, arm: Arm, model_version: Option<&str>, source: Source) -> Value {
        let mut row = Map::new();
        row.insert("arm".into(), json!(arm.name()));
        row.insert("mv".into(), json!(model_version));
        row.insert("src".into(), json!(source.name()));
        for (name, v) in [
            ("d", self.decisions),
            ("o", self.outcomes),
            ("s", self.reward_sum),
            ("q", self.reward_sq_sum),
        ] {
            if v > 0 {
                row.insert(name.into(), json!(v));
            }
        }
        let fb: Map<String, Value> = FALLBACK_SLOTS
            .iter()
            .zip(self.fallbacks)
            .filter(|(_, n)| *n > 0)
            .map(|(name, n)| ((*name).to_owned(), json!(n)))
            .collect();
        if !fb.is_empty() {
            row.insert("fb".into(), Value::Object(fb));
        }
        Value::Object(row)
    }
}

/// A `/v1/decide` caller's outcome, kept with its decision's id until the flush.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CallerOutcome {
    /// The decision's id, the part the keyed tag signs (its last character is the arm and
    /// source).
    pub id: String,
    /// When the decision was made, ms since the epoch (from the signed id).
    pub decided_ms: i64,
    /// The reward, in millionths.
    pub reward: u64,
}

/// An isolate's counts since its last flush.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Live {
    counts: [[Counts; 3]; 3],
    caller: Vec<CallerOutcome>,
    /// Caller outcomes dropped because [`MAX_BATCH_OUTCOMES`] were waiting.
    dropped: u64,
    outcomes: u64,
}

impl Live {
    /// Counts one decision.
    pub fn add_decision(&mut self, arm: Arm, source: Source, reason: Option<FallbackReason>) {
        self.counts[arm.index()][source.index()].add_decision(source, reason);
    }

    /// Counts a routed decision's outcome (the Worker saw it: it counts once).
    pub fn add_outcome(&mut self, arm: Arm, source: Source, reward: f64) {
        self.counts[arm.index()][source.index()].add_reward(reward);
        self.outcomes = self.outcomes.saturating_add(1);
    }

    /// Keeps a caller's outcome for the control plane, which counts each decision's once.
    /// False when [`MAX_BATCH_OUTCOMES`] are already waiting: the outcome is dropped (and
    /// counted in [`Live::dropped`]), so that an isolate's memory stays bounded whatever
    /// callers send while a flush is under way.
    pub fn add_caller_outcome(&mut self, outcome: CallerOutcome) -> bool {
        if self.caller.len() >= MAX_BATCH_OUTCOMES {
            self.dropped = self.dropped.saturating_add(1);
            return false;
        }
        self.caller.push(outcome);
        self.outcomes = self.outcomes.saturating_add(1);
        true
    }

    /// Caller outcomes dropped since the last flush.
    pub fn dropped(&self) -> u64 {
        self.dropped
    }

    /// Whether nothing was counted.
    pub fn is_empty(&self) -> bool {
        self.caller.is_empty()
            && self
                .counts
                .iter()
                .flatten()
                .all(|c| *c == Counts::default())
    }

    /// The flush rule: a flush is due `flush_ms` after the last one began, or once
    /// `flush_outcomes` outcomes are waiting (or as many caller outcomes as a batch holds).
    pub fn due(&self, since_flush_ms: f64, flush_ms: f64, flush_outcomes: u64) -> bool {
        since_flush_ms >= flush_ms
            || self.outcomes >= flush_outcomes
            || self.caller.len() >= MAX_BATCH_OUTCOMES
    }

    /// The counts of one arm and source.
    pub fn counts(&self, arm: Arm, source: Source) -> &Counts {
        &self.counts[arm.index()][source.index()]
    }

    /// The caller outcomes waiting.
    pub fn caller_outcomes(&self) -> &[CallerOutcome] {
        &self.caller
    }

    /// The flush batch (module docs): each arm's rows under the model version that serves
    /// it (`versions`, in [`Arm::ALL`] order), the challenger this isolate serves, and its
    /// `CANARY_PERCENT` (with the share, the arms' allocation).
    pub fn to_batch(
        &self,
        versions: [Option<&str>; 3],
        challenger: Option<&str>,
        canary: u8,
    ) -> String {
        let mut rows = Vec::new();
        for arm in Arm::ALL {
            for source in Source::ALL {
                let c = self.counts(arm, source);
                if *c != Counts::default() {
                    rows.push(c.to_row(arm, versions[arm.index()], source));
                }
            }
        }
        let outcomes: Vec<Value> = self
            .caller
            .iter()
            .map(|o| json!([o.id, o.decided_ms, o.reward]))
            .collect();
        json!({"v": BATCH_FORMAT, "challenger": challenger, "canary": canary, "rows": rows, "outcomes": outcomes})
            .to_string()
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn rewards_are_counted_in_millionths() {
        let mut c = Counts::default();
        c.add_reward(0.25);
        c.add_reward(f64::NAN);
        c.add_reward(7.0);
        assert_eq!(
            (c.outcomes, c.reward_sum, c.reward_sq_sum),
            (3, 1_250_000, 1_062_500)
        );
        assert_eq!(c.mean(), Some(1.25 / 3.0));
        assert_eq!(quantise(0.333_333_4), 333_333);
        assert_eq!(Counts::default().mean(), None);
    }

    #[test]
    fn fallbacks_are_counted_by_reason() {
        let mut c = Counts::default();
        c.add_decision(Source::Model, None);
        c.add_decision(Source::Model, Some(FallbackReason::LowConfidence));
        c.add_decision(Source::Rules, Some(FallbackReason::OutOfDistribution));
        c.add_decision(Source::Default, None);
        c.add_decision(Source::Rules, Some(FallbackReason::Holdout));
        assert_eq!(c.decisions, 5);
        assert_eq!(c.fallbacks[4], 1);
        assert_eq!(c.fallbacks[HOLDOUT_SLOT], 1);
        assert_eq!(c.fallbacks[UNSPECIFIED_SLOT], 1);
        assert_eq!(c.fallbacks.iter().sum::<u64>(), 3);
        for r in FallbackReason::ALL {
            assert_eq!(FALLBACK_SLOTS[slot(Some(r))], r.name());
        }
    }

    #[test]
    fn the_batch_holds_rows_and_caller_outcomes() {
        let mut l = Live::default();
        assert!(l.is_empty());
        l.add_decision(Arm::Challenger, Source::Model, None);
        l.add_outcome(Arm::Challenger, Source::Model, 1.0);
        l.add_decision(
            Arm::Champion,
            Source::Rules,
            Some(FallbackReason::LowConfidence),
        );
        assert!(l.add_caller_outcome(CallerOutcome {
            id: "d-3".into(),
            decided_ms: 5,
            reward: 250_000,
        }));
        let batch: Value = serde_json::from_str(&l.to_batch(
            [Some("m-1"), Some("m-2"), Some("m-1")],
            Some("m-2"),
            90,
        ))
        .unwrap();
        assert_eq!(
            batch,
            json!({"v": 2, "challenger": "m-2", "canary": 90, "rows": [
                {"arm": "champion", "mv": "m-1", "src": "rules", "d": 1,
                 "fb": {"low_confidence": 1}},
                {"arm": "challenger", "mv": "m-2", "src": "model", "d": 1, "o": 1,
                 "s": 1_000_000, "q": 1_000_000},
            ], "outcomes": [["d-3", 5, 250_000]]})
        );
    }

    #[test]
    fn the_flush_rule_and_the_bound_on_waiting_outcomes() {
        let mut l = Live::default();
        assert!(!l.due(999.0, 1_000.0, 2));
        assert!(l.due(1_000.0, 1_000.0, 2));
        l.add_outcome(Arm::Champion, Source::Model, 1.0);
        assert!(!l.due(0.0, 1_000.0, 2));
        l.add_outcome(Arm::Champion, Source::Model, 1.0);
        assert!(l.due(0.0, 1_000.0, 2));
        let mut l = Live::default();
        for i in 0..MAX_BATCH_OUTCOMES + 5 {
            let kept = l.add_caller_outcome(CallerOutcome {
                id: format!("d-{i}"),
                decided_ms: 0,
                reward: 0,
            });
            assert_eq!(kept, i < MAX_BATCH_OUTCOMES);
        }
        assert_eq!(
            (l.caller_outcomes().len(), l.dropped()),
            (MAX_BATCH_OUTCOMES, 5)
        );
        assert!(l.due(0.0, 1e9, u64::MAX));
        let text = l.to_batch([None; 3], None, 100);
        assert!(text.len() < MAX_BATCH_BYTES, "{}", text.len());
    }
}

//! Evaluation metrics: accuracy, per-action precision/recall, confusion, calibration error,
//! the accuracy–coverage curve, threshold selection, and system accuracy with fallback.

use decider_core::{encode, Action, Decider, Gates, Model, Source, State, ACTIONS, NUM_ACTIONS};
use serde::Serialize;
use std::collections::BTreeMap;

/// Precision, recall and support of one action.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct ActionMetrics {
    /// Correct predictions of this action / predictions of it.
    pub precision: f64,
    /// Correct predictions of this action / rows labelled with it.
    pub recall: f64,
    /// Rows labelled with this action.
    pub support: usize,
}

/// One point of the accuracy–coverage curve.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct CurvePoint {
    /// Confidence threshold.
    pub threshold: f64,
    /// Share of rows with confidence >= threshold.
    pub coverage: f64,
    /// Accuracy of the model on that share.
    pub accuracy: f64,
}

/// The full evaluation report (`decider eval --json`).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Evaluation {
    /// Rows evaluated.
    pub n: usize,
    /// Model argmax accuracy on all rows.
    pub accuracy: f64,
    /// Threshold in force.
    pub threshold: f64,
    /// Share of rows decided by the model at the threshold (policy, OOD check included).
    pub coverage: f64,
    /// Accuracy on the rows the model decided.
    pub accuracy_at_threshold: f64,
    /// Accuracy of the served decision: model above threshold, rules below.
    pub system_accuracy: f64,
    /// Share of rows decided by rules or default.
    pub fallback_rate: f64,
    /// Fallbacks by reason.
    pub fallback_reasons: BTreeMap<String, usize>,
    /// Accuracy of the rule table alone on all rows.
    pub rules_accuracy: f64,
    /// Per action, in action order.
    pub per_action: BTreeMap<String, ActionMetrics>,
    /// Confusion matrix: `confusion[true][predicted]`, action order.
    pub confusion: [[usize; NUM_ACTIONS]; NUM_ACTIONS],
    /// Expected calibration error (15 equal-width bins).
    pub ece: f64,
    /// Accuracy–coverage curve (model confidence only, no OOD gate).
    pub curve: Vec<CurvePoint>,
    /// Model version evaluated.
    pub model_version: String,
}

/// Expected calibration error over equal-width confidence bins.
pub fn ece(conf: &[f64], correct: &[bool], bins: usize) -> f64 {
    let mut sum_c = vec![0.0; bins];
    let mut sum_a = vec![0.0; bins];
    let mut cnt = vec![0usize; bins];
    for (&c, &ok) in conf.iter().zip(correct) {
        let b = ((c * bins as f64) as usize).min(bins - 1);
        sum_c[b] += c;
        sum_a[b] += f64::from(u8::from(ok));
        cnt[b] += 1;
    }
    let n = conf.len() as f64;
    (0..bins)
        .filter(|&b| cnt[b] > 0)
        .map(|b| (sum_c[b] - sum_a[b]).abs() / n)
        .sum()
}

/// Rows sorted by confidence, highest first (stable on ties).
fn by_confidence(conf: &[f64], correct: &[bool]) -> Vec<(f64, bool)> {
    let mut v: Vec<(f64, bool)> = conf.iter().copied().zip(correct.iter().copied()).collect();
    v.sort_by(|a, b| b.0.total_cmp(&a.0));
    v
}

/// The accuracy–coverage curve at up to `points` coverage levels.
pub fn curve(conf: &[f64], correct: &[bool], points: usize) -> Vec<CurvePoint> {
    let v = by_confidence(conf, correct);
    let n = v.len();
    let mut out = Vec::new();
    let mut ok = 0usize;
    let mut next = 1usize;
    for (k, &(c, good)) in v.iter().enumerate() {
        ok += usize::from(good);
        let covered = k + 1;
        // Only cut between distinct confidences: a threshold cannot split a tie.
        let tie_follows = v.get(k + 1).is_some_and(|w| w.0 == c);
        if (covered * points >= next * n || covered == n) && !tie_follows {
            out.push(CurvePoint {
                threshold: c,
                coverage: covered as f64 / n as f64,
                accuracy: ok as f64 / covered as f64,
            });
            next = covered * points / n + 1;
        }
    }
    out
}

/// The lowest confidence threshold whose covered share keeps accuracy >= `target`.
/// `None` when no threshold reaches the target.
pub fn pick_threshold(conf: &[f64], correct: &[bool], target: f64) -> Option<f64> {
    let v = by_confidence(conf, correct);
    let mut ok = 0usize;
    let mut best = None;
    for (k, &(c, good)) in v.iter().enumerate() {
        ok += usize::from(good);
        let tie_follows = v.get(k + 1).is_some_and(|w| w.0 == c);
        if !tie_follows && ok as f64 / (k + 1) as f64 >= target {
            best = Some(c);
        }
    }
    best
}

/// Evaluates a decider on labelled rows: `model` alone (argmax on every row) and the whole
/// policy `d` serves with it (threshold, out-of-distribution check, rules).
pub fn evaluate(model: &Model, d: &Decider, rows: &[(State, Action)]) -> Evaluation {
    let n = rows.len();
    let mut confusion = [[0usize; NUM_ACTIONS]; NUM_ACTIONS];
    let mut conf = Vec::with_capacity(n);
    let mut correct = Vec::with_capacity(n);
    let (mut covered, mut covered_ok, mut system_ok, mut rules_ok) =
        (0usize, 0usize, 0usize, 0usize);
    let mut reasons = BTreeMap::new();
    for (s, truth) in rows {
        let (top, c) = decider_core::model::argmax(&model.predict(&encode(s)));
        confusion[truth.index()][top.index()] += 1;
        conf.push(c);
        correct.push(top == *truth);
        let dec = d.decide(s, Gates::default());
        system_ok += usize::from(dec.action == *truth);
        if dec.source == Source::Model {
            covered += 1;
            covered_ok += usize::from(dec.action == *truth);
        } else if let Some(r) = dec.fallback_reason {
            *reasons.entry(r.name().to_string()).or_insert(0) += 1;
        }
        rules_ok +=
            usize::from(d.rules().and_then(|r| r.evaluate(s)).map(|h| h.action) == Some(*truth));
    }
    let mut per_action = BTreeMap::new();
    for (k, name) in ACTIONS.iter().enumerate() {
        let tp = confusion[k][k] as f64;
        let predicted: usize = (0..NUM_ACTIONS).map(|t| confusion[t][k]).sum();
        let support: usize = confusion[k].iter().sum();
        per_action.insert(
            name.to_string(),
            ActionMetrics {
                precision: if predicted > 0 {
                    tp / predicted as f64
                } else {
                    0.0
                },
                recall: if support > 0 {
                    tp / support as f64
                } else {
                    0.0
                },
                support,
            },
        );
    }
    let nf = n as f64;
    Evaluation {
        n,
        accuracy: correct.iter().filter(|&&c| c).count() as f64 / nf,
        threshold: d.threshold().0,
        coverage: covered as f64 / nf,
        accuracy_at_threshold: if covered > 0 {
            covered_ok as f64 / covered as f64
        } else {
            0.0
        },
        system_accuracy: system_ok as f64 / nf,
        fallback_rate: (n - covered) as f64 / nf,
        fallback_reasons: reasons,
        rules_accuracy: rules_ok as f64 / nf,
        per_action,
        confusion,
        ece: ece(&conf, &correct, 15),
        curve: curve(&conf, &correct, 50),
        model_version: model.version().to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn threshold_is_lowest_confidence_meeting_target() {
        // Sorted: 0.99 ok, 0.9 ok, 0.8 wrong, 0.7 ok → cumulative acc 1, 1, .667, .75
        let conf = [0.8, 0.99, 0.7, 0.9];
        let ok = [false, true, true, true];
        assert_eq!(pick_threshold(&conf, &ok, 0.99), Some(0.9));
        assert_eq!(pick_threshold(&conf, &ok, 0.7), Some(0.7));
        assert_eq!(pick_threshold(&[0.5], &[false], 0.9), None);
    }

    #[test]
    fn ties_are_not_split() {
        let conf = [0.9, 0.9, 0.5];
        let ok = [true, false, true];
        // Cutting at 0.9 covers both 0.9 rows (acc 0.5); never "first 0.9 only".
        assert_eq!(pick_threshold(&conf, &ok, 0.9), None);
        let c = curve(&conf, &ok, 10);
        assert!(c.iter().all(|p| p.coverage != 1.0 / 3.0));
    }

    #[test]
    fn ece_of_perfect_calibration_is_small() {
        let conf = vec![0.8; 1000];
        let ok: Vec<bool> = (0..1000).map(|i| i % 5 != 0).collect();
        assert!(ece(&conf, &ok, 15) < 1e-9);
        assert!((ece(&[1.0, 1.0], &[false, false], 15) - 1.0).abs() < 1e-12);
    }

    #[test]
    fn curve_ends_at_full_coverage() {
        let conf: Vec<f64> = (0..100).map(|i| f64::from(i) / 100.0).collect();
        let ok = vec![true; 100];
        let c = curve(&conf, &ok, 20);
        assert_eq!(c.last().unwrap().coverage, 1.0);
        assert!(c.windows(2).all(|w| w[0].coverage < w[1].coverage));
    }
}

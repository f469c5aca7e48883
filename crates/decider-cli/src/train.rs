//! The training pipeline: split, fit, early-stop, calibrate, pick the threshold, and build
//! the artifact. Deterministic: same data and seed → byte-identical artifact
//! (no timestamps, no hash-map ordering, no threads).

use crate::dataset::Dataset;
use crate::gbdt::{self, GbdtParams, RoundInfo};
use crate::metrics::{curve, ece, pick_threshold, CurvePoint};
use crate::rng::Rng;
use decider_core::hex;
use decider_core::model::{softmax, Calibration, CalibrationMethod, FeatureRanges, FORMAT_VERSION};
use decider_core::{
    encode, Action, Artifact, Features, RuleTable, State, ACTIONS, ENCODER_VERSION, FEATURE_DIM,
    NUM_ACTIONS,
};
use serde_json::json;
use sha2::{Digest, Sha256};

/// Training options.
#[derive(Debug, Clone)]
pub struct TrainOptions {
    /// Seed for the train/validation split.
    pub seed: u64,
    /// Share of rows held out for validation when no validation file is given.
    pub valid_fraction: f64,
    /// Accuracy the model-decided share must keep on validation (threshold selection).
    pub target_accuracy: f64,
    /// Booster parameters.
    pub params: GbdtParams,
    /// After early stopping on the held-out split, refit on all rows (train + held-out) for
    /// the same number of rounds scaled by the row ratio. Calibration and threshold come from
    /// the held-out fit. Only applies when validation is split from `--data`.
    pub refit: bool,
}

impl Default for TrainOptions {
    fn default() -> Self {
        TrainOptions {
            seed: 42,
            valid_fraction: 0.2,
            target_accuracy: 0.99,
            params: GbdtParams::default(),
            refit: true,
        }
    }
}

/// Everything training produces.
#[derive(Debug, Clone)]
pub struct Trained {
    /// The artifact to write.
    pub artifact: Artifact,
    /// Validation accuracy–coverage curve (calibrated confidences).
    pub curve: Vec<CurvePoint>,
    /// Summary metrics (also inside `artifact.training`).
    pub summary: serde_json::Value,
    /// What the model fitted on the training split said about the validation rows.
    pub held_out: HeldOut,
}

/// The validation rows' answers from the model fitted on the training split (before any
/// refit): what a gate other than accuracy is chosen from.
#[derive(Debug, Clone, Default)]
pub struct HeldOut {
    /// Index of each validation row in the training dataset's rows, when validation was split
    /// from it (`None` for a validation file).
    pub index: Option<Vec<usize>>,
    /// Calibrated confidence of the top action.
    pub confidence: Vec<f64>,
    /// The top action.
    pub action: Vec<Action>,
}

/// Labelled rows.
type Rows = Vec<(State, Action)>;

/// The seeded train/validation split of `n` rows: (training indices, validation indices),
/// each ascending. The trainer holds out exactly these rows when no validation file is given,
/// so a caller that labels rows can know which of them validate.
pub fn split_indices(n: usize, fraction: f64, seed: u64) -> (Vec<usize>, Vec<usize>) {
    let mut idx: Vec<usize> = (0..n).collect();
    Rng::new(seed).shuffle(&mut idx);
    let nv = ((n as f64 * fraction).round() as usize).clamp(1, n.saturating_sub(1).max(1));
    let (v, t) = idx.split_at(nv.min(n));
    let mut t = t.to_vec();
    let mut v = v.to_vec();
    t.sort_unstable();
    v.sort_unstable();
    (t, v)
}

fn split(rows: &[(State, Action)], fraction: f64, seed: u64) -> (Rows, Rows, Vec<usize>) {
    let (t, v) = split_indices(rows.len(), fraction, seed);
    (
        t.iter().map(|&i| rows[i]).collect(),
        v.iter().map(|&i| rows[i]).collect(),
        v,
    )
}

fn xy(rows: &[(State, Action)]) -> (Vec<Features>, Vec<usize>) {
    rows.iter().map(|(s, a)| (encode(s), a.index())).unzip()
}

/// Temperature minimising validation log-loss (golden-section search on ln T).
fn fit_temperature(margins: &[[f64; NUM_ACTIONS]], y: &[usize]) -> f64 {
    let nll = |lt: f64| gbdt::logloss(margins, y, lt.exp()).0;
    let (mut a, mut b) = (0.05f64.ln(), 20f64.ln());
    let r = (5f64.sqrt() - 1.0) / 2.0;
    let (mut c, mut d) = (b - r * (b - a), a + r * (b - a));
    let (mut fc, mut fd) = (nll(c), nll(d));
    for _ in 0..60 {
        if fc < fd {
            b = d;
            d = c;
            fd = fc;
            c = b - r * (b - a);
            fc = nll(c);
        } else {
            a = c;
            c = d;
            fc = fd;
            d = a + r * (b - a);
            fd = nll(d);
        }
    }
    ((a + b) / 2.0).exp()
}

/// Trains on `train` (validated on `valid`, or on a seeded split of `train`).
///
/// # Errors
/// A message for invalid options or data too small to split.
pub fn train(
    train: &Dataset,
    valid: Option<&Dataset>,
    opts: &TrainOptions,
    rules: &RuleTable,
    progress: impl FnMut(RoundInfo),
) -> Result<Trained, String> {
    let params = opts.params.check()?;
    if !(opts.target_accuracy > 0.0 && opts.target_accuracy <= 1.0) {
        return Err(format!(
            "target accuracy must be in (0, 1], got {}",
            opts.target_accuracy
        ));
    }
    if !(opts.valid_fraction > 0.0 && opts.valid_fraction < 1.0) {
        return Err(format!(
            "validation fraction must be in (0, 1), got {}",
            opts.valid_fraction
        ));
    }
    let (tr, va, valid_source, valid_index) = match valid {
        Some(v) => (train.rows.clone(), v.rows.clone(), "file", None),
        None => {
            if train.rows.len() < 20 {
                return Err(format!(
                    "need at least 20 rows to split off validation data, got {}",
                    train.rows.len()
                ));
            }
            let (t, v, index) = split(&train.rows, opts.valid_fraction, opts.seed);
            (t, v, "split", Some(index))
        }
    };
    let (x, y) = xy(&tr);
    let (vx, vy) = xy(&va);
    let mut progress = progress;
    let fitted = gbdt::fit(&x, &y, Some((&vx, &vy)), &params, &mut progress);
    let refit_rows = (opts.refit && valid.is_none()).then(|| train.rows.clone());

    let mut ranges = FeatureRanges::empty();
    tr.iter().chain(&va).for_each(|(s, _)| ranges.include(s));
    let mut artifact = Artifact {
        format_version: FORMAT_VERSION,
        model_version: String::new(),
        encoder_version: ENCODER_VERSION,
        actions: ACTIONS.iter().map(|s| s.to_string()).collect(),
        feature_dim: FEATURE_DIM,
        model: fitted.ensemble,
        calibration: Calibration {
            method: CalibrationMethod::Temperature,
            temperature: 1.0,
        },
        threshold: 0.0,
        feature_ranges: ranges,
        training: json!({}),
    };
    // The artifact's own margins (decider-core's definition, f64), not the served layout's:
    // the artifact is then a function of the data and the seed alone, whatever the compact
    // form does with its leaves (f32 rounding moves a margin by about 1e-7 relative).
    decider_core::model::validate(&artifact)
        .map_err(|e| format!("trained model failed validation: {e}"))?;
    let margins: Vec<[f64; NUM_ACTIONS]> = vx.iter().map(|r| artifact.model.margins(r)).collect();
    let temperature = fit_temperature(&margins, &vy);
    let conf_at = |t: f64| -> (Vec<f64>, Vec<bool>) {
        margins
            .iter()
            .zip(&vy)
            .map(|(m, &k)| {
                let (a, c) = decider_core::model::argmax(&softmax(m, t));
                (c, a.index() == k)
            })
            .unzip()
    };
    let (conf_raw, correct) = conf_at(1.0);
    let (conf, _) = conf_at(temperature);
    let held_out = HeldOut {
        index: valid_index,
        confidence: conf.clone(),
        action: margins
            .iter()
            .map(|m| decider_core::model::argmax(&softmax(m, temperature)).0)
            .collect(),
    };
    let (loss_raw, accuracy) = gbdt::logloss(&margins, &vy, 1.0);
    let (loss_cal, _) = gbdt::logloss(&margins, &vy, temperature);
    let threshold = pick_threshold(&conf, &correct, opts.target_accuracy).unwrap_or(1.0);
    let covered: Vec<bool> = conf.iter().map(|&c| c >= threshold).collect();
    let n_cov = covered.iter().filter(|&&c| c).count();
    let cov_ok = covered
        .iter()
        .zip(&correct)
        .filter(|(c, ok)| **c && **ok)
        .count();
    let rules_ok = va
        .iter()
        .filter(|(s, a)| rules.evaluate(s).map(|h| h.action) == Some(*a))
        .count();
    let system_ok = va
        .iter()
        .zip(&conf)
        .zip(&margins)
        .filter(|(((s, a), &c), m)| {
            let act = if c >= threshold {
                decider_core::model::argmax(&softmax(m, temperature)).0
            } else {
                rules.evaluate(s).map_or(Action::RouteA, |h| h.action)
            };
            act == *a
        })
        .count();
    let nv = va.len() as f64;
    let metrics = json!({
        "valid_accuracy": accuracy,
        "valid_logloss_raw": loss_raw,
        "valid_logloss_calibrated": loss_cal,
        "valid_ece_raw": ece(&conf_raw, &correct, 15),
        "valid_ece_calibrated": ece(&conf, &correct, 15),
        "valid_coverage_at_threshold": n_cov as f64 / nv,
        "valid_accuracy_at_threshold": if n_cov > 0 { cov_ok as f64 / n_cov as f64 } else { 0.0 },
        "valid_system_accuracy": system_ok as f64 / nv,
        "valid_rules_accuracy": rules_ok as f64 / nv,
    });
    let mut refit_rounds = None;
    if let Some(all) = &refit_rows {
        let (ax, ay) = xy(all);
        let rounds =
            ((fitted.rounds as f64 * all.len() as f64 / tr.len() as f64).ceil() as usize).max(1);
        let p = GbdtParams {
            max_rounds: rounds,
            ..opts.params
        }
        .check()?;
        artifact.model = gbdt::fit(&ax, &ay, None, &p, &mut progress).ensemble;
        refit_rounds = Some(rounds);
    }
    artifact.calibration.temperature = temperature;
    artifact.threshold = threshold;
    artifact.training = json!({
        "data_sha256": train.sha256,
        "valid_data_sha256": valid.map(|v| v.sha256.clone()),
        "rows": train.rows.len() + valid.map_or(0, |v| v.rows.len()),
        "train_rows": tr.len(),
        "valid_rows": va.len(),
        "valid_source": valid_source,
        "seed": opts.seed,
        "target_accuracy": opts.target_accuracy,
        "rounds": fitted.rounds,
        "refit_rounds": refit_rounds,
        "refit_rows": refit_rows.as_ref().map(Vec::len),
        "trees": artifact.model.trees.len(),
        "params": opts.params,
        "metrics": metrics,
    });
    if let (Some(extra), Some(t)) = (&train.provenance, artifact.training.as_object_mut()) {
        t.extend(extra.clone());
    }
    seal(&mut artifact)?;
    Ok(Trained {
        curve: curve(&conf, &correct, 50),
        summary: json!({
            "model_version": artifact.model_version,
            "threshold": threshold,
            "temperature": temperature,
            "training": artifact.training,
        }),
        artifact,
        held_out,
    })
}

/// Names the artifact by its content and validates it: call after any change to its model,
/// calibration, threshold or training record (same content → same version). The feature
/// ranges are named through the training record when a caller changes them.
///
/// # Errors
/// An artifact that fails validation.
pub fn seal(artifact: &mut Artifact) -> Result<(), String> {
    let body = serde_json::to_vec(&(
        &artifact.model,
        &artifact.calibration,
        artifact.threshold,
        &artifact.training,
    ))
    .map_err(|e| e.to_string())?;
    artifact.model_version = format!("gbdt-{}", &hex::encode(&Sha256::digest(&body))[..12]);
    decider_core::model::validate(artifact)
        .map_err(|e| format!("trained model failed validation: {e}"))
}

/// Serialises an artifact (pretty JSON, trailing newline): the on-disk form.
pub fn to_json(a: &Artifact) -> String {
    let mut s = serde_json::to_string(a).expect("artifact serialises");
    s.push('\n');
    s
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::simulate::{simulate, SimOptions};

    fn ds(rows: usize, seed: u64) -> Dataset {
        Dataset {
            rows: simulate(SimOptions {
                rows,
                seed,
                shifted: false,
                noise: 0.005,
            }),
            sha256: format!("{seed:064}"),
            provenance: None,
        }
    }

    #[test]
    fn temperature_recovers_a_known_scale() {
        // Labels drawn from softmax(m / 2): the fitted temperature should be near 2.
        let mut rng = Rng::new(5);
        let mut margins = Vec::new();
        let mut y = Vec::new();
        for _ in 0..20000 {
            let m = [rng.normal() * 4.0, rng.normal() * 4.0, 0.0, 0.0];
            let p = softmax(&m, 2.0);
            y.push(rng.weighted(&p));
            margins.push(m);
        }
        let t = fit_temperature(&margins, &y);
        assert!((t - 2.0).abs() < 0.15, "{t}");
    }

    #[test]
    fn same_data_same_seed_same_artifact_bytes() {
        let d = ds(3000, 11);
        let rules = RuleTable::from_json(decider_core::DEFAULT_RULES_JSON).unwrap();
        let opts = TrainOptions {
            params: GbdtParams {
                max_rounds: 30,
                ..Default::default()
            },
            ..Default::default()
        };
        let a = train(&d, None, &opts, &rules, |_| {}).unwrap();
        let b = train(&d, None, &opts, &rules, |_| {}).unwrap();
        assert_eq!(to_json(&a.artifact), to_json(&b.artifact));
        let c = train(&d, None, &TrainOptions { seed: 43, ..opts }, &rules, |_| {}).unwrap();
        assert_ne!(a.artifact.model_version, c.artifact.model_version);
        let m = decider_core::Model::from_json(&to_json(&a.artifact)).unwrap();
        assert!((0.0..=1.0).contains(&m.threshold()));
    }
}

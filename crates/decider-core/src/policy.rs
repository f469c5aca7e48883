//! The decision policy: model output, gates and rules in, one [`Decision`] out (DESIGN §5).
//!
//! The caller (CLI or Worker) does all I/O: it runs or awaits the model and passes the
//! *outcome* here, so every path, fallbacks included, is a plain function call that native
//! tests reach. Order of checks, first that applies wins:
//!
//! 1. `stale_signals` — edge routing without fresh backend signals → rules.
//! 2. `holdout` — canary traffic kept on rules.
//! 3. `model_unavailable` / `model_error` / `model_timeout` → rules.
//! 4. `out_of_distribution` — a raw field outside the training ranges (when the check is on) → rules.
//! 5. `low_confidence` — confidence below the threshold → rules.
//! 6. Otherwise the model decides.
//!
//! When rules are needed but no table is available, the configured default action decides
//! (`source: default`). In shadow mode the model runs, rules decide, and the decision
//! records the model's action and whether the two agree.

use crate::actions::{Action, NUM_ACTIONS};
use crate::features::ENCODER_VERSION;
use crate::json_text::{push_f64, push_str_opt, push_u64, NumberText};
use crate::model::{argmax, FeatureRanges, Probabilities};
use crate::rules::RuleTable;
use crate::state::State;
use serde::{Deserialize, Serialize};
use serde_json::Value;
use thiserror::Error;

/// Who made the decision.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Source {
    /// The model, confident enough.
    Model,
    /// The rule table.
    Rules,
    /// The configured default action (no rule table could decide).
    Default,
}

impl Source {
    /// Wire name.
    pub fn name(self) -> &'static str {
        match self {
            Source::Model => "model",
            Source::Rules => "rules",
            Source::Default => "default",
        }
    }
}

/// Why the model did not decide.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum FallbackReason {
    /// Model confidence below the threshold.
    LowConfidence,
    /// The model failed or returned malformed output.
    ModelError,
    /// The model did not answer in time.
    ModelTimeout,
    /// No usable model (missing or refused artifact, missing binding).
    ModelUnavailable,
    /// A raw state field outside the training ranges.
    OutOfDistribution,
    /// Edge routing without fresh backend signals.
    StaleSignals,
    /// Canary traffic kept on rules.
    Holdout,
}

impl FallbackReason {
    /// Wire name.
    pub fn name(self) -> &'static str {
        match self {
            FallbackReason::LowConfidence => "low_confidence",
            FallbackReason::ModelError => "model_error",
            FallbackReason::ModelTimeout => "model_timeout",
            FallbackReason::ModelUnavailable => "model_unavailable",
            FallbackReason::OutOfDistribution => "out_of_distribution",
            FallbackReason::StaleSignals => "stale_signals",
            FallbackReason::Holdout => "holdout",
        }
    }
}

/// Why a model output could not be used.
#[derive(Debug, Clone, PartialEq, Error)]
pub enum ModelError {
    /// A probability or confidence is NaN or infinite.
    #[error("model output holds a non-finite number ({0})")]
    NonFinite(String),
    /// Output does not have the expected shape.
    #[error("malformed model output: {0}")]
    Malformed(String),
    /// The backend raised an error.
    #[error("model backend failed: {0}")]
    Backend(String),
}

/// A usable model output.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct ModelOutput {
    /// The model's top action.
    pub action: Action,
    /// Its calibrated confidence, in `[0, 1]`.
    pub confidence: f64,
    /// Probabilities per action when the backend gives them.
    pub probabilities: Option<Probabilities>,
}

impl ModelOutput {
    /// From a probability vector: checked finite, non-negative and summing to 1 within 1e-3
    /// (then renormalised exactly).
    ///
    /// # Errors
    /// [`ModelError`] when the vector cannot be trusted.
    pub fn from_probabilities(p: Probabilities) -> Result<ModelOutput, ModelError> {
        if let Some(i) = p.iter().position(|v| !v.is_finite()) {
            return Err(ModelError::NonFinite(format!(
                "probability of {}",
                Action::ALL[i]
            )));
        }
        if p.iter().any(|&v| v < 0.0) {
            return Err(ModelError::Malformed("negative probability".into()));
        }
        let sum: f64 = p.iter().sum();
        if (sum - 1.0).abs() > 1e-3 {
            return Err(ModelError::Malformed(format!(
                "probabilities sum to {sum}, not 1"
            )));
        }
        let mut q = p;
        q.iter_mut().for_each(|v| *v /= sum);
        let (action, confidence) = argmax(&q);
        Ok(ModelOutput {
            action,
            confidence,
            probabilities: Some(q),
        })
    }

    /// From a top action and its confidence.
    ///
    /// # Errors
    /// [`ModelError`] for a non-finite or out-of-range confidence.
    pub fn from_action(action: Action, confidence: f64) -> Result<ModelOutput, ModelError> {
        if !confidence.is_finite() {
            return Err(ModelError::NonFinite("confidence".into()));
        }
        if !(0.0..=1.0).contains(&confidence) {
            return Err(ModelError::Malformed(format!(
                "confidence must be 0..=1, got {confidence}"
            )));
        }
        Ok(ModelOutput {
            action,
            confidence,
            probabilities: None,
        })
    }

    /// Interprets a remote model's JSON answer (the Workers AI backend). Accepted shapes,
    /// also when wrapped in `{"result": …}`:
    /// `{"action": "route_b", "confidence": 0.93}`,
    /// `{"probabilities": {"route_a": 0.1, …}}` (every action present),
    /// `{"probabilities": [0.1, 0.7, 0.1, 0.1]}` (action order), or a bare array of 4.
    ///
    /// # Errors
    /// [`ModelError`] for anything else, unknown actions, or non-finite numbers.
    pub fn from_remote_json(v: &Value) -> Result<ModelOutput, ModelError> {
        let v = v
            .get("result")
            .filter(|r| r.is_object() || r.is_array())
            .unwrap_or(v);
        if let Some(arr) = v.as_array() {
            return Self::from_probabilities(prob_array(arr)?);
        }
        let Some(obj) = v.as_object() else {
            return Err(ModelError::Malformed(format!(
                "expected an object, got {}",
                crate::state::json_type(v)
            )));
        };
        if let Some(p) = obj.get("probabilities") {
            let probs = match p {
                Value::Array(arr) => prob_array(arr)?,
                Value::Object(map) => {
                    let mut out = [0.0; NUM_ACTIONS];
                    if let Some(k) = map.keys().find(|k| Action::parse_name(k).is_none()) {
                        return Err(ModelError::Malformed(format!(
                            "unknown action {k:?} in probabilities"
                        )));
                    }
                    for a in Action::ALL {
                        out[a.index()] = number(map.get(a.name()), a.name())?;
                    }
                    out
                }
                other => {
                    return Err(ModelError::Malformed(format!(
                        "probabilities must be an array or object, got {}",
                        crate::state::json_type(other)
                    )))
                }
            };
            return Self::from_probabilities(probs);
        }
        let action = obj.get("action").ok_or_else(|| {
            ModelError::Malformed("neither action nor probabilities present".into())
        })?;
        let name = action
            .as_str()
            .ok_or_else(|| ModelError::Malformed("action must be a string".into()))?;
        let action = Action::parse_name(name)
            .ok_or_else(|| ModelError::Malformed(format!("unknown action {name:?}")))?;
        Self::from_action(action, number(obj.get("confidence"), "confidence")?)
    }
}

fn number(v: Option<&Value>, what: &str) -> Result<f64, ModelError> {
    match v {
        None => Err(ModelError::Malformed(format!("{what} missing"))),
        // serde_json maps NaN/Infinity to null when a JS value is converted.
        Some(Value::Null) => Err(ModelError::NonFinite(what.to_string())),
        Some(Value::Number(n)) => n
            .as_f64()
            .ok_or_else(|| ModelError::NonFinite(what.to_string())),
        Some(other) => Err(ModelError::Malformed(format!(
            "{what} must be a number, got {}",
            crate::state::json_type(other)
        ))),
    }
}

fn prob_array(arr: &[Value]) -> Result<Probabilities, ModelError> {
    if arr.len() != NUM_ACTIONS {
        return Err(ModelError::Malformed(format!(
            "expected {NUM_ACTIONS} probabilities, got {}",
            arr.len()
        )));
    }
    let mut out = [0.0; NUM_ACTIONS];
    for (i, v) in arr.iter().enumerate() {
        out[i] = number(Some(v), Action::ALL[i].name())?;
    }
    Ok(out)
}

/// What became of the model call.
#[derive(Debug, Clone, PartialEq)]
pub enum ModelOutcome {
    /// A usable answer.
    Output(ModelOutput),
    /// The backend failed or answered garbage.
    Error(ModelError),
    /// The backend did not answer in time.
    Timeout,
    /// No model to ask (why is reported elsewhere, e.g. /v1/health).
    Unavailable,
    /// The model was not consulted (the gates made it unnecessary).
    NotRun,
}

/// Per-request gates decided by the edge before the model.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Gates {
    /// Backend signals are missing or older than allowed.
    pub stale_signals: bool,
    /// The request falls outside the canary share.
    pub holdout: bool,
}

/// Policy configuration, validated once (see [`PolicyConfig::check`]).
#[derive(Debug, Clone, PartialEq)]
pub struct PolicyConfig {
    /// Confidence at or above which the model decides.
    pub threshold: f64,
    /// Action when neither model nor rules can decide.
    pub default_action: Action,
    /// Whether out-of-range raw fields send the decision to rules.
    pub ood_check: bool,
    /// Shadow mode: rules decide, the model's action is recorded.
    pub shadow: bool,
}

/// An invalid policy configuration.
#[derive(Debug, Clone, PartialEq, Error)]
#[error("threshold must be a number in [0, 1], got {0}")]
pub struct ConfigError(pub f64);

impl PolicyConfig {
    /// Checks the configuration.
    ///
    /// # Errors
    /// [`ConfigError`] for a threshold outside `[0, 1]` or non-finite.
    pub fn check(self) -> Result<PolicyConfig, ConfigError> {
        if self.threshold.is_finite() && (0.0..=1.0).contains(&self.threshold) {
            Ok(self)
        } else {
            Err(ConfigError(self.threshold))
        }
    }
}

/// Probabilities keyed by action name, in action order on the wire.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct ProbabilityMap {
    /// P(route_a).
    pub route_a: f64,
    /// P(route_b).
    pub route_b: f64,
    /// P(route_c).
    pub route_c: f64,
    /// P(reject).
    pub reject: f64,
}

impl From<Probabilities> for ProbabilityMap {
    fn from(p: Probabilities) -> Self {
        ProbabilityMap {
            route_a: p[0],
            route_b: p[1],
            route_c: p[2],
            reject: p[3],
        }
    }
}

/// Shadow-mode record: what the model would have done.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Shadow {
    /// The model's action (None when the model gave no usable output).
    pub model_action: Option<Action>,
    /// Whether it equals the served action.
    pub agree: bool,
}

/// A decision (DESIGN §5).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Decision {
    /// The action to take.
    pub action: Action,
    /// The model's confidence in its top action, when the model answered.
    pub confidence: Option<f64>,
    /// Who decided.
    pub source: Source,
    /// Why the model did not decide, if it did not.
    pub fallback_reason: Option<FallbackReason>,
    /// Version of the model consulted (or configured).
    pub model_version: Option<String>,
    /// Encoder version of this build.
    pub encoder_version: u32,
    /// Model probabilities per action, when available.
    pub probabilities: Option<ProbabilityMap>,
    /// Wall time of the decision in microseconds, filled in by the caller.
    pub decision_us: u64,
    /// Name of the rule that decided, when rules decided.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rule: Option<String>,
    /// Shadow-mode record.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub shadow: Option<Shadow>,
}

impl Decision {
    /// The decision as compact JSON, byte for byte what `serde_json::to_string` makes of
    /// it (fields in DESIGN §5 order), written directly: the Worker answers every
    /// `/v1/decide` with this, and the generic serialiser costs more than the model's
    /// forward pass in wasm.
    pub fn to_json(&self) -> String {
        // Room for a model decision's record (about 300 bytes with four probabilities at
        // full precision): one allocation, no regrowth.
        let mut out = String::with_capacity(384);
        self.write_json(&mut out);
        out
    }

    /// [`Decision::to_json`] appended to `out` (a buffer kept between decisions spares an
    /// allocation per decision).
    pub fn write_json(&self, out: &mut String) {
        // The probabilities first: the confidence is one of them when the model answered,
        // and formatting a float costs more than the rest of the record.
        let mut room: [NumberText; 4] = Default::default();
        let [ra, rb, rc, rr] = &mut room;
        let probs = self.probabilities.map(|p| {
            let values = [p.route_a, p.route_b, p.route_c, p.reject];
            let texts = [
                ra.format(p.route_a),
                rb.format(p.route_b),
                rc.format(p.route_c),
                rr.format(p.reject),
            ];
            (values, texts)
        });
        out.push_str("{\"action\":\"");
        out.push_str(self.action.name());
        out.push_str("\",\"confidence\":");
        match self.confidence {
            Some(c) => {
                let same = probs.as_ref().and_then(|(values, texts)| {
                    let i = values.iter().position(|v| v.to_bits() == c.to_bits())?;
                    Some(texts[i])
                });
                match same {
                    Some(text) => out.push_str(text),
                    None => push_f64(out, c),
                }
            }
            None => out.push_str("null"),
        }
        out.push_str(",\"source\":\"");
        out.push_str(self.source.name());
        out.push_str("\",\"fallback_reason\":");
        match self.fallback_reason {
            Some(r) => {
                out.push('"');
                out.push_str(r.name());
                out.push('"');
            }
            None => out.push_str("null"),
        }
        out.push_str(",\"model_version\":");
        push_str_opt(out, self.model_version.as_deref());
        out.push_str(",\"encoder_version\":");
        push_u64(out, u64::from(self.encoder_version));
        out.push_str(",\"probabilities\":");
        match &probs {
            Some((_, [a, b, c, r])) => {
                out.push_str("{\"route_a\":");
                out.push_str(a);
                out.push_str(",\"route_b\":");
                out.push_str(b);
                out.push_str(",\"route_c\":");
                out.push_str(c);
                out.push_str(",\"reject\":");
                out.push_str(r);
                out.push('}');
            }
            None => out.push_str("null"),
        }
        out.push_str(",\"decision_us\":");
        push_u64(out, self.decision_us);
        if let Some(rule) = &self.rule {
            out.push_str(",\"rule\":");
            push_str_opt(out, Some(rule));
        }
        if let Some(sh) = &self.shadow {
            out.push_str(",\"shadow\":{\"model_action\":");
            match sh.model_action {
                Some(a) => {
                    out.push('"');
                    out.push_str(a.name());
                    out.push('"');
                }
                None => out.push_str("null"),
            }
            out.push_str(",\"agree\":");
            out.push_str(if sh.agree { "true" } else { "false" });
            out.push('}');
        }
        out.push('}');
    }
}

/// Everything a decision is made from, besides the configuration.
#[derive(Debug, Clone, Copy)]
pub struct Inputs<'a> {
    /// The validated state.
    pub state: &'a State,
    /// What became of the model call.
    pub outcome: &'a ModelOutcome,
    /// Edge gates.
    pub gates: Gates,
    /// The rule table, if any.
    pub rules: Option<&'a RuleTable>,
    /// Training ranges for the out-of-distribution check, if known.
    pub ranges: Option<&'a FeatureRanges>,
    /// Model version to report.
    pub model_version: Option<&'a str>,
}

/// Whether the model needs to be consulted at all for these gates.
pub fn model_needed(gates: Gates, cfg: &PolicyConfig) -> bool {
    cfg.shadow || !(gates.stale_signals || gates.holdout)
}

/// Makes the decision. Never panics, for any state and any outcome.
// `!(confidence >= threshold)` is deliberate: a NaN confidence must count as low.
#[allow(clippy::neg_cmp_op_on_partial_ord)]
pub fn decide(inp: Inputs<'_>, cfg: &PolicyConfig) -> Decision {
    let output = match inp.outcome {
        ModelOutcome::Output(o) => Some(*o),
        _ => None,
    };
    let reason = if inp.gates.stale_signals {
        Some(FallbackReason::StaleSignals)
    } else if inp.gates.holdout {
        Some(FallbackReason::Holdout)
    } else {
        match inp.outcome {
            ModelOutcome::Error(_) => Some(FallbackReason::ModelError),
            ModelOutcome::Timeout => Some(FallbackReason::ModelTimeout),
            ModelOutcome::Unavailable | ModelOutcome::NotRun => {
                Some(FallbackReason::ModelUnavailable)
            }
            ModelOutcome::Output(o) => {
                let ood =
                    cfg.ood_check && inp.ranges.is_some_and(|r| r.outlier(inp.state).is_some());
                if ood {
                    Some(FallbackReason::OutOfDistribution)
                } else if !(o.confidence >= cfg.threshold) {
                    Some(FallbackReason::LowConfidence)
                } else {
                    None
                }
            }
        }
    };
    let mut d = Decision {
        action: cfg.default_action,
        confidence: output.map(|o| o.confidence),
        source: Source::Model,
        fallback_reason: reason,
        model_version: inp.model_version.map(str::to_string),
        encoder_version: ENCODER_VERSION,
        probabilities: output
            .and_then(|o| o.probabilities)
            .map(ProbabilityMap::from),
        decision_us: 0,
        rule: None,
        shadow: None,
    };
    let use_rules = reason.is_some() || cfg.shadow;
    if !use_rules {
        d.action = output.map_or(cfg.default_action, |o| o.action);
        return d;
    }
    let stale = inp.gates.stale_signals;
    let hit = inp.rules.and_then(|t| {
        t.evaluate_with(|f| {
            let signal = matches!(f, "current_load" | "recent_success_rate" | "queue_depth");
            if stale && signal {
                None
            } else {
                inp.state.field(f)
            }
        })
    });
    match hit {
        Some(h) => {
            d.action = h.action;
            d.source = Source::Rules;
            d.rule = Some(h.rule.to_string());
        }
        None => {
            d.action = cfg.default_action;
            d.source = Source::Default;
        }
    }
    if cfg.shadow {
        let model_action = output.map(|o| o.action);
        d.shadow = Some(Shadow {
            model_action,
            agree: model_action == Some(d.action),
        });
    }
    d
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::rules::RuleTable;
    use serde_json::json;

    fn state() -> State {
        State {
            request_type: 1,
            region_id: 5,
            current_load: 0.4,
            recent_success_rate: 0.97,
            queue_depth: 12.0,
            hour: 14,
        }
    }

    fn cfg() -> PolicyConfig {
        PolicyConfig {
            threshold: 0.8,
            default_action: Action::RouteC,
            ood_check: true,
            shadow: false,
        }
    }

    fn rules() -> RuleTable {
        RuleTable::from_json(
            r#"{"version":"t","rules":[
          {"name":"busy","when":{"current_load":{"gte":0.3}},"action":"route_b"},
          {"name":"all","when":{},"action":"route_a"}]}"#,
        )
        .unwrap()
    }

    fn out(p: [f64; 4]) -> ModelOutcome {
        ModelOutcome::Output(ModelOutput::from_probabilities(p).unwrap())
    }

    fn run(
        outcome: ModelOutcome,
        gates: Gates,
        ranges: Option<&FeatureRanges>,
        cfg: &PolicyConfig,
    ) -> Decision {
        let s = state();
        let r = rules();
        decide(
            Inputs {
                state: &s,
                outcome: &outcome,
                gates,
                rules: Some(&r),
                ranges,
                model_version: Some("m1"),
            },
            cfg,
        )
    }

    #[test]
    fn confident_model_decides() {
        let d = run(
            out([0.05, 0.05, 0.85, 0.05]),
            Gates::default(),
            None,
            &cfg(),
        );
        assert_eq!(
            (d.action, d.source, d.fallback_reason),
            (Action::RouteC, Source::Model, None)
        );
        assert_eq!(d.confidence, Some(0.85));
        assert_eq!(d.probabilities.unwrap().route_c, 0.85);
    }

    #[test]
    fn threshold_is_inclusive() {
        let d = run(out([0.8, 0.1, 0.05, 0.05]), Gates::default(), None, &cfg());
        assert_eq!(d.source, Source::Model);
    }

    #[test]
    fn every_fallback_reason() {
        let mut narrow = FeatureRanges::empty();
        narrow.include(&State {
            current_load: 0.1,
            ..state()
        });
        let cases = [
            (
                out([0.1, 0.1, 0.7, 0.1]),
                Gates::default(),
                None,
                FallbackReason::LowConfidence,
            ),
            (
                ModelOutcome::Error(ModelError::Backend("boom".into())),
                Gates::default(),
                None,
                FallbackReason::ModelError,
            ),
            (
                ModelOutcome::Timeout,
                Gates::default(),
                None,
                FallbackReason::ModelTimeout,
            ),
            (
                ModelOutcome::Unavailable,
                Gates::default(),
                None,
                FallbackReason::ModelUnavailable,
            ),
            (
                out([0.97, 0.01, 0.01, 0.01]),
                Gates::default(),
                Some(&narrow),
                FallbackReason::OutOfDistribution,
            ),
            (
                out([0.97, 0.01, 0.01, 0.01]),
                Gates {
                    stale_signals: true,
                    holdout: false,
                },
                None,
                FallbackReason::StaleSignals,
            ),
            (
                out([0.97, 0.01, 0.01, 0.01]),
                Gates {
                    stale_signals: false,
                    holdout: true,
                },
                None,
                FallbackReason::Holdout,
            ),
        ];
        for (o, g, r, want) in cases {
            let d = run(o, g, r, &cfg());
            assert_eq!(d.fallback_reason, Some(want));
            assert_eq!(d.source, Source::Rules, "{want:?}");
            let expected = if want == FallbackReason::StaleSignals {
                Action::RouteA
            } else {
                Action::RouteB
            };
            assert_eq!(
                d.action, expected,
                "{want:?}: stale signals must not feed rules"
            );
        }
    }

    #[test]
    fn ood_check_can_be_turned_off() {
        let mut narrow = FeatureRanges::empty();
        narrow.include(&State {
            current_load: 0.1,
            ..state()
        });
        let c = PolicyConfig {
            ood_check: false,
            ..cfg()
        };
        let d = run(
            out([0.97, 0.01, 0.01, 0.01]),
            Gates::default(),
            Some(&narrow),
            &c,
        );
        assert_eq!(d.source, Source::Model);
    }

    #[test]
    fn no_rules_means_default_action() {
        let s = state();
        let d = decide(
            Inputs {
                state: &s,
                outcome: &ModelOutcome::Timeout,
                gates: Gates::default(),
                rules: None,
                ranges: None,
                model_version: None,
            },
            &cfg(),
        );
        assert_eq!((d.action, d.source), (Action::RouteC, Source::Default));
        assert_eq!(d.fallback_reason, Some(FallbackReason::ModelTimeout));
    }

    #[test]
    fn shadow_mode_records_model_action() {
        let c = PolicyConfig {
            shadow: true,
            ..cfg()
        };
        let d = run(out([0.01, 0.01, 0.97, 0.01]), Gates::default(), None, &c);
        assert_eq!((d.action, d.source), (Action::RouteB, Source::Rules));
        assert_eq!(
            d.shadow,
            Some(Shadow {
                model_action: Some(Action::RouteC),
                agree: false
            })
        );
    }

    #[test]
    fn remote_outputs() {
        let ok = |v: Value| ModelOutput::from_remote_json(&v);
        assert_eq!(
            ok(json!({"action": "route_b", "confidence": 0.9}))
                .unwrap()
                .action,
            Action::RouteB
        );
        let p = ok(json!({"probabilities": {"route_a": 0.1, "route_b": 0.2, "route_c": 0.6, "reject": 0.1}})).unwrap();
        assert_eq!((p.action, p.confidence), (Action::RouteC, 0.6));
        assert_eq!(
            ok(json!({"result": [0.7, 0.1, 0.1, 0.1]})).unwrap().action,
            Action::RouteA
        );
        for bad in [
            json!({"action": "route_d", "confidence": 0.9}),
            json!({"action": "route_a", "confidence": null}),
            json!({"action": "route_a", "confidence": 1.5}),
            json!({"action": "route_a"}),
            json!({"probabilities": [0.5, 0.5]}),
            json!({"probabilities": [0.9, 0.9, 0.1, 0.1]}),
            json!({"probabilities": {"route_a": 1.0}}),
            json!("route_a"),
            json!(null),
        ] {
            assert!(ok(bad.clone()).is_err(), "{bad}");
        }
        assert!(matches!(
            ModelOutput::from_probabilities([f64::NAN, 0.0, 0.0, 1.0]),
            Err(ModelError::NonFinite(_))
        ));
    }

    #[test]
    fn config_check_refuses_bad_threshold() {
        assert!(PolicyConfig {
            threshold: 1.5,
            ..cfg()
        }
        .check()
        .is_err());
        assert!(PolicyConfig {
            threshold: f64::NAN,
            ..cfg()
        }
        .check()
        .is_err());
        assert!(cfg().check().is_ok());
    }

    #[test]
    fn decision_serialises_per_contract() {
        let d = run(
            out([0.05, 0.85, 0.05, 0.05]),
            Gates::default(),
            None,
            &cfg(),
        );
        let v = serde_json::to_value(&d).unwrap();
        let keys: Vec<&str> = v.as_object().unwrap().keys().map(String::as_str).collect();
        for k in [
            "action",
            "confidence",
            "source",
            "fallback_reason",
            "model_version",
            "encoder_version",
            "probabilities",
            "decision_us",
        ] {
            assert!(keys.contains(&k), "{k}");
        }
        assert_eq!(v["source"], "model");
        assert_eq!(v["fallback_reason"], Value::Null);
        assert_eq!(v["encoder_version"], 1);
    }
}

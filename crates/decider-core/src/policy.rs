//! The decision policy: model output, gates and rules in, one [`Decision`] out.
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

use crate::actions::Action;
use crate::features::ENCODER_VERSION;
use crate::model::{FeatureRanges, Probabilities};
use crate::output::ModelOutcome;
use crate::rules::Rules;
use crate::state::State;
use serde::{Deserialize, Serialize};
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
    /// All sources, in wire order.
    pub const ALL: [Source; 3] = [Source::Model, Source::Rules, Source::Default];

    /// The source of a wire name.
    pub fn parse_name(s: &str) -> Option<Source> {
        Source::ALL.into_iter().find(|x| x.name() == s)
    }

    /// Position in [`Source::ALL`] (wire order): the index of per-source counters.
    pub fn index(self) -> usize {
        match self {
            Source::Model => 0,
            Source::Rules => 1,
            Source::Default => 2,
        }
    }

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
    /// All reasons, in declaration order.
    pub const ALL: [FallbackReason; 7] = [
        FallbackReason::LowConfidence,
        FallbackReason::ModelError,
        FallbackReason::ModelTimeout,
        FallbackReason::ModelUnavailable,
        FallbackReason::OutOfDistribution,
        FallbackReason::StaleSignals,
        FallbackReason::Holdout,
    ];

    /// The reason of a wire name.
    pub fn parse_name(s: &str) -> Option<FallbackReason> {
        FallbackReason::ALL.into_iter().find(|x| x.name() == s)
    }

    /// Wire name.
    pub const fn name(self) -> &'static str {
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

/// Per-request gates decided by the edge before the model.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Gates {
    /// Backend signals are missing or older than allowed.
    pub stale_signals: bool,
    /// The request falls outside the canary share.
    pub holdout: bool,
}

/// Policy configuration. [`crate::Decider`] builds it from checked parameters.
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

/// A confidence threshold, checked when made: finite and in `[0, 1]`.
#[derive(Debug, Clone, Copy, PartialEq, PartialOrd)]
pub struct Threshold(f64);

impl Threshold {
    /// Checks a threshold.
    ///
    /// # Errors
    /// [`ConfigError`] for a value outside `[0, 1]` or not finite.
    pub fn new(v: f64) -> Result<Threshold, ConfigError> {
        if v.is_finite() && (0.0..=1.0).contains(&v) {
            Ok(Threshold(v))
        } else {
            Err(ConfigError(v))
        }
    }

    /// The value.
    pub fn get(self) -> f64 {
        self.0
    }
}

/// An invalid policy configuration.
#[derive(Debug, Clone, PartialEq, Error)]
#[error("threshold must be a number in [0, 1], got {0}")]
pub struct ConfigError(pub f64);

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

/// A decision: the action and everything that explains it. Serialised in field order, this
/// is the `/v1/decide` answer.
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

/// Everything a decision is made from, besides the configuration.
#[derive(Debug, Clone, Copy)]
pub struct Inputs<'a> {
    /// The validated state.
    pub state: &'a State,
    /// What became of the model call.
    pub outcome: &'a ModelOutcome,
    /// Edge gates.
    pub gates: Gates,
    /// The rule table, if any (read only when a decision falls to rules).
    pub rules: Option<&'a Rules>,
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
    let hit = inp.rules.and_then(Rules::table).and_then(|t| {
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
    use crate::output::{ModelError, ModelOutput};
    use crate::rules::RuleTable;
    use serde_json::Value;

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
                rules: Some(&Rules::from(r.clone())),
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

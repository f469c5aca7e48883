//! The whole decision, composed once: a model source, a rule table and a checked policy.
//!
//! The Worker, `decider decide`/`eval` and the benchmarks all decide through [`Decider`], so
//! "run the model if the policy needs it, then apply the policy" exists in one place. A
//! model in memory is run here; a remote model (Workers AI) is awaited by the caller, which
//! asks [`Decider::needs_remote`] first and hands the outcome to [`Decider::decide_with`].

use crate::actions::Action;
use crate::model::Model;
use crate::output::ModelOutcome;
use crate::policy::{self, Decision, Gates, Inputs, PolicyConfig, Threshold};
use crate::rules::RuleTable;
use crate::state::State;
use std::sync::Arc;

/// Threshold used when neither configuration nor a model gives one.
pub const DEFAULT_THRESHOLD: f64 = 0.8;

/// Where the decision model comes from.
#[derive(Debug, Clone)]
pub enum ModelSource {
    /// A validated model in memory (the embedded artifact, or a file the CLI loaded).
    Local(Arc<Model>),
    /// A model behind an asynchronous call (Workers AI), named as decisions report it.
    Remote {
        /// The remote model's name.
        name: String,
        /// The threshold it was calibrated with, when known (the embedded artifact's: the
        /// remote model is expected to be the same trained model).
        threshold: Option<f64>,
    },
    /// No usable model, and why (shown by `/v1/health`; every decision falls back).
    Unavailable(String),
}

/// Where the threshold in force comes from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ThresholdSource {
    /// Configuration overrides it.
    Config,
    /// The model's calibrated threshold.
    Artifact,
    /// [`DEFAULT_THRESHOLD`]: no override and no model that knows one.
    Default,
}

impl ThresholdSource {
    /// Wire name.
    pub fn name(self) -> &'static str {
        match self {
            ThresholdSource::Config => "config",
            ThresholdSource::Artifact => "artifact",
            ThresholdSource::Default => "default",
        }
    }
}

/// Policy parameters as configured.
#[derive(Debug, Clone, PartialEq)]
pub struct Params {
    /// Confidence threshold override; `None` takes the model's.
    pub threshold: Option<Threshold>,
    /// Action when neither model nor rules can decide.
    pub default_action: Action,
    /// Whether out-of-range raw fields send the decision to rules.
    pub ood_check: bool,
    /// Shadow mode: rules decide, the model's action is recorded.
    pub shadow: bool,
}

impl Default for Params {
    fn default() -> Params {
        Params {
            threshold: None,
            default_action: Action::RouteA,
            ood_check: true,
            shadow: false,
        }
    }
}

/// A model source, a rule table and a checked policy configuration.
#[derive(Debug, Clone)]
pub struct Decider {
    model: ModelSource,
    rules: Option<RuleTable>,
    policy: PolicyConfig,
    threshold_source: ThresholdSource,
}

impl Decider {
    /// Resolves the threshold: the override, else the model's, else [`DEFAULT_THRESHOLD`].
    /// Every one of them is valid (a [`Threshold`] is checked when made, an artifact's when
    /// loaded), so this cannot fail.
    pub fn new(model: ModelSource, rules: Option<RuleTable>, params: Params) -> Decider {
        let model_threshold = match &model {
            ModelSource::Local(m) => Some(m.threshold()),
            ModelSource::Remote { threshold, .. } => *threshold,
            ModelSource::Unavailable(_) => None,
        };
        let (threshold, threshold_source) = match (params.threshold, model_threshold) {
            (Some(t), _) => (t.get(), ThresholdSource::Config),
            (None, Some(t)) => (t, ThresholdSource::Artifact),
            (None, None) => (DEFAULT_THRESHOLD, ThresholdSource::Default),
        };
        let policy = PolicyConfig {
            threshold,
            default_action: params.default_action,
            ood_check: params.ood_check,
            shadow: params.shadow,
        };
        Decider {
            model,
            rules,
            policy,
            threshold_source,
        }
    }

    /// The model source.
    pub fn model(&self) -> &ModelSource {
        &self.model
    }

    /// The rule table, if any.
    pub fn rules(&self) -> Option<&RuleTable> {
        self.rules.as_ref()
    }

    /// The checked policy configuration.
    pub fn policy(&self) -> &PolicyConfig {
        &self.policy
    }

    /// The threshold in force and where it comes from.
    pub fn threshold(&self) -> (f64, ThresholdSource) {
        (self.policy.threshold, self.threshold_source)
    }

    /// The model version decisions report: the artifact's, or the remote model's name.
    pub fn model_version(&self) -> Option<&str> {
        match &self.model {
            ModelSource::Local(m) => Some(m.version()),
            ModelSource::Remote { name, .. } => Some(name),
            ModelSource::Unavailable(_) => None,
        }
    }

    /// Whether deciding under these gates needs the remote model's answer first.
    pub fn needs_remote(&self, gates: Gates) -> bool {
        matches!(self.model, ModelSource::Remote { .. })
            && policy::model_needed(gates, &self.policy)
    }

    /// Decides with a model in memory (a remote model counts as unavailable: use
    /// [`Decider::decide_with`] for it).
    pub fn decide(&self, state: &State, gates: Gates) -> Decision {
        self.decide_with(state, gates, None)
    }

    /// Decides, given the remote model's outcome when [`Decider::needs_remote`] said it was
    /// needed. The model in memory runs only when the policy needs it.
    pub fn decide_with(
        &self,
        state: &State,
        gates: Gates,
        remote: Option<ModelOutcome>,
    ) -> Decision {
        let outcome = if !policy::model_needed(gates, &self.policy) {
            ModelOutcome::NotRun
        } else {
            match &self.model {
                ModelSource::Local(m) => ModelOutcome::of_model(m, state),
                ModelSource::Remote { .. } => remote.unwrap_or(ModelOutcome::Unavailable),
                ModelSource::Unavailable(_) => ModelOutcome::Unavailable,
            }
        };
        policy::decide(
            Inputs {
                state,
                outcome: &outcome,
                gates,
                rules: self.rules.as_ref(),
                // Training ranges are known only for a model in memory.
                ranges: match &self.model {
                    ModelSource::Local(m) => Some(m.ranges()),
                    _ => None,
                },
                model_version: self.model_version(),
            },
            &self.policy,
        )
    }
}

/// Request body text → decision JSON text (or `{"error": …}` for a bad body): what the
/// Worker's `/v1/decide` computes between reading the body and writing the response. The
/// criterion benches and the wasm micro-benchmark time this one function.
#[doc(hidden)]
pub fn decide_body_text(decider: &Decider, text: &[u8], default_hour: u8) -> String {
    match State::from_body(text, default_hour) {
        Ok(s) => serde_json::to_string(&decider.decide(&s, Gates::default()))
            .unwrap_or_else(|e| format!("{{\"error\":{:?}}}", e.to_string())),
        Err(e) => serde_json::json!({"error": e.to_string()}).to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::tests_support::TINY_ARTIFACT;
    use crate::output::ModelOutput;
    use crate::policy::{FallbackReason, Source};
    use crate::DEFAULT_RULES_JSON;

    fn state(region_id: u8) -> State {
        State {
            request_type: 1,
            region_id,
            current_load: 0.2,
            recent_success_rate: 0.97,
            queue_depth: 3.0,
            hour: 14,
        }
    }

    fn local(params: Params) -> Decider {
        let model = Arc::new(Model::from_json(TINY_ARTIFACT).unwrap());
        let rules = RuleTable::from_json(DEFAULT_RULES_JSON).unwrap();
        Decider::new(ModelSource::Local(model), Some(rules), params)
    }

    #[test]
    fn threshold_precedence() {
        let d = local(Params {
            threshold: Some(Threshold::new(0.55).unwrap()),
            ..Params::default()
        });
        assert_eq!(d.threshold(), (0.55, ThresholdSource::Config));
        assert_eq!(
            local(Params::default()).threshold(),
            (0.6, ThresholdSource::Artifact)
        );
        let remote = |threshold| {
            Decider::new(
                ModelSource::Remote {
                    name: "@cf/x".into(),
                    threshold,
                },
                None,
                Params::default(),
            )
            .threshold()
        };
        assert_eq!(remote(Some(0.7)), (0.7, ThresholdSource::Artifact));
        assert_eq!(remote(None), (DEFAULT_THRESHOLD, ThresholdSource::Default));
        for bad in [1.5, -0.1, f64::NAN, f64::INFINITY] {
            assert!(Threshold::new(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn local_model_decides_and_reports_its_version() {
        let d = local(Params::default()).decide(&state(3), Gates::default());
        assert_eq!((d.action, d.source), (Action::RouteB, Source::Model));
        assert_eq!(d.model_version.as_deref(), Some("tiny-test"));
    }

    #[test]
    fn gates_skip_the_model() {
        let d = local(Params::default()).decide(
            &state(3),
            Gates {
                stale_signals: false,
                holdout: true,
            },
        );
        assert_eq!(d.fallback_reason, Some(FallbackReason::Holdout));
        assert_eq!(d.confidence, None, "the model must not have run");
    }

    #[test]
    fn remote_outcome_is_used_only_for_a_remote_source() {
        let remote = Decider::new(
            ModelSource::Remote {
                name: "@cf/x".into(),
                threshold: Some(0.5),
            },
            None,
            Params::default(),
        );
        let answer = ModelOutcome::Output(ModelOutput::from_action(Action::RouteC, 0.9).unwrap());
        assert!(remote.needs_remote(Gates::default()));
        assert!(!remote.needs_remote(Gates {
            stale_signals: true,
            holdout: false
        }));
        let d = remote.decide_with(&state(0), Gates::default(), Some(answer.clone()));
        assert_eq!((d.action, d.source), (Action::RouteC, Source::Model));
        assert_eq!(d.model_version.as_deref(), Some("@cf/x"));
        let d = remote.decide(&state(0), Gates::default());
        assert_eq!(d.fallback_reason, Some(FallbackReason::ModelUnavailable));
        assert_eq!(d.source, Source::Default, "no rule table");
        // A local model ignores a remote answer.
        let l = local(Params::default());
        assert!(!l.needs_remote(Gates::default()));
        let d = l.decide_with(&state(3), Gates::default(), Some(answer));
        assert_eq!(d.action, Action::RouteB);
    }

    #[test]
    fn unavailable_model_falls_back_to_rules() {
        let rules = RuleTable::from_json(DEFAULT_RULES_JSON).unwrap();
        let d = Decider::new(
            ModelSource::Unavailable("refused".into()),
            Some(rules),
            Params::default(),
        );
        assert!(!d.needs_remote(Gates::default()));
        let out = d.decide(&state(3), Gates::default());
        assert_eq!(out.source, Source::Rules);
        assert_eq!(out.fallback_reason, Some(FallbackReason::ModelUnavailable));
        assert_eq!(out.model_version, None);
    }
}

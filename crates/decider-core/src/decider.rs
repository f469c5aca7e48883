//! The whole decision, composed once: a model source, a rule table and a checked policy.
//!
//! The Worker, `decider decide`/`eval` and the benchmarks all decide through [`Decider`], so
//! "run the model if the policy needs it, then apply the policy" exists in one place. A
//! model in memory is run here; a remote model (Workers AI) is awaited by the caller, which
//! asks [`Decider::needs_remote`] first and hands the outcome to [`Decider::decide_with`].

use crate::actions::Action;
use crate::model::Model;
use crate::output::ModelOutcome;
use crate::policy::{self, Decision, Gates, Inputs, PolicyConfig, Source, Threshold};
use crate::rules::{RuleTable, Rules};
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
    /// Exploration on model-decided traffic (off by default).
    pub explore: Explore,
}

impl Default for Params {
    fn default() -> Params {
        Params {
            threshold: None,
            default_action: Action::RouteA,
            ood_check: true,
            shadow: false,
            explore: Explore::OFF,
        }
    }
}

/// The share of model-decided traffic whose action is drawn uniformly from the route actions
/// instead of taken greedily, checked when made: `0..=`[`Explore::MAX_PERCENT`] percent.
///
/// Exploration is how logs come to hold outcomes of actions the model would not take, which
/// is what evaluating or training a new policy from them needs. It never applies to a
/// decision made by rules or the default action (those are the fallback, not the policy being
/// learned, and the rules' rejects are the overload guard) and never draws `reject`. It does
/// replace a model's `reject` with that share: without it the logs never show what routing
/// would have paid where the model rejects, so no policy learned from them can correct a
/// wrong reject, and off-policy estimates of one that routes there are extrapolation.
#[derive(Debug, Clone, Copy, PartialEq, PartialOrd)]
pub struct Explore(f64);

impl Explore {
    /// No exploration.
    pub const OFF: Explore = Explore(0.0);
    /// The largest share accepted, in percent.
    pub const MAX_PERCENT: f64 = 20.0;

    /// Checks a share given in percent.
    ///
    /// # Errors
    /// A message for a value outside `0..=20` or not finite.
    pub fn from_percent(percent: f64) -> Result<Explore, String> {
        if percent.is_finite() && (0.0..=Explore::MAX_PERCENT).contains(&percent) {
            Ok(Explore(percent / 100.0))
        } else {
            Err(format!(
                "exploration must be 0..={} percent, got {percent}",
                Explore::MAX_PERCENT
            ))
        }
    }

    /// The share as a probability.
    pub fn probability(self) -> f64 {
        self.0
    }
}

/// A served decision: the decision, and how the serving policy chose its action.
#[derive(Debug, Clone, PartialEq)]
pub struct Served {
    /// The decision, its action possibly replaced by exploration.
    pub decision: Decision,
    /// The probability with which the serving policy chose `decision.action` (1 for a
    /// deterministic decision).
    pub propensity: f64,
    /// Whether exploration replaced the greedy action.
    pub explored: bool,
    /// The serving policy's probability of each action (in [`crate::ACTIONS`] order) in this
    /// state: [`Decider::serving_distribution`] of the greedy decision.
    pub distribution: [f64; crate::NUM_ACTIONS],
}

/// The route actions exploration draws from.
const ROUTES: [Action; 3] = Action::ROUTED;

/// A uniform draw in `[0, 2^64)` derived from a decision id (FNV-1a, then a SplitMix64
/// finaliser so that ids differing in one character spread over the whole range). The same id
/// gives the same draw on every platform, so an explored decision can be replayed from its
/// record.
pub fn draw_from_id(id: &str) -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for b in id.as_bytes() {
        h ^= u64::from(*b);
        h = h.wrapping_mul(0x0000_0100_0000_01b3);
    }
    h ^= h >> 30;
    h = h.wrapping_mul(0xbf58_476d_1ce4_e5b9);
    h ^= h >> 27;
    h = h.wrapping_mul(0x94d0_49bb_1331_11eb);
    h ^ (h >> 31)
}

/// A model source, a rule table and a checked policy configuration.
#[derive(Debug, Clone)]
pub struct Decider {
    model: ModelSource,
    rules: Option<Rules>,
    policy: PolicyConfig,
    threshold_source: ThresholdSource,
    explore: Explore,
}

impl Decider {
    /// Resolves the threshold: the override, else the model's, else [`DEFAULT_THRESHOLD`].
    /// Every one of them is valid (a [`Threshold`] is checked when made, an artifact's when
    /// loaded), so this cannot fail.
    pub fn new(model: ModelSource, rules: Option<Rules>, params: Params) -> Decider {
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
            explore: params.explore,
        }
    }

    /// The model source.
    pub fn model(&self) -> &ModelSource {
        &self.model
    }

    /// The rule table, if any.
    pub fn rules(&self) -> Option<&RuleTable> {
        self.rules.as_ref().and_then(Rules::table)
    }

    /// The rule table's version, if there is a table (the shipped table's is known without
    /// reading it).
    pub fn rules_version(&self) -> Option<&str> {
        self.rules.as_ref().map(Rules::version)
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

    /// The exploration share in force.
    pub fn explore(&self) -> Explore {
        self.explore
    }

    /// The probability of each action (in [`crate::ACTIONS`] order) under the serving policy,
    /// given its greedy decision: all on the greedy action, except that a model-decided action
    /// gives each route action `ε/3` and keeps the rest (`1 − ε + ε/3` for a route, `1 − ε`
    /// for `reject`).
    pub fn serving_distribution(&self, greedy: &Decision) -> [f64; crate::NUM_ACTIONS] {
        let mut p = [0.0; crate::NUM_ACTIONS];
        let eps = self.explore.probability();
        if eps > 0.0 && greedy.source == Source::Model {
            for a in ROUTES {
                p[a.index()] = eps / ROUTES.len() as f64;
            }
            p[greedy.action.index()] += 1.0 - eps;
        } else {
            p[greedy.action.index()] = 1.0;
        }
        p
    }

    /// Serves a greedy decision: with the exploration share, and `draw` uniform over `u64`
    /// (see [`draw_from_id`]), the action is drawn uniformly from the route actions instead.
    /// With exploration off this is the greedy decision with propensity 1.
    pub fn serve(&self, greedy: Decision, draw: u64) -> Served {
        let p = self.serving_distribution(&greedy);
        let eps = self.explore.probability();
        // The high bits decide whether to explore, the low ones which route: independent
        // enough for a share of at most 20% over three actions.
        let u = (draw >> 11) as f64 / (1u64 << 53) as f64;
        let explores = p[greedy.action.index()] < 1.0 && u < eps;
        let mut decision = greedy;
        if explores {
            decision.action = ROUTES[(draw % ROUTES.len() as u64) as usize];
        }
        Served {
            propensity: p[decision.action.index()],
            explored: explores,
            decision,
            distribution: p,
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::tests_support::TINY_ARTIFACT;
    use crate::output::ModelOutput;
    use crate::policy::FallbackReason;

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
        Decider::new(ModelSource::Local(model), Some(Rules::Shipped), params)
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
        let d = Decider::new(
            ModelSource::Unavailable("refused".into()),
            Some(Rules::Shipped),
            Params::default(),
        );
        assert!(!d.needs_remote(Gates::default()));
        let out = d.decide(&state(3), Gates::default());
        assert_eq!(out.source, Source::Rules);
        assert_eq!(out.fallback_reason, Some(FallbackReason::ModelUnavailable));
        assert_eq!(out.model_version, None);
    }

    #[test]
    fn exploration_is_off_by_default_and_changes_nothing() {
        let d = local(Params::default());
        assert_eq!(d.explore(), Explore::OFF);
        for region in 0..10 {
            let greedy = d.decide(&state(region), Gates::default());
            for draw in [0, 1, u64::MAX, draw_from_id("x")] {
                let served = d.serve(greedy.clone(), draw);
                assert_eq!(served.decision, greedy);
                assert_eq!((served.propensity, served.explored), (1.0, false));
            }
        }
    }

    #[test]
    fn exploration_percent_is_checked() {
        for ok in [0.0, 0.5, 20.0] {
            assert!(Explore::from_percent(ok).is_ok(), "{ok}");
        }
        for bad in [-1.0, 20.01, f64::NAN, f64::INFINITY] {
            assert!(Explore::from_percent(bad).is_err(), "{bad}");
        }
    }

    /// Over many ids the explored share is ε, each route action gets ε/3, and every logged
    /// propensity is exactly the serving policy's probability of the logged action.
    #[test]
    fn exploration_draws_routes_uniformly_with_exact_propensities() {
        let d = local(Params {
            explore: Explore::from_percent(20.0).unwrap(),
            ..Params::default()
        });
        let greedy = d.decide(&state(3), Gates::default());
        assert_eq!(
            (greedy.action, greedy.source),
            (Action::RouteB, Source::Model)
        );
        let p = d.serving_distribution(&greedy);
        assert!((p.iter().sum::<f64>() - 1.0).abs() < 1e-12);
        assert_eq!(p[Action::Reject.index()], 0.0);
        let n = 60_000;
        let mut counts = [0usize; 4];
        let mut explored = 0;
        for i in 0..n {
            let s = d.serve(greedy.clone(), draw_from_id(&format!("id-{i}")));
            counts[s.decision.action.index()] += 1;
            explored += usize::from(s.explored);
            assert_eq!(s.propensity, p[s.decision.action.index()]);
            // Replaying the id gives the same action.
            let again = d.serve(greedy.clone(), draw_from_id(&format!("id-{i}")));
            assert_eq!(again.decision.action, s.decision.action);
        }
        let share = |c: usize| c as f64 / n as f64;
        assert!((share(explored) - 0.2).abs() < 0.01, "{explored}");
        for a in [Action::RouteA, Action::RouteC] {
            assert!(
                (share(counts[a.index()]) - 0.2 / 3.0).abs() < 0.01,
                "{counts:?}"
            );
        }
        assert!((share(counts[Action::RouteB.index()]) - (0.8 + 0.2 / 3.0)).abs() < 0.01);
        assert_eq!(counts[Action::Reject.index()], 0);
    }

    #[test]
    fn exploration_never_touches_rules_or_default_decisions() {
        let d = local(Params {
            explore: Explore::from_percent(20.0).unwrap(),
            ..Params::default()
        });
        let held = d.decide(
            &state(3),
            Gates {
                stale_signals: false,
                holdout: true,
            },
        );
        assert_eq!(held.source, Source::Rules);
        let mut rules_reject = held.clone();
        rules_reject.action = Action::Reject;
        let mut default = held.clone();
        default.source = Source::Default;
        for greedy in [held, rules_reject, default] {
            assert_eq!(d.serving_distribution(&greedy)[greedy.action.index()], 1.0);
            for i in 0..2000 {
                let s = d.serve(greedy.clone(), draw_from_id(&i.to_string()));
                assert_eq!(
                    (s.decision.action, s.propensity, s.explored),
                    (greedy.action, 1.0, false)
                );
            }
        }
    }

    /// A model's `reject` is explored like a route: ε of it goes to a uniform route action
    /// (`ε/3` each), the rest stays rejected with propensity `1 − ε`.
    #[test]
    fn exploration_routes_a_share_of_the_models_rejects() {
        let d = local(Params {
            explore: Explore::from_percent(20.0).unwrap(),
            ..Params::default()
        });
        let mut reject = d.decide(&state(3), Gates::default());
        assert_eq!(reject.source, Source::Model);
        reject.action = Action::Reject;
        let p = d.serving_distribution(&reject);
        let want = [0.2 / 3.0, 0.2 / 3.0, 0.2 / 3.0, 0.8];
        assert!(
            p.iter().zip(want).all(|(p, w)| (p - w).abs() < 1e-12),
            "{p:?}"
        );
        let n = 30_000;
        let mut counts = [0usize; 4];
        for i in 0..n {
            let s = d.serve(reject.clone(), draw_from_id(&format!("r-{i}")));
            counts[s.decision.action.index()] += 1;
            assert_eq!(s.explored, s.decision.action != Action::Reject);
            assert_eq!(s.propensity, p[s.decision.action.index()]);
        }
        let share = |c: usize| c as f64 / n as f64;
        assert!(
            (share(counts[Action::Reject.index()]) - 0.8).abs() < 0.01,
            "{counts:?}"
        );
        for a in ROUTES {
            assert!(
                (share(counts[a.index()]) - 0.2 / 3.0).abs() < 0.01,
                "{counts:?}"
            );
        }
    }
}

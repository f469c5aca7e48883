//! The decision path shared by `decider decide` and `decider eval`: the embedded-model
//! backend plus decider-core's policy — the same calls the Worker makes, so the CLI's
//! answers and the Worker's are comparable decision for decision.

use decider_core::policy::{decide, Gates, Inputs, PolicyConfig};
use decider_core::{Action, Decision, Model, RuleTable, State};

/// A model, a rule table and a policy configuration.
#[derive(Debug, Clone)]
pub struct Decider {
    /// The loaded model.
    pub model: Model,
    /// The rule table for fallbacks.
    pub rules: RuleTable,
    /// Policy configuration.
    pub config: PolicyConfig,
}

impl Decider {
    /// Builds a decider with the artifact's threshold unless `threshold` overrides it.
    ///
    /// # Errors
    /// A message when the threshold is outside `[0, 1]`.
    pub fn new(
        model: Model,
        rules: RuleTable,
        threshold: Option<f64>,
        ood_check: bool,
    ) -> Result<Decider, String> {
        let config = PolicyConfig {
            threshold: threshold.unwrap_or(model.threshold()),
            default_action: Action::RouteA,
            ood_check,
            shadow: false,
        }
        .check()
        .map_err(|e| e.to_string())?;
        Ok(Decider {
            model,
            rules,
            config,
        })
    }

    /// Decides for a state, exactly as the Worker's embedded backend does.
    pub fn decide(&self, s: &State) -> Decision {
        let outcome = self.model.outcome(s);
        decide(
            Inputs {
                state: s,
                outcome: &outcome,
                gates: Gates::default(),
                rules: Some(&self.rules),
                ranges: Some(self.model.ranges()),
                model_version: Some(self.model.version()),
            },
            &self.config,
        )
    }
}

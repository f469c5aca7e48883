//! The small value types of the configuration: secrets, the model backend, the rules' source.

/// A secret value: never printed, not even by `Debug`.
#[derive(Clone, PartialEq, Eq)]
pub struct Secret(pub String);

impl std::fmt::Debug for Secret {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Secret(…)")
    }
}

/// Where decisions come from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BackendKind {
    /// The artifact embedded at build time, run in the Worker's wasm.
    Embedded,
    /// A model on Workers AI, called through the `AI` binding.
    WorkersAi,
}

impl BackendKind {
    /// The value of `DECISION_BACKEND` that selects this backend.
    pub fn name(self) -> &'static str {
        match self {
            BackendKind::Embedded => "embedded",
            BackendKind::WorkersAi => "workers-ai",
        }
    }
}

/// Where the rule table came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RulesSource {
    /// `rules/default.json`, embedded at build time.
    Default,
    /// The `RULES` variable.
    Config,
    /// `RULES=none`: no table, the default action decides every fallback.
    None,
}

impl RulesSource {
    /// Wire name for /v1/health.
    pub fn name(self) -> &'static str {
        match self {
            RulesSource::Default => "default",
            RulesSource::Config => "config",
            RulesSource::None => "none",
        }
    }
}

/// The serving side of the automatic rollout (`ROLLOUT_*`): the reward of an outcome, and
/// how the isolates batch their counts and read the setting.
#[derive(Debug, Clone, PartialEq)]
pub struct RolloutSettings {
    /// What an outcome is worth (`ROLLOUT_SLO_MS`).
    pub success: decider_core::rollout::SuccessRule,
    /// Flush the isolate's counts at least this often, seconds (`ROLLOUT_FLUSH_S`).
    pub flush_s: u32,
    /// …or once this many outcomes are counted (`ROLLOUT_FLUSH_OUTCOMES`).
    pub flush_outcomes: u32,
    /// Reuse the setting read from the control plane this long, seconds (`ROLLOUT_CACHE_S`).
    pub cache_s: u32,
}

impl Default for RolloutSettings {
    fn default() -> RolloutSettings {
        RolloutSettings {
            success: decider_core::rollout::SuccessRule::default(),
            flush_s: 10,
            flush_outcomes: 500,
            cache_s: 30,
        }
    }
}

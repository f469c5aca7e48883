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

//! Configuration from wrangler vars, validated once per isolate.
//!
//! Every variable has a safe default. An invalid value never crashes the Worker: it is
//! replaced by the default and reported in [`Config::errors`], which /v1/health shows.
//! Parsing is pure (a lookup function in, a [`Config`] out) so it is tested natively.

use decider_core::{Action, RuleTable, DEFAULT_RULES_JSON};

/// Decision threshold when neither `CONFIDENCE_THRESHOLD` nor a loaded artifact gives one.
pub const DEFAULT_THRESHOLD: f64 = 0.8;
/// Default `AI_TIMEOUT_MS`.
pub const DEFAULT_AI_TIMEOUT_MS: u32 = 25;
/// Largest accepted `AI_TIMEOUT_MS`: a decision that waits longer is not a real-time decision.
pub const MAX_AI_TIMEOUT_MS: u32 = 10_000;
/// Action when neither model nor rules can decide, unless `DEFAULT_ACTION` says otherwise.
pub const DEFAULT_ACTION: Action = Action::RouteA;

/// Every variable the Worker reads, in the order /v1/health reports them.
pub const VAR_NAMES: &[&str] = &[
    "DECISION_BACKEND",
    "AI_MODEL",
    "AI_TIMEOUT_MS",
    "CONFIDENCE_THRESHOLD",
    "DEFAULT_ACTION",
    "RULES",
    "OOD_CHECK",
    "SHADOW",
    "DEBUG_ENDPOINTS",
];

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

/// One invalid variable: which, and why.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConfigIssue {
    /// The variable name.
    pub var: &'static str,
    /// What was wrong and which default replaced it.
    pub message: String,
}

/// The validated configuration.
#[derive(Debug, Clone)]
pub struct Config {
    /// Model backend (`DECISION_BACKEND`).
    pub backend: BackendKind,
    /// Workers AI model name (`AI_MODEL`); empty when unset.
    pub ai_model: String,
    /// Time budget of a Workers AI call (`AI_TIMEOUT_MS`).
    pub ai_timeout_ms: u32,
    /// `CONFIDENCE_THRESHOLD`, overriding the artifact's calibrated threshold.
    pub threshold_override: Option<f64>,
    /// `DEFAULT_ACTION`.
    pub default_action: Action,
    /// The rule table in force, if any.
    pub rules: Option<RuleTable>,
    /// Where [`Config::rules`] came from.
    pub rules_source: RulesSource,
    /// `OOD_CHECK`: out-of-range raw fields send the decision to rules.
    pub ood_check: bool,
    /// `SHADOW`: rules decide, the model's action is logged beside them.
    pub shadow: bool,
    /// `DEBUG_ENDPOINTS`: enables `POST /v1/debug/encode` (off by default).
    pub debug_endpoints: bool,
    /// Invalid variables, each replaced by its default.
    pub errors: Vec<ConfigIssue>,
}

/// Parses a boolean variable: `true/false`, `1/0`, `yes/no`, `on/off` (any case).
fn parse_bool(s: &str) -> Option<bool> {
    match s.trim().to_ascii_lowercase().as_str() {
        "true" | "1" | "yes" | "on" => Some(true),
        "false" | "0" | "no" | "off" => Some(false),
        _ => None,
    }
}

impl Config {
    /// Builds the configuration from a variable lookup (`None` or an empty string: unset).
    pub fn from_vars(lookup: impl Fn(&str) -> Option<String>) -> Config {
        let get = |name: &str| lookup(name).filter(|v| !v.trim().is_empty());
        let mut errors = Vec::new();
        let mut bad = |var: &'static str, message: String| {
            errors.push(ConfigIssue { var, message });
        };

        let backend = match get("DECISION_BACKEND").as_deref().map(str::trim) {
            None | Some("embedded") => BackendKind::Embedded,
            Some("workers-ai") => BackendKind::WorkersAi,
            Some(other) => {
                bad(
                    "DECISION_BACKEND",
                    format!("must be embedded or workers-ai, got {other:?}; using embedded"),
                );
                BackendKind::Embedded
            }
        };

        let ai_model = get("AI_MODEL")
            .map(|s| s.trim().to_string())
            .unwrap_or_default();
        if backend == BackendKind::WorkersAi && ai_model.is_empty() {
            bad(
                "AI_MODEL",
                "is required with DECISION_BACKEND=workers-ai; every decision falls back to rules"
                    .into(),
            );
        }

        let ai_timeout_ms = match get("AI_TIMEOUT_MS") {
            None => DEFAULT_AI_TIMEOUT_MS,
            Some(s) => match s.trim().parse::<u32>() {
                Ok(v) if (1..=MAX_AI_TIMEOUT_MS).contains(&v) => v,
                _ => {
                    bad(
                        "AI_TIMEOUT_MS",
                        format!(
                            "must be an integer 1..={MAX_AI_TIMEOUT_MS}, got {s:?}; using {DEFAULT_AI_TIMEOUT_MS}"
                        ),
                    );
                    DEFAULT_AI_TIMEOUT_MS
                }
            },
        };

        let threshold_override = match get("CONFIDENCE_THRESHOLD") {
            None => None,
            Some(s) => match s.trim().parse::<f64>() {
                Ok(v) if v.is_finite() && (0.0..=1.0).contains(&v) => Some(v),
                _ => {
                    bad(
                        "CONFIDENCE_THRESHOLD",
                        format!(
                            "must be a number in [0, 1], got {s:?}; using the artifact's threshold"
                        ),
                    );
                    None
                }
            },
        };

        let default_action = match get("DEFAULT_ACTION") {
            None => DEFAULT_ACTION,
            Some(s) => Action::parse_name(s.trim()).unwrap_or_else(|| {
                bad(
                    "DEFAULT_ACTION",
                    format!(
                        "must be one of {}, got {s:?}; using {DEFAULT_ACTION}",
                        decider_core::ACTIONS.join(", ")
                    ),
                );
                DEFAULT_ACTION
            }),
        };

        let default_rules = || match RuleTable::from_json(DEFAULT_RULES_JSON) {
            Ok(t) => (Some(t), RulesSource::Default),
            // Unreachable with the shipped table (a test checks it); degrade, never crash.
            Err(_) => (None, RulesSource::None),
        };
        let (rules, rules_source) = match get("RULES") {
            None => default_rules(),
            // No rule table at all: every fallback takes DEFAULT_ACTION (`source: default`).
            Some(s) if s.trim() == "none" => (None, RulesSource::None),
            Some(s) => match RuleTable::from_json(&s) {
                Ok(t) => (Some(t), RulesSource::Config),
                Err(e) => {
                    bad("RULES", format!("{e}; using the default rule table"));
                    default_rules()
                }
            },
        };

        let mut flag = |var: &'static str, default: bool| match get(var) {
            None => default,
            Some(s) => parse_bool(&s).unwrap_or_else(|| {
                bad(
                    var,
                    format!("must be true or false, got {s:?}; using {default}"),
                );
                default
            }),
        };
        let ood_check = flag("OOD_CHECK", true);
        let shadow = flag("SHADOW", false);
        let debug_endpoints = flag("DEBUG_ENDPOINTS", false);

        Config {
            backend,
            ai_model,
            ai_timeout_ms,
            threshold_override,
            default_action,
            rules,
            rules_source,
            ood_check,
            shadow,
            debug_endpoints,
            errors,
        }
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use std::collections::HashMap;

    fn cfg(pairs: &[(&str, &str)]) -> Config {
        let m: HashMap<String, String> = pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        Config::from_vars(|k| m.get(k).cloned())
    }

    #[test]
    fn defaults_without_vars() {
        let c = cfg(&[]);
        assert_eq!(c.backend, BackendKind::Embedded);
        assert_eq!(c.ai_timeout_ms, DEFAULT_AI_TIMEOUT_MS);
        assert_eq!(c.threshold_override, None);
        assert_eq!(c.default_action, DEFAULT_ACTION);
        assert_eq!(c.rules_source, RulesSource::Default);
        assert!(c.rules.is_some(), "the shipped rule table must load");
        assert!(c.ood_check && !c.shadow && !c.debug_endpoints);
        assert!(c.errors.is_empty(), "{:?}", c.errors);
    }

    #[test]
    fn valid_values_are_used() {
        let c = cfg(&[
            ("DECISION_BACKEND", "workers-ai"),
            ("AI_MODEL", "@cf/acme/decider"),
            ("AI_TIMEOUT_MS", "40"),
            ("CONFIDENCE_THRESHOLD", "0.65"),
            ("DEFAULT_ACTION", "reject"),
            (
                "RULES",
                r#"{"version":"mine","rules":[{"name":"all","when":{},"action":"route_c"}]}"#,
            ),
            ("OOD_CHECK", "false"),
            ("SHADOW", "TRUE"),
            ("DEBUG_ENDPOINTS", "1"),
        ]);
        assert_eq!(c.backend, BackendKind::WorkersAi);
        assert_eq!(c.ai_model, "@cf/acme/decider");
        assert_eq!(c.ai_timeout_ms, 40);
        assert_eq!(c.threshold_override, Some(0.65));
        assert_eq!(c.default_action, Action::Reject);
        assert_eq!(c.rules_source, RulesSource::Config);
        assert_eq!(c.rules.as_ref().unwrap().version(), "mine");
        assert!(!c.ood_check && c.shadow && c.debug_endpoints);
        assert!(c.errors.is_empty(), "{:?}", c.errors);
    }

    #[test]
    fn invalid_values_fall_back_and_are_reported() {
        let c = cfg(&[
            ("DECISION_BACKEND", "gpu"),
            ("AI_TIMEOUT_MS", "-5"),
            ("CONFIDENCE_THRESHOLD", "NaN"),
            ("DEFAULT_ACTION", "route_d"),
            ("RULES", r#"{"version":"x","rules":[]}"#),
            ("OOD_CHECK", "maybe"),
            ("SHADOW", "2"),
        ]);
        assert_eq!(c.backend, BackendKind::Embedded);
        assert_eq!(c.ai_timeout_ms, DEFAULT_AI_TIMEOUT_MS);
        assert_eq!(c.threshold_override, None);
        assert_eq!(c.default_action, DEFAULT_ACTION);
        assert_eq!(c.rules_source, RulesSource::Default);
        assert!(c.ood_check && !c.shadow);
        let vars: Vec<&str> = c.errors.iter().map(|e| e.var).collect();
        assert_eq!(
            vars,
            [
                "DECISION_BACKEND",
                "AI_TIMEOUT_MS",
                "CONFIDENCE_THRESHOLD",
                "DEFAULT_ACTION",
                "RULES",
                "OOD_CHECK",
                "SHADOW"
            ]
        );
        assert!(c.errors[1].message.contains("\"-5\""), "{:?}", c.errors[1]);
    }

    #[test]
    fn out_of_range_threshold_and_timeout_are_refused() {
        for (var, val) in [
            ("CONFIDENCE_THRESHOLD", "1.5"),
            ("CONFIDENCE_THRESHOLD", "inf"),
            ("AI_TIMEOUT_MS", "0"),
            ("AI_TIMEOUT_MS", "99999999"),
            ("AI_TIMEOUT_MS", "2.5"),
        ] {
            let c = cfg(&[(var, val)]);
            assert_eq!(c.errors.len(), 1, "{var}={val}");
            assert_eq!(c.errors[0].var, var);
        }
    }

    #[test]
    fn workers_ai_without_model_name_is_reported() {
        let c = cfg(&[("DECISION_BACKEND", "workers-ai")]);
        assert_eq!(c.backend, BackendKind::WorkersAi);
        assert_eq!(c.errors[0].var, "AI_MODEL");
    }

    #[test]
    fn rules_none_disables_the_table() {
        let c = cfg(&[("RULES", "none")]);
        assert!(c.rules.is_none());
        assert_eq!(c.rules_source, RulesSource::None);
        assert!(c.errors.is_empty());
    }

    #[test]
    fn empty_values_mean_unset() {
        let c = cfg(&[("CONFIDENCE_THRESHOLD", ""), ("RULES", "  ")]);
        assert!(c.errors.is_empty());
        assert_eq!(c.rules_source, RulesSource::Default);
    }
}

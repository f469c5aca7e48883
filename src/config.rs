//! Configuration from wrangler vars, validated once per isolate.
//!
//! Every variable has a safe default. An invalid value never crashes the Worker: it is
//! replaced by the default and reported in [`Config::errors`], which /v1/health shows.
//! Parsing is pure (a lookup function in, a [`Config`] out) so it is tested natively.

use crate::edge::{parse_origin, CanaryKey, Failover, Regions, RequestTypes};
use decider_core::{Action, RuleTable, DEFAULT_RULES_JSON};
use std::collections::BTreeMap;

/// Decision threshold when neither `CONFIDENCE_THRESHOLD` nor a loaded artifact gives one.
pub const DEFAULT_THRESHOLD: f64 = 0.8;
/// Default `AI_TIMEOUT_MS`.
pub const DEFAULT_AI_TIMEOUT_MS: u32 = 25;
/// Largest accepted `AI_TIMEOUT_MS`: a decision that waits longer is not a real-time decision.
pub const MAX_AI_TIMEOUT_MS: u32 = 10_000;
/// Action when neither model nor rules can decide, unless `DEFAULT_ACTION` says otherwise.
pub const DEFAULT_ACTION: Action = Action::RouteA;
/// Default `SIGNALS_CACHE_S`: how long an isolate reuses the signals it read from KV.
pub const DEFAULT_SIGNALS_CACHE_S: u32 = 5;
/// Default `SIGNALS_MAX_AGE_S`: older signals are stale and routing falls back to rules.
pub const DEFAULT_SIGNALS_MAX_AGE_S: u32 = 60;
/// Default `ORIGIN_TIMEOUT_MS`: time to the origin's response headers.
pub const DEFAULT_ORIGIN_TIMEOUT_MS: u32 = 5_000;
/// Default `REJECT_RETRY_AFTER_S`.
pub const DEFAULT_RETRY_AFTER_S: u32 = 5;

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
    "REQUEST_TYPES",
    "REGIONS",
    "SIGNALS_CACHE_S",
    "SIGNALS_MAX_AGE_S",
    "ORIGIN_ROUTE_A",
    "ORIGIN_ROUTE_B",
    "ORIGIN_ROUTE_C",
    "ORIGIN_TIMEOUT_MS",
    "FAILOVER",
    "REJECT_RETRY_AFTER_S",
    "CANARY_PERCENT",
    "CANARY_KEY",
    "ADMIN_TOKEN",
];

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
    /// `DEBUG_ENDPOINTS`: enables `POST /v1/debug/encode` and `/v1/debug/trap` (off by default).
    pub debug_endpoints: bool,
    /// `REQUEST_TYPES`: (method, path prefix) → request type.
    pub request_types: RequestTypes,
    /// `REGIONS`: country / continent → region.
    pub regions: Regions,
    /// `SIGNALS_CACHE_S`: in-isolate reuse of the KV signals (0: read KV every request).
    pub signals_cache_s: u32,
    /// `SIGNALS_MAX_AGE_S`: signals older than this are stale.
    pub signals_max_age_s: u32,
    /// `ORIGIN_ROUTE_A/B/C`: origin base URL per routed action.
    pub origins: BTreeMap<Action, String>,
    /// `ORIGIN_TIMEOUT_MS`: time budget to the origin's response headers.
    pub origin_timeout_ms: u32,
    /// `FAILOVER`: where a failed origin's idempotent requests go next.
    pub failover: Failover,
    /// `REJECT_RETRY_AFTER_S`: `Retry-After` of a rejected request.
    pub retry_after_s: u32,
    /// `CANARY_PERCENT`: share of routing keys the model may decide for.
    pub canary_percent: u8,
    /// `CANARY_KEY`: what the sticky canary bucket is computed from.
    pub canary_key: CanaryKey,
    /// `ADMIN_TOKEN` (a secret): bearer token of the admin endpoints; unset disables them.
    pub admin_token: Option<Secret>,
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
    /// A configuration from literal `(name, value)` pairs, for tests.
    #[cfg(test)]
    pub(crate) fn from_pairs(pairs: &[(&str, &str)]) -> Config {
        Config::from_vars(|k| {
            pairs
                .iter()
                .find(|(n, _)| *n == k)
                .map(|(_, v)| v.to_string())
        })
    }

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

        let request_types = match get("REQUEST_TYPES") {
            None => RequestTypes::shipped(),
            Some(s) => RequestTypes::from_json(&s).unwrap_or_else(|e| {
                bad("REQUEST_TYPES", format!("{e}; using the shipped table"));
                RequestTypes::shipped()
            }),
        };
        let regions = match get("REGIONS") {
            None => Regions::shipped(),
            Some(s) => Regions::from_json(&s).unwrap_or_else(|e| {
                bad("REGIONS", format!("{e}; using the shipped map"));
                Regions::shipped()
            }),
        };
        let failover = match get("FAILOVER") {
            None => Failover::shipped(),
            Some(s) => Failover::from_json(&s).unwrap_or_else(|e| {
                bad(
                    "FAILOVER",
                    format!("{e}; using route_a → route_b → route_c → route_a"),
                );
                Failover::shipped()
            }),
        };
        let mut int = |var: &'static str, lo: u32, hi: u32, default: u32| match get(var) {
            None => default,
            Some(s) => match s.trim().parse::<u32>() {
                Ok(v) if (lo..=hi).contains(&v) => v,
                _ => {
                    bad(
                        var,
                        format!("must be an integer {lo}..={hi}, got {s:?}; using {default}"),
                    );
                    default
                }
            },
        };
        let signals_cache_s = int("SIGNALS_CACHE_S", 0, 300, DEFAULT_SIGNALS_CACHE_S);
        let signals_max_age_s = int("SIGNALS_MAX_AGE_S", 1, 86_400, DEFAULT_SIGNALS_MAX_AGE_S);
        let origin_timeout_ms = int("ORIGIN_TIMEOUT_MS", 1, 60_000, DEFAULT_ORIGIN_TIMEOUT_MS);
        let retry_after_s = int("REJECT_RETRY_AFTER_S", 0, 86_400, DEFAULT_RETRY_AFTER_S);
        let canary_percent = int("CANARY_PERCENT", 0, 100, 100) as u8;

        let mut origins = BTreeMap::new();
        for (var, action) in [
            ("ORIGIN_ROUTE_A", Action::RouteA),
            ("ORIGIN_ROUTE_B", Action::RouteB),
            ("ORIGIN_ROUTE_C", Action::RouteC),
        ] {
            if let Some(s) = get(var) {
                match parse_origin(&s) {
                    Ok(o) => {
                        origins.insert(action, o);
                    }
                    Err(e) => bad(var, format!("{e}; {action} has no origin")),
                }
            }
        }

        let canary_key = match get("CANARY_KEY") {
            None => CanaryKey::ClientIp,
            Some(s) => CanaryKey::parse(&s).unwrap_or_else(|e| {
                bad("CANARY_KEY", format!("{e}; using ip"));
                CanaryKey::ClientIp
            }),
        };
        let admin_token = get("ADMIN_TOKEN").map(|t| Secret(t.trim().to_string()));

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
            request_types,
            regions,
            signals_cache_s,
            signals_max_age_s,
            origins,
            origin_timeout_ms,
            failover,
            retry_after_s,
            canary_percent,
            canary_key,
            admin_token,
            errors,
        }
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    fn cfg(pairs: &[(&str, &str)]) -> Config {
        Config::from_pairs(pairs)
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
    fn routing_defaults_and_overrides() {
        let c = cfg(&[]);
        assert!(c.origins.is_empty());
        assert_eq!(c.canary_percent, 100);
        assert_eq!(c.canary_key, CanaryKey::ClientIp);
        assert_eq!(c.signals_max_age_s, DEFAULT_SIGNALS_MAX_AGE_S);
        assert!(c.admin_token.is_none());
        let c = cfg(&[
            ("ORIGIN_ROUTE_A", "http://127.0.0.1:9001"),
            ("ORIGIN_ROUTE_C", "https://c.example/base/"),
            ("CANARY_PERCENT", "25"),
            ("CANARY_KEY", "header:x-user"),
            ("SIGNALS_CACHE_S", "0"),
            ("ORIGIN_TIMEOUT_MS", "250"),
            ("REJECT_RETRY_AFTER_S", "30"),
            ("ADMIN_TOKEN", "t0ken"),
            ("FAILOVER", r#"{"route_a": "route_c"}"#),
        ]);
        assert!(c.errors.is_empty(), "{:?}", c.errors);
        assert_eq!(c.origins[&Action::RouteA], "http://127.0.0.1:9001");
        assert_eq!(c.origins[&Action::RouteC], "https://c.example/base");
        assert_eq!(
            (
                c.canary_percent,
                c.signals_cache_s,
                c.origin_timeout_ms,
                c.retry_after_s
            ),
            (25, 0, 250, 30)
        );
        assert_eq!(c.failover.of(Action::RouteA), Some(Action::RouteC));
        assert_eq!(c.admin_token, Some(Secret("t0ken".into())));
        assert_eq!(format!("{:?}", c.admin_token), "Some(Secret(…))");
    }

    #[test]
    fn invalid_routing_vars_are_reported() {
        let c = cfg(&[
            ("REQUEST_TYPES", "{"),
            ("REGIONS", r#"{"default": 12}"#),
            ("SIGNALS_CACHE_S", "-1"),
            ("SIGNALS_MAX_AGE_S", "0"),
            ("ORIGIN_ROUTE_B", "127.0.0.1:9002"),
            ("ORIGIN_TIMEOUT_MS", "fast"),
            ("FAILOVER", r#"{"route_a": "reject"}"#),
            ("REJECT_RETRY_AFTER_S", "soon"),
            ("CANARY_PERCENT", "101"),
            ("CANARY_KEY", "cookie"),
        ]);
        let vars: Vec<&str> = c.errors.iter().map(|e| e.var).collect();
        assert_eq!(
            vars,
            [
                "REQUEST_TYPES",
                "REGIONS",
                "FAILOVER",
                "SIGNALS_CACHE_S",
                "SIGNALS_MAX_AGE_S",
                "ORIGIN_TIMEOUT_MS",
                "REJECT_RETRY_AFTER_S",
                "CANARY_PERCENT",
                "ORIGIN_ROUTE_B",
                "CANARY_KEY"
            ]
        );
        assert!(c.origins.is_empty());
        assert_eq!(c.canary_percent, 100);
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

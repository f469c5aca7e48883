//! The serving Worker's configuration from wrangler vars: one table, [`VARS`], that parsing,
//! `/v1/health` and the README's configuration table all follow ([`decider_core::vars`]).
//!
//! Every variable has a safe default. An invalid value never crashes the Worker: it is
//! replaced by the default and reported in [`Config::errors`], which `/v1/health` shows.
//! Parsing is pure (a lookup function in, a [`Config`] out), so it is tested natively, and it
//! runs once per isolate. The rollout's policy (`ROLLOUT_STEPS`, `ROLLOUT_ALPHA`, …) is the
//! control plane's configuration (`workers/rollout`), not this one.

use decider_core::decision_id::check_key;
use decider_core::failover::Failover;
use decider_core::monitor::Params as MonitorParams;
use decider_core::regions::Regions;
use decider_core::request_types::RequestTypes;
use decider_core::rollout::{CanaryKey, Statuses};
use decider_core::var;
use decider_core::vars::{self, flag, int, Var};
use decider_core::{Action, Explore, Params, RuleTable, Rules, Threshold, ACTIONS};
use serde_json::{json, Value};
use std::collections::BTreeMap;

mod kinds;
mod parse;
pub use decider_core::vars::{ConfigIssue, Visibility};
pub use kinds::{BackendKind, RolloutSettings, RulesSource, Secret};
pub use parse::parse_origin;
use parse::parse_url;

/// The configuration in force, every value checked.
#[derive(Debug, Clone)]
pub struct Config {
    /// Model backend (`DECISION_BACKEND`).
    pub backend: BackendKind,
    /// Workers AI model name (`AI_MODEL`); empty when unset.
    pub ai_model: String,
    /// Budget of a Workers AI call in ms (`AI_TIMEOUT_MS`).
    pub ai_timeout_ms: u32,
    /// AI Gateway id the Workers AI call goes through (`AI_GATEWAY`).
    pub ai_gateway: Option<String>,
    /// The decision policy's parameters: `CONFIDENCE_THRESHOLD` (when set; otherwise the
    /// artifact's threshold applies), `DEFAULT_ACTION`, `OOD_CHECK`, `SHADOW`,
    /// `EXPLORE_PERCENT`.
    pub params: Params,
    /// The rule table (the shipped one unless `RULES` gives one); `None` with `RULES=none`.
    pub rules: Option<Rules>,
    /// Where the rule table came from.
    pub rules_source: RulesSource,
    /// Test endpoints under `/v1/debug/` (`DEBUG_ENDPOINTS`).
    pub debug_endpoints: bool,
    /// Method and path → request type (`REQUEST_TYPES`).
    pub request_types: RequestTypes,
    /// Country/continent → region (`REGIONS`).
    pub regions: Regions,
    /// In-isolate reuse of the KV signals, seconds (`SIGNALS_CACHE_S`).
    pub signals_cache_s: u32,
    /// Signals older than this are stale, seconds (`SIGNALS_MAX_AGE_S`).
    pub signals_max_age_s: u32,
    /// Origin base URL per routed action (`ORIGIN_ROUTE_A/B/C`).
    pub origins: BTreeMap<Action, String>,
    /// Time to an origin's response headers once the request body is sent, ms
    /// (`ORIGIN_TIMEOUT_MS`).
    pub origin_timeout_ms: u32,
    /// Longest wait for the next byte of an origin's response body, ms
    /// (`ORIGIN_BODY_IDLE_MS`); then the body is cut.
    pub origin_body_idle_ms: u32,
    /// Failover origin per action (`FAILOVER`).
    pub failover: Failover,
    /// `Retry-After` of a rejected request, seconds (`REJECT_RETRY_AFTER_S`).
    pub retry_after_s: u32,
    /// Share of routing keys the model may decide for, 0..=100 (`CANARY_PERCENT`).
    pub canary_percent: u8,
    /// Share of routing keys the challenger model serves, 0..=100 (`CHALLENGER_PERCENT`).
    pub challenger_percent: u8,
    /// What the canary bucket is computed from (`CANARY_KEY`).
    pub canary_key: CanaryKey,
    /// The automatic rollout (`ROLLOUT_*`).
    pub rollout: RolloutSettings,
    /// The monitor's metrics document (`SIGNALS_URL`).
    pub signals_url: Option<String>,
    /// The path the monitor probes on every origin (`HEALTH_PATH`).
    pub health_path: Option<String>,
    /// Budget of each probe and of the metrics fetch, ms (`MONITOR_TIMEOUT_MS`).
    pub monitor_timeout_ms: u32,
    /// The status a passing probe answers (`HEALTH_EXPECT_STATUS`).
    pub health_expect_status: u16,
    /// Window, hysteresis and load baseline of the probes (`HEALTH_WINDOW`,
    /// `HEALTH_DOWN_AFTER`, `HEALTH_UP_AFTER`, `HEALTH_LOAD_BASELINE_MS`).
    pub monitor: MonitorParams,
    /// Bearer token of the admin endpoints (`ADMIN_TOKEN`, a secret).
    pub admin_token: Option<Secret>,
    /// Bearer token of `POST /v1/outcome` (`OUTCOME_TOKEN`, a secret).
    pub outcome_token: Option<Secret>,
    /// The key decision ids are signed with (`DECISION_ID_KEY`, a secret).
    pub decision_id_key: Option<Secret>,
    /// The key they were signed with before a rotation (`DECISION_ID_KEY_PREVIOUS`).
    pub decision_id_key_previous: Option<Secret>,
    /// Invalid variables, each replaced by its default.
    pub errors: Vec<ConfigIssue>,
}

impl Default for Config {
    fn default() -> Config {
        Config {
            backend: BackendKind::Embedded,
            ai_model: String::new(),
            ai_timeout_ms: 25,
            ai_gateway: None,
            params: Params::default(),
            // Read when a decision first falls to rules (it loads: a test checks it).
            rules: Some(Rules::Shipped),
            rules_source: RulesSource::Default,
            debug_endpoints: false,
            request_types: RequestTypes::shipped(),
            regions: Regions::shipped(),
            signals_cache_s: 5,
            signals_max_age_s: 60,
            origins: BTreeMap::new(),
            origin_timeout_ms: 5_000,
            origin_body_idle_ms: 5_000,
            failover: Failover::shipped(),
            retry_after_s: 5,
            canary_percent: 100,
            challenger_percent: 0,
            canary_key: CanaryKey::ClientIp,
            rollout: RolloutSettings::default(),
            signals_url: None,
            health_path: None,
            monitor_timeout_ms: 2_000,
            health_expect_status: 200,
            monitor: MonitorParams::default(),
            admin_token: None,
            outcome_token: None,
            decision_id_key: None,
            decision_id_key_previous: None,
            errors: Vec::new(),
        }
    }
}

/// Every variable the Worker reads, in the order `/v1/health` and the README list them.
#[rustfmt::skip]
pub const VARS: &[Var<Config>] = &[
    var! { "DECISION_BACKEND", "embedded", Public,
        "`embedded`: the artifact built into the wasm; `workers-ai`: a model on Workers AI",
        parse: |s, c| {
            c.backend = match s {
                "embedded" => BackendKind::Embedded,
                "workers-ai" => BackendKind::WorkersAi,
                _ => return Err("must be embedded or workers-ai".into()),
            };
            Ok(())
        },
        value: |c| json!(c.backend.name()) },
    var! { "AI_MODEL", "—", Public,
        "Workers AI model name (required with `workers-ai`)",
        parse: |s, c| {
            c.ai_model = s.to_string();
            Ok(())
        },
        value: |c| json!((!c.ai_model.is_empty()).then_some(&c.ai_model)) },
    var! { "AI_TIMEOUT_MS", "25", Public,
        "budget of a Workers AI call, 1..=10000 ms; on expiry → `model_timeout`",
        parse: |s, c| int(s, 1, 10_000).map(|v| c.ai_timeout_ms = v),
        value: |c| json!(c.ai_timeout_ms) },
    var! { "AI_GATEWAY", "—", Public,
        "AI Gateway id: the Workers AI call is made with `{gateway: {id}}`",
        parse: |s, c| {
            c.ai_gateway = Some(s.to_string());
            Ok(())
        },
        value: |c| json!(c.ai_gateway) },
    var! { "CONFIDENCE_THRESHOLD", "the artifact's", Public,
        "model confidence at or above which the model decides, in [0, 1]",
        parse: |s, c| {
            let t = s.parse::<f64>().ok().and_then(|v| Threshold::new(v).ok());
            c.params.threshold = Some(t.ok_or("must be a number in [0, 1]")?);
            Ok(())
        },
        value: |c| json!(c.params.threshold.map(Threshold::get)) },
    var! { "DEFAULT_ACTION", "route_a", Public,
        "the action when no rule table can decide",
        parse: |s, c| match Action::parse_name(s) {
            Some(a) => {
                c.params.default_action = a;
                Ok(())
            }
            None => Err(format!("must be one of {}", ACTIONS.join(", "))),
        },
        value: |c| json!(c.params.default_action) },
    var! { "RULES", "`rules/default.json`", Public,
        "a JSON rule table; `none`: no table, fallbacks take `DEFAULT_ACTION`",
        parse: |s, c| {
            if s == "none" {
                (c.rules, c.rules_source) = (None, RulesSource::None);
                return Ok(());
            }
            let table = RuleTable::from_json(s).map_err(|e| e.to_string())?;
            (c.rules, c.rules_source) = (Some(Rules::Table(table)), RulesSource::Config);
            Ok(())
        },
        value: |c| json!(c.rules.as_ref().map(Rules::version)) },
    var! { "OOD_CHECK", "true", Public,
        "a state field outside the training ranges → rules (`out_of_distribution`)",
        parse: |s, c| flag(s).map(|v| c.params.ood_check = v),
        value: |c| json!(c.params.ood_check) },
    var! { "SHADOW", "false", Public,
        "rules decide, the model's action is logged beside them",
        parse: |s, c| flag(s).map(|v| c.params.shadow = v),
        value: |c| json!(c.params.shadow) },
    var! { "EXPLORE_PERCENT", "0", Public,
        "share of model-decided traffic whose action is drawn uniformly from the route actions, 0..=20 (never drawing `reject`, never on rules); the logged `propensity` says how each action was chosen",
        parse: |s, c| {
            let percent = s.parse::<f64>().map_err(|_| "must be a number 0..=20".to_string())?;
            c.params.explore = Explore::from_percent(percent).map_err(|_| "must be a number 0..=20")?;
            Ok(())
        },
        value: |c| json!(c.params.explore.probability() * 100.0) },
    var! { "DEBUG_ENDPOINTS", "false", Public,
        "enables `POST /v1/debug/encode` and `POST /v1/debug/trap` (tests only)",
        parse: |s, c| flag(s).map(|v| c.debug_endpoints = v),
        value: |c| json!(c.debug_endpoints) },
    var! { "REQUEST_TYPES", "shipped table", Admin,
        "method and path prefix → `request_type`, first hit",
        parse: |s, c| RequestTypes::from_json(s).map(|t| c.request_types = t),
        value: |c| json!(c.request_types) },
    var! { "REGIONS", "shipped map", Admin,
        "country, then continent → `region_id`",
        parse: |s, c| Regions::from_json(s).map(|r| c.regions = r),
        value: |c| json!(c.regions) },
    var! { "SIGNALS_CACHE_S", "5", Public,
        "in-isolate reuse of the KV signals, 0..=300 s (0: read KV every request)",
        parse: |s, c| int(s, 0, 300).map(|v| c.signals_cache_s = v),
        value: |c| json!(c.signals_cache_s) },
    var! { "SIGNALS_MAX_AGE_S", "60", Public,
        "older signals are stale → rules (`stale_signals`), 1..=86400 s",
        parse: |s, c| int(s, 1, 86_400).map(|v| c.signals_max_age_s = v),
        value: |c| json!(c.signals_max_age_s) },
    var! { "ORIGIN_ROUTE_A", "—", Admin,
        "origin base URL of `route_a` (`http(s)://host[:port][/base]`)",
        parse: |s, c| origin(s, Action::RouteA, c),
        value: |c| json!(c.origins.get(&Action::RouteA)) },
    var! { "ORIGIN_ROUTE_B", "—", Admin,
        "origin base URL of `route_b`",
        parse: |s, c| origin(s, Action::RouteB, c),
        value: |c| json!(c.origins.get(&Action::RouteB)) },
    var! { "ORIGIN_ROUTE_C", "—", Admin,
        "origin base URL of `route_c`",
        parse: |s, c| origin(s, Action::RouteC, c),
        value: |c| json!(c.origins.get(&Action::RouteC)) },
    var! { "ORIGIN_TIMEOUT_MS", "5000", Public,
        "time to an origin's response headers once the request body is sent, 1..=60000 ms",
        parse: |s, c| int(s, 1, 60_000).map(|v| c.origin_timeout_ms = v),
        value: |c| json!(c.origin_timeout_ms) },
    var! { "ORIGIN_BODY_IDLE_MS", "5000", Public,
        "longest wait for the next byte of an origin's response body, 1..=600000 ms; then the body is cut (the client sees it cut short, the record says `outcome.error: body_idle`, a failure). The client's own reading is not timed",
        parse: |s, c| int(s, 1, 600_000).map(|v| c.origin_body_idle_ms = v),
        value: |c| json!(c.origin_body_idle_ms) },
    var! { "FAILOVER", "a → b → c → a", Admin,
        "failover origin per action, `{\"route_a\": \"route_b\", …}`",
        parse: |s, c| Failover::from_json(s).map(|f| c.failover = f),
        value: |c| {
            let map: BTreeMap<&str, &str> = c
                .failover
                .0
                .iter()
                .map(|(a, b)| (a.name(), b.name()))
                .collect();
            json!(map)
        } },
    var! { "REJECT_RETRY_AFTER_S", "5", Public,
        "`Retry-After` of a rejected request, 0..=86400 s",
        parse: |s, c| int(s, 0, 86_400).map(|v| c.retry_after_s = v),
        value: |c| json!(c.retry_after_s) },
    var! { "CANARY_PERCENT", "100", Public,
        "share of routing keys the model may decide for, 0..=100; the rest is held out on rules",
        parse: |s, c| int(s, 0, 100).map(|v| c.canary_percent = v as u8),
        value: |c| json!(c.canary_percent) },
    var! { "CHALLENGER_PERCENT", "0", Public,
        "share of routing keys the embedded challenger model (`model/challenger.json`) serves instead of the champion, 0..=100, taken from the canary share by the same sticky buckets; with the `ROLLOUT` binding (the control plane, `workers/rollout`) the judge sets the share instead once it has answered",
        parse: |s, c| int(s, 0, 100).map(|v| c.challenger_percent = v as u8),
        value: |c| json!(c.challenger_percent) },
    var! { "ROLLOUT_SUCCESS", "status<500", Public,
        "the statuses that count as a success, of a routed decision's own origin (its first attempt, whatever failover did next) and of a caller's reported status: `2xx`, `200-399`, `204`, `status<500`, `status<=399`, comma-separated, `!` to take some out (`status<500,!404`); `decider report`, `ope` and `train --logs` take the same `--success`",
        parse: |s, c| Statuses::parse(s).map(|v| c.rollout.success.statuses = v),
        value: |c| json!(c.rollout.success.statuses.describe()) },
    var! { "ROLLOUT_SLO_MS", "—", Public,
        "an outcome slower than this is a failure, 1..=600000 ms; unset: latency does not matter",
        parse: |s, c| int(s, 1, 600_000).map(|v| c.rollout.success.slo_ms = Some(f64::from(v))),
        value: |c| json!(c.rollout.success.slo_ms) },
    var! { "ROLLOUT_FLUSH_S", "10", Public,
        "an isolate sends its counts to the control plane (`ROLLOUT`) at least this often, 1..=3600 s",
        parse: |s, c| int(s, 1, 3_600).map(|v| c.rollout.flush_s = v),
        value: |c| json!(c.rollout.flush_s) },
    var! { "ROLLOUT_FLUSH_OUTCOMES", "500", Public,
        "…or once it has counted this many outcomes, 1..=1000",
        parse: |s, c| int(s, 1, 1_000).map(|v| c.rollout.flush_outcomes = v),
        value: |c| json!(c.rollout.flush_outcomes) },
    var! { "ROLLOUT_CACHE_S", "30", Public,
        "an isolate reuses the setting read from the control plane this long, 1..=3600 s (each flush's answer renews it too)",
        parse: |s, c| int(s, 1, 3_600).map(|v| c.rollout.cache_s = v),
        value: |c| json!(c.rollout.cache_s) },
    var! { "CANARY_KEY", "ip", Admin,
        "`ip` (`cf-connecting-ip`) or `header:<name>`",
        parse: |s, c| CanaryKey::parse(s).map(|k| c.canary_key = k),
        value: |c| json!(c.canary_key.header()) },
    var! { "SIGNALS_URL", "—", Admin,
        "the monitor's metrics document (`docs/monitors.md`): the three signal fields, or them per route; read on every cron run",
        parse: |s, c| parse_url(s).map(|u| c.signals_url = Some(u)),
        value: |c| json!(c.signals_url) },
    var! { "HEALTH_PATH", "—", Admin,
        "path the monitor probes on every origin each cron run; a down origin's traffic goes to its failover",
        parse: |s, c| {
            if !s.starts_with('/') || s.contains('#') {
                return Err("must be a path starting with / (no fragment)".into());
            }
            c.health_path = Some(s.to_string());
            Ok(())
        },
        value: |c| json!(c.health_path) },
    var! { "MONITOR_TIMEOUT_MS", "2000", Public,
        "budget of each probe and of the `SIGNALS_URL` fetch, 1..=30000 ms",
        parse: |s, c| int(s, 1, 30_000).map(|v| c.monitor_timeout_ms = v),
        value: |c| json!(c.monitor_timeout_ms) },
    var! { "HEALTH_EXPECT_STATUS", "200", Public,
        "the status a passing probe answers, 200..=599",
        parse: |s, c| int(s, 200, 599).map(|v| c.health_expect_status = v as u16),
        value: |c| json!(c.health_expect_status) },
    var! { "HEALTH_WINDOW", "10", Public,
        "probes kept per origin for its success rate, 1..=100",
        parse: |s, c| int(s, 1, 100).map(|v| c.monitor.window = v),
        value: |c| json!(c.monitor.window) },
    var! { "HEALTH_DOWN_AFTER", "2", Public,
        "consecutive failed probes that mark an origin down, 1..=20",
        parse: |s, c| int(s, 1, 20).map(|v| c.monitor.down_after = v),
        value: |c| json!(c.monitor.down_after) },
    var! { "HEALTH_UP_AFTER", "2", Public,
        "consecutive passed probes that mark a down origin up again, 1..=20",
        parse: |s, c| int(s, 1, 20).map(|v| c.monitor.up_after = v),
        value: |c| json!(c.monitor.up_after) },
    var! { "HEALTH_LOAD_BASELINE_MS", "500", Public,
        "probe latency of an origin at full load: its `current_load` is latency / this, 1..=60000 ms",
        parse: |s, c| int(s, 1, 60_000).map(|v| c.monitor.load_baseline_ms = f64::from(v)),
        value: |c| json!(c.monitor.load_baseline_ms) },
    var! { "ADMIN_TOKEN", "— (secret)", Secret,
        "bearer token of `/v1/admin/*`; unset: admin endpoints refuse everything",
        parse: |s, c| {
            c.admin_token = Some(Secret(s.to_string()));
            Ok(())
        },
        value: |c| json!(c.admin_token.is_some()) },
    var! { "OUTCOME_TOKEN", "— (secret)", Secret,
        "bearer token of `POST /v1/outcome` (`ADMIN_TOKEN` works there too); unset: only the admin token",
        parse: |s, c| {
            c.outcome_token = Some(Secret(s.to_string()));
            Ok(())
        },
        value: |c| json!(c.outcome_token.is_some()) },
    var! { "DECISION_ID_KEY", "— (secret)", Secret,
        "key of the tag every `decision_id` carries (HMAC-SHA-256, at least 16 bytes: `openssl rand -hex 32`); an outcome counts live only for an id it verifies; unset: ids are unsigned and no caller outcome is counted live",
        parse: |s, c| {
            check_key(s.as_bytes())?;
            c.decision_id_key = Some(Secret(s.to_string()));
            Ok(())
        },
        value: |c| json!(c.decision_id_key.is_some()) },
    var! { "DECISION_ID_KEY_PREVIOUS", "— (secret)", Secret,
        "the key before a rotation: ids it signed are still accepted (set it to the old key, deploy, then drop it after the outcome horizon)",
        parse: |s, c| {
            check_key(s.as_bytes())?;
            c.decision_id_key_previous = Some(Secret(s.to_string()));
            Ok(())
        },
        value: |c| json!(c.decision_id_key_previous.is_some()) },
];

/// An origin base URL for `action`.
fn origin(s: &str, action: Action, c: &mut Config) -> Result<(), String> {
    c.origins.insert(action, parse_origin(s)?);
    Ok(())
}

impl Config {
    /// Builds the configuration from a variable lookup (`None` or blank: unset), then checks
    /// what no single variable can: `workers-ai` needs `AI_MODEL`.
    pub fn from_vars(lookup: impl Fn(&str) -> Option<String>) -> Config {
        let mut cfg = Config::default();
        cfg.errors = vars::apply(VARS, &mut cfg, lookup);
        if cfg.backend == BackendKind::WorkersAi && cfg.ai_model.is_empty() {
            cfg.errors.push(ConfigIssue {
                var: "AI_MODEL",
                message: "is required with DECISION_BACKEND=workers-ai; every decision falls back to rules"
                    .into(),
            });
        }
        cfg
    }

    /// Every variable's value in force, in table order, with what `admin` may see: public
    /// ones always, routing details only for the admin, secrets only as set or not.
    pub fn values(&self, admin: bool) -> serde_json::Map<String, Value> {
        vars::values(VARS, self, admin)
    }

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
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests;

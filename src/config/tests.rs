#![allow(clippy::expect_used)]

use super::*;
use decider_core::rollout::CanaryKey;
use decider_core::Threshold;

fn cfg(pairs: &[(&str, &str)]) -> Config {
    Config::from_pairs(pairs)
}

#[test]
fn defaults_without_vars() {
    let c = cfg(&[]);
    assert_eq!(c.backend, BackendKind::Embedded);
    assert_eq!(c.ai_timeout_ms, 25);
    assert_eq!(c.params.threshold, None);
    assert_eq!(c.params.default_action, Action::RouteA);
    assert_eq!(c.rules_source, RulesSource::Default);
    assert!(
        c.rules.as_ref().and_then(Rules::table).is_some(),
        "the shipped rule table must load"
    );
    assert!(c.params.ood_check && !c.params.shadow && !c.debug_endpoints);
    assert!(c.errors.is_empty(), "{:?}", c.errors);
}

#[test]
fn valid_values_are_used() {
    let c = cfg(&[
        ("DECISION_BACKEND", "workers-ai"),
        ("AI_MODEL", " @cf/acme/decider "),
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
    assert_eq!(c.params.threshold.map(Threshold::get), Some(0.65));
    assert_eq!(c.params.default_action, Action::Reject);
    assert_eq!(c.rules_source, RulesSource::Config);
    assert_eq!(
        c.rules.as_ref().and_then(Rules::table).unwrap().version(),
        "mine"
    );
    assert!(!c.params.ood_check && c.params.shadow && c.debug_endpoints);
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
    assert_eq!(c.ai_timeout_ms, 25);
    assert_eq!(c.params.threshold, None);
    assert_eq!(c.params.default_action, Action::RouteA);
    assert_eq!(c.rules_source, RulesSource::Default);
    assert!(c.params.ood_check && !c.params.shadow);
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
    assert_eq!(
        c.errors[1].message,
        "must be an integer 1..=10000, got \"-5\"; using 25"
    );
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
    assert_eq!(c.signals_max_age_s, 60);
    assert!(c.admin_token.is_none());
    let c = cfg(&[
        ("ORIGIN_ROUTE_A", "http://127.0.0.1:9001"),
        ("ORIGIN_ROUTE_C", "https://c.example/base/"),
        ("CANARY_PERCENT", "25"),
        ("CANARY_KEY", "header:x-user"),
        ("SIGNALS_CACHE_S", "0"),
        ("ORIGIN_TIMEOUT_MS", "250"),
        ("ORIGIN_BODY_IDLE_MS", "1500"),
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
    assert_eq!(c.origin_body_idle_ms, 1500);
    assert_eq!(c.failover.of(Action::RouteA), Some(Action::RouteC));
    assert_eq!(c.admin_token, Some(Secret("t0ken".into())));
    assert_eq!(format!("{:?}", c.admin_token), "Some(Secret(…))");
}

#[test]
fn invalid_routing_vars_are_reported_in_table_order() {
    let c = cfg(&[
        ("REQUEST_TYPES", "{"),
        ("REGIONS", r#"{"default": 12}"#),
        ("SIGNALS_CACHE_S", "-1"),
        ("SIGNALS_MAX_AGE_S", "0"),
        ("ORIGIN_ROUTE_B", "127.0.0.1:9002"),
        ("ORIGIN_TIMEOUT_MS", "fast"),
        ("ORIGIN_BODY_IDLE_MS", "0"),
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
            "SIGNALS_CACHE_S",
            "SIGNALS_MAX_AGE_S",
            "ORIGIN_ROUTE_B",
            "ORIGIN_TIMEOUT_MS",
            "ORIGIN_BODY_IDLE_MS",
            "FAILOVER",
            "REJECT_RETRY_AFTER_S",
            "CANARY_PERCENT",
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

#[test]
fn long_invalid_values_are_quoted_clipped_and_secrets_never() {
    let long = format!("{{\"version\": \"{}\"", "x".repeat(5000));
    let c = cfg(&[("RULES", &long)]);
    assert!(c.errors[0].message.len() < 400, "{}", c.errors[0].message);
    assert!(c.errors[0]
        .message
        .ends_with("; using `rules/default.json`"));
}

#[test]
fn origins() {
    assert_eq!(
        parse_origin("http://127.0.0.1:9001/").unwrap(),
        "http://127.0.0.1:9001"
    );
    assert_eq!(
        parse_origin("https://a.example/base/").unwrap(),
        "https://a.example/base"
    );
    for bad in [
        "ftp://x",
        "127.0.0.1:9001",
        "http://",
        "http://u:p@x",
        "http://x/?a=1",
        "http://x/#f",
    ] {
        assert!(parse_origin(bad).is_err(), "{bad}");
    }
}

#[test]
fn health_values_follow_the_table_and_hide_what_they_must() {
    let c = cfg(&[
        ("ORIGIN_ROUTE_A", "http://127.0.0.1:9001"),
        ("ADMIN_TOKEN", "t0ken"),
    ]);
    let admin = c.values(true);
    let names: Vec<&str> = admin.keys().map(String::as_str).collect();
    let mut table: Vec<&str> = VARS.iter().map(|v| v.name).collect();
    // serde_json's map is sorted; the table order is the README's.
    table.sort_unstable();
    assert_eq!(names, table);
    assert_eq!(admin["ORIGIN_ROUTE_A"], "http://127.0.0.1:9001");
    assert_eq!(admin["ADMIN_TOKEN"], true, "a secret shows only as set");
    assert_eq!(admin["FAILOVER"]["route_a"], "route_b");
    let public = c.values(false);
    assert!(public.get("ORIGIN_ROUTE_A").is_none());
    assert!(public.get("FAILOVER").is_none());
    assert_eq!(public["CANARY_PERCENT"], 100);
    assert!(!serde_json::to_string(&admin).unwrap().contains("t0ken"));
}

/// The README documents exactly [`VARS`]: names, order, defaults and meanings.
/// `UPDATE_README=1 cargo test -p edge-decider readme` rewrites the table.
#[test]
fn readme_configuration_table_is_the_table() {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/README.md");
    let readme = std::fs::read_to_string(path).unwrap();
    let start = readme
        .find("| var | default | meaning |")
        .expect("README has a configuration table");
    let end = readme[start..]
        .find("\n\n")
        .map_or(readme.len(), |i| start + i + 1);
    let want = decider_core::vars::table(VARS);
    if std::env::var("UPDATE_README").as_deref() == Ok("1") {
        let updated = format!("{}{}{}", &readme[..start], want, &readme[end..]);
        std::fs::write(path, updated).unwrap();
        return;
    }
    assert_eq!(
        &readme[start..end],
        want,
        "README's configuration table differs from config::VARS; UPDATE_README=1 rewrites it"
    );
}

#[test]
fn monitor_variables() {
    let c = cfg(&[]);
    assert_eq!(
        (c.signals_url.as_deref(), c.health_path.as_deref()),
        (None, None)
    );
    assert_eq!((c.monitor_timeout_ms, c.health_expect_status), (2_000, 200));
    assert_eq!(c.monitor, decider_core::monitor::Params::default());
    let c = cfg(&[
        (
            "SIGNALS_URL",
            "https://metrics.internal.example/v1/signals?fmt=json",
        ),
        ("HEALTH_PATH", "/healthz?deep=1"),
        ("MONITOR_TIMEOUT_MS", "750"),
        ("HEALTH_EXPECT_STATUS", "204"),
        ("HEALTH_WINDOW", "20"),
        ("HEALTH_DOWN_AFTER", "3"),
        ("HEALTH_UP_AFTER", "5"),
        ("HEALTH_LOAD_BASELINE_MS", "250"),
    ]);
    assert!(c.errors.is_empty(), "{:?}", c.errors);
    assert_eq!(
        c.signals_url.as_deref(),
        Some("https://metrics.internal.example/v1/signals?fmt=json")
    );
    assert_eq!(c.health_path.as_deref(), Some("/healthz?deep=1"));
    assert_eq!((c.monitor_timeout_ms, c.health_expect_status), (750, 204));
    assert_eq!(
        (c.monitor.window, c.monitor.down_after, c.monitor.up_after),
        (20, 3, 5)
    );
    assert_eq!(c.monitor.load_baseline_ms, 250.0);
    let c = cfg(&[
        ("SIGNALS_URL", "ftp://x"),
        ("HEALTH_PATH", "healthz"),
        ("MONITOR_TIMEOUT_MS", "0"),
        ("HEALTH_EXPECT_STATUS", "1000"),
        ("HEALTH_WINDOW", "0"),
        ("HEALTH_DOWN_AFTER", "21"),
        ("HEALTH_UP_AFTER", "x"),
        ("HEALTH_LOAD_BASELINE_MS", "-1"),
    ]);
    let vars: Vec<&str> = c.errors.iter().map(|e| e.var).collect();
    assert_eq!(
        vars,
        [
            "SIGNALS_URL",
            "HEALTH_PATH",
            "MONITOR_TIMEOUT_MS",
            "HEALTH_EXPECT_STATUS",
            "HEALTH_WINDOW",
            "HEALTH_DOWN_AFTER",
            "HEALTH_UP_AFTER",
            "HEALTH_LOAD_BASELINE_MS"
        ]
    );
    assert!(c.errors[1]
        .message
        .contains("must be a path starting with /"));
    assert_eq!(c.signals_url, None);
    assert_eq!(c.monitor, decider_core::monitor::Params::default());
}

#[test]
fn rollout_success_and_slo_set_one_rule() {
    let c = cfg(&[("ROLLOUT_SUCCESS", "2xx,3xx"), ("ROLLOUT_SLO_MS", "250")]);
    let rule = c.rollout.success;
    assert!(rule.statuses.contains(204) && rule.statuses.contains(399));
    assert!(!rule.statuses.contains(404) && !rule.statuses.contains(500));
    assert_eq!(rule.slo_ms, Some(250.0));
    assert!(c.errors.is_empty(), "{:?}", c.errors);
    // The order of the variables does not matter: neither resets the other.
    let c = cfg(&[("ROLLOUT_SLO_MS", "250"), ("ROLLOUT_SUCCESS", "2xx")]);
    assert_eq!(c.rollout.success.slo_ms, Some(250.0));
    assert!(!c.rollout.success.statuses.contains(301));
    // A bad spec names its term and keeps the default.
    let c = cfg(&[("ROLLOUT_SUCCESS", "2xx,6xx")]);
    assert_eq!(c.rollout.success.statuses, Statuses::default());
    assert_eq!(c.errors[0].var, "ROLLOUT_SUCCESS");
    assert!(
        c.errors[0].message.contains("\"6xx\""),
        "{}",
        c.errors[0].message
    );
}

//! The control plane's configuration from wrangler vars: one table, [`VARS`]
//! ([`decider_core::vars`]), that parsing and docs/rollout.md's table follow.

use decider_core::var;
use decider_core::vars::{self, flag, int, ConfigIssue, Var};
use decider_rollout::policy::{self, Policy};
use serde_json::json;

/// Default of `OUTCOME_HORIZON_S`: a day.
pub const DEFAULT_HORIZON_S: u32 = 86_400;

/// The configuration in force, every value checked.
#[derive(Debug, Clone)]
pub struct Config {
    /// The judge's policy (`ROLLOUT_STEPS`, `ROLLOUT_MIN_OUTCOMES`, `ROLLOUT_MAX_LOSS`,
    /// `ROLLOUT_ALPHA`, `ROLLOUT_AUTO`, `ROLLOUT_RULES_SWITCH`).
    pub policy: Policy,
    /// Width of the count windows, seconds (`ROLLOUT_WINDOW_S`).
    pub window_s: u32,
    /// How long a counted caller outcome's decision id is remembered, seconds
    /// (`OUTCOME_HORIZON_S`).
    pub horizon_s: u32,
    /// Where every change and alarm is POSTed (`ROLLOUT_WEBHOOK_URL`).
    pub webhook_url: Option<String>,
    /// Bearer token of the operator's verbs (`ADMIN_TOKEN`, a secret of the control plane).
    pub admin_token: Option<String>,
    /// Invalid variables, each replaced by its default.
    pub errors: Vec<ConfigIssue>,
}

impl Default for Config {
    fn default() -> Config {
        Config {
            policy: Policy::default(),
            window_s: 60,
            horizon_s: DEFAULT_HORIZON_S,
            webhook_url: None,
            admin_token: None,
            errors: Vec::new(),
        }
    }
}

/// Every variable the control plane reads, in the order docs/rollout.md lists them.
#[rustfmt::skip]
pub const VARS: &[Var<Config>] = &[
    var! { "ROLLOUT_STEPS", "5,20,50,100", Public,
        "the challenger's shares, in percent of routing keys, step by step; the last (100) promotes it",
        parse: |s, c| policy::parse_steps(s).map(|v| c.policy.steps = v),
        value: |c| json!(c.policy.steps.as_slice()) },
    var! { "ROLLOUT_MIN_OUTCOMES", "200", Public,
        "outcomes the challenger and the champion each need on a step before it may advance (a rollback needs none), 1..=100000000",
        parse: |s, c| policy::parse_min_outcomes(s).map(|v| c.policy.min_outcomes = v),
        value: |c| json!(c.policy.min_outcomes) },
    var! { "ROLLOUT_MAX_LOSS", "0", Public,
        "largest tolerated loss of mean reward before a rollback, in [0, 1] (0.01: one point of success rate)",
        parse: |s, c| policy::parse_max_loss(s).map(|v| c.policy.max_loss = v),
        value: |c| json!(c.policy.max_loss) },
    var! { "ROLLOUT_ALPHA", "0.05", Public,
        "the judge's error rate over the whole rollout, every step and every look included, in [0.000001, 0.5]",
        parse: |s, c| policy::parse_alpha(s).map(|v| c.policy.alpha = v),
        value: |c| json!(c.policy.alpha) },
    var! { "ROLLOUT_AUTO", "true", Public,
        "the judge ramps and rolls back by itself; `false`: it only reports (logs, `/v1/health`) and the serving Worker's `CHALLENGER_PERCENT` applies",
        parse: |s, c| flag(s).map(|v| c.policy.auto = v),
        value: |c| json!(c.policy.auto) },
    var! { "ROLLOUT_RULES_SWITCH", "false", Public,
        "when the holdout arm shows rules beating the model, send every decision to rules (otherwise only the alarm)",
        parse: |s, c| flag(s).map(|v| c.policy.rules_switch = v),
        value: |c| json!(c.policy.rules_switch) },
    var! { "ROLLOUT_MIN_STEP_S", "300", Public,
        "a step lasts at least this long before it may advance, whatever the evidence (a rollback never waits), 0..=604800 s",
        parse: |s, c| int(s, 0, 604_800).map(|v| c.policy.min_step_ms = i64::from(v) * 1_000),
        value: |c| json!(c.policy.min_step_ms / 1_000) },
    var! { "ROLLOUT_BAKE_PERCENT", "5", Public,
        "after the last step the previous champion keeps this share of routing keys while the challenger bakes, 0..=50 (0: promoted at once)",
        parse: |s, c| policy::parse_bake_percent(s).map(|v| c.policy.bake_percent = v),
        value: |c| json!(c.policy.bake_percent) },
    var! { "ROLLOUT_BAKE_S", "3600", Public,
        "how long the bake lasts; the judge can still roll the challenger back, and it is promoted to 100% only at the end, 0..=604800 s",
        parse: |s, c| int(s, 0, 604_800).map(|v| c.policy.bake_ms = i64::from(v) * 1_000),
        value: |c| json!(c.policy.bake_ms / 1_000) },
    var! { "ROLLOUT_WINDOW_S", "60", Public,
        "width of the count windows; the judge counts a window once it has ended, 1..=3600 s",
        parse: |s, c| int(s, 1, 3_600).map(|v| c.window_s = v),
        value: |c| json!(c.window_s) },
    var! { "OUTCOME_HORIZON_S", "86400", Public,
        "a caller's outcome counts once if its decision is at most this old (its id is remembered this long); older ones are logged, not counted, 60..=2592000 s",
        parse: |s, c| int(s, 60, 2_592_000).map(|v| c.horizon_s = v),
        value: |c| json!(c.horizon_s) },
    var! { "ROLLOUT_WEBHOOK_URL", "—", Admin,
        "every change and alarm is POSTed here as JSON with a Slack-compatible `text`, retried with backoff; never delays a request or the judge",
        parse: |s, c| parse_webhook(s).map(|u| c.webhook_url = Some(u)),
        value: |c| json!(c.webhook_url) },
    var! { "ADMIN_TOKEN", "— (secret)", Secret,
        "bearer token of the operator's verbs (`/v1/admin/rollout` through the serving Worker, `decider rollout …`); unset: they refuse everything",
        parse: |s, c| {
            c.admin_token = Some(s.to_string());
            Ok(())
        },
        value: |c| json!(c.admin_token.is_some()) },
];

/// `ROLLOUT_WEBHOOK_URL`: an absolute `http(s)` URL with a host and no credentials.
fn parse_webhook(s: &str) -> Result<String, String> {
    let rest = s
        .strip_prefix("https://")
        .or_else(|| s.strip_prefix("http://"))
        .ok_or("must be an http:// or https:// URL")?;
    let host = rest.split(['/', '?', '#']).next().unwrap_or_default();
    if host.is_empty() || host.contains('@') {
        return Err("must name a host (and no credentials)".into());
    }
    Ok(s.to_string())
}

impl Config {
    /// Builds the configuration from a variable lookup (`None` or blank: unset).
    pub fn from_vars(lookup: impl Fn(&str) -> Option<String>) -> Config {
        let mut cfg = Config::default();
        cfg.errors = vars::apply(VARS, &mut cfg, lookup);
        cfg
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use super::*;

    fn cfg(pairs: &[(&str, &str)]) -> Config {
        Config::from_vars(|k| {
            pairs
                .iter()
                .find(|(n, _)| *n == k)
                .map(|(_, v)| v.to_string())
        })
    }

    #[test]
    fn defaults_and_overrides() {
        let c = cfg(&[]);
        assert!(c.errors.is_empty());
        assert_eq!(c.policy, Policy::default());
        assert_eq!((c.window_s, c.horizon_s), (60, DEFAULT_HORIZON_S));
        assert_eq!(
            (c.webhook_url.as_deref(), c.admin_token.as_deref()),
            (None, None)
        );
        let c = cfg(&[
            ("ROLLOUT_STEPS", "10,100"),
            ("ROLLOUT_AUTO", "false"),
            ("ROLLOUT_WINDOW_S", "1"),
            ("OUTCOME_HORIZON_S", "3600"),
            ("ROLLOUT_MIN_STEP_S", "0"),
            ("ROLLOUT_BAKE_PERCENT", "10"),
            ("ROLLOUT_BAKE_S", "120"),
            ("ROLLOUT_WEBHOOK_URL", "https://hooks.example/T0/B0"),
        ]);
        assert!(c.errors.is_empty(), "{:?}", c.errors);
        assert_eq!(c.policy.steps.as_slice(), &[10, 100]);
        assert!(!c.policy.auto);
        assert_eq!((c.window_s, c.horizon_s), (1, 3_600));
        assert_eq!(
            (
                c.policy.min_step_ms,
                c.policy.bake_percent,
                c.policy.bake_ms
            ),
            (0, 10, 120_000)
        );
        assert_eq!(
            c.webhook_url.as_deref(),
            Some("https://hooks.example/T0/B0")
        );
    }

    #[test]
    fn invalid_values_keep_the_default_and_name_the_variable() {
        let c = cfg(&[
            ("ROLLOUT_STEPS", "5,20"),
            ("ROLLOUT_ALPHA", "2"),
            ("OUTCOME_HORIZON_S", "10"),
        ]);
        let vars: Vec<&str> = c.errors.iter().map(|e| e.var).collect();
        assert_eq!(
            vars,
            ["ROLLOUT_STEPS", "ROLLOUT_ALPHA", "OUTCOME_HORIZON_S"]
        );
        assert!(
            c.errors[0].message.contains("must end at 100"),
            "{:?}",
            c.errors
        );
        assert_eq!(c.policy, Policy::default());
        assert_eq!(c.horizon_s, DEFAULT_HORIZON_S);
    }

    /// docs/rollout.md documents exactly [`VARS`]. `UPDATE_DOCS=1 cargo test -p
    /// edge-decider-rollout docs` rewrites the table.
    #[test]
    fn docs_configuration_table_is_the_table() {
        let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../../docs/rollout.md");
        let doc = std::fs::read_to_string(path).unwrap();
        let start = doc
            .find("| var | default | meaning |")
            .expect("docs/rollout.md has a configuration table");
        let end = doc[start..]
            .find("\n\n")
            .map_or(doc.len(), |i| start + i + 1);
        let want = vars::table(VARS);
        if std::env::var("UPDATE_DOCS").as_deref() == Ok("1") {
            let updated = format!("{}{}{}", &doc[..start], want, &doc[end..]);
            std::fs::write(path, updated).unwrap();
            return;
        }
        assert_eq!(
            &doc[start..end],
            want,
            "docs/rollout.md's configuration table differs from VARS; UPDATE_DOCS=1 rewrites it"
        );
    }
}

//! `GET /v1/health`: what the Worker decides with, and what is wrong with its configuration.
//!
//! Anyone may read whether the Worker is well and what it decides with ([`public`]); the
//! whole document ([`report`]: configuration values and errors, origins, the failover map,
//! the signals' state, the monitor's last run, the model's error) maps the backends behind
//! the Worker and is for the admin token only.

use crate::config::{BackendKind, Config};
use crate::isolate::Isolate;
use crate::signals::Current;
use decider_core::monitor::Stored;
use decider_core::rollout::Setting;
use decider_core::{ModelSource, ACTIONS, ENCODER_VERSION};
use serde_json::{json, Value};

/// The part of the health document anyone may read: `status`, `backend`, `model`
/// (`loaded`, `version`), `encoder_version`, `rules.version`, `threshold` and
/// `explore_percent`. Why the Worker is degraded is in the whole document and the log.
pub fn public(iso: &Isolate) -> Value {
    let d = &iso.decider;
    let loaded = !matches!(d.model(), ModelSource::Unavailable(_));
    json!({
        "status": status(iso),
        "backend": iso.cfg.backend.name(),
        "model": {"loaded": loaded, "version": d.model_version()},
        "encoder_version": ENCODER_VERSION,
        "rules": {"version": d.rules_version()},
        "threshold": d.threshold().0,
        "explore_percent": iso.cfg.params.explore.probability() * 100.0,
        "rollout": crate::rollout::public(iso),
    })
}

/// `ok` when a model is loaded and every variable is valid, `degraded` otherwise (the
/// Worker still answers, from rules).
fn status(iso: &Isolate) -> &'static str {
    let loaded = !matches!(iso.decider.model(), ModelSource::Unavailable(_));
    if loaded && iso.cfg.errors.is_empty() {
        "ok"
    } else {
        "degraded"
    }
}

/// The whole health document (admin token only). `status` as in [`public`].
pub fn report(
    iso: &Isolate,
    signals: &Current,
    monitor: &Result<Option<Stored>, String>,
    now_ms: f64,
) -> Value {
    let cfg = &iso.cfg;
    let d = &iso.decider;
    let model_error = match d.model() {
        ModelSource::Unavailable(why) => Some(why.as_str()),
        _ => None,
    };
    let (threshold, threshold_source) = d.threshold();
    let mut v = json!({
        "status": status(iso),
        "backend": cfg.backend.name(),
        "model": {
            "loaded": model_error.is_none(),
            "version": d.model_version(),
            "error": model_error,
        },
        "encoder_version": ENCODER_VERSION,
        "actions": ACTIONS,
        "threshold": threshold,
        "threshold_source": threshold_source.name(),
        "rules": {
            "version": d.rules_version(),
            "source": cfg.rules_source.name(),
            "count": d.rules().map_or(0, |r| r.len()),
        },
        "default_action": cfg.params.default_action,
        "ood_check": cfg.params.ood_check,
        "shadow": cfg.params.shadow,
        "explore_percent": cfg.params.explore.probability() * 100.0,
        "config": cfg.values(true),
        "config_errors": cfg.errors.iter()
            .map(|e| json!({"var": e.var, "message": e.message}))
            .collect::<Vec<_>>(),
        "routing": {
            "origins": cfg.origins.iter()
                .map(|(a, o)| (a.name().to_string(), json!(o)))
                .collect::<serde_json::Map<_, _>>(),
            "failover": cfg.failover.0.iter()
                .map(|(a, b)| (a.name().to_string(), json!(b.name())))
                .collect::<serde_json::Map<_, _>>(),
            "origin_timeout_ms": cfg.origin_timeout_ms,
            "origin_body_idle_ms": cfg.origin_body_idle_ms,
            "canary_percent": cfg.canary_percent,
            "canary_key": cfg.canary_key.header(),
            "admin_enabled": cfg.admin_token.is_some(),
            "monitor": crate::monitor::report(cfg, monitor, now_ms),
            "signals": {
                "fresh": signals.fresh,
                "age_s": signals.snapshot.map(|s| s.age_s(now_ms)),
                "source": signals.snapshot.map(|s| s.source.name()),
                "detail": stale_detail(cfg, signals, monitor, now_ms),
                "max_age_s": cfg.signals_max_age_s,
                "cache_s": cfg.signals_cache_s,
            },
        },
    });
    if let Some(c) = &iso.challenger {
        let error = match c.model() {
            ModelSource::Unavailable(why) => Some(why.as_str()),
            _ => None,
        };
        v["challenger"] = json!({
            "loaded": error.is_none(),
            "version": c.model_version(),
            "error": error,
            "threshold": c.threshold().0,
            "percent": match crate::rollout::setting(iso) {
                Setting::Share(p) => p,
                Setting::Rules => 0,
            },
        });
    }
    if cfg.backend == BackendKind::WorkersAi {
        v["ai"] = json!({"model": cfg.ai_model, "timeout_ms": cfg.ai_timeout_ms});
    }
    v
}

/// Why the signals are stale, `None` when they are fresh: what the read said, or the
/// snapshot's age, and, when the monitor's last run stored nothing, why it did not.
fn stale_detail(
    cfg: &Config,
    signals: &Current,
    monitor: &Result<Option<Stored>, String>,
    now_ms: f64,
) -> Option<String> {
    if signals.fresh {
        return None;
    }
    let mut why = match (&signals.detail, signals.snapshot) {
        (Some(d), _) => d.clone(),
        (None, Some(s)) => format!(
            "the {} snapshot is {:.0} s old, older than SIGNALS_MAX_AGE_S ({} s)",
            s.source.name(),
            s.age_s(now_ms),
            cfg.signals_max_age_s
        ),
        (None, None) => "no signals stored".into(),
    };
    if let Ok(Some(state)) = monitor {
        if let Some(not) = state.last_run.get("not_written").and_then(Value::as_str) {
            why.push_str(&format!("; the monitor's last run stored nothing: {not}"));
        }
    }
    Some(why)
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use decider_core::Decider;

    fn isolate(pairs: &[(&str, &str)], model: ModelSource) -> Isolate {
        let cfg = Config::from_pairs(pairs);
        let decider = Decider::new(model, cfg.rules.clone(), cfg.params.clone());
        Isolate {
            cfg,
            decider,
            challenger: None,
            ai: None,
            analytics: None,
            rollout: None,
            keys: None,
            outcome_limit: None,
        }
    }

    /// Regression: anyone could read the origins, the failover map and every configuration
    /// value on /v1/health.
    #[test]
    fn regression_public_part_maps_no_backend() {
        let model = ModelSource::Local(std::sync::Arc::clone(crate::isolate::embedded().unwrap()));
        let iso = isolate(
            &[
                ("ORIGIN_ROUTE_A", "https://a.internal.example"),
                ("FAILOVER", r#"{"route_a": "route_b"}"#),
                ("ORIGIN_ROUTE_B", "https://b.internal.example"),
            ],
            model,
        );
        let v = public(&iso);
        let keys: Vec<&str> = v.as_object().unwrap().keys().map(String::as_str).collect();
        assert_eq!(
            keys,
            [
                "backend",
                "encoder_version",
                "explore_percent",
                "model",
                "rollout",
                "rules",
                "status",
                "threshold"
            ]
        );
        assert!(!v.to_string().contains("internal.example"), "{v}");
        assert_eq!(v["status"], "ok");
        assert_eq!(v["model"]["loaded"], true);
        assert!(v["model"]["version"].is_string());
        assert!(v["rules"]["version"].is_string());
        assert!(v["threshold"].is_number());
    }

    #[test]
    fn public_part_says_degraded_but_not_why() {
        let iso = isolate(
            &[("ORIGIN_TIMEOUT_MS", "soon")],
            ModelSource::Unavailable("embedded artifact refused: secret detail".into()),
        );
        let v = public(&iso);
        assert_eq!(v["status"], "degraded");
        assert_eq!(v["model"]["loaded"], false);
        let text = v.to_string();
        assert!(
            !text.contains("secret detail") && !text.contains("ORIGIN_TIMEOUT_MS"),
            "{text}"
        );
    }
}

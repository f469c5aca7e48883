//! `GET /v1/health`: what the Worker decides with, and what is wrong with its configuration.

use crate::config::{BackendKind, Config};
use crate::engine::ThresholdSource;
use decider_core::{ACTIONS, ENCODER_VERSION};
use serde_json::{json, Value};

/// The model as /v1/health reports it.
#[derive(Debug, Clone, PartialEq)]
pub struct ModelStatus {
    /// Whether decisions can use a model.
    pub loaded: bool,
    /// The model version (artifact `model_version`, or the Workers AI model name).
    pub version: Option<String>,
    /// Why no model is loaded.
    pub error: Option<String>,
}

/// The health document. `status` is `ok` when a model is loaded and every variable is
/// valid, `degraded` otherwise (the Worker still answers, from rules).
pub fn report(cfg: &Config, model: &ModelStatus, threshold: (f64, ThresholdSource)) -> Value {
    let ok = model.loaded && cfg.errors.is_empty();
    let mut v = json!({
        "status": if ok { "ok" } else { "degraded" },
        "backend": cfg.backend.name(),
        "model": {
            "loaded": model.loaded,
            "version": model.version,
            "error": model.error,
        },
        "encoder_version": ENCODER_VERSION,
        "actions": ACTIONS,
        "threshold": threshold.0,
        "threshold_source": threshold.1.name(),
        "rules": {
            "version": cfg.rules.as_ref().map(|r| r.version()),
            "source": cfg.rules_source.name(),
            "count": cfg.rules.as_ref().map_or(0, |r| r.len()),
        },
        "default_action": cfg.default_action,
        "ood_check": cfg.ood_check,
        "shadow": cfg.shadow,
        "config_errors": cfg.errors.iter()
            .map(|e| json!({"var": e.var, "message": e.message}))
            .collect::<Vec<_>>(),
    });
    v["routing"] = json!({
        "origins": cfg.origins.iter().map(|(a, o)| (a.name().to_string(), json!(o))).collect::<serde_json::Map<_, _>>(),
        "failover": cfg.failover.0.iter().map(|(a, b)| (a.name().to_string(), json!(b.name()))).collect::<serde_json::Map<_, _>>(),
        "origin_timeout_ms": cfg.origin_timeout_ms,
        "canary_percent": cfg.canary_percent,
        "canary_key": cfg.canary_key.header(),
        "admin_enabled": cfg.admin_token.is_some(),
    });
    if cfg.backend == BackendKind::WorkersAi {
        v["ai"] = json!({"model": cfg.ai_model, "timeout_ms": cfg.ai_timeout_ms});
    }
    v
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    fn cfg(pairs: &[(&str, &str)]) -> Config {
        Config::from_pairs(pairs)
    }

    #[test]
    fn healthy() {
        let m = ModelStatus {
            loaded: true,
            version: Some("m1".into()),
            error: None,
        };
        let v = report(&cfg(&[]), &m, (0.7, ThresholdSource::Artifact));
        assert_eq!(v["status"], "ok");
        assert_eq!(v["model"]["version"], "m1");
        assert_eq!(v["threshold"], 0.7);
        assert_eq!(v["threshold_source"], "artifact");
        assert_eq!(v["rules"]["source"], "default");
        assert_eq!(v["encoder_version"], 1);
        assert_eq!(v["config_errors"], json!([]));
        assert!(v.get("ai").is_none());
        assert_eq!(v["routing"]["admin_enabled"], false);
        assert_eq!(v["routing"]["failover"]["route_a"], "route_b");
    }

    #[test]
    fn degraded_says_why() {
        let m = ModelStatus {
            loaded: false,
            version: None,
            error: Some("embedded artifact refused: x".into()),
        };
        let v = report(
            &cfg(&[
                ("DECISION_BACKEND", "workers-ai"),
                ("AI_TIMEOUT_MS", "zero"),
            ]),
            &m,
            (0.8, ThresholdSource::Default),
        );
        assert_eq!(v["status"], "degraded");
        assert_eq!(v["model"]["error"], "embedded artifact refused: x");
        assert_eq!(v["config_errors"][0]["var"], "AI_MODEL");
        assert_eq!(v["config_errors"][1]["var"], "AI_TIMEOUT_MS");
        assert_eq!(v["ai"]["timeout_ms"], 25);
    }
}

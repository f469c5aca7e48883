//! `GET /v1/health`: what the Worker decides with, and what is wrong with its configuration.

use crate::config::BackendKind;
use crate::isolate::Isolate;
use crate::signals::Current;
use decider_core::{ModelSource, ACTIONS, ENCODER_VERSION};
use serde_json::{json, Value};

/// The health document. `status` is `ok` when a model is loaded and every variable is
/// valid, `degraded` otherwise (the Worker still answers, from rules).
pub fn report(iso: &Isolate, signals: &Current, now_ms: f64) -> Value {
    let cfg = &iso.cfg;
    let d = &iso.decider;
    let model_error = match d.model() {
        ModelSource::Unavailable(why) => Some(why.as_str()),
        _ => None,
    };
    let (threshold, threshold_source) = d.threshold();
    let ok = model_error.is_none() && cfg.errors.is_empty();
    let mut v = json!({
        "status": if ok { "ok" } else { "degraded" },
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
            "version": d.rules().map(|r| r.version()),
            "source": cfg.rules_source.name(),
            "count": d.rules().map_or(0, |r| r.len()),
        },
        "default_action": cfg.default_action,
        "ood_check": cfg.ood_check,
        "shadow": cfg.shadow,
        "explore_percent": cfg.explore.probability() * 100.0,
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
            "canary_percent": cfg.canary_percent,
            "canary_key": cfg.canary_key.header(),
            "admin_enabled": cfg.admin_token.is_some(),
            "signals": {
                "fresh": signals.fresh,
                "age_s": signals.snapshot.map(|s| s.age_s(now_ms)),
                "detail": if signals.fresh { None } else { signals.detail.clone() },
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
            "percent": cfg.challenger_percent,
        });
    }
    if cfg.backend == BackendKind::WorkersAi {
        v["ai"] = json!({"model": cfg.ai_model, "timeout_ms": cfg.ai_timeout_ms});
    }
    v
}

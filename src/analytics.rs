//! Workers Analytics Engine: one data point per decision when the `DECISIONS` binding is
//! configured; nothing (silently) without it.
//!
//! blobs: action, source, fallback_reason (`""` when none), model_version (`""` when none);
//! doubles: confidence (-1 when the model gave none), decision_us; index: the action.

use decider_core::Decision;
use worker::{AnalyticsEngineDataPointBuilder, Env};

/// The Analytics Engine binding name.
pub const BINDING: &str = "DECISIONS";

thread_local! {
    /// Whether [`BINDING`] is bound in the environment object last seen: one identity check
    /// instead of a property lookup and two type checks (each a call from wasm into JS) on
    /// every decision.
    static BOUND: crate::env_cache::PerEnv<bool> = const { crate::env_cache::PerEnv::new() };
}

/// Whether [`BINDING`] is bound in `env`.
fn bound(env: &Env) -> bool {
    BOUND.with(|kept| {
        kept.get(env, || {
            js_sys::Reflect::get(env, &wasm_bindgen::JsValue::from_str(BINDING))
                .is_ok_and(|v| !v.is_undefined() && !v.is_null())
        })
    })
}

/// Writes the data point of a decision, if the binding exists. Errors are logged, never
/// surfaced: observation must not break routing.
pub fn write(env: &Env, d: &Decision) {
    if !bound(env) {
        return;
    }
    let Ok(dataset) = env.analytics_engine(BINDING) else {
        return;
    };
    let point = AnalyticsEngineDataPointBuilder::new()
        .indexes([d.action.name()])
        .blobs([
            d.action.name(),
            d.source.name(),
            d.fallback_reason.map_or("", |r| r.name()),
            d.model_version.as_deref().unwrap_or(""),
        ])
        .doubles([d.confidence.unwrap_or(-1.0), d.decision_us as f64])
        .build();
    if let Err(e) = dataset.write_data_point(&point) {
        crate::log::emit(&serde_json::json!({
            "ts": crate::clock::iso_now(), "event": "analytics_error", "error": e.to_string(),
        }));
    }
}

//! Workers Analytics Engine: one data point per decision when the `DECISIONS` binding is
//! configured; nothing without it.
//!
//! blobs: action, source, fallback_reason (`""` when none), model_version (`""` when none);
//! doubles: confidence (-1 when the model gave none), decision_us; index: the action.

use decider_core::Decision;
use worker::{AnalyticsEngineDataPointBuilder, AnalyticsEngineDataset, Env};

/// The Analytics Engine binding name.
pub const BINDING: &str = "DECISIONS";

/// The dataset, when the binding exists.
pub fn dataset(env: &Env) -> Option<AnalyticsEngineDataset> {
    let bound = js_sys::Reflect::get(env, &wasm_bindgen::JsValue::from_str(BINDING))
        .is_ok_and(|v| !v.is_undefined() && !v.is_null());
    bound.then(|| env.analytics_engine(BINDING).ok()).flatten()
}

/// Writes the data point of a decision. Errors are logged, never surfaced: observation
/// must not break routing.
pub fn write(dataset: &AnalyticsEngineDataset, d: &Decision) {
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
        crate::log::event(
            "analytics_error",
            serde_json::json!({"error": crate::log::clip(&e.to_string())}),
        );
    }
}

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
    /// The environment object last asked about and whether [`BINDING`] is bound in it.
    /// workerd hands every request of an isolate the same `env` object (as for the
    /// configuration, `config` in src/lib.rs), so one identity check replaces a property
    /// lookup and two type checks, each a call from wasm into JS, on every decision.
    static BOUND: std::cell::RefCell<Option<(wasm_bindgen::JsValue, bool)>> =
        const { std::cell::RefCell::new(None) };
}

/// Whether [`BINDING`] is bound in `env` (looked up once per environment object).
fn bound(env: &Env) -> bool {
    let env_js: &wasm_bindgen::JsValue = env;
    let seen = BOUND.with(|cell| {
        cell.borrow()
            .as_ref()
            .filter(|(seen, _)| js_sys::Object::is(seen, env_js))
            .map(|(_, bound)| *bound)
    });
    if let Some(bound) = seen {
        return bound;
    }
    let bound = js_sys::Reflect::get(env, &wasm_bindgen::JsValue::from_str(BINDING))
        .is_ok_and(|v| !v.is_undefined() && !v.is_null());
    BOUND.with(|cell| *cell.borrow_mut() = Some((env_js.clone(), bound)));
    bound
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

//! The floor: a workers-rs Worker that does nothing but answer a constant decision-shaped
//! JSON with the same headers as edge-decider. Whatever edge-decider costs above this is
//! the cost of its decision (and its request parsing), not of workers-rs or the runtime.
//!
//! With the `record-io` feature it also does the I/O every decision of edge-decider must do,
//! and nothing else: it reads the four request headers edge-decider reads, draws a
//! `decision_id` from the runtime's CSPRNG, logs a constant decision record as long as
//! edge-decider's for the benchmark's state, and answers edge-decider's body with its six
//! headers. The gap between the two floors is what the required I/O costs in the runtime;
//! edge-decider's gap above the second is what its own code costs.
use worker::*;

#[cfg(not(feature = "record-io"))]
const BODY: &str = r#"{"action":"route_a","confidence":null,"source":"default","fallback_reason":null,"model_version":null,"encoder_version":1,"probabilities":null,"decision_us":0}"#;

#[cfg(not(feature = "record-io"))]
#[event(fetch)]
async fn fetch(mut req: Request, _env: Env, _ctx: Context) -> Result<Response> {
    // Read the body as every real handler does: a Worker that leaves it unread gets its
    // keep-alive connection closed by workerd, which would make the floor slower, not faster.
    let _ = req.bytes().await?;
    let mut resp = Response::ok(BODY)?;
    let h = resp.headers_mut();
    h.set("content-type", "application/json")?;
    h.set("x-decision-action", "route_a")?;
    h.set("x-decision-source", "default")?;
    Ok(resp)
}

/// edge-decider's answer and log line for bench/state.json, `{id}` standing for the decision id.
#[cfg(feature = "record-io")]
const ANSWER: &str = r#"{"action":"route_a","confidence":0.9990664526027092,"source":"model","fallback_reason":null,"model_version":"gbdt-fe6ed1b269ed","encoder_version":1,"probabilities":{"route_a":0.9990664526027092,"route_b":0.00035081156729843964,"route_c":0.0003194765476600193,"reject":0.0002632592823322094},"decision_us":1000,"decision_id":"{id}"}"#;
#[cfg(feature = "record-io")]
const RECORD: &str = r#"{"event":"decision","log_version":1,"ts":"2026-12-02T19:19:39.230Z","decision_id":"{id}","request_id":null,"endpoint":"decide","state":{"request_type":1,"region_id":3,"current_load":0.4,"recent_success_rate":0.97,"queue_depth":12.0,"hour":14},"action":"route_a","source":"model","fallback_reason":null,"rule":null,"confidence":0.9990664526027092,"probabilities":{"route_a":0.9990664526027092,"route_b":0.00035081156729843964,"route_c":0.0003194765476600193,"reject":0.0002632592823322094},"propensity":1.0,"explored":false,"model_version":"gbdt-fe6ed1b269ed","rules_version":"default-2026-11-30","encoder_version":1,"backend":"embedded","arm":"champion","decision_us":1000}"#;

#[cfg(feature = "record-io")]
#[event(fetch)]
async fn fetch(mut req: Request, _env: Env, _ctx: Context) -> Result<Response> {
    let headers = req.headers();
    for name in [
        "content-type",
        "content-length",
        "cf-connecting-ip",
        "cf-ray",
    ] {
        let _ = headers.get(name)?;
    }
    let _ = req.bytes().await?;
    let global: web_sys::WorkerGlobalScope = wasm_bindgen::JsCast::unchecked_into(js_sys::global());
    let id = global.crypto()?.random_uuid();
    web_sys::console::log_1(&wasm_bindgen::JsValue::from(RECORD.replace("{id}", &id)));
    let mut resp = Response::ok(ANSWER.replace("{id}", &id))?;
    let h = resp.headers_mut();
    h.set("content-type", "application/json")?;
    h.set("cache-control", "no-store")?;
    h.set("x-decision-action", "route_a")?;
    h.set("x-decision-source", "model")?;
    h.set("x-decision-model-version", "gbdt-fe6ed1b269ed")?;
    h.set("x-decision-id", &id)?;
    Ok(resp)
}

//! Worker glue for the JSON API: reading bounded bodies and building responses.

use crate::body::{check_declared_length, MAX_BODY_BYTES};
use crate::error::ApiError;
use decider_core::Decision;
use js_sys::futures::JsFuture;
use js_sys::Uint8Array;
use serde_json::Value;
use wasm_bindgen::{JsCast, JsValue};
use web_sys::ReadableStreamDefaultReader;
use worker::{Headers, Request, Response, ResponseBuilder};

/// A JSON response with `cache-control: no-store` (decisions and health are live data).
pub fn json(status: u16, body: &Value) -> worker::Result<Response> {
    json_text(status, body.to_string())
}

/// A JSON response from already-serialised text.
pub fn json_text(status: u16, body: String) -> worker::Result<Response> {
    json_builder().map(|b| b.with_status(status).fixed(body.into_bytes()))
}

/// A response builder (status 200) with the JSON API's `content-type` and `cache-control`.
/// The builder owns one `Headers`, set here directly (`Response::from_bytes` would first
/// set `application/octet-stream` on it, and a second `Headers` would then replace it).
fn json_builder() -> worker::Result<ResponseBuilder> {
    ResponseBuilder::new()
        .with_header("content-type", "application/json")?
        .with_header("cache-control", "no-store")
}

/// The error response for an [`ApiError`]; `Allow` and `Retry-After` when set.
pub fn error(e: &ApiError) -> worker::Result<Response> {
    let resp = json(e.status, &e.body())?;
    if let Some(allow) = e.allow {
        resp.headers().set("allow", allow)?;
    }
    if e.status == 401 {
        resp.headers().set("www-authenticate", "Bearer")?;
    }
    if let Some(secs) = e.retry_after {
        resp.headers().set("retry-after", &secs.to_string())?;
    }
    Ok(resp)
}

/// Sets the `x-decision-*` headers of a decision on a header map.
pub fn set_decision_headers(headers: &Headers, d: &Decision) -> worker::Result<()> {
    headers.set("x-decision-action", d.action.name())?;
    headers.set("x-decision-source", d.source.name())?;
    headers.set(
        "x-decision-model-version",
        d.model_version.as_deref().unwrap_or("none"),
    )?;
    Ok(())
}

/// Reads a request body of at most [`MAX_BODY_BYTES`], refusing an over-long declared
/// `content-length` before reading and stopping as soon as the limit is passed.
///
/// The body is read through the stream's default reader, chunk by chunk, whatever the
/// declared length says: a service-binding caller can declare a length its stream does not
/// keep, and `arrayBuffer()` would buffer all of it before any check. The reader is never
/// released: releasing it rejects its `closed` promise with a `TypeError` whose stack trace
/// runs through the wasm frames. wasm-streams (behind `Request::stream`) releases on drop,
/// and that error was the largest single cost of a decision request's glue (measured).
///
/// # Errors
/// 413 over the limit, 400 when the body cannot be read.
pub async fn read_body(req: &mut Request) -> Result<Vec<u8>, ApiError> {
    let declared = req.headers().get("content-length").ok().flatten();
    check_declared_length(declared.as_deref())?;
    let Some(body) = req.inner().body() else {
        return Ok(Vec::new());
    };
    let reader: ReadableStreamDefaultReader = body.get_reader().unchecked_into();
    let mut out = Vec::new();
    loop {
        let step = JsFuture::from(reader.read())
            .await
            .map_err(|_| unreadable())?;
        let done =
            js_sys::Reflect::get(&step, &JsValue::from_str("done")).map_err(|_| unreadable())?;
        if done.is_truthy() {
            return Ok(out);
        }
        let chunk: Uint8Array = js_sys::Reflect::get(&step, &JsValue::from_str("value"))
            .ok()
            .and_then(|v| v.dyn_into().ok())
            .ok_or_else(unreadable)?;
        let len = chunk.length() as usize;
        if out.len() + len > MAX_BODY_BYTES {
            // Stop the sender; the answer does not depend on how cancelling goes.
            let _ = reader.cancel();
            return Err(ApiError::payload_too_large(MAX_BODY_BYTES));
        }
        let start = out.len();
        out.resize(start + len, 0);
        chunk.copy_to(&mut out[start..]);
    }
}

/// 400 `invalid_body`: the body stream failed.
fn unreadable() -> ApiError {
    ApiError::new(400, "invalid_body", "request body cannot be read")
}

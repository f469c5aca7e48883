//! Worker glue for the JSON API: reading bounded bodies and building responses.

use crate::body::{check_declared_length, MAX_BODY_BYTES};
use crate::error::ApiError;
use decider_core::Decision;
use js_sys::futures::JsFuture;
use js_sys::Uint8Array;
use serde_json::Value;
use wasm_bindgen::prelude::wasm_bindgen;
use wasm_bindgen::{JsCast, JsValue};
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

#[wasm_bindgen(module = "/src/glue.js")]
extern "C" {
    #[wasm_bindgen(js_name = readBounded)]
    fn read_bounded(request: &web_sys::Request, max: u32) -> js_sys::Promise;

    #[wasm_bindgen(js_name = isPlainDecide)]
    fn is_plain_decide_js(request: &web_sys::Request, max: u32) -> bool;

    #[wasm_bindgen(js_name = serveBody)]
    fn serve_body_js(
        request: &web_sys::Request,
        env: &JsValue,
        max: u32,
        answer: &js_sys::Function,
    ) -> js_sys::Promise;

    #[wasm_bindgen(js_name = decisionResponse, catch)]
    fn decision_response_js(
        body: &str,
        action: &JsValue,
        source: &JsValue,
        model_version: &JsValue,
    ) -> Result<web_sys::Response, JsValue>;

    #[wasm_bindgen(js_name = setDecisionHeaders, catch)]
    fn set_decision_headers_js(
        headers: &web_sys::Headers,
        action: &JsValue,
        source: &JsValue,
        model_version: &JsValue,
    ) -> Result<(), JsValue>;
}

/// The `x-decision-model-version` value of a decision.
fn model_version_header(d: &Decision) -> &str {
    d.model_version.as_deref().unwrap_or("none")
}

/// Most header values [`header_text`] keeps.
const HEADER_TEXT_MAX: usize = 32;

thread_local! {
    /// Header values already made into JS strings: action and source names and model
    /// versions, a handful per isolate, are then not decoded anew for every response.
    static HEADER_TEXT: std::cell::RefCell<Vec<(String, JsValue)>> =
        const { std::cell::RefCell::new(Vec::new()) };
}

/// `text` as a JS string, made once per isolate (up to [`HEADER_TEXT_MAX`] values; any
/// more are made each time).
fn header_text(text: &str) -> JsValue {
    HEADER_TEXT.with(|cell| {
        let mut kept = cell.borrow_mut();
        if let Some((_, js)) = kept.iter().find(|(t, _)| t == text) {
            return js.clone();
        }
        let js = JsValue::from_str(text);
        if kept.len() < HEADER_TEXT_MAX {
            kept.push((text.to_string(), js.clone()));
        }
        js
    })
}

/// Sets the `x-decision-*` headers of a decision on a header map.
pub fn set_decision_headers(headers: &Headers, d: &Decision) -> worker::Result<()> {
    set_decision_headers_js(
        &headers.0,
        &header_text(d.action.name()),
        &header_text(d.source.name()),
        &header_text(model_version_header(d)),
    )
    .map_err(worker::Error::from)
}

/// The 200 answer to `POST /v1/decide`: the decision's JSON text with the JSON API's
/// headers and the `x-decision-*` headers, built in one call into JS.
///
/// # Errors
/// When the runtime refuses a header value (a Workers AI model name that is not one).
pub fn decision_response(body: &str, d: &Decision) -> worker::Result<web_sys::Response> {
    decision_response_js(
        body,
        &header_text(d.action.name()),
        &header_text(d.source.name()),
        &header_text(model_version_header(d)),
    )
    .map_err(worker::Error::from)
}

/// Reads a request body of at most [`MAX_BODY_BYTES`], refusing an over-long declared
/// `content-length` before reading and stopping as soon as the limit is passed.
///
/// The read loop runs in JS (`readBounded` in src/glue.js): it reads through the stream's
/// default reader whatever the declared length says (a service-binding caller can declare
/// a length its stream does not keep, and `arrayBuffer()` would buffer all of it before any
/// check), and never releases the reader (releasing rejects its `closed` promise with a
/// `TypeError` whose stack capture was once the largest cost of a decision's glue).
///
/// # Errors
/// 413 over the limit, 400 when the body cannot be read.
pub async fn read_body(req: &mut Request) -> Result<Vec<u8>, ApiError> {
    let declared = req.headers().get("content-length").ok().flatten();
    check_declared_length(declared.as_deref())?;
    let read = JsFuture::from(read_bounded(req.inner(), max_body()))
        .await
        .unwrap_or(JsValue::UNDEFINED);
    body_bytes(read)
}

/// [`MAX_BODY_BYTES`] as the JS side takes it.
fn max_body() -> u32 {
    u32::try_from(MAX_BODY_BYTES).unwrap_or(u32::MAX)
}

/// What `readBounded` resolved to, as bytes: null is over the limit, anything else that is
/// not bytes (undefined: the stream failed) is unreadable.
///
/// # Errors
/// 413 over the limit, 400 when the body could not be read.
pub fn body_bytes(read: JsValue) -> Result<Vec<u8>, ApiError> {
    if read.is_null() {
        return Err(ApiError::payload_too_large(MAX_BODY_BYTES));
    }
    let bytes: Uint8Array = read.dyn_into().map_err(|_| unreadable())?;
    Ok(bytes.to_vec())
}

/// Whether `request` is certainly a `POST /v1/decide` whose content type and declared
/// length the router's checks accept (`isPlainDecide` in src/glue.js, which reads them
/// without bringing them into wasm memory). False is not a refusal: check it in Rust.
pub fn is_plain_decide(request: &web_sys::Request) -> bool {
    is_plain_decide_js(request, max_body())
}

/// Reads the body of `request` (as [`read_body`] does, in JS) and then calls `answer`
/// with what was read (see [`body_bytes`]), `env` and the request's `cf-ray` header (or
/// null); resolves to what `answer` returns. The caller has checked the declared length.
pub fn serve_body(
    request: &web_sys::Request,
    env: &JsValue,
    answer: &js_sys::Function,
) -> js_sys::Promise {
    serve_body_js(request, env, max_body(), answer)
}

/// 400 `invalid_body`: the body stream failed.
fn unreadable() -> ApiError {
    ApiError::new(400, "invalid_body", "request body cannot be read")
}

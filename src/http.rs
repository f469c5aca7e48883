//! The JSON API's HTTP plumbing: content type, a bounded body read, JSON responses and the
//! decision headers.

use crate::error::ApiError;
use decider_core::Decision;
use js_sys::futures::JsFuture;
use serde::Serialize;
use wasm_bindgen::prelude::wasm_bindgen;
use wasm_bindgen::JsValue;
use worker::{Headers, Request, Response, ResponseBuilder};

/// Largest accepted request body of the JSON API, in bytes.
pub const MAX_BODY_BYTES: usize = 16 * 1024;

/// Checks that a `content-type` header declares JSON (`application/json`, any parameters).
///
/// # Errors
/// 415 naming what was sent.
pub fn check_json_content_type(content_type: Option<&str>) -> Result<(), ApiError> {
    let is_json = content_type.is_some_and(|ct| {
        ct.split(';')
            .next()
            .is_some_and(|m| m.trim().eq_ignore_ascii_case("application/json"))
    });
    if is_json {
        Ok(())
    } else {
        Err(ApiError::unsupported_media_type(content_type))
    }
}

/// Checks a declared `content-length` against [`MAX_BODY_BYTES`] before reading anything.
///
/// # Errors
/// 413 when the declared length is over the limit.
pub fn check_declared_length(content_length: Option<&str>, max: usize) -> Result<(), ApiError> {
    match content_length.and_then(|v| v.trim().parse::<u64>().ok()) {
        Some(n) if n > max as u64 => Err(ApiError::payload_too_large(max)),
        _ => Ok(()),
    }
}

/// Reads a JSON API body: the content type must be JSON and the body at most
/// [`MAX_BODY_BYTES`].
///
/// A body with a declared length is read whole by the runtime (`arrayBuffer`, one native
/// call): from the network, HTTP framing ends it at that length, which is already checked.
/// A body without one (chunked) is read chunk by chunk and the read stops as soon as the
/// limit is passed, so an endless stream is never buffered. A reader costs workerd a
/// promise and a chunk per read, more CPU than one `arrayBuffer` call, so only a body whose
/// length nobody declared gets one. A service binding (the account's own Worker) can
/// declare a short length and send more: that body is read whole and refused with 413.
///
/// # Errors
/// 415, 413, or 400 when the stream fails.
pub async fn read_json_body(req: &mut Request) -> Result<Vec<u8>, ApiError> {
    read_json_body_up_to(req, MAX_BODY_BYTES).await
}

/// [`read_json_body`] with another limit (the rollout store's flush batches).
///
/// # Errors
/// 415, 413, or 400 when the stream fails.
pub async fn read_json_body_up_to(req: &mut Request, max: usize) -> Result<Vec<u8>, ApiError> {
    let headers = req.headers();
    check_json_content_type(headers.get("content-type").ok().flatten().as_deref())?;
    let declared = headers.get("content-length").ok().flatten();
    check_declared_length(declared.as_deref(), max)?;
    let read =
        read_bounded(req.inner(), max as u32, declared.is_some()).map_err(|_| unreadable())?;
    let body = JsFuture::from(read).await.map_err(|_| unreadable())?;
    if body.is_null() {
        return Err(ApiError::payload_too_large(max));
    }
    Ok(js_sys::Uint8Array::new(&body).to_vec())
}

#[wasm_bindgen(inline_js = r#"
export async function read_bounded(req, max, declared) {
  if (req.body === null) return new Uint8Array(0);
  if (declared) {
    const body = new Uint8Array(await req.arrayBuffer());
    return body.byteLength > max ? null : body;
  }
  const reader = req.body.getReader();
  const chunks = [];
  let n = 0;
  for (;;) {
    const { done, value } = await reader.read();
    if (done) break;
    n += value.byteLength;
    if (n > max) {
      reader.cancel().catch(() => {});
      return null;
    }
    chunks.push(value);
  }
  if (chunks.length === 1) return chunks[0];
  const body = new Uint8Array(n);
  let at = 0;
  for (const c of chunks) {
    body.set(c, at);
    at += c.byteLength;
  }
  return body;
}
"#)]
extern "C" {
    /// Resolves to `req`'s body, or to `null` when it is longer than `max` bytes. Without a
    /// `declared` length the read stops as soon as more than `max` bytes have arrived (the
    /// rest is cancelled, not read). Rejects when the stream fails.
    #[wasm_bindgen(catch)]
    fn read_bounded(
        req: &web_sys::Request,
        max: u32,
        declared: bool,
    ) -> Result<js_sys::Promise, JsValue>;
}

/// 400 `invalid_body`: the body stream failed.
fn unreadable() -> ApiError {
    ApiError::new(400, "invalid_body", "request body cannot be read")
}

/// A JSON response with `cache-control: no-store` (decisions and health are live data).
///
/// # Errors
/// When the runtime refuses the response (not expected).
pub fn json(status: u16, body: &impl Serialize) -> worker::Result<Response> {
    json_text(status, serde_json::to_string(body)?)
}

/// A response of JSON text already written, as [`json`] sends it.
///
/// # Errors
/// When the runtime refuses the response (not expected).
pub fn json_text(status: u16, text: String) -> worker::Result<Response> {
    Ok(ResponseBuilder::new()
        .with_header("content-type", "application/json")?
        .with_header("cache-control", "no-store")?
        .with_status(status)
        .fixed(text.into_bytes()))
}

/// The error response for an [`ApiError`]; `Allow`, `WWW-Authenticate` and `Retry-After`
/// when they apply.
///
/// # Errors
/// When the runtime refuses the response (not expected).
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

/// Sets the `x-decision-*` headers of a decision.
///
/// # Errors
/// When the runtime refuses a header value (a Workers AI model name that is not one).
pub fn set_decision_headers(
    headers: &Headers,
    d: &Decision,
    decision_id: &str,
) -> worker::Result<()> {
    headers.set("x-decision-action", d.action.name())?;
    headers.set("x-decision-source", d.source.name())?;
    headers.set(
        "x-decision-model-version",
        d.model_version.as_deref().unwrap_or("none"),
    )?;
    headers.set("x-decision-id", decision_id)
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn content_types() {
        assert!(check_json_content_type(Some("application/json")).is_ok());
        assert!(check_json_content_type(Some("Application/JSON; charset=utf-8")).is_ok());
        for bad in [
            None,
            Some("text/plain"),
            Some("application/jsonx"),
            Some(""),
        ] {
            assert_eq!(
                check_json_content_type(bad).unwrap_err().status,
                415,
                "{bad:?}"
            );
        }
    }

    #[test]
    fn declared_length() {
        assert!(check_declared_length(None, MAX_BODY_BYTES).is_ok());
        assert!(check_declared_length(Some("16384"), MAX_BODY_BYTES).is_ok());
        assert_eq!(
            check_declared_length(Some("16385"), MAX_BODY_BYTES)
                .unwrap_err()
                .status,
            413
        );
        assert!(
            check_declared_length(Some("garbage"), MAX_BODY_BYTES).is_ok(),
            "the read limit still applies"
        );
    }
}

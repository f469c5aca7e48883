//! Worker glue for the JSON API: reading bounded bodies and building responses.

use crate::body::{check_declared_length, MAX_BODY_BYTES};
use crate::error::ApiError;
use decider_core::Decision;
use futures_util::StreamExt;
use serde_json::Value;
use worker::{Headers, Request, Response};

/// A JSON response with `cache-control: no-store` (decisions and health are live data).
pub fn json(status: u16, body: &Value) -> worker::Result<Response> {
    json_text(status, body.to_string())
}

/// A JSON response from already-serialised text.
pub fn json_text(status: u16, body: String) -> worker::Result<Response> {
    let headers = Headers::new();
    headers.set("content-type", "application/json")?;
    headers.set("cache-control", "no-store")?;
    Ok(Response::from_bytes(body.into_bytes())?
        .with_status(status)
        .with_headers(headers))
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
/// # Errors
/// 413 over the limit, 400 when the body stream fails.
pub async fn read_body(req: &mut Request) -> Result<Vec<u8>, ApiError> {
    let declared = req.headers().get("content-length").ok().flatten();
    check_declared_length(declared.as_deref())?;
    if req.inner().body().is_none() {
        return Ok(Vec::new());
    }
    let mut stream = req
        .stream()
        .map_err(|_| ApiError::new(400, "invalid_body", "request body cannot be read"))?;
    let mut out = Vec::new();
    while let Some(chunk) = stream.next().await {
        let chunk =
            chunk.map_err(|_| ApiError::new(400, "invalid_body", "request body cannot be read"))?;
        if out.len() + chunk.len() > MAX_BODY_BYTES {
            return Err(ApiError::payload_too_large(MAX_BODY_BYTES));
        }
        out.extend_from_slice(&chunk);
    }
    Ok(out)
}

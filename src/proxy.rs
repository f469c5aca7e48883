//! Proxying a routed request to its origin: streamed bodies both ways, an upstream
//! timeout, one failover retry for idempotent methods.
//!
//! Only the configured origins are ever contacted; the request contributes its path,
//! query, method, headers and body, never the destination.

use crate::edge::{forward_request_header, forward_response_header, is_idempotent, target_url};
use futures_util::future::{select, Either};
use js_sys::futures::JsFuture;
use std::time::Duration;
use wasm_bindgen::{JsCast, JsValue};
use web_sys::{
    AbortController, Headers, ReadableStream, Request as WsRequest, RequestInit, RequestRedirect,
    Response as WsResponse, WorkerGlobalScope,
};

/// What became of one upstream attempt.
#[derive(Debug)]
pub enum Attempt {
    /// The origin answered (any status).
    Answered(WsResponse),
    /// No answer: connection failure or an invalid upstream request.
    Failed(String),
    /// No response headers within `ORIGIN_TIMEOUT_MS`.
    TimedOut,
}

impl Attempt {
    /// Whether this attempt warrants the failover origin: no answer, or 502/503/504.
    pub fn should_fail_over(&self) -> bool {
        match self {
            Attempt::Answered(r) => matches!(r.status(), 502..=504),
            Attempt::Failed(_) | Attempt::TimedOut => true,
        }
    }

    /// A short description for logs and the 502 message.
    pub fn describe(&self) -> String {
        match self {
            Attempt::Answered(r) => format!("answered {}", r.status()),
            Attempt::Failed(e) => format!("failed: {e}"),
            Attempt::TimedOut => "timed out".to_string(),
        }
    }
}

/// What is forwarded, prepared once from the incoming request.
#[derive(Debug)]
pub struct Outgoing {
    method: String,
    path: String,
    query: Option<String>,
    headers: Headers,
    /// Body for the first attempt.
    body: Option<ReadableStream>,
    /// A tee of the body kept for the failover attempt (idempotent methods with a body).
    spare: Option<ReadableStream>,
}

fn js_err(e: JsValue) -> worker::Error {
    worker::Error::from(e)
}

impl Outgoing {
    /// Prepares the forwarded request: filtered headers, the body stream (teed when a
    /// retry may need it again; the spare branch then buffers what the first attempt reads).
    ///
    /// # Errors
    /// JS failures copying headers or teeing the body.
    pub fn from_request(req: &worker::Request, may_retry: bool) -> worker::Result<Outgoing> {
        let inner = req.inner();
        let url = req.url()?;
        let method = inner.method();
        let incoming = inner.headers();
        let connection = incoming.get("connection").ok().flatten();
        let headers = Headers::new().map_err(js_err)?;
        for (name, value) in worker::Headers(incoming).entries() {
            if forward_request_header(&name, connection.as_deref()) {
                headers.append(&name, &value).map_err(js_err)?;
            }
        }
        let (body, spare) = match inner.body() {
            Some(b) if may_retry && is_idempotent(&method) => {
                let pair = b.tee();
                (
                    Some(pair.get(0).unchecked_into::<ReadableStream>()),
                    Some(pair.get(1).unchecked_into::<ReadableStream>()),
                )
            }
            b => (b, None),
        };
        Ok(Outgoing {
            method,
            path: url.path().to_string(),
            query: url.query().map(str::to_string),
            headers,
            body,
            spare,
        })
    }

    /// Whether a failover attempt may be made after this first one.
    pub fn retryable(&self) -> bool {
        is_idempotent(&self.method)
    }

    /// Sends to `origin`, waiting at most `timeout_ms` for response headers. The first
    /// call uses the body, the second the spare tee.
    pub async fn send(&mut self, origin: &str, timeout_ms: u32) -> Attempt {
        let body = self.body.take().or_else(|| self.spare.take());
        let url = target_url(origin, &self.path, self.query.as_deref());
        let controller = match AbortController::new() {
            Ok(c) => c,
            Err(e) => return Attempt::Failed(format!("{e:?}")),
        };
        let init = RequestInit::new();
        init.set_method(&self.method);
        init.set_headers(&self.headers);
        if let Some(b) = &body {
            init.set_body(b);
        }
        // 3xx go back to the client as they are.
        init.set_redirect(RequestRedirect::Manual);
        init.set_signal(Some(&controller.signal()));
        let request = match WsRequest::new_with_str_and_init(&url, &init) {
            Ok(r) => r,
            Err(e) => return Attempt::Failed(js_message(&e)),
        };
        let global: WorkerGlobalScope = js_sys::global().unchecked_into();
        let fetch = JsFuture::from(global.fetch_with_request(&request));
        let timer = worker::Delay::from(Duration::from_millis(u64::from(timeout_ms)));
        futures_util::pin_mut!(fetch);
        match select(fetch, timer).await {
            Either::Left((Ok(v), _)) => match v.dyn_into::<WsResponse>() {
                Ok(r) => Attempt::Answered(r),
                Err(_) => Attempt::Failed("fetch returned a non-response".into()),
            },
            Either::Left((Err(e), _)) => Attempt::Failed(js_message(&e)),
            Either::Right(((), _)) => {
                controller.abort();
                Attempt::TimedOut
            }
        }
    }

    /// Releases the spare body branch once no retry will use it.
    pub fn drop_spare(&mut self) {
        if let Some(s) = self.spare.take() {
            let _ = s.cancel();
        }
    }
}

fn js_message(e: &JsValue) -> String {
    e.dyn_ref::<js_sys::Error>()
        .map(|err| String::from(err.message()))
        .or_else(|| e.as_string())
        .unwrap_or_else(|| format!("{e:?}"))
}

/// The client response for an origin's answer: same status and body (streamed), headers
/// without hop-by-hop ones, plus `extra` (the decision headers).
///
/// # Errors
/// JS failures building the response.
pub fn relay(up: &WsResponse, extra: &[(&str, &str)]) -> worker::Result<worker::Response> {
    let upstream = up.headers();
    let connection = upstream.get("connection").ok().flatten();
    let headers = Headers::new().map_err(js_err)?;
    for (name, value) in worker::Headers(upstream).entries() {
        if forward_response_header(&name, connection.as_deref()) {
            headers.append(&name, &value).map_err(js_err)?;
        }
    }
    for (k, v) in extra {
        headers.set(k, v).map_err(js_err)?;
    }
    let init = web_sys::ResponseInit::new();
    init.set_status(up.status());
    init.set_status_text(&up.status_text());
    init.set_headers(&headers);
    let resp = WsResponse::new_with_opt_readable_stream_and_init(up.body().as_ref(), &init)
        .map_err(js_err)?;
    Ok(worker::Response::from(resp))
}

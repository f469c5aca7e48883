//! Proxying a routed request to its origin: streamed bodies both ways, an upstream
//! timeout, one failover retry for idempotent methods, and a response body cut when the
//! origin stalls it.
//!
//! Only the configured origins are ever contacted; the request contributes its path,
//! query, method, headers and body, never the destination. Which origin is asked, when to
//! fail over, what the record keeps and what a 502 says are decider-core's
//! ([`decider_core::failover::Forwarding`]); which headers cross and which requests may be
//! resent are [`decider_core::forward`]'s. This module does the JavaScript.

use crate::clock;
use crate::config::Config;
use crate::error::ApiError;
use crate::http;
use crate::js::{self, Fetched};
use crate::log;
use crate::pipe::{Ended, Moved, Origin, Pipe};
use decider_core::failover::{AttemptResult, Forwarding, Next, OriginSet};
use decider_core::forward::{
    forward_request_header, forward_response_header, get_or_head_declares_body, is_bodyless,
    is_idempotent, relayable_status, target_url,
};
use decider_core::record::RouteOutcome;
use decider_core::{Action, Decision};
use wasm_bindgen::{JsCast, JsValue};
use web_sys::{Headers, ReadableStream, RequestInit, RequestRedirect, Response as WsResponse};

/// The response for a routed request and what happened at the origins.
#[derive(Debug)]
pub struct Forwarded {
    /// The response to send.
    pub response: worker::Response,
    /// For the decision record.
    pub outcome: RouteOutcome,
    /// Runtime text of failed attempts, for the log only.
    pub detail: Option<String>,
    /// The relayed body on its way to the client: how it ends (`Moved::Stalled`: the origin
    /// sent nothing for `ORIGIN_BODY_IDLE_MS` and the body was cut). None without a body.
    pub body: Option<Ended>,
}

/// Sends a routed request to the origin of `decided` as [`Forwarding`] plans it: an origin
/// the monitor marks down (`down`) is passed over for its failover, and one failover is
/// taken when the first attempt gives no usable answer (idempotent methods, or any method
/// when nothing was sent because the action has no origin). Answers 502 with the Worker's
/// own words when no origin gave a usable answer, and 400 `body_not_allowed` to a GET or
/// HEAD that declares a body (nothing is sent).
///
/// # Errors
/// Internal (JS) failures only.
pub async fn forward(
    req: &worker::Request,
    d: &Decision,
    decision_id: &str,
    decided: Action,
    down: OriginSet,
    cfg: &Config,
) -> worker::Result<Forwarded> {
    let incoming = req.headers();
    let header = |name: &str| incoming.get(name).ok().flatten();
    let method = req.inner().method();
    if get_or_head_declares_body(
        &method,
        header("content-length").as_deref(),
        header("transfer-encoding").as_deref(),
    ) {
        let e = ApiError::new(
            400,
            "body_not_allowed",
            "GET and HEAD requests must not carry a body",
        );
        return answer(
            e,
            d,
            decision_id,
            None,
            RouteOutcome::answered_by_worker(400),
            None,
        );
    }
    let mut books = Forwarding::start(
        decided,
        &cfg.failover,
        down,
        |a| cfg.origins.contains_key(&a),
        is_idempotent(&method),
    );
    let mut out = Outgoing::from_request(req, books.may_retry())?;
    let started = clock::now_ms();
    let mut answered = None;
    loop {
        match books.next() {
            Next::Send(origin) => {
                let sent_at = clock::now_ms();
                let url = cfg.origins.get(&origin).map_or("", String::as_str);
                let (result, response) = out.send(url, cfg.origin_timeout_ms).await;
                let now = clock::now_ms();
                books.attempted(result, now - sent_at, now - started);
                answered = response;
            }
            Next::Relay { failover } => {
                out.drop_spare();
                let (outcome, detail) = books.finish();
                let Some(up) = answered else {
                    return Err(worker::Error::RustError("relay without an answer".into()));
                };
                let (response, body) = relay(&up, d, decision_id, failover, cfg)?;
                return Ok(Forwarded {
                    response,
                    outcome,
                    detail: detail.map(|t| log::clip(&t)),
                    body,
                });
            }
            Next::BadGateway { message, failover } => {
                out.drop_spare();
                let (outcome, detail) = books.finish();
                let e = ApiError::new(502, "bad_gateway", message);
                return answer(e, d, decision_id, failover, outcome, detail);
            }
        }
    }
}

/// The Worker's own answer to a routed request (400, 502) with the decision headers; the
/// runtime's words stay in the log.
fn answer(
    e: ApiError,
    d: &Decision,
    decision_id: &str,
    failover: Option<Action>,
    outcome: RouteOutcome,
    detail: Option<String>,
) -> worker::Result<Forwarded> {
    let response = http::error(&e)?;
    http::set_decision_headers(response.headers(), d, decision_id)?;
    if let Some(f) = failover {
        response.headers().set("x-decision-failover", f.name())?;
    }
    Ok(Forwarded {
        response,
        outcome,
        detail: detail.map(|t| log::clip(&t)),
        body: None,
    })
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
    /// The body's declared length, kept on the way to the origin (none when chunked).
    length: Option<u64>,
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
        let url = inner.url();
        let (path, query) = decider_core::forward::path_and_query(&url);
        let method = inner.method();
        let incoming = inner.headers();
        let connection = incoming.get("connection").ok().flatten();
        let headers = Headers::new().map_err(js_err)?;
        for (name, value) in worker::Headers(incoming.clone()).entries() {
            if forward_request_header(&name, connection.as_deref()) {
                headers.append(&name, &value).map_err(js_err)?;
            }
        }
        // With a transfer-encoding the runtime reads the body by it, and content-length is
        // only a claim.
        let length = match incoming.has("transfer-encoding") {
            Ok(false) => incoming
                .get("content-length")
                .ok()
                .flatten()
                .and_then(|l| l.trim().parse::<u64>().ok()),
            _ => None,
        };
        let bodyless = is_bodyless(&method);
        let (body, spare) = match inner.body() {
            // A GET or HEAD that declares a body is refused before this; what is left is the
            // empty stream the runtime gives a `content-length: 0` request, which its own
            // Request constructor would refuse to send.
            Some(_) if bodyless => (None, None),
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
            path: path.to_string(),
            query: query.map(str::to_string),
            headers,
            body,
            spare,
            length,
        })
    }

    /// Sends to `origin`, waiting at most `timeout_ms` for response headers once the
    /// request body has been sent (the client's upload time does not count; the origin may
    /// leave a chunk of it untaken for at most `timeout_ms`). The first call uses the body,
    /// the second the spare tee. The response comes back when it can be relayed.
    pub async fn send(
        &mut self,
        origin: &str,
        timeout_ms: u32,
    ) -> (AttemptResult, Option<WsResponse>) {
        let upload = match self.body.take().or_else(|| self.spare.take()) {
            Some(b) => match Pipe::start(&b, self.length, Origin::Reads, timeout_ms) {
                Ok(u) => Some(u),
                Err(e) => return (AttemptResult::Failed(js::error_text(&e)), None),
            },
            None => None,
        };
        let init = RequestInit::new();
        init.set_method(&self.method);
        init.set_headers(&self.headers);
        if let Some(u) = &upload {
            init.set_body(&u.body);
        }
        // 3xx go back to the client as they are.
        init.set_redirect(RequestRedirect::Manual);
        let sent = upload.as_ref().map(Pipe::ended);
        // `true` when the origin stalled the upload, `false` when the headers were late.
        let deadline = async move {
            if let Some(sent) = sent {
                if sent.await == Moved::Stalled {
                    return true;
                }
            }
            js::delay(timeout_ms).await;
            false
        };
        let url = target_url(origin, &self.path, self.query.as_deref());
        let (result, response) = match js::fetch(&url, &init, deadline).await {
            Fetched::Answer { response, .. } if relayable_status(response.status()) => {
                (AttemptResult::Answered(response.status()), Some(response))
            }
            Fetched::Answer { response, abort } => {
                // The runtime's fetch takes an interim 1xx for the final answer. Abort and
                // cancel the body, so the connection is closed rather than pooled with the
                // real answer still unread.
                abort.abort();
                if let Some(b) = response.body() {
                    js::quietly(b.cancel());
                }
                (AttemptResult::InvalidStatus(response.status()), None)
            }
            Fetched::Failed(e) => (AttemptResult::Failed(e), None),
            Fetched::Late(true) => (AttemptResult::UploadStalled, None),
            Fetched::Late(false) => (AttemptResult::TimedOut, None),
        };
        if let (Some(u), None) = (&upload, &response) {
            u.abandon();
        }
        (result, response)
    }

    /// Releases the spare body branch once no retry will use it.
    pub fn drop_spare(&mut self) {
        if let Some(s) = self.spare.take() {
            let _ = s.cancel();
        }
    }
}

/// The client response for an origin's answer: same status and body, headers without
/// hop-by-hop ones, plus the decision headers (and `x-decision-failover`). The body streams
/// through a [`Pipe`] that cuts it when the origin sends nothing for `ORIGIN_BODY_IDLE_MS`;
/// the future says how it ended.
///
/// # Errors
/// JS failures building the response.
fn relay(
    up: &WsResponse,
    d: &Decision,
    decision_id: &str,
    failover: Option<Action>,
    cfg: &Config,
) -> worker::Result<(worker::Response, Option<Ended>)> {
    let upstream = up.headers();
    let connection = upstream.get("connection").ok().flatten();
    let headers = Headers::new().map_err(js_err)?;
    for (name, value) in worker::Headers(upstream.clone()).entries() {
        if forward_response_header(&name, connection.as_deref()) {
            headers.append(&name, &value).map_err(js_err)?;
        }
    }
    http::set_decision_headers(&worker::Headers(headers.clone()), d, decision_id)?;
    if let Some(f) = failover {
        headers
            .set("x-decision-failover", f.name())
            .map_err(js_err)?;
    }
    let pipe = match up.body() {
        Some(body) => {
            let length = relayed_length(&upstream);
            if length.is_none() {
                // The runtime frames what it sends again (chunked, or encoded anew).
                headers.delete("content-length").map_err(js_err)?;
            }
            Some(
                Pipe::start(&body, length, Origin::Writes, cfg.origin_body_idle_ms)
                    .map_err(js_err)?,
            )
        }
        None => None,
    };
    let init = web_sys::ResponseInit::new();
    init.set_status(up.status());
    init.set_status_text(&up.status_text());
    init.set_headers(&headers);
    let body = pipe.as_ref().map(|p| p.body.clone());
    let resp =
        WsResponse::new_with_opt_readable_stream_and_init(body.as_ref(), &init).map_err(js_err)?;
    Ok((worker::Response::from(resp), pipe.as_ref().map(Pipe::ended)))
}

/// The length a relayed body keeps: the origin's `content-length` when the bytes read are
/// the bytes it counted (no `content-encoding`: the runtime hands the Worker a body decoded,
/// and encodes it again on the way out).
fn relayed_length(upstream: &Headers) -> Option<u64> {
    let encoded = upstream
        .get("content-encoding")
        .ok()
        .flatten()
        .is_some_and(|e| !e.trim().eq_ignore_ascii_case("identity"));
    if encoded || upstream.has("transfer-encoding").unwrap_or(true) {
        return None;
    }
    upstream
        .get("content-length")
        .ok()
        .flatten()
        .and_then(|l| l.trim().parse::<u64>().ok())
}

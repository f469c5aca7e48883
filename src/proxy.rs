//! Proxying a routed request to its origin: streamed bodies both ways, an upstream
//! timeout, one failover retry for idempotent methods.
//!
//! Only the configured origins are ever contacted; the request contributes its path,
//! query, method, headers and body, never the destination.

use crate::clock;
use crate::config::Config;
use crate::error::ApiError;
use crate::http;
use crate::log;
use crate::upload::{Sent, Upload};
use decider_core::monitor::{self, OriginSet};
use decider_core::record::{self, ErrorKind, RouteOutcome};
use decider_core::{Action, Decision};
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
    /// The origin answered with a status that can be relayed (200..=599).
    Answered(WsResponse),
    /// No answer: connection failure or an invalid upstream request (the runtime's text,
    /// for the log only).
    Failed(String),
    /// A status that cannot be relayed (outside 200..=599); the connection was dropped.
    InvalidStatus(u16),
    /// No response headers within `ORIGIN_TIMEOUT_MS` of the body being sent.
    TimedOut,
    /// The origin left a chunk of the request body untaken for `ORIGIN_TIMEOUT_MS`.
    UploadStalled,
}

impl Attempt {
    /// Whether this attempt warrants the failover origin: no answer, or 502/503/504.
    pub fn should_fail_over(&self) -> bool {
        match self {
            Attempt::Answered(r) => matches!(r.status(), 502..=504),
            Attempt::Failed(_)
            | Attempt::InvalidStatus(_)
            | Attempt::TimedOut
            | Attempt::UploadStalled => true,
        }
    }

    /// A description for the log, with the runtime's text (never sent to clients).
    pub fn describe(&self) -> String {
        match self {
            Attempt::Failed(e) => format!("failed: {e}"),
            Attempt::UploadStalled => "timed out: the origin stopped taking the body".into(),
            other => other.public(),
        }
    }

    /// What the client is told about the attempt: what became of it, in words of the
    /// Worker's own (see [`bad_gateway_message`]).
    pub fn public(&self) -> String {
        match self {
            Attempt::Answered(r) => format!("answered {}", r.status()),
            Attempt::Failed(_) => "failed".into(),
            Attempt::InvalidStatus(s) => format!("answered invalid status {s}"),
            Attempt::TimedOut | Attempt::UploadStalled => "timed out".into(),
        }
    }

    /// The attempt as the decision record keeps it.
    fn record(&self, origin: Action, latency_ms: f64) -> record::Attempt {
        let (status, error) = match self {
            Attempt::Answered(r) if self.should_fail_over() => {
                (Some(r.status()), Some(ErrorKind::UpstreamStatus))
            }
            Attempt::Answered(r) => (Some(r.status()), None),
            Attempt::Failed(_) => (None, Some(ErrorKind::Connect)),
            Attempt::InvalidStatus(s) => (Some(*s), Some(ErrorKind::BadUpstream)),
            Attempt::TimedOut | Attempt::UploadStalled => (None, Some(ErrorKind::Timeout)),
        };
        record::Attempt {
            origin,
            status,
            error,
            latency_ms: Some(latency_ms),
        }
    }
}

/// The response for a routed request and what happened at the origins.
#[derive(Debug)]
pub struct Forwarded {
    /// The response to send.
    pub response: worker::Response,
    /// For the decision record.
    pub outcome: RouteOutcome,
    /// Runtime text of failed attempts, for the log only.
    pub detail: Option<String>,
}

/// Sends a routed request to the origin of `action`, failing over once (to the `FAILOVER`
/// origin) when the first attempt gives no usable answer: for idempotent methods, or for
/// any method when nothing was sent because the action has no origin. An origin in `down`
/// (marked down by the monitor) is not tried: the request goes straight to its failover
/// ([`monitor::plan`]). Answers 502 with a stable message when no origin gave a usable
/// answer, and 400 `body_not_allowed` to a GET or HEAD that declares a body (nothing is
/// sent).
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
    if get_or_head_declares_body(
        &req.inner().method(),
        header("content-length").as_deref(),
        header("transfer-encoding").as_deref(),
    ) {
        return body_not_allowed(d, decision_id);
    }
    let plan = monitor::plan(decided, &cfg.failover, down, |a| {
        cfg.origins.contains_key(&a)
    });
    let (action, failover) = (plan.first, plan.retry);
    // Passing over a down origin is a failover taken before any attempt.
    let skipped_to = plan.skipped.map(|_| action);
    let mut out = Outgoing::from_request(req, failover.is_some())?;
    let started = clock::now_ms();
    let mut outcome = RouteOutcome {
        origin: None,
        status: None,
        latency_ms: None,
        failover: skipped_to,
        origin_down: plan.skipped,
        error: None,
        attempts: Vec::new(),
    };
    let mut details = Vec::new();
    if let Some(down) = plan.skipped {
        details.push(format!(
            "{down} marked down by the monitor, sent to {action}"
        ));
    }

    let first = match cfg.origins.get(&action) {
        Some(origin) => {
            let a = out.send(origin, cfg.origin_timeout_ms).await;
            outcome
                .attempts
                .push(a.record(action, clock::now_ms() - started));
            outcome.origin = Some(action);
            a
        }
        None => {
            outcome.error = Some(ErrorKind::NoOrigin);
            Attempt::Failed(format!("no origin configured for {action}"))
        }
    };
    let unsent = outcome.attempts.is_empty();
    if !first.should_fail_over() {
        out.drop_spare();
        if let Attempt::Answered(r) = &first {
            outcome.status = Some(r.status());
            outcome.latency_ms = Some(clock::now_ms() - started);
            let response = relay(r, d, decision_id, skipped_to)?;
            let detail = (!details.is_empty()).then(|| log::clip(&details.join("; ")));
            return Ok(Forwarded {
                response,
                outcome,
                detail,
            });
        }
    }
    details.push(format!("{action} {}", first.describe()));
    let first_public = if unsent {
        NOT_CONFIGURED.to_string()
    } else {
        first.public()
    };
    let first_error = outcome.attempts.last().and_then(|a| a.error);
    outcome.error = outcome.error.or(first_error);
    outcome.status = outcome.attempts.last().and_then(|a| a.status);
    let target = failover
        .filter(|_| unsent || out.retryable())
        .and_then(|t| cfg.origins.get(&t).map(|o| (t, o)));
    let Some((target, origin)) = target else {
        out.drop_spare();
        outcome.latency_ms = Some(clock::now_ms() - started);
        let message = bad_gateway_message(action, &first_public, None);
        return bad_gateway(d, decision_id, skipped_to, outcome, message, details);
    };
    outcome.failover = Some(target);
    outcome.origin = Some(target);
    let sent_at = clock::now_ms();
    let second = out.send(origin, cfg.origin_timeout_ms).await;
    outcome
        .attempts
        .push(second.record(target, clock::now_ms() - sent_at));
    outcome.latency_ms = Some(clock::now_ms() - started);
    match &second {
        Attempt::Answered(r) if !second.should_fail_over() => {
            outcome.status = Some(r.status());
            outcome.error = None;
            let response = relay(r, d, decision_id, Some(target))?;
            Ok(Forwarded {
                response,
                outcome,
                detail: Some(log::clip(&details.join("; "))),
            })
        }
        other => {
            outcome.status = outcome.attempts.last().and_then(|a| a.status);
            outcome.error = outcome.attempts.last().and_then(|a| a.error);
            details.push(format!("failover {target} {}", other.describe()));
            let second_public = other.public();
            let message =
                bad_gateway_message(action, &first_public, Some((target, &second_public)));
            bad_gateway(d, decision_id, Some(target), outcome, message, details)
        }
    }
}

/// What a 502 says of an action without an origin.
const NOT_CONFIGURED: &str = "not configured";

/// The whole of a 502's message: `origin for <action> <outcome>`, then
/// `, failover <action> <outcome>` when a failover was tried. An outcome is `failed`,
/// `timed out`, `answered <status>`, `answered invalid status <status>` or `not configured`
/// ([`Attempt::public`]): the Worker's words only, whatever the runtime said.
pub fn bad_gateway_message(
    action: Action,
    first: &str,
    failover: Option<(Action, &str)>,
) -> String {
    match failover {
        Some((target, second)) => {
            format!("origin for {action} {first}, failover {target} {second}")
        }
        None => format!("origin for {action} {first}"),
    }
}

/// 502 `bad_gateway` with the decision headers; the runtime's words stay in the log.
fn bad_gateway(
    d: &Decision,
    decision_id: &str,
    failover: Option<Action>,
    outcome: RouteOutcome,
    message: String,
    details: Vec<String>,
) -> worker::Result<Forwarded> {
    let response = http::error(&ApiError::new(502, "bad_gateway", message))?;
    http::set_decision_headers(response.headers(), d, decision_id)?;
    if let Some(f) = failover {
        response.headers().set("x-decision-failover", f.name())?;
    }
    Ok(Forwarded {
        response,
        outcome,
        detail: Some(log::clip(&details.join("; "))),
    })
}

/// 400 `body_not_allowed` with the decision headers: the runtime refuses to send a GET or
/// HEAD with a body, and dropping the body would forward a different request.
fn body_not_allowed(d: &Decision, decision_id: &str) -> worker::Result<Forwarded> {
    let response = http::error(&ApiError::new(
        400,
        "body_not_allowed",
        "GET and HEAD requests must not carry a body",
    ))?;
    http::set_decision_headers(response.headers(), d, decision_id)?;
    Ok(Forwarded {
        response,
        outcome: RouteOutcome::answered_by_worker(400),
        detail: None,
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
        let url = req.url()?;
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
        let bodyless = method.eq_ignore_ascii_case("GET") || method.eq_ignore_ascii_case("HEAD");
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
            path: url.path().to_string(),
            query: url.query().map(str::to_string),
            headers,
            body,
            spare,
            length,
        })
    }

    /// Whether a failover attempt may be made after this first one.
    pub fn retryable(&self) -> bool {
        is_idempotent(&self.method)
    }

    /// Sends to `origin`, waiting at most `timeout_ms` for response headers once the
    /// request body has been sent (the client's upload time does not count; the origin may
    /// leave a chunk of it untaken for at most `timeout_ms`). The first call uses the body,
    /// the second the spare tee.
    pub async fn send(&mut self, origin: &str, timeout_ms: u32) -> Attempt {
        let upload = match self.body.take().or_else(|| self.spare.take()) {
            Some(b) => match Upload::start(&b, self.length, timeout_ms) {
                Ok(u) => Some(u),
                Err(e) => return Attempt::Failed(js_message(&e)),
            },
            None => None,
        };
        let attempt = self.attempt(origin, timeout_ms, upload.as_ref()).await;
        if let (Some(u), false) = (&upload, matches!(attempt, Attempt::Answered(_))) {
            u.abandon();
        }
        attempt
    }

    async fn attempt(&self, origin: &str, timeout_ms: u32, upload: Option<&Upload>) -> Attempt {
        let url = target_url(origin, &self.path, self.query.as_deref());
        let controller = match AbortController::new() {
            Ok(c) => c,
            Err(e) => return Attempt::Failed(format!("{e:?}")),
        };
        let init = RequestInit::new();
        init.set_method(&self.method);
        init.set_headers(&self.headers);
        if let Some(u) = upload {
            init.set_body(&u.body);
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
        let sent = upload.map(Upload::sent);
        // `true` when the origin stalled the upload, `false` when the headers were late.
        let timer = async move {
            if let Some(sent) = sent {
                if sent.await == Sent::Stalled {
                    return true;
                }
            }
            worker::Delay::from(Duration::from_millis(u64::from(timeout_ms))).await;
            false
        };
        futures_util::pin_mut!(fetch);
        futures_util::pin_mut!(timer);
        match select(fetch, timer).await {
            Either::Left((Ok(v), _)) => match v.dyn_into::<WsResponse>() {
                Ok(r) if relayable_status(r.status()) => Attempt::Answered(r),
                Ok(r) => {
                    // The runtime's fetch takes an interim 1xx for the final answer. Abort
                    // and cancel the body, so the connection is closed rather than pooled
                    // with the real answer still unread.
                    controller.abort();
                    if let Some(b) = r.body() {
                        crate::upload::quietly(b.cancel());
                    }
                    Attempt::InvalidStatus(r.status())
                }
                Err(_) => Attempt::Failed("fetch returned a non-response".into()),
            },
            Either::Left((Err(e), _)) => Attempt::Failed(js_message(&e)),
            Either::Right((stalled, _)) => {
                controller.abort();
                if stalled {
                    Attempt::UploadStalled
                } else {
                    Attempt::TimedOut
                }
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
/// without hop-by-hop ones, plus the decision headers (and `x-decision-failover`).
///
/// # Errors
/// JS failures building the response.
fn relay(
    up: &WsResponse,
    d: &Decision,
    decision_id: &str,
    failover: Option<Action>,
) -> worker::Result<worker::Response> {
    let upstream = up.headers();
    let connection = upstream.get("connection").ok().flatten();
    let headers = Headers::new().map_err(js_err)?;
    for (name, value) in worker::Headers(upstream).entries() {
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
    let init = web_sys::ResponseInit::new();
    init.set_status(up.status());
    init.set_status_text(&up.status_text());
    init.set_headers(&headers);
    let resp = WsResponse::new_with_opt_readable_stream_and_init(up.body().as_ref(), &init)
        .map_err(js_err)?;
    Ok(worker::Response::from(resp))
}

/// The upstream URL: the origin base followed by the request's path and query. The request
/// never picks the host: only configured origins are ever contacted.
pub fn target_url(origin: &str, path: &str, query: Option<&str>) -> String {
    let mut url = String::with_capacity(origin.len() + path.len() + 16);
    url.push_str(origin);
    if !path.starts_with('/') {
        url.push('/');
    }
    url.push_str(path);
    if let Some(q) = query.filter(|q| !q.is_empty()) {
        url.push('?');
        url.push_str(q);
    }
    url
}

/// Hop-by-hop headers (RFC 9110 §7.6.1): meaningful for one connection only, never forwarded.
pub const HOP_BY_HOP: [&str; 9] = [
    "connection",
    "keep-alive",
    "proxy-authenticate",
    "proxy-authorization",
    "proxy-connection",
    "te",
    "trailer",
    "transfer-encoding",
    "upgrade",
];

/// Whether a client request header may be forwarded upstream: not hop-by-hop, not named
/// by `Connection`, not `host` (the origin's is used), not `expect`, and not a client-sent
/// `x-decision-*` (only the Worker speaks for the decision).
///
/// `Expect` is between the client and the runtime, which reads the body for the Worker.
/// Forwarded, `Expect: 100-continue` makes the origin answer `100 Continue` first, and the
/// runtime's fetch takes that interim answer for the final one: on a HEAD it pools the
/// connection with the real answer unread, and the next request on it gets that answer.
pub fn forward_request_header(name: &str, connection: Option<&str>) -> bool {
    let n = name.to_ascii_lowercase();
    !(HOP_BY_HOP.contains(&n.as_str())
        || n == "host"
        || n == "expect"
        || n.starts_with("x-decision-")
        || named_by_connection(&n, connection))
}

/// Whether a GET or HEAD request declares a body: a `content-length` other than 0, or any
/// `transfer-encoding`. Such a request is answered 400: the runtime refuses to send a GET or
/// HEAD with a body.
pub fn get_or_head_declares_body(
    method: &str,
    content_length: Option<&str>,
    transfer_encoding: Option<&str>,
) -> bool {
    let bodyless = method.eq_ignore_ascii_case("GET") || method.eq_ignore_ascii_case("HEAD");
    bodyless
        && (transfer_encoding.is_some()
            || content_length.is_some_and(|l| l.trim().parse::<u64>() != Ok(0)))
}

/// Whether an upstream status can be relayed: a final status the runtime can build a
/// response with. Anything else (an interim 1xx the runtime took for the final answer, or
/// a number beyond 599) is a failed attempt.
pub fn relayable_status(status: u16) -> bool {
    (200..=599).contains(&status)
}

/// Whether an upstream response header may be passed to the client: not hop-by-hop and
/// not an `x-decision-*` (the Worker sets its own).
pub fn forward_response_header(name: &str, connection: Option<&str>) -> bool {
    let n = name.to_ascii_lowercase();
    !(HOP_BY_HOP.contains(&n.as_str())
        || n.starts_with("x-decision-")
        || named_by_connection(&n, connection))
}

fn named_by_connection(lower_name: &str, connection: Option<&str>) -> bool {
    connection.is_some_and(|c| {
        c.split(',')
            .any(|t| t.trim().eq_ignore_ascii_case(lower_name))
    })
}

/// Whether a method is idempotent (RFC 9110 §9.2.2): only these are retried on failover.
pub fn is_idempotent(method: &str) -> bool {
    matches!(
        method.to_ascii_uppercase().as_str(),
        "GET" | "HEAD" | "OPTIONS" | "TRACE" | "PUT" | "DELETE"
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn target_urls() {
        assert_eq!(
            target_url("http://127.0.0.1:9001", "/any/path", Some("q=1&r=2")),
            "http://127.0.0.1:9001/any/path?q=1&r=2"
        );
        assert_eq!(
            target_url("https://a.example/base", "/x", None),
            "https://a.example/base/x"
        );
        assert_eq!(target_url("http://h", "/x", Some("")), "http://h/x");
    }

    #[test]
    fn header_hygiene() {
        for h in [
            "Connection",
            "keep-alive",
            "TE",
            "transfer-encoding",
            "upgrade",
            "host",
            "X-Decision-Action",
            "x-decision-anything",
            "Expect",
            "expect",
        ] {
            assert!(!forward_request_header(h, None), "{h}");
        }
        for h in [
            "accept",
            "x-custom",
            "content-type",
            "cookie",
            "authorization",
            "cf-connecting-ip",
        ] {
            assert!(forward_request_header(h, None), "{h}");
        }
        assert!(!forward_request_header(
            "x-secret-hop",
            Some("keep-alive, X-Secret-Hop")
        ));
        assert!(!forward_response_header("x-decision-source", None));
        assert!(forward_response_header("set-cookie", None));
        assert!(!forward_response_header("transfer-encoding", None));
    }

    #[test]
    fn get_and_head_bodies() {
        assert!(get_or_head_declares_body("GET", Some("3"), None));
        assert!(get_or_head_declares_body("head", None, Some("chunked")));
        assert!(get_or_head_declares_body("GET", Some("0"), Some("chunked")));
        assert!(get_or_head_declares_body("GET", Some("x"), None));
        assert!(!get_or_head_declares_body("GET", Some("0"), None));
        assert!(!get_or_head_declares_body("HEAD", Some(" 0 "), None));
        assert!(!get_or_head_declares_body("GET", None, None));
        assert!(!get_or_head_declares_body("POST", Some("3"), None));
        assert!(!get_or_head_declares_body(
            "OPTIONS",
            Some("3"),
            Some("chunked")
        ));
    }

    #[test]
    fn relayable_statuses() {
        for s in [200, 204, 302, 404, 502, 599] {
            assert!(relayable_status(s), "{s}");
        }
        for s in [0, 100, 101, 103, 199, 600, 999] {
            assert!(!relayable_status(s), "{s}");
        }
    }

    #[test]
    fn bad_gateway_messages_are_the_workers_words() {
        assert_eq!(
            bad_gateway_message(Action::RouteA, "failed", None),
            "origin for route_a failed"
        );
        assert_eq!(
            bad_gateway_message(
                Action::RouteA,
                "answered invalid status 103",
                Some((Action::RouteB, "timed out"))
            ),
            "origin for route_a answered invalid status 103, failover route_b timed out"
        );
        assert_eq!(
            bad_gateway_message(
                Action::RouteC,
                NOT_CONFIGURED,
                Some((Action::RouteA, "answered 503"))
            ),
            "origin for route_c not configured, failover route_a answered 503"
        );
    }

    #[test]
    fn idempotent_methods() {
        for m in ["GET", "head", "OPTIONS", "PUT", "DELETE"] {
            assert!(is_idempotent(m), "{m}");
        }
        for m in ["POST", "PATCH", "CONNECT"] {
            assert!(!is_idempotent(m), "{m}");
        }
    }
}

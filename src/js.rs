//! The JavaScript runtime's primitives the Worker's I/O is made of, each written once: a
//! `fetch` raced against a deadline (to an origin, or to a Durable Object's stub), a future
//! bounded in time, a future polled apart, the text of a JS error, and a promise left to
//! settle unobserved.

use decider_core::record::{clip_to, TEXT_BYTES};
use futures_util::future::{select, Either};
use js_sys::futures::JsFuture;
use js_sys::Promise;
use std::future::Future;
use std::pin::Pin;
use std::time::Duration;
use wasm_bindgen::{JsCast, JsValue};
use web_sys::{AbortController, Request, RequestInit, Response};

/// A future of its own, polled through a pointer rather than inlined into its caller's:
/// V8 compiles a wasm function when it is first called, so an isolate's first request
/// compiles the code of its own route (and backend), not every route's.
pub fn apart<'a, T>(f: impl Future<Output = T> + 'a) -> Pin<Box<dyn Future<Output = T> + 'a>> {
    Box::pin(f)
}

/// What a fetch raced against a deadline came to.
#[derive(Debug)]
pub enum Fetched<T> {
    /// Response headers arrived first. `abort` cancels the request (a connection whose
    /// answer the caller will not read must not be pooled).
    Answer {
        /// The response.
        response: Response,
        /// The request's abort controller.
        abort: AbortController,
    },
    /// The request failed (the runtime's words, for the log).
    Failed(String),
    /// The deadline came first, with its value; the request was aborted.
    Late(T),
}

/// Sends `url` with `init` (its signal is replaced by an abort controller's) and waits for
/// the response headers or `deadline`, whichever comes first.
pub async fn fetch<T>(
    url: &str,
    init: &RequestInit,
    deadline: impl Future<Output = T>,
) -> Fetched<T> {
    fetch_on(&js_sys::global(), url, init, deadline).await
}

/// [`fetch`] through `target`'s own `fetch` method: the global scope's (the network), or a
/// Durable Object stub's.
pub async fn fetch_on<T>(
    target: &JsValue,
    url: &str,
    init: &RequestInit,
    deadline: impl Future<Output = T>,
) -> Fetched<T> {
    let abort = match AbortController::new() {
        Ok(c) => c,
        Err(e) => return Fetched::Failed(error_text(&e)),
    };
    init.set_signal(Some(&abort.signal()));
    let request = match Request::new_with_str_and_init(url, init) {
        Ok(r) => r,
        Err(e) => return Fetched::Failed(error_text(&e)),
    };
    let sent = match call_method(target, "fetch", &request).map(|p| p.dyn_into::<Promise>()) {
        Ok(Ok(p)) => JsFuture::from(p),
        Ok(Err(_)) => return Fetched::Failed("fetch returned no promise".into()),
        Err(e) => return Fetched::Failed(e),
    };
    futures_util::pin_mut!(sent);
    futures_util::pin_mut!(deadline);
    match select(sent, deadline).await {
        Either::Left((Ok(v), _)) => match v.dyn_into::<Response>() {
            Ok(response) => Fetched::Answer { response, abort },
            Err(_) => Fetched::Failed("fetch returned a non-response".into()),
        },
        Either::Left((Err(e), _)) => Fetched::Failed(error_text(&e)),
        Either::Right((late, _)) => {
            abort.abort();
            Fetched::Late(late)
        }
    }
}

/// `target[name](arg)`: a method of a JavaScript object (a binding's), called with one
/// argument; its value, or the text of why it failed.
pub fn call_method(target: &JsValue, name: &str, arg: &JsValue) -> Result<JsValue, String> {
    let f = js_sys::Reflect::get(target, &JsValue::from_str(name)).map_err(|e| error_text(&e))?;
    let f: &js_sys::Function = f
        .dyn_ref()
        .ok_or_else(|| format!("{name} is not a function"))?;
    f.call1(target, arg).map_err(|e| error_text(&e))
}

/// A timer of `ms` milliseconds.
pub fn delay(ms: u32) -> worker::Delay {
    worker::Delay::from(Duration::from_millis(u64::from(ms)))
}

/// `fut`'s output, or `None` when `ms` milliseconds pass first.
pub async fn within<F: Future>(fut: F, ms: u32) -> Option<F::Output> {
    futures_util::pin_mut!(fut);
    match select(fut, delay(ms)).await {
        Either::Left((v, _)) => Some(v),
        Either::Right(_) => None,
    }
}

/// A promise's value, or its rejection's text.
pub async fn settle(p: Promise) -> Result<JsValue, String> {
    JsFuture::from(p).await.map_err(|e| error_text(&e))
}

/// The first line of a JavaScript error's message (no stack trace), clipped to
/// [`TEXT_BYTES`]: what the log and `/v1/health` say of a runtime failure.
pub fn error_text(e: &JsValue) -> String {
    let text = e
        .dyn_ref::<js_sys::Error>()
        .map(|err| String::from(err.message()))
        .or_else(|| e.as_string())
        .unwrap_or_else(|| format!("{e:?}"));
    clip_to(text.lines().next().unwrap_or_default(), TEXT_BYTES)
}

/// Lets a promise settle unobserved without an unhandled rejection (`JsFuture` attaches both
/// handlers, and keeps them alive until one runs).
pub fn quietly(p: Promise) {
    drop(JsFuture::from(p));
}

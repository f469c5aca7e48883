//! edge-decider: the Cloudflare Worker, a thin adapter over decider-core.
//!
//! It parses requests, awaits I/O (the Workers AI binding), and hands the results to
//! [`decider_core::decide`]; it holds no decision logic of its own (DESIGN §1, §7).
//!
//! # Layout
//! - [`config`]: wrangler vars → validated [`config::Config`] (invalid values reported, defaulted).
//! - [`engine`]: the embedded model (parsed once per isolate) and the Workers AI backend.
//! - [`env_cache`]: values derived from the `env` object, kept while it stays the same.
//! - [`body`]: content type, size limit and the `{"state": …}` envelope.
//! - [`error`]: the one mapping from errors to HTTP status and JSON body.
//! - [`health`]: the `/v1/health` document.
//! - [`log`]: one JSON log line per decision.
//! - [`edge`]: request → state fields, canary buckets, origins, failover, header hygiene (pure).
//! - [`route`], [`proxy`], [`signals`]: edge routing, proxying with failover, KV signals and admin.
//! - [`analytics`]: one Analytics Engine data point per decision, when bound.
//! - [`http`], [`clock`]: Worker glue (responses, bounded body reads, the JS clock); the
//!   parts that would cross between wasm and JS call by call are written in JS, in
//!   `src/glue.js` (a body read loop, one-call responses), and imported through wasm-bindgen.
//! - [`fetch`]: the exported handler; `POST /v1/decide` with the embedded model takes a fast
//!   path without Rust futures, everything else the async router.
//!
//! # Routes
//! - `POST /v1/decide` — `{"state": {…}}` → decision JSON and `x-decision-*` headers.
//! - `GET /v1/health` — model, versions, threshold, rules, routing, configuration errors.
//! - `PUT|GET /v1/admin/signals` — store / show backend signals (bearer `ADMIN_TOKEN`).
//! - `POST /v1/debug/trap` — aborts the wasm instance, to test recovery; only with
//!   `DEBUG_ENDPOINTS=true`.
//! - `POST /v1/debug/encode` — the encoded features of a state; only with
//!   `DEBUG_ENDPOINTS=true` (off by default; the end-to-end tests check golden vectors with it).
//! - Anything else outside `/v1/` — edge routing: decided, then proxied or rejected.

pub mod analytics;
pub mod body;
pub mod clock;
pub mod config;
pub mod edge;
pub mod engine;
pub mod env_cache;
pub mod error;
pub mod health;
pub mod http;
pub mod log;
pub mod proxy;
pub mod route;
pub mod signals;

use config::{Config, VAR_NAMES};
use decider_core::{encode, Gates, ENCODER_VERSION};
use engine::{Engine, ModelHandle};
use error::ApiError;
use futures_util::FutureExt;
use js_sys::Promise;
use serde_json::json;
use std::cell::RefCell;
use std::rc::Rc;
use wasm_bindgen::prelude::{wasm_bindgen, Closure};
use wasm_bindgen::{JsCast, JsValue};
use wasm_bindgen_futures::future_to_promise;
use worker::{event, wasm_bindgen_futures, Context, Env, Method, Request, Response};

/// Raw variable values (in [`VAR_NAMES`] order) and the configuration parsed from them.
type CachedConfig = (Vec<Option<String>>, Rc<Config>);

thread_local! {
    /// The configuration of this isolate, with the raw values it was parsed from. Vars do
    /// not change within an isolate, so this parses once; the comparison keeps it correct
    /// should an isolate ever be handed another environment.
    static CONFIG: RefCell<Option<CachedConfig>> = const { RefCell::new(None) };

    /// The configuration of the environment object last seen: an identity check skips
    /// reading every var through `Reflect.get` on each request.
    static CONFIG_ENV: env_cache::PerEnv<Rc<Config>> = const { env_cache::PerEnv::new() };
}

/// A variable's value as text: strings as they are, other JSON values (a TOML table
/// in `[vars]`, a number) serialised.
fn raw_var(env: &Env, name: &str) -> Option<String> {
    let v = js_sys::Reflect::get(env, &wasm_bindgen::JsValue::from_str(name)).ok()?;
    if v.is_undefined() || v.is_null() {
        return None;
    }
    if let Some(s) = v.as_string() {
        return Some(s);
    }
    js_sys::JSON::stringify(&v).ok().and_then(|s| s.as_string())
}

/// The validated configuration for this environment (parsed once per isolate).
fn config(env: &Env) -> Rc<Config> {
    CONFIG_ENV.with(|kept| kept.get(env, || config_from_vars(env)))
}

/// The configuration read var by var from an environment not seen before (reparsed only
/// when the values differ from the last ones parsed).
fn config_from_vars(env: &Env) -> Rc<Config> {
    let raw: Vec<Option<String>> = VAR_NAMES.iter().map(|n| raw_var(env, n)).collect();
    CONFIG.with(|cell| {
        let mut slot = cell.borrow_mut();
        if let Some((seen, cfg)) = slot.as_ref() {
            if *seen == raw {
                return Rc::clone(cfg);
            }
        }
        let cfg = Rc::new(Config::from_vars(|name| {
            VAR_NAMES
                .iter()
                .position(|n| *n == name)
                .and_then(|i| raw.get(i).cloned().flatten())
        }));
        *slot = Some((raw.clone(), Rc::clone(&cfg)));
        cfg
    })
}

#[event(start)]
fn start() {
    // A panic is a bug; this makes its message reach the log.
    console_error_panic_hook::set_once();
    // Parse and validate the embedded artifact at isolate start-up, not in the first
    // request (a refusal is kept and reported by /v1/health).
    let _ = engine::embedded();
}

/// The fetch handler, as `#[event(fetch)]` would export it, with one fast path in front.
///
/// `POST /v1/decide` with an embedded model answers through `decide_fast`: its only I/O
/// is reading the body, which JS does before calling back into Rust once, so no Rust
/// future, task queue or per-await closure is involved. Everything else (and a Workers AI
/// backend, which awaits the model) goes through the async router, `handle`.
#[wasm_bindgen]
pub fn fetch(req: web_sys::Request, env: Env, ctx: worker::worker_sys::Context) -> Promise {
    if let Some(answer) = decide_fast(&req, &env) {
        return answer;
    }
    future_to_promise(async move {
        let resp = handle(Request::from(req), env, Context::new(ctx)).await;
        Ok(JsValue::from(resp?))
    })
}

/// The router behind [`fetch`]; an internal failure is logged and answered 500.
async fn handle(req: Request, env: Env, _ctx: Context) -> Result<web_sys::Response, JsValue> {
    let cfg = config(&env);
    let engine = Engine::new(&cfg, &env);
    match route(req, &env, &engine).await {
        Ok(resp) => Ok(resp),
        Err(e) => Ok(internal_error(&e.to_string())?),
    }
}

/// Logs an internal failure and answers 500 `internal`.
fn internal_error(why: &str) -> worker::Result<web_sys::Response> {
    log::emit(&json!({"ts": clock::iso_now(), "event": "internal_error", "error": why}));
    http::error(&ApiError::internal()).map(Into::into)
}

/// An API error as a response (an internal failure when even that cannot be built).
fn error_response(e: &ApiError) -> Result<web_sys::Response, JsValue> {
    match http::error(e) {
        Ok(resp) => Ok(resp.into()),
        Err(err) => Ok(internal_error(&err.to_string())?),
    }
}

/// The fast path of [`fetch`] for `POST /v1/decide`, or `None` for the router. It takes
/// only requests the router's checks accept ([`http::is_plain_decide`]: JSON content type,
/// declared length within the limit) with an embedded (or unavailable) model; anything
/// else, including every request those checks refuse and a Workers AI backend, goes to the
/// router. Its answers are the router's: the same body read limit, the same decision code
/// ([`decide_body`]), the same errors (the bad-input table runs against both).
fn decide_fast(req: &web_sys::Request, env: &Env) -> Option<Promise> {
    if !http::is_plain_decide(req) {
        return None;
    }
    let cfg = config(env);
    if matches!(Engine::new(&cfg, env).model, ModelHandle::WorkersAi(_)) {
        return None;
    }
    Some(DECIDE_ANSWER.with(|answer| http::serve_body(req, env, answer.as_ref().unchecked_ref())))
}

/// The closure `serveBody` (src/glue.js) calls with the body of a fast-path request.
type AnswerFn = dyn Fn(JsValue, Env, JsValue) -> Result<web_sys::Response, JsValue>;

thread_local! {
    /// Made once per isolate and kept: a closure per request would cost what the fast path saves.
    static DECIDE_ANSWER: Closure<AnswerFn> = Closure::new(answer_decide);
}

/// The second half of the fast path: the body has been read. `ray` is the request's
/// `cf-ray` header, or null.
fn answer_decide(read: JsValue, env: Env, ray: JsValue) -> Result<web_sys::Response, JsValue> {
    let cfg = config(&env);
    let engine = Engine::new(&cfg, &env);
    let request_id = ray.as_string();
    let answer = http::body_bytes(read).map(|bytes| {
        // An embedded (or unavailable) model does no I/O, so this future is ready at once.
        decide_body(&bytes, request_id.as_deref(), &env, &engine)
            .now_or_never()
            .unwrap_or_else(|| Err(ApiError::internal()))
    });
    match answer.and_then(|r| r) {
        Ok(resp) => Ok(resp),
        Err(e) => error_response(&e),
    }
}

/// Whether a path is in the API's `/v1` namespace (any case: `/V1/DECIDE` must not be
/// proxied to an origin as if it were application traffic).
fn is_api_path(path: &str) -> bool {
    let p = path.as_bytes();
    p.len() >= 3 && p[..3].eq_ignore_ascii_case(b"/v1") && (p.len() == 3 || p[3] == b'/')
}

/// Dispatches a request. Client errors are answered here; `Err` is an internal failure.
async fn route(
    mut req: Request,
    env: &Env,
    engine: &Engine<'_>,
) -> worker::Result<web_sys::Response> {
    let path = req.path();
    if !is_api_path(&path) {
        return route::handle(req, env, engine).await.map(Into::into);
    }
    let method = req.method();
    let result = match path.as_str() {
        "/v1/decide" => match method {
            // The hot path answers with a `web_sys::Response` built in one call.
            Method::Post => {
                return decide(&mut req, env, engine)
                    .await
                    .or_else(|e| http::error(&e).map(Into::into))
            }
            m => Err(ApiError::method_not_allowed(m.as_ref(), "POST")),
        },
        "/v1/health" => match method {
            Method::Get | Method::Head => Ok(health(env, engine).await?),
            m => Err(ApiError::method_not_allowed(m.as_ref(), "GET, HEAD")),
        },
        "/v1/admin/signals" => signals::admin(&mut req, env, engine.cfg).await,
        "/v1/debug/encode" if engine.cfg.debug_endpoints => match method {
            Method::Post => debug_encode(&mut req).await,
            m => Err(ApiError::method_not_allowed(m.as_ref(), "POST")),
        },
        "/v1/debug/trap" if engine.cfg.debug_endpoints => match method {
            Method::Post => debug_trap(),
            m => Err(ApiError::method_not_allowed(m.as_ref(), "POST")),
        },
        _ => Err(ApiError::not_found(&path)),
    };
    match result {
        Ok(resp) => Ok(resp.into()),
        Err(e) => http::error(&e).map(Into::into),
    }
}

/// Reads and validates a `{"state": …}` body (content type, size, schema).
async fn read_state(req: &mut Request) -> Result<decider_core::State, ApiError> {
    let bytes = read_json_body(req).await?;
    body::parse_state_body(&bytes, clock::utc_hour())
}

/// Reads a JSON API body: content type, size limit.
async fn read_json_body(req: &mut Request) -> Result<Vec<u8>, ApiError> {
    let ct = req.headers().get("content-type").ok().flatten();
    body::check_json_content_type(ct.as_deref())?;
    http::read_body(req).await
}

/// `POST /v1/decide` through the router (a Workers AI backend; see [`decide_fast`]).
async fn decide(
    req: &mut Request,
    env: &Env,
    engine: &Engine<'_>,
) -> Result<web_sys::Response, ApiError> {
    let bytes = read_json_body(req).await?;
    let request_id = req.headers().get("cf-ray").ok().flatten();
    decide_body(&bytes, request_id.as_deref(), env, engine).await
}

/// Decides a `{"state": …}` body, logs the decision and answers it.
async fn decide_body(
    bytes: &[u8],
    request_id: Option<&str>,
    env: &Env,
    engine: &Engine<'_>,
) -> Result<web_sys::Response, ApiError> {
    let now = clock::now_ms();
    let state = body::parse_state_body(bytes, clock::hour_from_ms(now))?;
    let (d, detail) = engine.decide(&state, Gates::default()).await;
    TEXT_BUF.with(|buf| {
        // Taken, not borrowed, so that nothing here can find it borrowed; put back after.
        let mut text = buf.take();
        text.clear();
        log::write_decision_line(
            &mut text,
            &clock::iso_from_ms(now),
            request_id,
            log::Endpoint::Decide,
            &d,
            detail.as_deref(),
        );
        log::emit_line(&text);
        analytics::write(env, &d);
        // Fields in the documented order (DESIGN §5), byte for byte serde_json's output.
        text.clear();
        d.write_json(&mut text);
        let resp = http::decision_response(&text, &d).map_err(|_| ApiError::internal());
        if text.capacity() <= TEXT_BUF_KEEP {
            buf.set(text);
        }
        resp
    })
}

/// The largest text buffer [`TEXT_BUF`] keeps (a decision's line is a few hundred bytes;
/// a rare long one, such as a clipped backend error, is not held for the isolate's life).
const TEXT_BUF_KEEP: usize = 4096;

thread_local! {
    /// The buffer each decision's log line and then its JSON answer are written into: two
    /// allocations fewer per decision (dlmalloc's large-chunk paths were in the profile of
    /// the running Worker).
    static TEXT_BUF: std::cell::Cell<String> = const { std::cell::Cell::new(String::new()) };
}

/// `GET /v1/health`.
async fn health(env: &Env, engine: &Engine<'_>) -> worker::Result<Response> {
    let status = match &engine.model {
        ModelHandle::Unavailable(why) => health::ModelStatus {
            loaded: false,
            version: None,
            error: Some(why.clone()),
        },
        _ => health::ModelStatus {
            loaded: true,
            version: engine.model_version().map(str::to_string),
            error: None,
        },
    };
    let threshold = engine::threshold(engine.cfg, engine::embedded().ok());
    let mut report = health::report(engine.cfg, &status, threshold);
    let current = signals::current(env, engine.cfg).await;
    report["routing"]["signals"] = json!({
        "fresh": current.fresh,
        "age_s": current.snapshot.map(|s| s.age_s(clock::now_ms())),
        "detail": if current.fresh { None } else { current.detail },
        "max_age_s": engine.cfg.signals_max_age_s,
        "cache_s": engine.cfg.signals_cache_s,
    });
    http::json(200, &report)
}

/// `POST /v1/debug/trap` (only with `DEBUG_ENDPOINTS=true`): aborts, as a panic does (the
/// release profile compiles panics to a wasm trap). The end-to-end tests use it to check
/// that the Worker answers again after one (workers-rs re-instantiates the module).
fn debug_trap() -> ! {
    std::process::abort()
}

/// `POST /v1/debug/encode` (only with `DEBUG_ENDPOINTS=true`).
async fn debug_encode(req: &mut Request) -> Result<Response, ApiError> {
    let state = read_state(req).await?;
    let body = json!({
        "encoder_version": ENCODER_VERSION,
        "state": state.to_value(),
        "features": encode(&state).to_vec(),
    });
    http::json(200, &body).map_err(|_| ApiError::internal())
}

#[cfg(test)]
mod tests {
    use super::is_api_path;

    #[test]
    fn api_namespace_is_case_insensitive() {
        for p in ["/v1", "/v1/", "/v1/decide", "/V1/DECIDE", "/v1/x/y"] {
            assert!(is_api_path(p), "{p}");
        }
        for p in ["/", "/v10", "/v1x/decide", "/api/v1/decide", "/v"] {
            assert!(!is_api_path(p), "{p}");
        }
    }
}

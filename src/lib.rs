//! edge-decider: the Cloudflare Worker, a thin adapter over decider-core.
//!
//! It reads requests, the environment and KV, awaits I/O (the Workers AI binding, the
//! origins), and hands the results to [`decider_core::Decider`]; it holds no decision logic
//! of its own.
//!
//! # Layout
//! - [`config`]: wrangler vars → a checked [`config::Config`], from one table of variables.
//! - [`isolate`]: what an isolate derives once: the configuration, the embedded model, the
//!   decider.
//! - [`decide`]: the I/O around one decision (both endpoints), and `POST /v1/decide`.
//! - [`ai`]: the Workers AI backend.
//! - [`route`], [`proxy`], [`pipe`], [`signals`]: edge routing, proxying with failover, a
//!   body on its way between client and origin, KV signals and the admin endpoint.
//! - [`outcome`]: `POST /v1/outcome`, outcomes reported by `/v1/decide` callers.
//! - [`monitor`]: the scheduled origin monitor (probes, metrics, down origins).
//! - [`rollout`]: the data plane's part of rollouts — the arm of a request, live counts
//!   flushed to the control plane (`workers/rollout`, bound as `ROLLOUT`), the setting it
//!   answers.
//! - [`health`]: the `/v1/health` document.
//! - [`http`], [`error`]: bounded body reads, JSON responses, the one mapping from errors to
//!   HTTP statuses.
//! - [`js`], [`kv`]: the runtime's primitives written once (fetch with a deadline, a bounded
//!   wait, a JS error's text) and the KV namespace with its two keys.
//! - [`log`], [`analytics`], [`clock`]: log lines, Analytics Engine data points, the clock.
//!
//! # Routes
//! - `POST /v1/decide` — `{"state": {…}}` → decision JSON and `x-decision-*` headers.
//! - `GET /v1/health` — status, model and rules versions, threshold; with the admin token
//!   also configuration values and errors, routing and signals.
//! - `POST /v1/outcome` — a `/v1/decide` caller's outcome for a decision (bearer token).
//! - `PUT|GET /v1/admin/signals` — store / show backend signals (bearer `ADMIN_TOKEN`).
//! - `GET|POST /v1/admin/rollout` — the rollout's status and an operator's verbs, relayed to
//!   the control plane (which checks its own `ADMIN_TOKEN`).
//! - `POST /v1/debug/encode`, `POST /v1/debug/trap` — test endpoints, only with
//!   `DEBUG_ENDPOINTS=true`.
//! - Anything else outside `/v1/` — edge routing: decided, then proxied or rejected.

pub mod ai;
pub mod analytics;
pub mod clock;
pub mod config;
pub mod decide;
pub mod error;
pub mod health;
pub mod http;
pub mod isolate;
pub mod js;
pub mod kv;
pub mod log;
pub mod monitor;
pub mod outcome;
pub mod pipe;
pub mod proxy;
pub mod rollout;
pub mod route;
pub mod signals;

use decider_core::forward::{is_refused_method, ROUTED_ALLOW};
use decider_core::{encode, State, ENCODER_VERSION};
use error::ApiError;
use isolate::Isolate;
use js::apart;
use serde_json::json;
use std::rc::Rc;
use worker::{event, Context, Env, Method, Request, Response, ScheduleContext, ScheduledEvent};

#[event(start)]
fn start() {
    // A panic is a bug; this makes its message reach the log.
    console_error_panic_hook::set_once();
    // Parse and validate the embedded artifact at isolate start-up, not in the first
    // request (a refusal is kept and reported by /v1/health).
    let _ = isolate::embedded();
    // And the configuration: the first request then runs (and compiles) none of it.
    isolate::prepare();
}

/// Every request. Client errors are answered with their status; an internal failure is
/// logged and answered 500 `internal`.
#[event(fetch)]
async fn fetch(req: Request, env: Env, ctx: Context) -> worker::Result<Response> {
    let iso = isolate::get(&env);
    let answered = route(req, &env, &iso, &ctx).await;
    rollout::after_request(&iso, &ctx);
    match answered {
        Ok(resp) => Ok(resp),
        Err(e) => internal_error(&e),
    }
}

/// An internal failure: logged, answered 500 `internal`. Cold and out of line, so a first
/// request that succeeds does not compile it.
#[cold]
#[inline(never)]
fn internal_error(e: &worker::Error) -> worker::Result<Response> {
    log::event(
        "internal_error",
        json!({"error": log::clip(&e.to_string())}),
    );
    http::error(&ApiError::internal())
}

/// Every Cron Trigger: one run of the origin monitor (`docs/monitors.md`). The rollout's
/// judge runs in the control plane, on its own trigger.
#[event(scheduled)]
async fn scheduled(event: ScheduledEvent, env: Env, _ctx: ScheduleContext) {
    let iso = isolate::get(&env);
    monitor::run(&env, &iso.cfg, event.schedule()).await;
}

/// Whether a path is in the API's `/v1` namespace (any case: `/V1/DECIDE` must not be
/// proxied to an origin as if it were application traffic).
fn is_api_path(path: &str) -> bool {
    let p = path.as_bytes();
    p.len() >= 3 && p[..3].eq_ignore_ascii_case(b"/v1") && (p.len() == 3 || p[3] == b'/')
}

/// Dispatches a request. `Err` is an internal failure.
async fn route(
    mut req: Request,
    env: &Env,
    iso: &Rc<Isolate>,
    ctx: &Context,
) -> worker::Result<Response> {
    let path = req.path();
    if !is_api_path(&path) {
        // Refused at the edge: nothing is decided, logged or sent.
        let method = req.inner().method();
        if is_refused_method(&method) {
            return http::error(&ApiError::method_not_allowed(&method, ROUTED_ALLOW));
        }
        return apart(route::handle(req, env, iso, ctx)).await;
    }
    let method = req.method();
    let result = match path.as_str() {
        "/v1/decide" => match method {
            Method::Post => apart(decide::handle(&mut req, iso)).await,
            m => Err(ApiError::method_not_allowed(m.as_ref(), "POST")),
        },
        "/v1/health" => match method {
            Method::Get | Method::Head => apart(health(&req, env, iso)).await,
            m => Err(ApiError::method_not_allowed(m.as_ref(), "GET, HEAD")),
        },
        "/v1/outcome" => match method {
            Method::Post => apart(outcome::handle(&mut req, iso)).await,
            m => Err(ApiError::method_not_allowed(m.as_ref(), "POST")),
        },
        "/v1/admin/signals" => apart(signals::admin(&mut req, env, iso)).await,
        "/v1/admin/rollout" => apart(rollout::admin(&mut req, iso)).await,
        "/v1/debug/encode" if iso.cfg.debug_endpoints => match method {
            Method::Post => apart(debug_encode(&mut req)).await,
            m => Err(ApiError::method_not_allowed(m.as_ref(), "POST")),
        },
        "/v1/debug/trap" if iso.cfg.debug_endpoints => match method {
            Method::Post => debug_trap(),
            m => Err(ApiError::method_not_allowed(m.as_ref(), "POST")),
        },
        _ => Err(ApiError::not_found(&path)),
    };
    match result {
        Ok(resp) => Ok(resp),
        Err(e) => http::error(&e),
    }
}

/// `GET /v1/health`: the whole document with the admin token, its public part without (a
/// wrong token is no token: the public part, not a 401).
async fn health(req: &Request, env: &Env, iso: &Isolate) -> Result<Response, ApiError> {
    let authorization = req.headers().get("authorization").ok().flatten();
    let report = if iso.is_admin(authorization.as_deref()) {
        let (current, monitor, rollout) = futures_util::future::join3(
            signals::current(env, &iso.cfg),
            monitor::read_state(env),
            rollout::report(iso),
        )
        .await;
        let mut report = health::report(iso, &current, &monitor, clock::now_ms());
        report["rollout"] = rollout;
        report
    } else {
        health::public(iso)
    };
    http::json(200, &report).map_err(|_| ApiError::internal())
}

/// `POST /v1/debug/trap` (only with `DEBUG_ENDPOINTS=true`): aborts, as a panic does (the
/// release profile compiles panics to a wasm trap). The end-to-end tests use it to check
/// that the Worker answers again after one (workers-rs re-instantiates the module).
fn debug_trap() -> ! {
    std::process::abort()
}

/// `POST /v1/debug/encode` (only with `DEBUG_ENDPOINTS=true`): a state's 16 features.
async fn debug_encode(req: &mut Request) -> Result<Response, ApiError> {
    let bytes = http::read_json_body(req).await?;
    let state = State::from_body(&bytes, clock::utc_hour())?;
    let body = json!({
        "encoder_version": ENCODER_VERSION,
        "state": state,
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

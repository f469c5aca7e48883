//! The I/O around one decision, for both endpoints, and the `POST /v1/decide` handler.
//!
//! decider-core composes the decision, its record and its answer
//! ([`decider_core::request::decide`]); this module awaits the Workers AI model when the
//! decider needs it, names the decision (`decision_id`), reads the clock, and writes the
//! record to the log.

use crate::clock;
use crate::config::Config;
use crate::error::ApiError;
use crate::http;
use crate::isolate::Isolate;
use crate::log;
use decider_core::record::{Endpoint, RoutingKey};
use decider_core::request::{self, Decided, Remote, Request};
use decider_core::rollout::Arm;
use decider_core::{Gates, State};
use worker::Response;

/// Where a decision is made and for whom.
#[derive(Debug, Clone)]
pub struct Context {
    /// The endpoint.
    pub endpoint: Endpoint,
    /// The rollout arm.
    pub arm: Arm,
    /// Whether the request had its routing key.
    pub key: RoutingKey,
    /// The platform's request id (`cf-ray`).
    pub request_id: Option<String>,
}

/// The routing key a request's arm is bucketed by (`CANARY_KEY`: `cf-connecting-ip`, which
/// Cloudflare sets on every request at the edge, or a configured header), and whether the
/// request had one. A request without one (or with an empty one) gets a key drawn at random
/// for it alone, so keyless requests spread over the buckets like everyone's rather than all
/// sharing the bucket of one missing key; its record says `key: none`.
pub fn routing_key(headers: &worker::Headers, cfg: &Config) -> (String, RoutingKey) {
    match headers.get(cfg.canary_key.header()).ok().flatten() {
        Some(k) if !k.trim().is_empty() => (k, RoutingKey::Given),
        _ => (log::new_decision_id(), RoutingKey::None),
    }
}

/// Writes a decision's record to the log and, when bound, a data point to Analytics Engine.
pub fn log(iso: &Isolate, decided: &Decided) {
    let r = &decided.record;
    crate::rollout::count_decision(iso, r.arm, r.source, r.fallback_reason);
    log::write(&r.to_line());
    if let Some(dataset) = &iso.analytics {
        crate::analytics::write(dataset, &decided.decision);
    }
}

/// Decides a state: awaits the remote model when the arm's decider needs it, then lets
/// decider-core decide.
pub async fn decide(iso: &Isolate, state: &State, gates: Gates, ctx: Context) -> Decided {
    let started = clock::now_ms();
    let decider = iso.decider_for(ctx.arm);
    let remote = match &iso.ai {
        Some(ai) if decider.needs_remote(gates) => {
            let (outcome, detail) = crate::js::apart(crate::ai::infer(ai, &iso.cfg, state)).await;
            Some(Remote { outcome, detail })
        }
        _ => None,
    };
    let now_ms = clock::now_ms();
    let req = Request {
        state: *state,
        gates,
        endpoint: ctx.endpoint,
        arm: ctx.arm,
        key: ctx.key,
        decision_id: log::new_decision_id(),
        keys: iso.keys.as_ref(),
        request_id: ctx.request_id.as_deref(),
        backend: iso.cfg.backend.name(),
        now_ms,
        decision_us: clock::elapsed_us(started),
    };
    request::decide(decider, req, remote)
}

/// `POST /v1/decide`: `{"state": {…}}` → the decision JSON, its `x-decision-*` headers and
/// `x-decision-id`; the decision's record goes to the log.
///
/// # Errors
/// A client error (400, 413, 415) to answer.
pub async fn handle(req: &mut worker::Request, iso: &Isolate) -> Result<Response, ApiError> {
    let bytes = http::read_json_body(req).await?;
    let state = State::from_body(&bytes, clock::utc_hour())?;
    let headers = req.headers();
    let (key, had_key) = routing_key(headers, &iso.cfg);
    let arm = crate::rollout::arm(iso, &key, false);
    let ctx = Context {
        endpoint: Endpoint::Decide,
        arm,
        key: had_key,
        request_id: headers.get("cf-ray").ok().flatten(),
    };
    // Held out only when the judge switched every decision to rules.
    let gates = Gates {
        holdout: arm == Arm::Holdout,
        ..Gates::default()
    };
    let decided = decide(iso, &state, gates, ctx).await;
    log(iso, &decided);
    let resp = http::json_text(200, decided.answer()).map_err(|_| ApiError::internal())?;
    http::set_decision_headers(
        resp.headers(),
        &decided.decision,
        &decided.record.decision_id,
    )
    .map_err(|_| ApiError::internal())?;
    Ok(resp)
}

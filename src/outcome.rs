//! `POST /v1/outcome`: a `/v1/decide` caller reports how a decision went.
//!
//! The caller routes by itself, so only it knows the outcome. The report is validated like
//! every other body; its `decision_id` must be one this Worker issued (its keyed tag,
//! [`decider_core::decision_id`], verifies) for a `/v1/decide` decision; then it is written
//! to the log as an `outcome` record (`decider report` joins the two offline) and, with the
//! control plane bound, handed to the live counts, where one outcome per decision counts.
//! Each token may send at most what the `OUTCOME_RATE_LIMIT` binding allows.

use crate::clock;
use crate::error::ApiError;
use crate::http;
use crate::isolate::Isolate;
use crate::js;
use crate::log;
use decider_core::decision_id::{self, IdError};
use decider_core::record::{Endpoint, OutcomeRecord};
use serde_json::json;
use wasm_bindgen::{JsCast, JsValue};
use worker::{Request, Response};

/// `Retry-After` of a rate-limited outcome, seconds (the shortest period a limiter counts).
const RETRY_AFTER_S: u32 = 10;

/// Validates, logs and counts one outcome; answers 202 with the decision id and whether it
/// went to the live counts.
///
/// Bearer `OUTCOME_TOKEN` (or `ADMIN_TOKEN`): the callers that report outcomes are services,
/// and the outcome token lets them do only that.
///
/// # Errors
/// 401 without a valid token; 429 over the token's rate; 400, 413 or 415 for a bad body; 400
/// naming `decision_id` for an id this Worker did not issue (altered, invented, unsigned
/// while `DECISION_ID_KEY` is set) or one of a routed decision.
pub async fn handle(req: &mut Request, iso: &Isolate) -> Result<Response, ApiError> {
    let authorization = req.headers().get("authorization").ok().flatten();
    let token = crate::isolate::bearer_token(authorization.as_deref());
    let who = if iso.accepts(token, &[&iso.cfg.outcome_token]) {
        "outcome"
    } else if iso.accepts(token, &[&iso.cfg.admin_token]) {
        "admin"
    } else {
        return Err(ApiError::unauthorized());
    };
    if let Some(limiter) = &iso.outcome_limit {
        if !within_limit(limiter, who).await {
            return Err(ApiError::too_many_requests("outcomes", RETRY_AFTER_S));
        }
    }
    let bytes = http::read_json_body(req).await?;
    let record = OutcomeRecord::from_body(&bytes, clock::iso_now())?;
    let live = match &iso.keys {
        Some(keys) => {
            let claims = decision_id::verify(&record.decision_id, keys).map_err(refused)?;
            if claims.endpoint == Endpoint::Route {
                return Err(ApiError::new(
                    400,
                    "invalid_decision_id",
                    "decision_id names a routed decision: the Worker records its outcome itself",
                )
                .with_field("decision_id"));
            }
            crate::rollout::count_caller_outcome(
                iso,
                decision_id::base(&record.decision_id),
                &claims,
                record.reward,
                record.status,
                record.latency_ms,
            )
        }
        // Without a key no id can be verified: logged for the offline join, never counted.
        None => false,
    };
    log::write(&record.to_line());
    let answer = json!({"accepted": true, "decision_id": record.decision_id, "live": live});
    http::json(202, &answer).map_err(|_| ApiError::internal())
}

/// 400 naming `decision_id`, saying why it was refused.
fn refused(e: IdError) -> ApiError {
    ApiError::new(400, "invalid_decision_id", e.to_string()).with_field("decision_id")
}

/// Whether the rate limiter lets one more outcome of `key` through. A limiter that fails
/// lets it through (and says so in the log): the limit protects the counts, and the
/// counts are protected by the keyed id and the dedupe as well.
async fn within_limit(limiter: &JsValue, key: &str) -> bool {
    let arg = js_sys::Object::new();
    let _ = js_sys::Reflect::set(&arg, &JsValue::from_str("key"), &JsValue::from_str(key));
    let answer = match js::call_method(limiter, "limit", &arg).map(|p| p.dyn_into()) {
        Ok(Ok(p)) => js::settle(p).await,
        Ok(Err(_)) => Err("limit returned no promise".into()),
        Err(e) => Err(e),
    };
    let success = answer.and_then(|v| {
        js_sys::Reflect::get(&v, &JsValue::from_str("success")).map_err(|e| js::error_text(&e))
    });
    match success {
        Ok(ok) => ok.as_bool().unwrap_or(true),
        Err(e) => {
            log::event("outcome_rate_limit_failed", json!({"error": log::clip(&e)}));
            true
        }
    }
}

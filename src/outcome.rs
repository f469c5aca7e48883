//! `POST /v1/outcome`: a `/v1/decide` caller reports how a decision went.
//!
//! The caller routes by itself, so only it knows the outcome. The report is validated like
//! every other body and written to the log as an `outcome` record with the decision's id;
//! `decider report` joins the two offline. The logs are the event store: nothing is kept here
//! but, with the `ROLLOUT` binding, the live counts of the arm and source its decision id is
//! tagged with.

use crate::clock;
use crate::error::ApiError;
use crate::http;
use crate::isolate::Isolate;
use crate::log;
use decider_core::record::OutcomeRecord;
use decider_core::rollout::{decision_tag, Observation};
use serde_json::json;
use worker::{Request, Response};

/// Validates and logs one outcome; answers 202 with the decision id.
///
/// Bearer `OUTCOME_TOKEN` (or `ADMIN_TOKEN`): the callers that report outcomes are services,
/// and the outcome token lets them do only that.
///
/// # Errors
/// 401 without a valid token; 400, 413 or 415 for a bad body.
pub async fn handle(req: &mut Request, iso: &Isolate) -> Result<Response, ApiError> {
    let authorization = req.headers().get("authorization").ok().flatten();
    let token = crate::isolate::bearer_token(authorization.as_deref());
    if !iso.accepts(token, &[&iso.cfg.outcome_token, &iso.cfg.admin_token]) {
        return Err(ApiError::unauthorized());
    }
    let bytes = http::read_json_body(req).await?;
    let record = OutcomeRecord::from_body(&bytes, clock::iso_now())?;
    let answer = json!({"accepted": true, "decision_id": record.decision_id});
    log::write(&record.to_line());
    if let Some((arm, source)) = decision_tag(&record.decision_id) {
        let seen = Observation {
            reward: record.reward,
            status: record.status,
            latency_ms: record.latency_ms,
            rejected: false,
        };
        crate::rollout::count_outcome(iso, arm, source, &seen);
    }
    http::json(202, &answer).map_err(|_| ApiError::internal())
}

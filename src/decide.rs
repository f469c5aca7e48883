//! One decision with its record, for both endpoints, and the `POST /v1/decide` handler.
//!
//! The decider in decider-core does the deciding; this module does the I/O around it: it
//! awaits the Workers AI model when the decider needs it, names the decision
//! (`decision_id`), and writes its record to the log.

use crate::clock;
use crate::config::BackendKind;
use crate::error::ApiError;
use crate::http;
use crate::isolate::Isolate;
use crate::log;
use decider_core::decider::draw_from_id;
use decider_core::record::{Arm, DecisionRecord, Endpoint, LOG_VERSION};
use decider_core::{Decision, Gates, State};
use worker::{Request, Response};

/// Where a decision is made and for whom.
#[derive(Debug, Clone)]
pub struct Context {
    /// The endpoint.
    pub endpoint: Endpoint,
    /// The rollout arm.
    pub arm: Arm,
    /// The platform's request id (`cf-ray`).
    pub request_id: Option<String>,
}

/// A decision and the record that will be logged for it.
#[derive(Debug)]
pub struct Decided {
    /// The decision.
    pub decision: Decision,
    /// Its record; a routed request adds its outcome before logging.
    pub record: DecisionRecord,
}

impl Decided {
    /// Writes the record to the log and, when bound, a data point to Analytics Engine.
    pub fn log(&self, iso: &Isolate) {
        log::write(&self.record.to_line());
        if let Some(dataset) = &iso.analytics {
            crate::analytics::write(dataset, &self.decision);
        }
    }
}

/// Decides a state: runs (or awaits) the model when the policy needs it, then the policy.
pub async fn decide(iso: &Isolate, state: &State, gates: Gates, ctx: Context) -> Decided {
    let started = clock::now_ms();
    let decider = iso.decider_for(ctx.arm);
    let (remote, detail) = match &iso.ai {
        Some(ai) if decider.needs_remote(gates) => {
            let (outcome, detail) = crate::ai::infer(ai, &iso.cfg, state).await;
            (Some(outcome), detail)
        }
        _ => (None, None),
    };
    let mut greedy = decider.decide_with(state, gates, remote);
    greedy.decision_us = clock::elapsed_us(started);
    let decision_id = log::new_decision_id();
    let served = decider.serve(greedy, draw_from_id(&decision_id));
    let d = served.decision;
    // A decision that needed an unavailable model says why in its record.
    let needed = decider_core::policy::model_needed(gates, decider.policy());
    let detail = detail.or_else(|| match decider.model() {
        decider_core::ModelSource::Unavailable(why) if needed => Some(log::clip(why)),
        _ => None,
    });
    let record = DecisionRecord {
        log_version: LOG_VERSION,
        ts: clock::iso_from_ms(clock::now_ms()),
        decision_id,
        request_id: ctx
            .request_id
            .as_deref()
            .map(|r| log::clip_to(r, log::ECHO_BYTES)),
        endpoint: ctx.endpoint,
        state: *state,
        action: d.action,
        source: d.source,
        fallback_reason: d.fallback_reason,
        rule: d.rule.clone(),
        confidence: d.confidence,
        probabilities: d.probabilities,
        propensity: served.propensity,
        explored: served.explored,
        model_version: d.model_version.clone(),
        rules_version: decider.rules().map(|r| r.version().to_string()),
        encoder_version: d.encoder_version,
        backend: match iso.cfg.backend {
            BackendKind::Embedded => "embedded".into(),
            BackendKind::WorkersAi => "workers-ai".into(),
        },
        arm: ctx.arm,
        decision_us: d.decision_us,
        outcome: None,
        request: None,
        shadow: d.shadow,
        detail,
    };
    Decided {
        decision: d,
        record,
    }
}

/// `POST /v1/decide`: `{"state": {…}}` → the decision JSON, its `x-decision-*` headers and
/// `x-decision-id`; the decision's record goes to the log.
///
/// # Errors
/// A client error (400, 413, 415) to answer.
pub async fn handle(req: &mut Request, iso: &Isolate) -> Result<Response, ApiError> {
    let bytes = http::read_json_body(req).await?;
    let state = State::from_body(&bytes, clock::utc_hour())?;
    let headers = req.headers();
    let key = headers.get(iso.cfg.canary_key.header()).ok().flatten();
    let ctx = Context {
        endpoint: Endpoint::Decide,
        arm: iso.arm(key.as_deref().unwrap_or_default(), false),
        request_id: headers.get("cf-ray").ok().flatten(),
    };
    let decided = decide(iso, &state, Gates::default(), ctx).await;
    decided.log(iso);
    let answer = Answer {
        decision: &decided.decision,
        decision_id: &decided.record.decision_id,
    };
    let resp = http::json(200, &answer).map_err(|_| ApiError::internal())?;
    http::set_decision_headers(resp.headers(), &decided.decision, answer.decision_id)
        .map_err(|_| ApiError::internal())?;
    Ok(resp)
}

/// The `/v1/decide` body: the decision's fields, then its id.
#[derive(serde::Serialize)]
struct Answer<'a> {
    #[serde(flatten)]
    decision: &'a Decision,
    decision_id: &'a str,
}

//! Edge routing of every request outside `/v1/`: the state from the request and the live
//! signals, the decision, then the request proxied to the chosen origin or rejected. The
//! decision's record is written once the answer's body has ended (how it ended is part of
//! the outcome), through `ctx.waitUntil` when the body is still streaming.

use crate::clock;
use crate::decide::{self, decide, Context};
use crate::error::ApiError;
use crate::http;
use crate::isolate::Isolate;
use crate::log;
use crate::pipe::Moved;
use crate::proxy::{self, Forwarded};
use crate::signals;
use decider_core::record::{Endpoint, RequestInfo, RouteOutcome};
use decider_core::rollout::{Arm, Observation};
use decider_core::time::hour_from_ms;
use decider_core::{Action, Gates, State};
use std::rc::Rc;
use worker::{Env, Request, Response};

/// Routes one request.
///
/// # Errors
/// Internal (JS) failures only; client and upstream problems are answered.
pub async fn handle(
    req: Request,
    env: &Env,
    iso: &Rc<Isolate>,
    ctx: &worker::Context,
) -> worker::Result<Response> {
    let cfg = &iso.cfg;
    let method = req.inner().method();
    let request_type = cfg.request_types.classify(&method, &req.path());
    let (country, continent) = req
        .cf()
        .map_or((None, None), |cf| (cf.country(), cf.continent()));
    let region_id = cfg.regions.lookup(country.as_deref(), continent.as_deref());
    let current = signals::current(env, cfg).await;
    let (canary_key, key) = decide::routing_key(req.headers(), cfg);
    let arm = crate::rollout::arm(iso, &canary_key, true);
    let holdout = arm == Arm::Holdout;
    let gates = Gates {
        stale_signals: !current.fresh,
        holdout,
    };
    let now = clock::now_ms();
    let state = State::from_parts(
        request_type,
        region_id,
        hour_from_ms(now),
        current.signals(),
    );
    let context = Context {
        endpoint: Endpoint::Route,
        arm,
        key,
        request_id: req.headers().get("cf-ray").ok().flatten(),
    };
    let mut decided = decide(iso, &state, gates, context).await;
    let d = &decided.decision;
    let forwarded = match d.action {
        Action::Reject => Forwarded {
            response: rejected(d, &decided.record.decision_id, cfg.retry_after_s)?,
            outcome: RouteOutcome::answered_by_worker(503),
            detail: None,
            body: None,
        },
        routed => {
            let id = &decided.record.decision_id;
            proxy::forward(&req, d, id, routed, current.down, cfg).await?
        }
    };
    let rejected = d.action == Action::Reject;
    let Forwarded {
        response,
        mut outcome,
        detail,
        body,
    } = forwarded;
    let record = &mut decided.record;
    if record.detail.is_none() {
        record.detail = detail;
    }
    record.request = Some(RequestInfo {
        method: log::clip(&method),
        country: country.as_deref().map(log::clip),
        continent: continent.as_deref().map(log::clip),
        signals_age_s: current.snapshot.map(|s| s.age_s(now)),
        signals_detail: if current.fresh { None } else { current.detail },
    });
    // The outcome is known once the body has ended: counted, then the record logged.
    let streaming = body.is_some();
    let iso = Rc::clone(iso);
    let settle = async move {
        if let Some(ended) = body {
            if ended.await == Moved::Stalled {
                outcome.body_went_idle();
            }
        }
        // The decision's own outcome (its origin's first attempt), not the request's.
        let (status, latency_ms) = outcome.decided(decided.record.action);
        let seen = Observation {
            reward: None,
            status,
            latency_ms,
            rejected,
        };
        let record = &mut decided.record;
        crate::rollout::count_outcome(&iso, record.arm, record.source, &seen);
        record.outcome = Some(outcome);
        decide::log(&iso, &decided);
    };
    if !streaming {
        settle.await;
    } else {
        ctx.wait_until(settle);
    }
    Ok(response)
}

/// 503 `rejected` with `Retry-After` and the decision headers.
fn rejected(
    d: &decider_core::Decision,
    decision_id: &str,
    retry_after_s: u32,
) -> worker::Result<Response> {
    let e = ApiError {
        retry_after: Some(retry_after_s),
        ..ApiError::new(
            503,
            "rejected",
            "the request was rejected to protect the backends; retry later",
        )
    };
    let resp = http::error(&e)?;
    http::set_decision_headers(resp.headers(), d, decision_id)?;
    Ok(resp)
}

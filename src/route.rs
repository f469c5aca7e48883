//! Edge routing of every request outside `/v1/`: state from the request and the live
//! signals, the decision from the core, then proxy to the chosen origin or reject.

use crate::clock;
use crate::edge::in_canary;
use crate::engine::Engine;
use crate::error::ApiError;
use crate::http;
use crate::log;
use crate::proxy::{relay, Attempt, Outgoing};
use crate::signals;
use decider_core::{Action, Decision, Gates, State};
use serde_json::json;
use worker::{Env, Request, Response};

/// Where the request went, for the log line.
#[derive(Debug, Default)]
struct Upstream {
    origin: Option<&'static str>,
    status: Option<u16>,
    failover: Option<&'static str>,
    error: Option<String>,
}

/// Routes one request.
///
/// # Errors
/// Internal (JS) failures only; client and upstream problems are answered.
pub async fn handle(req: Request, env: &Env, engine: &Engine<'_>) -> worker::Result<Response> {
    let cfg = engine.cfg;
    let method = req.inner().method();
    let path = req.path();
    let request_type = cfg.request_types.classify(&method, &path);
    let (country, continent) = req
        .cf()
        .map_or((None, None), |cf| (cf.country(), cf.continent()));
    let region_id = cfg.regions.lookup(country.as_deref(), continent.as_deref());
    let current = signals::current(env, cfg).await;
    let canary_key = req
        .headers()
        .get(cfg.canary_key.header())
        .ok()
        .flatten()
        .unwrap_or_default();
    let gates = Gates {
        stale_signals: !current.fresh,
        holdout: !in_canary(&canary_key, cfg.canary_percent),
    };
    let state = State::from_parts(
        request_type,
        region_id,
        clock::utc_hour(),
        current.signals(),
    );
    let (d, model_detail) = engine.decide(&state, gates).await;

    let request_id = req.headers().get("cf-ray").ok().flatten();
    let mut upstream = Upstream::default();
    let resp = match d.action {
        Action::Reject => rejected(&d, cfg.retry_after_s)?,
        routed => proxy(req, &d, routed, engine, &mut upstream).await?,
    };
    let mut record = log::decision_record(
        &clock::iso_now(),
        request_id.as_deref(),
        log::Endpoint::Route,
        &d,
        model_detail.as_deref(),
    );
    record["request"] = json!({
        "method": method,
        "request_type": request_type,
        "region_id": region_id,
        "country": country,
        "continent": continent,
        "holdout": gates.holdout,
        "signals_age_s": current.snapshot.map(|s| s.age_s(clock::now_ms())),
        "signals_detail": if current.fresh { None } else { current.detail.clone() },
    });
    record["upstream"] = json!({
        "origin": upstream.origin,
        "status": upstream.status,
        "failover": upstream.failover,
        "error": upstream.error,
    });
    record["status"] = json!(resp.status_code());
    log::emit(&record);
    crate::analytics::write(env, &d);
    Ok(resp)
}

/// 503 `rejected` with `Retry-After` and the decision headers.
fn rejected(d: &Decision, retry_after_s: u32) -> worker::Result<Response> {
    let e = ApiError {
        retry_after: Some(retry_after_s),
        ..ApiError::new(
            503,
            "rejected",
            "the request was rejected to protect the backends; retry later",
        )
    };
    let resp = http::error(&e)?;
    http::set_decision_headers(resp.headers(), d)?;
    Ok(resp)
}

/// 502 `bad_gateway` with the decision headers.
fn bad_gateway(d: &Decision, message: String) -> worker::Result<Response> {
    let resp = http::error(&ApiError::new(502, "bad_gateway", message))?;
    http::set_decision_headers(resp.headers(), d)?;
    Ok(resp)
}

/// Sends the request to the action's origin, failing over once for idempotent methods.
async fn proxy(
    req: Request,
    d: &Decision,
    action: Action,
    engine: &Engine<'_>,
    up: &mut Upstream,
) -> worker::Result<Response> {
    let cfg = engine.cfg;
    let failover = cfg
        .failover
        .of(action)
        .filter(|f| cfg.origins.contains_key(f));
    let mut out = Outgoing::from_request(&req, failover.is_some())?;
    let decision_headers = |via: Option<Action>| {
        let mut h = vec![
            ("x-decision-action", d.action.name()),
            ("x-decision-source", d.source.name()),
            (
                "x-decision-model-version",
                d.model_version.as_deref().unwrap_or("none"),
            ),
        ];
        if let Some(v) = via {
            h.push(("x-decision-failover", v.name()));
        }
        h
    };

    let first = match cfg.origins.get(&action) {
        Some(origin) => {
            up.origin = Some(action.name());
            out.send(origin, cfg.origin_timeout_ms).await
        }
        // Nothing was sent, so any method may go to the failover origin.
        None => Attempt::Failed(format!("no origin configured for {action}")),
    };
    let unsent = !cfg.origins.contains_key(&action);
    if !first.should_fail_over() {
        out.drop_spare();
        if let Attempt::Answered(r) = &first {
            up.status = Some(r.status());
            return relay(r, &decision_headers(None));
        }
    }
    up.error = Some(first.describe());
    if let Attempt::Answered(r) = &first {
        up.status = Some(r.status());
    }
    let target = failover.filter(|_| unsent || out.retryable());
    let Some(target) = target else {
        out.drop_spare();
        return bad_gateway(d, format!("origin for {action} {}", first.describe()));
    };
    let Some(origin) = cfg.origins.get(&target) else {
        return bad_gateway(d, format!("origin for {action} {}", first.describe()));
    };
    up.failover = Some(target.name());
    let second = out.send(origin, cfg.origin_timeout_ms).await;
    match second {
        Attempt::Answered(r) if !matches!(r.status(), 502..=504) => {
            up.status = Some(r.status());
            relay(&r, &decision_headers(Some(target)))
        }
        other => {
            up.error = Some(format!(
                "{}; failover {target} {}",
                first.describe(),
                other.describe()
            ));
            if let Attempt::Answered(r) = &other {
                up.status = Some(r.status());
            }
            let resp = bad_gateway(
                d,
                format!(
                    "origin for {action} {}, failover {target} {}",
                    first.describe(),
                    other.describe()
                ),
            )?;
            resp.headers().set("x-decision-failover", target.name())?;
            Ok(resp)
        }
    }
}

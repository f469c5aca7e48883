//! edge-decider-rollout: the control plane of edge-decider's rollouts, a Worker of its own.
//!
//! The serving Worker (the data plane) decides, routes, counts and flushes its counts here
//! through its `ROLLOUT` binding (`script_name = "edge-decider-rollout"`); this Worker keeps
//! them, judges them on its Cron Trigger and answers the setting in force. It is a thin shell:
//! the rules are the `decider-rollout` crate's.
//!
//! # Layout
//! - [`object`]: the `Rollout` Durable Object (flushes, the setting, the judge, the state).
//! - [`config`]: `ROLLOUT_*` and `OUTCOME_HORIZON_S`, one table of variables.
//! - this file: the Cron Trigger (one look of the judge), and a `fetch` that answers 404:
//!   the control plane has no public surface.

pub mod config;
pub mod object;

use serde_json::json;
use wasm_bindgen::JsValue;
use worker::{event, Context, Env, Request, Response, ScheduleContext, ScheduledEvent};

/// Writes one log line (a record or an event).
pub fn log(line: &str) {
    web_sys::console::log_1(&JsValue::from_str(line));
}

/// A variable's value as text (strings as they are, other JSON values serialised).
pub fn var(env: &Env, name: &str) -> Option<String> {
    let v = js_sys_get(env, name)?;
    v.as_string().or_else(|| {
        worker::js_sys::JSON::stringify(&v)
            .ok()
            .and_then(|s| s.as_string())
    })
}

fn js_sys_get(env: &Env, name: &str) -> Option<JsValue> {
    let v = worker::js_sys::Reflect::get(env, &JsValue::from_str(name)).ok()?;
    (!v.is_undefined() && !v.is_null()).then_some(v)
}

#[event(start)]
fn start() {
    // A panic is a bug; this makes its message reach the log.
    console_error_panic_hook::set_once();
}

/// Anything over HTTP: 404. The control plane is reached through its binding only.
#[event(fetch)]
async fn fetch(_req: Request, _env: Env, _ctx: Context) -> worker::Result<Response> {
    let body = json!({"error": {"code": "not_found", "message": "the rollout control plane answers only through the serving Worker's ROLLOUT binding", "field": null}});
    Ok(Response::from_json(&body)?.with_status(404))
}

/// Every Cron Trigger: one look of the judge. The configuration's errors are logged first.
#[event(scheduled)]
async fn scheduled(_event: ScheduledEvent, env: Env, _ctx: ScheduleContext) {
    let cfg = config::Config::from_vars(|name| var(&env, name));
    for issue in &cfg.errors {
        log(
            &json!({"event": "config_error", "var": issue.var, "message": issue.message})
                .to_string(),
        );
    }
    if let Err(e) = judge(&env).await {
        log(&json!({"event": "rollout_judge_failed", "error": e.to_string()}).to_string());
    }
}

async fn judge(env: &Env) -> worker::Result<()> {
    let stub = env
        .durable_object("ROLLOUT")?
        .id_from_name("rollout")?
        .get_stub()?;
    let req = Request::new_with_init(
        "https://rollout/judge",
        worker::RequestInit::new().with_method(worker::Method::Post),
    )?;
    let mut resp = stub.fetch_with_request(req).await?;
    if resp.status_code() != 200 {
        let text = resp.text().await.unwrap_or_default();
        return Err(worker::Error::RustError(format!(
            "/judge answered {}: {text}",
            resp.status_code()
        )));
    }
    Ok(())
}

//! Rollouts, the serving Worker's part (the data plane): which arm serves a request, the
//! isolate's live counts, their flush to the control plane, and the setting it answers.
//! Nothing here judges: the judge, the rollout's state and its history are the control
//! plane's (`workers/rollout`, bound as `ROLLOUT`).
//!
//! Nothing here is on a request's path but a few additions to counters in the isolate's
//! memory ([`decider_core::rollout::Live`]): the counts are flushed in batches (its flush
//! rule: every `ROLLOUT_FLUSH_S` seconds or `ROLLOUT_FLUSH_OUTCOMES` outcomes) and the
//! setting is re-read (every `ROLLOUT_CACHE_S` seconds, unless a flush's answer renewed it)
//! through `ctx.waitUntil`, after the response. A flush that fails or times out loses its
//! counts, never a request; until the setting is known, and whenever the control plane is
//! absent or failing, `CHALLENGER_PERCENT` applies, so routing without it is routing as
//! before.

use crate::clock;
use crate::error::ApiError;
use crate::isolate::{ControlPlane, Isolate};
use crate::js;
use crate::log;
use decider_core::decision_id::Claims;
use decider_core::rollout::live::quantise;
use decider_core::rollout::{
    self, Arm, CallerOutcome, Live, Observation, Phase, Setting, SettingAnswer,
};
use decider_core::{Action, FallbackReason, Source};
use serde_json::{json, Value};
use std::cell::RefCell;
use std::rc::Rc;
use wasm_bindgen::JsValue;
use web_sys::{Headers, RequestInit};

/// Budget of a flush or a setting read, ms (they run after the response).
const IO_MS: u32 = 5_000;
/// Budget of the health report's read, ms.
const HEALTH_MS: u32 = 2_000;
/// Budget of an operator's call, ms.
const ADMIN_MS: u32 = 10_000;

/// The isolate's live counts and what it last heard from the control plane.
#[derive(Default)]
struct Isolated {
    live: Live,
    /// When the last flush began (0: no count yet).
    flushed_at_ms: f64,
    flushing: bool,
    /// The control plane's last answer, when there was one.
    answer: Option<SettingAnswer>,
    /// When the last read began or answer came (0: never).
    read_at_ms: f64,
    reading: bool,
}

thread_local! {
    static LIVE: RefCell<Isolated> = RefCell::new(Isolated::default());
}

/// The control plane's answer, when it is bound, has answered and sets the share.
fn automatic(iso: &Isolate) -> Option<SettingAnswer> {
    iso.rollout.as_ref()?;
    LIVE.with(|l| l.borrow().answer).filter(|a| a.automatic)
}

/// The setting in force in this isolate: the judge's when it is known, else
/// `CHALLENGER_PERCENT`.
pub fn setting(iso: &Isolate) -> Setting {
    automatic(iso).map_or(Setting::Share(iso.cfg.challenger_percent), |a| a.setting)
}

/// The rollout arm of a request with routing key `key`. `/v1/decide` (`holdout_applies`
/// false) is never held out, except when the judge switched every decision to rules.
pub fn arm(iso: &Isolate, key: &str, holdout_applies: bool) -> Arm {
    let share = match setting(iso) {
        Setting::Rules => return Arm::Holdout,
        Setting::Share(p) => p,
    };
    let canary = if holdout_applies {
        iso.cfg.canary_percent
    } else {
        100
    };
    let challenger = if iso.challenger.is_some() { share } else { 0 };
    rollout::arm(key, canary, challenger)
}

/// Counts one decision (with the control plane bound).
pub fn count_decision(iso: &Isolate, arm: Arm, source: Source, reason: Option<FallbackReason>) {
    if iso.rollout.is_some() {
        LIVE.with(|l| l.borrow_mut().live.add_decision(arm, source, reason));
    }
}

/// Counts a routed decision's outcome (with the control plane bound), its reward by
/// `ROLLOUT_SLO_MS`.
pub fn count_outcome(iso: &Isolate, arm: Arm, source: Source, seen: &Observation) {
    if iso.rollout.is_some() {
        let reward = iso.cfg.rollout.success.reward(seen);
        LIVE.with(|l| l.borrow_mut().live.add_outcome(arm, source, reward));
    }
}

/// Keeps a `/v1/decide` caller's outcome for the control plane, which counts one per
/// decision: `base` and `claims` from its verified id. Its reward is scored here, by the
/// same rule as a routed one (a rejected decision pays the reject reward). False when the
/// isolate already holds a full batch of them: the outcome is logged, not counted.
pub fn count_caller_outcome(
    iso: &Isolate,
    base: &str,
    claims: &Claims,
    reward: Option<f64>,
    status: Option<u16>,
    latency_ms: Option<f64>,
) -> bool {
    if iso.rollout.is_none() {
        return false;
    }
    let seen = Observation {
        reward,
        status,
        latency_ms,
        rejected: claims.action == Action::Reject,
    };
    let outcome = CallerOutcome {
        id: base.to_owned(),
        decided_ms: claims.issued_ms as i64,
        reward: quantise(iso.cfg.rollout.success.reward(&seen)),
    };
    LIVE.with(|l| l.borrow_mut().live.add_caller_outcome(outcome))
}

/// After a response: starts a flush and a setting read when they are due, through
/// `ctx.waitUntil`. Never awaits anything.
pub fn after_request(iso: &Rc<Isolate>, ctx: &worker::Context) {
    if let Some(plane) = &iso.rollout {
        flush_or_read(iso, plane, ctx);
    }
}

/// [`after_request`] with the control plane bound. Kept out of line: the runtime compiles a
/// function when it is first called, and a Worker without the binding never calls this.
#[inline(never)]
fn flush_or_read(iso: &Isolate, plane: &ControlPlane, ctx: &worker::Context) {
    let r = &iso.cfg.rollout;
    let now = clock::now_ms();
    let (taken, read) = LIVE.with(|l| {
        let mut l = l.borrow_mut();
        if l.flushed_at_ms == 0.0 {
            l.flushed_at_ms = now;
        }
        let due = l.live.due(
            now - l.flushed_at_ms,
            f64::from(r.flush_s) * 1e3,
            u64::from(r.flush_outcomes),
        );
        let taken = (due && !l.flushing).then(|| {
            l.flushing = true;
            l.flushed_at_ms = now;
            std::mem::take(&mut l.live)
        });
        let read = taken.is_none()
            && !l.reading
            && (l.read_at_ms == 0.0 || now - l.read_at_ms >= f64::from(r.cache_s) * 1e3);
        if read {
            l.reading = true;
            l.read_at_ms = now;
        }
        (taken, read)
    });
    let challenger = iso.challenger.as_ref().and_then(|d| d.model_version());
    if let Some(live) = taken {
        if live.dropped() > 0 {
            log::event(
                "rollout_outcomes_dropped",
                json!({"dropped": live.dropped(), "why": "a full batch of caller outcomes was waiting"}),
            );
        }
        if live.is_empty() {
            LIVE.with(|l| l.borrow_mut().flushing = false);
        } else {
            let versions = Arm::ALL.map(|a| iso.decider_for(a).model_version());
            let batch = live.to_batch(versions, challenger, iso.cfg.canary_percent);
            ctx.wait_until(flush(plane.clone(), batch));
        }
    }
    if read {
        ctx.wait_until(read_setting(plane.clone(), challenger.map(str::to_owned)));
    }
}

/// A request to the control plane's object; `body` makes it a JSON POST, `authorization`
/// is passed on. Its answer's status and text, or why there is none, within `ms`.
async fn exchange(
    plane: &ControlPlane,
    path: &str,
    body: Option<&str>,
    authorization: Option<&str>,
    ms: u32,
) -> Result<(u16, String), String> {
    let stub = plane.stub()?;
    let init = RequestInit::new();
    let headers = Headers::new().map_err(|e| js::error_text(&e))?;
    if let Some(a) = authorization {
        headers
            .set("authorization", a)
            .map_err(|e| js::error_text(&e))?;
    }
    if let Some(body) = body {
        headers
            .set("content-type", "application/json")
            .map_err(|e| js::error_text(&e))?;
        init.set_method("POST");
        init.set_body(&JsValue::from_str(body));
    }
    init.set_headers(&headers);
    let url = format!("https://rollout{path}");
    let response = match js::fetch_on(&stub, &url, &init, js::delay(ms)).await {
        js::Fetched::Answer { response, .. } => response,
        js::Fetched::Failed(e) => return Err(format!("{path}: {e}")),
        js::Fetched::Late(()) => return Err(format!("{path}: no answer within {ms} ms")),
    };
    let status = response.status();
    let text = match response.text() {
        Ok(p) => js::within(js::settle(p), ms).await,
        Err(e) => Some(Err(js::error_text(&e))),
    };
    match text {
        Some(Ok(t)) => Ok((status, t.as_string().unwrap_or_default())),
        Some(Err(e)) => Err(format!("{path}: {e}")),
        None => Err(format!("{path}: no body within {ms} ms")),
    }
}

/// [`exchange`] for the Worker's own calls: the answer's text when it is 2xx.
async fn call(
    plane: &ControlPlane,
    path: &str,
    body: Option<&str>,
    ms: u32,
) -> Result<String, String> {
    let (status, text) = exchange(plane, path, body, None, ms).await?;
    if !(200..300).contains(&status) {
        return Err(format!("{path} answered {status}: {}", log::clip(&text)));
    }
    Ok(text)
}

/// `GET|POST /v1/admin/rollout`: the operator's status and verbs, passed to the control plane
/// as they came (it checks the bearer token, its own `ADMIN_TOKEN`, and answers): this Worker
/// only relays them.
///
/// # Errors
/// 503 without the control plane or when it cannot be reached; the body's own errors.
pub async fn admin(req: &mut worker::Request, iso: &Isolate) -> Result<worker::Response, ApiError> {
    let Some(plane) = &iso.rollout else {
        return Err(ApiError::new(
            503,
            "no_control_plane",
            "no rollout control plane is bound (ROLLOUT)",
        ));
    };
    let authorization = req.headers().get("authorization").ok().flatten();
    let (path, body) = match req.method() {
        worker::Method::Get => ("/status", None),
        worker::Method::Post => {
            let bytes = crate::http::read_json_body(req).await?;
            let text = String::from_utf8(bytes)
                .map_err(|_| ApiError::new(400, "invalid_json", "the body is not UTF-8 text"))?;
            ("/control", Some(text))
        }
        m => return Err(ApiError::method_not_allowed(m.as_ref(), "GET, POST")),
    };
    let answered = exchange(
        plane,
        path,
        body.as_deref(),
        authorization.as_deref(),
        ADMIN_MS,
    )
    .await;
    let (status, text) = answered.map_err(|e| {
        log::event("rollout_admin_failed", json!({"error": log::clip(&e)}));
        ApiError::new(
            503,
            "control_plane_unavailable",
            "the rollout control plane did not answer",
        )
    })?;
    crate::http::json_text(status, text).map_err(|_| ApiError::internal())
}

/// Applies the control plane's answer to a flush or a read.
fn heard(answer: &str, now: f64) -> Result<(), String> {
    let a = SettingAnswer::from_json(answer)
        .ok_or_else(|| format!("not a setting: {}", log::clip(answer)))?;
    LIVE.with(|l| {
        let mut l = l.borrow_mut();
        l.answer = Some(a);
        l.read_at_ms = now;
    });
    Ok(())
}

/// Sends a batch; a failure is logged and the batch is lost.
async fn flush(plane: ControlPlane, batch: String) {
    let sent = call(&plane, "/flush", Some(&batch), IO_MS).await;
    if let Err(e) = sent.and_then(|a| heard(&a, clock::now_ms())) {
        log::event("rollout_flush_failed", json!({"error": log::clip(&e)}));
    }
    LIVE.with(|l| l.borrow_mut().flushing = false);
}

/// Reads the setting; a failure keeps the last one known (or `CHALLENGER_PERCENT`).
async fn read_setting(plane: ControlPlane, challenger: Option<String>) {
    let path = match &challenger {
        Some(v) => format!("/setting?challenger={}", js_sys::encode_uri_component(v)),
        None => "/setting".to_owned(),
    };
    let read = call(&plane, &path, None, IO_MS).await;
    if let Err(e) = read.and_then(|a| heard(&a, clock::now_ms())) {
        log::event("rollout_read_failed", json!({"error": log::clip(&e)}));
    }
    LIVE.with(|l| l.borrow_mut().reading = false);
}

/// The public part of `/v1/health`: the challenger and its share as this isolate applies
/// them, with no I/O.
pub fn public(iso: &Isolate) -> Value {
    let version = iso.challenger.as_ref().and_then(|d| d.model_version());
    let answer = automatic(iso);
    let phase = answer.map(|a| a.phase);
    json!({
        "automatic": answer.is_some(),
        "challenger_version": version,
        "setting": setting(iso),
        "phase": phase.map(Phase::name),
        "effective_champion": if phase == Some(Phase::Promoted) { version } else { None },
    })
}

/// The admin part of `/v1/health`: the control plane's state (phase, step, alarms,
/// history, the last judgement), windows and configuration, or why it could not be read.
pub async fn report(iso: &Isolate) -> Value {
    let mut v = public(iso);
    let Some(plane) = &iso.rollout else {
        v["store"] = json!({"bound": false});
        return v;
    };
    v["store"] = match call(plane, "/state", None, HEALTH_MS).await {
        Ok(text) => match serde_json::from_slice::<Value>(text.as_bytes()) {
            Ok(v) => json!({
                "bound": true, "state": v["state"], "windows": v["windows"],
                "config": v["config"], "config_errors": v["config_errors"],
            }),
            Err(e) => json!({"bound": true, "error": format!("/state answered non-JSON: {e}")}),
        },
        Err(e) => json!({"bound": true, "error": log::clip(&e)}),
    };
    v
}

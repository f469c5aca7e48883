//! Rollouts that run themselves, the isolate's part: which arm serves a request, live
//! counts of decisions and outcomes, their flush to the `ROLLOUT` Durable Object
//! ([`crate::rollout_store`]), and the judge's cron run (the object logs what the judge did).
//!
//! Nothing here is on a request's path but a few additions to counters in the isolate's
//! memory: the counts are flushed in batches (every `ROLLOUT_FLUSH_S` seconds or
//! `ROLLOUT_FLUSH_OUTCOMES` outcomes) and the share is re-read (every `ROLLOUT_CACHE_S`
//! seconds) through `ctx.waitUntil`, after the response. A flush that fails or times out
//! loses its counts, never a request; until the share is known, and whenever the object is
//! absent or failing, `CHALLENGER_PERCENT` applies, so routing without the object is
//! routing as before.
//!
//! An outcome is counted under the arm and source of its decision: a routed request's
//! straight away, a `/v1/decide` caller's from the tag its decision id ends with
//! ([`decider_core::rollout::decision_tag`]), under the model versions this isolate serves.

use crate::clock;
use crate::isolate::Isolate;
use crate::js;
use crate::log;
use decider_core::rollout::{self, Arm, Counts, Observation, Phase, Setting, Tally};
use decider_core::{FallbackReason, Source};
use serde::de::DeserializeOwned;
use serde::Deserialize;
use serde_json::{json, Value};
use std::cell::RefCell;
use std::rc::Rc;
use wasm_bindgen::JsValue;
use worker::{Headers, Method, ObjectNamespace, RequestInit};

/// The one object of the namespace.
const OBJECT_NAME: &str = "rollout";
/// Budget of a flush or a share read, ms (they run after the response).
const IO_MS: u32 = 5_000;
/// Budget of the judge's call and of the health report's read, ms.
const JUDGE_MS: u32 = 10_000;
const HEALTH_MS: u32 = 2_000;

/// The isolate's live counts and the share it last read.
#[derive(Default)]
struct Live {
    /// Counts since the last flush, by arm and source (wire order).
    counts: [[Counts; 3]; 3],
    /// Outcomes counted since the last flush.
    outcomes: u32,
    /// When the last flush began (0: no count yet).
    flushed_at_ms: f64,
    flushing: bool,
    /// The setting and phase read from the object, when one was.
    read: Option<(Setting, Phase)>,
    /// When the last read began (0: never).
    read_at_ms: f64,
    reading: bool,
}

thread_local! {
    static LIVE: RefCell<Live> = RefCell::new(Live::default());
}

/// Whether the judge sets the share: the object is bound and `ROLLOUT_AUTO` is on.
fn automatic(iso: &Isolate) -> bool {
    iso.rollout.is_some() && iso.cfg.rollout.policy.auto
}

/// The setting in force in this isolate: the judge's when it is automatic and known, else
/// `CHALLENGER_PERCENT`.
pub fn setting(iso: &Isolate) -> Setting {
    let configured = Setting::Share(iso.cfg.challenger_percent);
    if !automatic(iso) {
        return configured;
    }
    LIVE.with(|l| l.borrow().read.map_or(configured, |(s, _)| s))
}

/// The judge's phase as this isolate last read it, when automatic.
fn phase(iso: &Isolate) -> Option<Phase> {
    automatic(iso)
        .then(|| LIVE.with(|l| l.borrow().read.map(|(_, p)| p)))
        .flatten()
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

/// Counts one decision (with the object bound).
pub fn count_decision(iso: &Isolate, arm: Arm, source: Source, reason: Option<FallbackReason>) {
    if iso.rollout.is_some() {
        LIVE.with(|l| {
            l.borrow_mut().counts[arm.index()][source.index()].add_decision(source, reason)
        });
    }
}

/// Counts one outcome of a decision of `arm` and `source` (with the object bound), its
/// reward by `ROLLOUT_SLO_MS`.
pub fn count_outcome(iso: &Isolate, arm: Arm, source: Source, seen: &Observation) {
    if iso.rollout.is_some() {
        let reward = iso.cfg.rollout.success.reward(seen);
        LIVE.with(|l| {
            let mut l = l.borrow_mut();
            l.counts[arm.index()][source.index()].add_reward(reward);
            l.outcomes = l.outcomes.saturating_add(1);
        });
    }
}

/// After a response: starts a flush and a share read when they are due, through
/// `ctx.waitUntil`. Never awaits anything.
pub fn after_request(iso: &Rc<Isolate>, ctx: &worker::Context) {
    let Some(ns) = &iso.rollout else {
        return;
    };
    let r = &iso.cfg.rollout;
    let now = clock::now_ms();
    let (counts, read) = LIVE.with(|l| {
        let mut l = l.borrow_mut();
        if l.flushed_at_ms == 0.0 {
            l.flushed_at_ms = now;
        }
        let due =
            now - l.flushed_at_ms >= f64::from(r.flush_s) * 1e3 || l.outcomes >= r.flush_outcomes;
        let counts = (due && !l.flushing).then(|| {
            l.flushing = true;
            l.flushed_at_ms = now;
            l.outcomes = 0;
            std::mem::take(&mut l.counts)
        });
        let read = r.policy.auto
            && !l.reading
            && (l.read_at_ms == 0.0 || now - l.read_at_ms >= f64::from(r.cache_s) * 1e3);
        if read {
            l.reading = true;
            l.read_at_ms = now;
        }
        (counts, read)
    });
    if let Some(counts) = counts {
        let batch = batch(iso, &counts);
        if batch.is_empty() {
            LIVE.with(|l| l.borrow_mut().flushing = false);
        } else {
            ctx.wait_until(flush(ns.clone(), batch.to_batch().to_string()));
        }
    }
    if read {
        ctx.wait_until(read_setting(ns.clone()));
    }
}

/// The counts as a tally, each arm under the model version that serves it here.
fn batch(iso: &Isolate, counts: &[[Counts; 3]; 3]) -> Tally {
    let mut t = Tally::new();
    for (a, row) in counts.iter().enumerate() {
        let arm = Arm::ALL[a];
        let version = iso.decider_for(arm).model_version();
        for (s, c) in row.iter().enumerate() {
            t.add_counts(arm, version, Source::ALL[s], c);
        }
    }
    t
}

/// A request to the object; `body` makes it a JSON POST. Its answer is read straight from
/// the text into `T`.
async fn call<T: DeserializeOwned>(
    ns: &ObjectNamespace,
    path: &str,
    body: Option<String>,
) -> Result<T, String> {
    let stub = ns.get_by_name(OBJECT_NAME).map_err(|e| e.to_string())?;
    let mut init = RequestInit::new();
    if let Some(body) = body {
        let headers = Headers::new();
        headers
            .set("content-type", "application/json")
            .map_err(|e| e.to_string())?;
        init.with_method(Method::Post)
            .with_headers(headers)
            .with_body(Some(JsValue::from_str(&body)));
    }
    let req = worker::Request::new_with_init(&format!("https://rollout{path}"), &init)
        .map_err(|e| e.to_string())?;
    let mut resp = stub
        .fetch_with_request(req)
        .await
        .map_err(|e| e.to_string())?;
    let status = resp.status_code();
    let text = resp.text().await.map_err(|e| e.to_string())?;
    if !(200..300).contains(&status) {
        return Err(format!("{path} answered {status}: {}", log::clip(&text)));
    }
    serde_json::from_str(&text).map_err(|e| format!("{path} answered non-JSON: {e}"))
}

/// `call` within `ms`.
async fn call_within<T: DeserializeOwned>(
    ns: &ObjectNamespace,
    path: &str,
    body: Option<String>,
    ms: u32,
) -> Result<T, String> {
    js::within(call(ns, path, body), ms)
        .await
        .unwrap_or_else(|| Err(format!("{path}: no answer within {ms} ms")))
}

/// Sends a batch; a failure is logged and the batch is lost.
async fn flush(ns: ObjectNamespace, batch: String) {
    if let Err(e) = call_within::<Value>(&ns, "/flush", Some(batch), IO_MS).await {
        log::event("rollout_flush_failed", json!({"error": log::clip(&e)}));
    }
    LIVE.with(|l| l.borrow_mut().flushing = false);
}

/// What `GET /setting` answers.
#[derive(Deserialize)]
struct SettingAnswer {
    setting: Setting,
    phase: Phase,
}

/// Reads the share; a failure keeps the last one known (or `CHALLENGER_PERCENT`).
async fn read_setting(ns: ObjectNamespace) {
    let read = call_within::<SettingAnswer>(&ns, "/setting", None, IO_MS).await;
    LIVE.with(|l| {
        let mut l = l.borrow_mut();
        l.reading = false;
        match read {
            Ok(a) => l.read = Some((a.setting, a.phase)),
            Err(e) => log::event("rollout_read_failed", json!({"error": log::clip(&e)})),
        }
    });
}

/// One cron run of the judge (with the object bound). The object logs what it did (see
/// [`crate::rollout_store`]); this isolate applies the setting it answers at once.
pub async fn judge(iso: &Isolate) {
    let Some(ns) = &iso.rollout else {
        return;
    };
    match call_within::<SettingAnswer>(ns, "/judge", Some("{}".into()), JUDGE_MS).await {
        Ok(a) => LIVE.with(|l| l.borrow_mut().read = Some((a.setting, a.phase))),
        Err(e) => log::event("rollout_judge_failed", json!({"error": log::clip(&e)})),
    }
}

/// The public part of `/v1/health`: the challenger and its share as this isolate applies
/// them, with no I/O.
pub fn public(iso: &Isolate) -> Value {
    let version = iso.challenger.as_ref().and_then(|d| d.model_version());
    let phase = phase(iso);
    json!({
        "automatic": automatic(iso),
        "challenger_version": version,
        "setting": setting(iso),
        "phase": phase,
        "effective_champion": if phase == Some(Phase::Promoted) { version } else { None },
    })
}

/// The admin part of `/v1/health`: the object's state (phase, step, alarms, history, the
/// last judgement) and windows, or why it could not be read.
pub async fn report(iso: &Isolate) -> Value {
    let mut v = public(iso);
    let Some(ns) = &iso.rollout else {
        v["store"] = json!({"bound": false});
        return v;
    };
    v["store"] = match call_within::<Value>(ns, "/state", None, HEALTH_MS).await {
        Ok(state) => json!({"bound": true, "state": state["state"], "windows": state["windows"]}),
        Err(e) => json!({"bound": true, "error": log::clip(&e)}),
    };
    v
}

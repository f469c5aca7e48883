//! What an isolate derives once from its environment: the checked configuration and the
//! decider it serves with.
//!
//! Vars and bindings do not change within an isolate, and workerd hands every request the
//! same `env` object, so this is built once and kept: at isolate start-up from the
//! importable `env` of `cloudflare:workers` ([`prepare`]), else on the first request; an
//! `env` object never seen before (a test harness, another environment) builds it anew.

use crate::config::{BackendKind, Config, Secret};
use crate::log;
use decider_core::decision_id::DecisionKeys;
use decider_core::rollout::Arm;
use decider_core::{Decider, Model, ModelSource};
use std::cell::RefCell;
use std::rc::Rc;
use std::sync::{Arc, OnceLock};
use wasm_bindgen::JsValue;
use worker::Env;

/// The model artifact's compact form, written to `OUT_DIR` by build.rs after the same
/// validation (or, for a refused artifact built with `DECIDER_ALLOW_INVALID_MODEL=1`, the
/// refusal and its reason).
const MODEL_BYTES: &[u8] = include_bytes!(concat!(env!("OUT_DIR"), "/decision-model.bin"));
/// The challenger's compact form; empty when none was embedded.
const CHALLENGER_BYTES: &[u8] = include_bytes!(concat!(env!("OUT_DIR"), "/challenger.bin"));

static EMBEDDED: OnceLock<Result<Arc<Model>, String>> = OnceLock::new();
static CHALLENGER: OnceLock<Option<Result<Arc<Model>, String>>> = OnceLock::new();

/// The embedded model, read and validated on first use and kept for the isolate's life.
///
/// # Errors
/// Why the artifact was refused (reported by `/v1/health`; decisions fall back to rules).
pub fn embedded() -> Result<&'static Arc<Model>, &'static str> {
    match EMBEDDED.get_or_init(|| load_artifact(MODEL_BYTES)) {
        Ok(m) => Ok(m),
        Err(e) => Err(e.as_str()),
    }
}

/// The embedded challenger model, if one was embedded (read once, like [`embedded`]).
pub fn challenger() -> Option<Result<&'static Arc<Model>, &'static str>> {
    CHALLENGER
        .get_or_init(|| (!CHALLENGER_BYTES.is_empty()).then(|| load_artifact(CHALLENGER_BYTES)))
        .as_ref()
        .map(|r| r.as_ref().map_err(String::as_str))
}

/// Reads a compact model, turning a refusal into the message `/v1/health` shows.
fn load_artifact(bytes: &[u8]) -> Result<Arc<Model>, String> {
    Model::from_compact(bytes)
        .map(Arc::new)
        .map_err(|e| format!("embedded artifact refused: {e}"))
}

/// The configuration and decider of an isolate.
#[derive(Debug)]
pub struct Isolate {
    /// The checked configuration.
    pub cfg: Config,
    /// The champion's decision path.
    pub decider: Decider,
    /// The challenger's, when a challenger model is embedded (embedded backend only).
    pub challenger: Option<Decider>,
    /// The Workers AI binding, when the backend uses it.
    pub ai: Option<worker::Ai>,
    /// The Analytics Engine dataset, when bound.
    pub analytics: Option<worker::AnalyticsEngineDataset>,
    /// The control plane (the `Rollout` object of `workers/rollout`, bound as `ROLLOUT`), when
    /// bound: live counts are kept and flushed to it, and its judge sets the share.
    pub rollout: Option<ControlPlane>,
    /// The keys decision ids are signed and checked with (`DECISION_ID_KEY`); None: ids are
    /// unsigned and no caller outcome is counted live.
    pub keys: Option<DecisionKeys>,
    /// The rate limiter of `POST /v1/outcome` (`OUTCOME_RATE_LIMIT`), when bound.
    pub outcome_limit: Option<JsValue>,
}

/// The binding of the control plane's object.
pub const ROLLOUT_BINDING: &str = "ROLLOUT";

/// The binding of the rate limiter of `POST /v1/outcome`.
pub const OUTCOME_LIMIT_BINDING: &str = "OUTCOME_RATE_LIMIT";

/// The name of the control plane's one object.
const ROLLOUT_OBJECT: &str = "rollout";

/// A binding of `env`, when set.
fn binding(env: &Env, name: &str) -> Option<JsValue> {
    js_sys::Reflect::get(env, &JsValue::from_str(name))
        .ok()
        .filter(|v| v.is_object())
}

/// The control plane's object, through its namespace binding.
#[derive(Debug, Clone)]
pub struct ControlPlane {
    ns: JsValue,
}

impl ControlPlane {
    /// None without the binding.
    fn of(env: &Env) -> Option<ControlPlane> {
        binding(env, ROLLOUT_BINDING).map(|ns| ControlPlane { ns })
    }

    /// A stub of the one object, `ROLLOUT.get(ROLLOUT.idFromName("rollout"))`, for one
    /// request: the runtime ties a stub to the request it was made in, so each request makes
    /// its own (no I/O).
    ///
    /// # Errors
    /// The runtime's words when it refuses.
    pub fn stub(&self) -> Result<JsValue, String> {
        let id =
            crate::js::call_method(&self.ns, "idFromName", &JsValue::from_str(ROLLOUT_OBJECT))?;
        crate::js::call_method(&self.ns, "get", &id)
    }
}

/// The decision id keys of the configuration; a refused key was already reported (and
/// left unset) by the configuration.
fn keys(cfg: &Config) -> Option<DecisionKeys> {
    let current = cfg.decision_id_key.as_ref()?;
    let previous = cfg.decision_id_key_previous.as_ref();
    DecisionKeys::new(current.0.as_bytes(), previous.map(|p| p.0.as_bytes())).ok()
}

/// The version of the challenger model that serves, when one does: an embedded challenger
/// that loaded, with the embedded backend.
pub fn challenger_version(cfg: &Config) -> Option<String> {
    match (cfg.backend, challenger()) {
        (BackendKind::Embedded, Some(Ok(m))) => Some(m.version().to_owned()),
        _ => None,
    }
}

impl Isolate {
    /// Reads every variable, resolves the model backend against the bindings, and builds
    /// the decider.
    fn new(env: &Env) -> Isolate {
        let cfg = Config::from_vars(|name| raw_var(env, name));
        let (model, ai) = match cfg.backend {
            BackendKind::Embedded => match embedded() {
                Ok(m) => (ModelSource::Local(Arc::clone(m)), None),
                Err(e) => (ModelSource::Unavailable(e.to_string()), None),
            },
            BackendKind::WorkersAi if cfg.ai_model.is_empty() => {
                (ModelSource::Unavailable("AI_MODEL is not set".into()), None)
            }
            BackendKind::WorkersAi => match env.ai("AI") {
                Ok(ai) => (
                    ModelSource::Remote {
                        name: cfg.ai_model.clone(),
                        threshold: embedded().ok().map(|m| m.threshold()),
                    },
                    Some(ai),
                ),
                Err(e) => (
                    ModelSource::Unavailable(format!("no usable AI binding: {e}")),
                    None,
                ),
            },
        };
        let decider = Decider::new(model, cfg.rules.clone(), cfg.params.clone());
        // A challenger competes with the embedded champion under the same rules and
        // parameters; without CONFIDENCE_THRESHOLD each uses its own calibrated threshold.
        let challenger = match (cfg.backend, challenger()) {
            (BackendKind::Embedded, Some(m)) => {
                let model = match m {
                    Ok(m) => ModelSource::Local(Arc::clone(m)),
                    Err(e) => ModelSource::Unavailable(format!("challenger: {e}")),
                };
                Some(Decider::new(model, cfg.rules.clone(), cfg.params.clone()))
            }
            _ => None,
        };
        Isolate {
            decider,
            challenger,
            ai,
            analytics: crate::analytics::dataset(env),
            rollout: ControlPlane::of(env),
            keys: keys(&cfg),
            outcome_limit: binding(env, OUTCOME_LIMIT_BINDING),
            cfg,
        }
    }

    /// The decider serving an arm: the challenger's for the challenger arm when there is one,
    /// else the champion's (whose policy puts the holdout arm on rules).
    pub fn decider_for(&self, arm: Arm) -> &Decider {
        match (arm, &self.challenger) {
            (Arm::Challenger, Some(c)) => c,
            _ => &self.decider,
        }
    }

    /// Whether an `Authorization: Bearer …` header carries the admin token.
    pub fn is_admin(&self, authorization: Option<&str>) -> bool {
        self.accepts(bearer_token(authorization), &[&self.cfg.admin_token])
    }

    /// Whether `given` equals one of the configured `tokens`, compared in constant time.
    /// An unset token accepts nothing.
    pub fn accepts(&self, given: Option<&str>, tokens: &[&Option<Secret>]) -> bool {
        let given = given.unwrap_or_default();
        !given.is_empty()
            && tokens.iter().any(|t| {
                t.as_ref()
                    .is_some_and(|t| constant_time_eq(given.as_bytes(), t.0.as_bytes()))
            })
    }
}

/// The setup kept for an `env` object.
struct Kept {
    /// The `env` object it was derived from.
    env: JsValue,
    isolate: Rc<Isolate>,
    /// Whether its configuration errors were logged (by a request: what an isolate logs
    /// while it starts reaches no request's logs).
    reported: bool,
}

thread_local! {
    /// The isolate's setup.
    static CURRENT: RefCell<Option<Kept>> = const { RefCell::new(None) };
}

#[wasm_bindgen::prelude::wasm_bindgen(inline_js = r#"
import { env } from "cloudflare:workers";
export function startup_env() { return env; }
export function same_env(a, b) {
  const keys = Object.keys(a);
  if (keys.length !== Object.keys(b).length) return false;
  for (const k of keys) if (!Object.is(a[k], b[k])) return false;
  return true;
}
"#)]
extern "C" {
    /// The Worker's `env` as `cloudflare:workers` exports it, readable at start-up.
    #[wasm_bindgen(catch)]
    fn startup_env() -> Result<JsValue, JsValue>;
    /// Whether two `env` objects hold the same members, each the same value. workerd's
    /// importable `env` is another object than the one a request is handed, with the same
    /// bindings (the same objects) and the same vars and secrets.
    fn same_env(a: &JsValue, b: &JsValue) -> bool;
}

/// Builds the setup at isolate start-up, when the runtime exports `env` then, so that the
/// first request finds it built. Its configuration errors are logged by the first request
/// that uses it.
pub fn prepare() {
    let Ok(env) = startup_env() else { return };
    if env.is_object() {
        let isolate = Rc::new(Isolate::new(&Env::from(env.clone())));
        keep(env, isolate, false);
    }
}

/// The setup for `env`: kept from start-up or an earlier request with the same `env`
/// (the same object, or one with the same members), else built.
pub fn get(env: &Env) -> Rc<Isolate> {
    let kept = CURRENT.with(|c| {
        let mut c = c.borrow_mut();
        let k = c.as_mut()?;
        if !js_sys::Object::is(&k.env, env) {
            if !same_env(&k.env, env) {
                return None;
            }
            // Later requests, handed this object, find it by identity.
            k.env = JsValue::from(env.clone());
        }
        let first = !std::mem::replace(&mut k.reported, true);
        Some((Rc::clone(&k.isolate), first))
    });
    let (isolate, first) = kept.unwrap_or_else(|| {
        let built = Rc::new(Isolate::new(env));
        keep(JsValue::from(env.clone()), Rc::clone(&built), true);
        (built, true)
    });
    if first {
        log_config_errors(&isolate.cfg);
    }
    isolate
}

/// Keeps `isolate` as the setup of `env`.
fn keep(env: JsValue, isolate: Rc<Isolate>, reported: bool) {
    CURRENT.with(|c| {
        *c.borrow_mut() = Some(Kept {
            env,
            isolate,
            reported,
        });
    });
}

/// Logs each configuration error once per isolate (`config_error` events): the public
/// health document does not show them.
fn log_config_errors(cfg: &Config) {
    for issue in &cfg.errors {
        log::event(
            "config_error",
            serde_json::json!({"var": issue.var, "message": log::clip(&issue.message)}),
        );
    }
}

/// A variable's value as text: strings as they are, other JSON values (a TOML table in
/// `[vars]`, a number) serialised.
pub fn raw_var(env: &Env, name: &str) -> Option<String> {
    let v = js_sys::Reflect::get(env, &JsValue::from_str(name)).ok()?;
    if v.is_undefined() || v.is_null() {
        return None;
    }
    if let Some(s) = v.as_string() {
        return Some(s);
    }
    js_sys::JSON::stringify(&v).ok().and_then(|s| s.as_string())
}

pub use decider_core::auth::{bearer_token, constant_time_eq};

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn embedded_artifact_loads() {
        let m = embedded().unwrap();
        assert!(!m.version().is_empty());
        assert!((0.0..=1.0).contains(&m.threshold()));
    }

    #[test]
    fn refused_artifact_is_reported_not_fatal() {
        let shipped = include_str!("../model/decision-model.json");
        let mut v: serde_json::Value = serde_json::from_str(shipped).unwrap();
        v["actions"] = serde_json::json!(["route_b", "route_a", "route_c", "reject"]);
        // What build.rs embeds for it under DECIDER_ALLOW_INVALID_MODEL=1.
        let (bytes, refused) = decider_core::compact::compile_or_refusal(&v.to_string());
        assert!(refused.is_some());
        let e = load_artifact(&bytes).unwrap_err();
        assert!(e.starts_with("embedded artifact refused: "), "{e}");
        assert!(e.contains("action list"), "{e}");
        let e = load_artifact(b"not a model").unwrap_err();
        assert!(e.contains("magic"), "{e}");
    }
}

//! The model backends and the decision call: await the model, hand the outcome to the core.
//!
//! Two backends (DESIGN §7, issue 3): the artifact embedded at build time, parsed and
//! validated once per isolate, and a Workers AI model raced against a timeout. Neither
//! holds decision logic: they produce a [`ModelOutcome`] and [`decider_core::decide`] does
//! the rest.

use crate::clock;
use crate::config::{BackendKind, Config, DEFAULT_THRESHOLD};
use decider_core::model::FeatureRanges;
use decider_core::policy::{self, ModelError};
use decider_core::{
    decide, encode, Decision, Gates, Inputs, Model, ModelOutcome, ModelOutput, PolicyConfig, State,
    ACTIONS,
};
use futures_util::future::{select, Either};
use serde::Serialize;
use std::sync::OnceLock;
use std::time::Duration;
use wasm_bindgen::JsCast;

/// The model artifact, copied into `OUT_DIR` by build.rs after a schema check.
pub const ARTIFACT_JSON: &str = include_str!(concat!(env!("OUT_DIR"), "/decision-model.json"));

static EMBEDDED: OnceLock<Result<Model, String>> = OnceLock::new();

/// The embedded model, parsed and validated on first use and kept for the isolate's life.
///
/// # Errors
/// Why the artifact was refused (reported by /v1/health; decisions fall back to rules).
pub fn embedded() -> Result<&'static Model, &'static str> {
    match EMBEDDED.get_or_init(|| load_artifact(ARTIFACT_JSON)) {
        Ok(m) => Ok(m),
        Err(e) => Err(e.as_str()),
    }
}

/// Parses an artifact, turning a refusal into the message /v1/health shows.
///
/// # Errors
/// The artifact error, prefixed with what was being loaded.
pub fn load_artifact(text: &str) -> Result<Model, String> {
    Model::from_json(text).map_err(|e| format!("embedded artifact refused: {e}"))
}

/// The model a request is decided with.
#[derive(Debug)]
pub enum ModelHandle {
    /// The embedded artifact.
    Embedded(&'static Model),
    /// Workers AI through the `AI` binding.
    WorkersAi(worker::Ai),
    /// No usable model, and why.
    Unavailable(String),
}

/// Input of a Workers AI call: the encoded features and the action space they index.
#[derive(Debug, Serialize)]
struct AiInput<'a> {
    features: &'a [f64],
    action_space: &'a [&'a str],
}

/// A model call's outcome plus the internal detail worth logging (never sent to clients).
#[derive(Debug)]
pub struct Outcome {
    /// What the policy sees.
    pub outcome: ModelOutcome,
    /// Backend error text, for the log.
    pub detail: Option<String>,
}

/// Everything needed to decide one request: configuration and the resolved model.
#[derive(Debug)]
pub struct Engine<'a> {
    /// The validated configuration.
    pub cfg: &'a Config,
    /// The model in use.
    pub model: ModelHandle,
}

/// Where the threshold in force comes from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ThresholdSource {
    /// `CONFIDENCE_THRESHOLD`.
    Config,
    /// The embedded artifact's calibrated threshold.
    Artifact,
    /// [`DEFAULT_THRESHOLD`] (no override, no loadable artifact).
    Default,
}

impl ThresholdSource {
    /// Wire name.
    pub fn name(self) -> &'static str {
        match self {
            ThresholdSource::Config => "config",
            ThresholdSource::Artifact => "artifact",
            ThresholdSource::Default => "default",
        }
    }
}

/// The threshold in force: the override, else the artifact's, else the default.
/// The Workers AI backend also uses the artifact's threshold unless overridden, since the
/// remote model is expected to be the same trained model.
pub fn threshold(cfg: &Config, artifact: Option<&Model>) -> (f64, ThresholdSource) {
    match (cfg.threshold_override, artifact) {
        (Some(t), _) => (t, ThresholdSource::Config),
        (None, Some(m)) => (m.threshold(), ThresholdSource::Artifact),
        (None, None) => (DEFAULT_THRESHOLD, ThresholdSource::Default),
    }
}

impl<'a> Engine<'a> {
    /// Resolves the configured backend against the environment.
    pub fn new(cfg: &'a Config, env: &worker::Env) -> Engine<'a> {
        let model = match cfg.backend {
            BackendKind::Embedded => match embedded() {
                Ok(m) => ModelHandle::Embedded(m),
                Err(e) => ModelHandle::Unavailable(e.to_string()),
            },
            BackendKind::WorkersAi if cfg.ai_model.is_empty() => {
                ModelHandle::Unavailable("AI_MODEL is not set".into())
            }
            BackendKind::WorkersAi => match env.ai("AI") {
                Ok(ai) => ModelHandle::WorkersAi(ai),
                Err(e) => ModelHandle::Unavailable(format!("no usable AI binding: {e}")),
            },
        };
        Engine { cfg, model }
    }

    /// The policy configuration in force.
    pub fn policy(&self) -> PolicyConfig {
        PolicyConfig {
            threshold: threshold(self.cfg, embedded().ok()).0,
            default_action: self.cfg.default_action,
            ood_check: self.cfg.ood_check,
            shadow: self.cfg.shadow,
        }
    }

    /// The model version decisions report.
    pub fn model_version(&self) -> Option<&str> {
        match &self.model {
            ModelHandle::Embedded(m) => Some(m.version()),
            ModelHandle::WorkersAi(_) => Some(self.cfg.ai_model.as_str()),
            ModelHandle::Unavailable(_) => None,
        }
    }

    fn ranges(&self) -> Option<&'static FeatureRanges> {
        match &self.model {
            // Training ranges are known for the embedded artifact only.
            ModelHandle::Embedded(m) => Some(m.ranges()),
            _ => None,
        }
    }

    /// Runs the model on a state.
    pub async fn infer(&self, state: &State) -> Outcome {
        match &self.model {
            ModelHandle::Embedded(m) => match m.outcome(state) {
                ModelOutcome::Error(e) => errored(e),
                outcome => Outcome {
                    outcome,
                    detail: None,
                },
            },
            ModelHandle::Unavailable(why) => Outcome {
                outcome: ModelOutcome::Unavailable,
                detail: Some(why.clone()),
            },
            ModelHandle::WorkersAi(ai) => {
                let features = encode(state);
                let input = AiInput {
                    features: &features,
                    action_space: &ACTIONS,
                };
                let call = run_ai(ai, &self.cfg.ai_model, &input);
                let timer =
                    worker::Delay::from(Duration::from_millis(u64::from(self.cfg.ai_timeout_ms)));
                futures_util::pin_mut!(call);
                match select(call, timer).await {
                    Either::Left((Ok(v), _)) => match ModelOutput::from_remote_json(&v) {
                        Ok(o) => Outcome {
                            outcome: ModelOutcome::Output(o),
                            detail: None,
                        },
                        Err(e) => errored(e),
                    },
                    Either::Left((Err(e), _)) => errored(ModelError::Backend(e)),
                    Either::Right(((), _)) => Outcome {
                        outcome: ModelOutcome::Timeout,
                        detail: Some(format!(
                            "no answer within AI_TIMEOUT_MS={}",
                            self.cfg.ai_timeout_ms
                        )),
                    },
                }
            }
        }
    }

    /// Decides a state under the given gates: runs the model only when the policy needs
    /// it, then hands everything to the core. Fills in `decision_us`.
    pub async fn decide(&self, state: &State, gates: Gates) -> (Decision, Option<String>) {
        let started = clock::now_ms();
        let policy = self.policy();
        let out = if policy::model_needed(gates, &policy) {
            self.infer(state).await
        } else {
            Outcome {
                outcome: ModelOutcome::NotRun,
                detail: None,
            }
        };
        let mut d = decide(
            Inputs {
                state,
                outcome: &out.outcome,
                gates,
                rules: self.cfg.rules.as_ref(),
                ranges: self.ranges(),
                model_version: self.model_version(),
            },
            &policy,
        );
        d.decision_us = clock::elapsed_us(started);
        (d, out.detail)
    }
}

fn errored(e: ModelError) -> Outcome {
    Outcome {
        detail: Some(clip(e.to_string(), MAX_DETAIL_BYTES)),
        outcome: ModelOutcome::Error(e),
    }
}

/// Longest backend error text kept for the log line (a 4 MiB error message must not become
/// a 4 MiB log line per request).
pub const MAX_DETAIL_BYTES: usize = 512;

/// Largest Workers AI answer accepted, as JSON text. A real answer is a few hundred bytes.
pub const MAX_AI_ANSWER_BYTES: usize = 32 << 20;

/// `s` cut to at most `max` bytes on a character boundary, marked when cut.
pub fn clip(mut s: String, max: usize) -> String {
    if s.len() > max {
        let mut end = max;
        while !s.is_char_boundary(end) {
            end -= 1;
        }
        s.truncate(end);
        s.push_str("…[truncated]");
    }
    s
}

/// The first line of a JavaScript error's text (no stack trace), clipped.
pub fn js_error_text(e: &wasm_bindgen::JsValue) -> String {
    let text = e
        .dyn_ref::<js_sys::Error>()
        .map(|err| String::from(err.message()))
        .or_else(|| e.as_string())
        .unwrap_or_else(|| format!("{e:?}"));
    clip(
        text.lines().next().unwrap_or_default().to_string(),
        MAX_DETAIL_BYTES,
    )
}

/// Calls `env.AI.run(model, input)` and returns its answer as a JSON value.
///
/// Not `worker::Ai::run`: that converts the answer with serde-wasm-bindgen, which recurses
/// without a depth limit (a 100 000-deep answer traps the wasm) and lets a throwing getter
/// unwind through the conversion. Here the answer goes through `JSON.stringify` on the JS
/// side, which reports cycles, BigInt, throwing getters and excessive depth as ordinary
/// errors, then through serde_json with its nesting limit.
///
/// # Errors
/// The backend's error, or why its answer is unusable, as text for the log.
async fn run_ai(
    ai: &worker::Ai,
    model: &str,
    input: &AiInput<'_>,
) -> Result<serde_json::Value, String> {
    let this: &wasm_bindgen::JsValue = ai.as_ref();
    let run = js_sys::Reflect::get(this, &"run".into())
        .map_err(|e| js_error_text(&e))?
        .dyn_into::<js_sys::Function>()
        .map_err(|_| "AI binding has no run method".to_string())?;
    let input_json = serde_json::to_string(input).map_err(|e| e.to_string())?;
    let input = js_sys::JSON::parse(&input_json).map_err(|e| js_error_text(&e))?;
    let pending = run
        .call2(this, &model.into(), &input)
        .map_err(|e| js_error_text(&e))?;
    let answer = js_sys::futures::JsFuture::from(js_sys::Promise::resolve(&pending))
        .await
        .map_err(|e| js_error_text(&e))?;
    let text = js_sys::JSON::stringify(&answer)
        .map_err(|e| format!("answer is not serialisable: {}", js_error_text(&e)))?
        .as_string()
        .ok_or_else(|| "answer is not a JSON value (undefined or a function)".to_string())?;
    if text.len() > MAX_AI_ANSWER_BYTES {
        return Err(format!(
            "answer is {} bytes, more than {MAX_AI_ANSWER_BYTES}",
            text.len()
        ));
    }
    serde_json::from_str(&text).map_err(|e| format!("answer is not usable JSON: {e}"))
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    /// Regression (fault table: "ai: binding throws an Error with a 4 MiB message"): backend
    /// error text is clipped before it reaches the log.
    #[test]
    fn regression_huge_backend_error_is_clipped() {
        let huge = "é".repeat(2 << 20);
        let c = clip(huge, MAX_DETAIL_BYTES);
        assert!(c.len() <= MAX_DETAIL_BYTES + "…[truncated]".len());
        assert!(c.ends_with("…[truncated]"));
        assert_eq!(clip("short".into(), MAX_DETAIL_BYTES), "short");
        let d = errored(ModelError::Backend("x".repeat(1 << 20)))
            .detail
            .unwrap();
        assert!(d.len() < 1024, "{}", d.len());
    }

    fn cfg(pairs: &[(&str, &str)]) -> Config {
        Config::from_pairs(pairs)
    }

    #[test]
    fn embedded_artifact_loads() {
        let m = embedded().unwrap();
        assert!(!m.version().is_empty());
        assert!((0.0..=1.0).contains(&m.threshold()));
    }

    #[test]
    fn refused_artifact_is_reported_not_fatal() {
        let mut v: serde_json::Value = serde_json::from_str(ARTIFACT_JSON).unwrap();
        v["actions"] = serde_json::json!(["route_b", "route_a", "route_c", "reject"]);
        let e = load_artifact(&v.to_string()).unwrap_err();
        assert!(e.starts_with("embedded artifact refused: "), "{e}");
        assert!(e.contains("action list"), "{e}");
        assert!(load_artifact("not json").is_err());
    }

    #[test]
    fn threshold_precedence() {
        let m = embedded().unwrap();
        assert_eq!(
            threshold(&cfg(&[("CONFIDENCE_THRESHOLD", "0.55")]), Some(m)),
            (0.55, ThresholdSource::Config)
        );
        assert_eq!(
            threshold(&cfg(&[]), Some(m)),
            (m.threshold(), ThresholdSource::Artifact)
        );
        assert_eq!(
            threshold(&cfg(&[]), None),
            (DEFAULT_THRESHOLD, ThresholdSource::Default)
        );
    }

    #[test]
    fn ai_input_shape() {
        let x = [0.5; 16];
        let v = serde_json::to_value(AiInput {
            features: &x,
            action_space: &ACTIONS,
        })
        .unwrap();
        assert_eq!(v["features"].as_array().unwrap().len(), 16);
        assert_eq!(v["action_space"], serde_json::json!(ACTIONS));
    }
}

//! The Workers AI backend: one model call, raced against `AI_TIMEOUT_MS`, turned into a
//! [`ModelOutcome`] for the decider.

use crate::config::Config;
use crate::js::{self, error_text};
use crate::log::clip;
use decider_core::{encode, ModelError, ModelOutcome, ModelOutput, State, ACTIONS};
use serde::Serialize;
use wasm_bindgen::{JsCast, JsValue};

/// Largest Workers AI answer accepted, as JSON text. A real answer is a few hundred bytes.
const MAX_AI_ANSWER_BYTES: usize = 32 << 20;

/// Input of a Workers AI call: the state (what a hosted decision model takes), its encoded
/// features, and the action space both index.
#[derive(Debug, Serialize)]
struct AiInput<'a> {
    state: &'a State,
    features: &'a [f64],
    action_space: &'a [&'a str],
}

/// Runs the remote model on a state. Returns the outcome and, when it failed, the detail
/// worth logging (never sent to clients).
pub async fn infer(ai: &worker::Ai, cfg: &Config, state: &State) -> (ModelOutcome, Option<String>) {
    let features = encode(state);
    let input = AiInput {
        state,
        features: &features,
        action_space: &ACTIONS,
    };
    let call = run(ai, &cfg.ai_model, &input, cfg.ai_gateway.as_deref());
    let failed = |e: ModelError| {
        let detail = clip(&e.to_string());
        (ModelOutcome::Error(e), Some(detail))
    };
    match js::within(call, cfg.ai_timeout_ms).await {
        Some(Ok(v)) => match ModelOutput::from_remote_json(&v) {
            Ok(o) => (ModelOutcome::Output(o), None),
            Err(e) => failed(e),
        },
        Some(Err(e)) => failed(ModelError::Backend(e)),
        None => (
            ModelOutcome::Timeout,
            Some(format!(
                "no answer within AI_TIMEOUT_MS={}",
                cfg.ai_timeout_ms
            )),
        ),
    }
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
async fn run(
    ai: &worker::Ai,
    model: &str,
    input: &AiInput<'_>,
    gateway: Option<&str>,
) -> Result<serde_json::Value, String> {
    let this: &JsValue = ai.as_ref();
    let run = js_sys::Reflect::get(this, &"run".into())
        .map_err(|e| error_text(&e))?
        .dyn_into::<js_sys::Function>()
        .map_err(|_| "AI binding has no run method".to_string())?;
    let input_json = serde_json::to_string(input).map_err(|e| e.to_string())?;
    let input = js_sys::JSON::parse(&input_json).map_err(|e| error_text(&e))?;
    let pending = match gateway {
        None => run.call2(this, &model.into(), &input),
        Some(id) => {
            let options =
                js_sys::JSON::parse(&serde_json::json!({"gateway": {"id": id}}).to_string())
                    .map_err(|e| error_text(&e))?;
            run.call3(this, &model.into(), &input, &options)
        }
    }
    .map_err(|e| error_text(&e))?;
    let answer = js::settle(js_sys::Promise::resolve(&pending)).await?;
    let text = js_sys::JSON::stringify(&answer)
        .map_err(|e| format!("answer is not serialisable: {}", error_text(&e)))?
        .as_string()
        .ok_or_else(|| "answer is not a JSON value (undefined or a function)".to_string())?;
    if text.len() > MAX_AI_ANSWER_BYTES {
        return Err(format!(
            "answer is {} bytes, more than {MAX_AI_ANSWER_BYTES}",
            text.len()
        ));
    }
    serde_json::from_slice(text.as_bytes()).map_err(|e| format!("answer is not usable JSON: {e}"))
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn ai_input_shape() {
        let s = State {
            request_type: 1,
            region_id: 3,
            current_load: 0.4,
            recent_success_rate: 0.97,
            queue_depth: 12.0,
            hour: 14,
        };
        let x = encode(&s);
        let v = serde_json::to_value(AiInput {
            state: &s,
            features: &x,
            action_space: &ACTIONS,
        })
        .unwrap();
        assert_eq!(v["features"].as_array().unwrap().len(), 16);
        assert_eq!(v["action_space"], serde_json::json!(ACTIONS));
        assert_eq!(v["state"]["region_id"], 3);
    }
}

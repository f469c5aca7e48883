//! What a model answered: a checked probability vector or top action, or why there is no
//! usable answer.
//!
//! Every backend ends here: the embedded model's probabilities, a remote model's JSON
//! answer, an error, a timeout. The policy only ever sees a [`ModelOutcome`], so a model
//! that answers garbage is a fallback, never a decision.

use crate::actions::{Action, NUM_ACTIONS};
use crate::features::encode;
use crate::json::json_type;
use crate::model::{argmax, Model, Probabilities};
use crate::state::State;
use serde_json::Value;
use thiserror::Error;

/// Why a model output could not be used.
#[derive(Debug, Clone, PartialEq, Error)]
pub enum ModelError {
    /// A probability or confidence is NaN or infinite.
    #[error("model output holds a non-finite number ({0})")]
    NonFinite(String),
    /// Output does not have the expected shape.
    #[error("malformed model output: {0}")]
    Malformed(String),
    /// The backend raised an error.
    #[error("model backend failed: {0}")]
    Backend(String),
}

/// A usable model output.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct ModelOutput {
    /// The model's top action.
    pub action: Action,
    /// Its calibrated confidence, in `[0, 1]`.
    pub confidence: f64,
    /// Probabilities per action when the backend gives them.
    pub probabilities: Option<Probabilities>,
}

impl ModelOutput {
    /// From a probability vector: checked finite, non-negative and summing to 1 within 1e-3
    /// (then renormalised exactly).
    ///
    /// # Errors
    /// [`ModelError`] when the vector cannot be trusted.
    pub fn from_probabilities(p: Probabilities) -> Result<ModelOutput, ModelError> {
        if let Some(i) = p.iter().position(|v| !v.is_finite()) {
            return Err(ModelError::NonFinite(format!(
                "probability of {}",
                Action::ALL[i]
            )));
        }
        if p.iter().any(|&v| v < 0.0) {
            return Err(ModelError::Malformed("negative probability".into()));
        }
        let sum: f64 = p.iter().sum();
        if (sum - 1.0).abs() > 1e-3 {
            return Err(ModelError::Malformed(format!(
                "probabilities sum to {sum}, not 1"
            )));
        }
        let mut q = p;
        q.iter_mut().for_each(|v| *v /= sum);
        let (action, confidence) = argmax(&q);
        Ok(ModelOutput {
            action,
            confidence,
            probabilities: Some(q),
        })
    }

    /// From a top action and its confidence.
    ///
    /// # Errors
    /// [`ModelError`] for a non-finite or out-of-range confidence.
    pub fn from_action(action: Action, confidence: f64) -> Result<ModelOutput, ModelError> {
        if !confidence.is_finite() {
            return Err(ModelError::NonFinite("confidence".into()));
        }
        if !(0.0..=1.0).contains(&confidence) {
            return Err(ModelError::Malformed(format!(
                "confidence must be 0..=1, got {confidence}"
            )));
        }
        Ok(ModelOutput {
            action,
            confidence,
            probabilities: None,
        })
    }

    /// Interprets a remote model's JSON answer (the Workers AI backend). Accepted shapes,
    /// also when wrapped in `{"result": …}`:
    /// `{"action": "route_b", "confidence": 0.93}`,
    /// `{"probabilities": {"route_a": 0.1, …}}` (every action present),
    /// `{"probabilities": [0.1, 0.7, 0.1, 0.1]}` (action order), or a bare array of 4.
    ///
    /// # Errors
    /// [`ModelError`] for anything else, unknown actions, or non-finite numbers.
    pub fn from_remote_json(v: &Value) -> Result<ModelOutput, ModelError> {
        let v = v
            .get("result")
            .filter(|r| r.is_object() || r.is_array())
            .unwrap_or(v);
        if let Some(arr) = v.as_array() {
            return Self::from_probabilities(prob_array(arr)?);
        }
        let Some(obj) = v.as_object() else {
            return Err(ModelError::Malformed(format!(
                "expected an object, got {}",
                json_type(v)
            )));
        };
        if let Some(p) = obj.get("probabilities") {
            let probs = match p {
                Value::Array(arr) => prob_array(arr)?,
                Value::Object(map) => {
                    let mut out = [0.0; NUM_ACTIONS];
                    if let Some(k) = map.keys().find(|k| Action::parse_name(k).is_none()) {
                        return Err(ModelError::Malformed(format!(
                            "unknown action {k:?} in probabilities"
                        )));
                    }
                    for a in Action::ALL {
                        out[a.index()] = number(map.get(a.name()), a.name())?;
                    }
                    out
                }
                other => {
                    return Err(ModelError::Malformed(format!(
                        "probabilities must be an array or object, got {}",
                        json_type(other)
                    )))
                }
            };
            return Self::from_probabilities(probs);
        }
        let action = obj.get("action").ok_or_else(|| {
            ModelError::Malformed("neither action nor probabilities present".into())
        })?;
        let name = action
            .as_str()
            .ok_or_else(|| ModelError::Malformed("action must be a string".into()))?;
        let action = Action::parse_name(name)
            .ok_or_else(|| ModelError::Malformed(format!("unknown action {name:?}")))?;
        Self::from_action(action, number(obj.get("confidence"), "confidence")?)
    }
}

fn number(v: Option<&Value>, what: &str) -> Result<f64, ModelError> {
    match v {
        None => Err(ModelError::Malformed(format!("{what} missing"))),
        // serde_json maps NaN/Infinity to null when a JS value is converted.
        Some(Value::Null) => Err(ModelError::NonFinite(what.to_string())),
        Some(Value::Number(n)) => n
            .as_f64()
            .ok_or_else(|| ModelError::NonFinite(what.to_string())),
        Some(other) => Err(ModelError::Malformed(format!(
            "{what} must be a number, got {}",
            json_type(other)
        ))),
    }
}

fn prob_array(arr: &[Value]) -> Result<Probabilities, ModelError> {
    if arr.len() != NUM_ACTIONS {
        return Err(ModelError::Malformed(format!(
            "expected {NUM_ACTIONS} probabilities, got {}",
            arr.len()
        )));
    }
    let mut out = [0.0; NUM_ACTIONS];
    for (i, v) in arr.iter().enumerate() {
        out[i] = number(Some(v), Action::ALL[i].name())?;
    }
    Ok(out)
}

/// What became of the model call.
#[derive(Debug, Clone, PartialEq)]
pub enum ModelOutcome {
    /// A usable answer.
    Output(ModelOutput),
    /// The backend failed or answered garbage.
    Error(ModelError),
    /// The backend did not answer in time.
    Timeout,
    /// No model to ask (why is reported elsewhere, e.g. /v1/health).
    Unavailable,
    /// The model was not consulted (the gates made it unnecessary).
    NotRun,
}

impl ModelOutcome {
    /// Runs a model in memory on a state: encode, predict, check the probabilities.
    pub fn of_model(model: &Model, s: &State) -> ModelOutcome {
        match ModelOutput::from_probabilities(model.predict(&encode(s))) {
            Ok(o) => ModelOutcome::Output(o),
            Err(e) => ModelOutcome::Error(e),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn remote_outputs() {
        let ok = |v: Value| ModelOutput::from_remote_json(&v);
        assert_eq!(
            ok(json!({"action": "route_b", "confidence": 0.9}))
                .unwrap()
                .action,
            Action::RouteB
        );
        let p = ok(json!({"probabilities": {"route_a": 0.1, "route_b": 0.2, "route_c": 0.6, "reject": 0.1}})).unwrap();
        assert_eq!((p.action, p.confidence), (Action::RouteC, 0.6));
        assert_eq!(
            ok(json!({"result": [0.7, 0.1, 0.1, 0.1]})).unwrap().action,
            Action::RouteA
        );
        for bad in [
            json!({"action": "route_d", "confidence": 0.9}),
            json!({"action": "route_a", "confidence": null}),
            json!({"action": "route_a", "confidence": 1.5}),
            json!({"action": "route_a"}),
            json!({"probabilities": [0.5, 0.5]}),
            json!({"probabilities": [0.9, 0.9, 0.1, 0.1]}),
            json!({"probabilities": {"route_a": 1.0}}),
            json!("route_a"),
            json!(null),
        ] {
            assert!(ok(bad.clone()).is_err(), "{bad}");
        }
        assert!(matches!(
            ModelOutput::from_probabilities([f64::NAN, 0.0, 0.0, 1.0]),
            Err(ModelError::NonFinite(_))
        ));
    }
}

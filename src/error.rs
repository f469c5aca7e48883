//! The one place where errors become HTTP statuses and JSON bodies.
//!
//! Every client error is `{"error": {"code", "message", "field"}}` with a 4xx status;
//! internal details (JS exceptions, backend messages) go to the log, never to the client.

use decider_core::StateError;
use serde_json::{json, Value};

/// An error answered to the client.
#[derive(Debug, Clone, PartialEq)]
pub struct ApiError {
    /// HTTP status.
    pub status: u16,
    /// Stable machine-readable code.
    pub code: &'static str,
    /// Human-readable message (no internals).
    pub message: String,
    /// The offending field, when there is one (`state.region_id`).
    pub field: Option<String>,
    /// `(line, column)` of malformed JSON.
    pub position: Option<(usize, usize)>,
    /// Value of the `Allow` header (405).
    pub allow: Option<&'static str>,
    /// Value of the `Retry-After` header, in seconds.
    pub retry_after: Option<u32>,
}

impl ApiError {
    /// An error with a status, code and message.
    pub fn new(status: u16, code: &'static str, message: impl Into<String>) -> ApiError {
        ApiError {
            status,
            code,
            message: message.into(),
            field: None,
            position: None,
            allow: None,
            retry_after: None,
        }
    }

    /// 404 for an unknown path.
    pub fn not_found(path: &str) -> ApiError {
        ApiError::new(404, "not_found", format!("no route for {path}"))
    }

    /// 405 with the `Allow` header.
    pub fn method_not_allowed(method: &str, allow: &'static str) -> ApiError {
        ApiError {
            allow: Some(allow),
            ..ApiError::new(
                405,
                "method_not_allowed",
                format!("method {method} is not allowed here; allowed: {allow}"),
            )
        }
    }

    /// 415 for a body that is not declared as JSON.
    pub fn unsupported_media_type(got: Option<&str>) -> ApiError {
        let got = got.map_or_else(|| "none".to_string(), |g| format!("{g:?}"));
        ApiError::new(
            415,
            "unsupported_media_type",
            format!("content-type must be application/json, got {got}"),
        )
    }

    /// 413 for a body over the limit.
    pub fn payload_too_large(limit: usize) -> ApiError {
        ApiError::new(
            413,
            "payload_too_large",
            format!("body must be at most {limit} bytes"),
        )
    }

    /// 401 for a missing or wrong bearer token.
    pub fn unauthorized() -> ApiError {
        ApiError::new(
            401,
            "unauthorized",
            "a valid Authorization: Bearer token is required",
        )
    }

    /// 500 for an internal failure; the detail is logged by the caller, not sent.
    pub fn internal() -> ApiError {
        ApiError::new(500, "internal", "internal error")
    }

    /// The same error naming a field.
    pub fn with_field(mut self, field: impl Into<String>) -> ApiError {
        self.field = Some(field.into());
        self
    }

    /// The JSON body.
    pub fn body(&self) -> Value {
        let mut e = json!({"code": self.code, "message": self.message, "field": self.field});
        if let Some((line, column)) = self.position {
            e["line"] = json!(line);
            e["column"] = json!(column);
        }
        json!({ "error": e })
    }
}

impl From<StateError> for ApiError {
    /// A state or signals validation error: 400 naming the field.
    fn from(e: StateError) -> ApiError {
        let field = match &e {
            // `within("state")` leaves these unprefixed; the object itself is the field.
            StateError::NotObject { what, .. } => Some((*what).to_string()),
            other => other.field().map(str::to_string),
        };
        let position = match &e {
            StateError::Json { line, column, .. } => Some((*line, *column)),
            _ => None,
        };
        ApiError {
            field,
            position,
            ..ApiError::new(400, e.code(), e.to_string())
        }
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use decider_core::State;

    #[test]
    fn state_errors_are_400_naming_the_field() {
        let e = State::from_value(&json!({"request_type": 9}), 0)
            .unwrap_err()
            .within("state");
        let a = ApiError::from(e);
        assert_eq!(a.status, 400);
        assert_eq!(a.code, "out_of_range");
        assert_eq!(a.field.as_deref(), Some("state.request_type"));
        assert_eq!(a.body()["error"]["field"], "state.request_type");
    }

    #[test]
    fn not_an_object_names_the_object() {
        let e = State::from_value(&json!([1, 2]), 0).unwrap_err();
        let a = ApiError::from(e.within("state"));
        assert_eq!(
            (a.code, a.field.as_deref()),
            ("invalid_type", Some("state"))
        );
    }

    #[test]
    fn malformed_json_keeps_its_position() {
        let e = serde_json::from_str::<Value>("{\n  \"state\": nope}").unwrap_err();
        let a = ApiError::from(StateError::from_serde(&e));
        assert_eq!((a.status, a.code), (400, "invalid_json"));
        assert_eq!(a.position, Some((2, 13)));
        let b = a.body();
        assert_eq!(
            (b["error"]["line"].clone(), b["error"]["column"].clone()),
            (json!(2), json!(13))
        );
        assert!(
            !a.message.contains(" at line 2 column 13 at"),
            "{}",
            a.message
        );
        assert!(a.message.contains("line 2 column 13"), "{}", a.message);
    }

    #[test]
    fn method_not_allowed_carries_allow() {
        let a = ApiError::method_not_allowed("PUT", "POST");
        assert_eq!((a.status, a.allow), (405, Some("POST")));
        assert_eq!(a.body()["error"]["field"], Value::Null);
    }
}

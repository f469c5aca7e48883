//! The one place where errors become HTTP statuses and JSON bodies.
//!
//! Every client error is `{"error": {"code", "message", "field"}}` with a 4xx status;
//! internal details (JS exceptions, backend messages) go to the log, never to the client.

use crate::log::{clip_to, ECHO_BYTES};
use decider_core::FieldError;
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

    /// 404 for an unknown path (at most [`ECHO_BYTES`] of it).
    pub fn not_found(path: &str) -> ApiError {
        ApiError::new(
            404,
            "not_found",
            format!("no route for {}", clip_to(path, ECHO_BYTES)),
        )
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

    /// 415 for a body that is not declared as JSON (quoting at most [`ECHO_BYTES`] of what
    /// was).
    pub fn unsupported_media_type(got: Option<&str>) -> ApiError {
        let got = got.map_or_else(
            || "none".to_string(),
            |g| format!("{:?}", clip_to(g, ECHO_BYTES)),
        );
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

    /// 429 with `Retry-After`: a caller sends more than its token may.
    pub fn too_many_requests(what: &str, retry_after_s: u32) -> ApiError {
        ApiError {
            retry_after: Some(retry_after_s),
            ..ApiError::new(
                429,
                "rate_limited",
                format!("too many {what} for this token; retry after {retry_after_s} s"),
            )
        }
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

impl From<FieldError> for ApiError {
    /// A body validation error (state, signals, outcome): 400 naming the field. An unknown
    /// field's name and a key given twice are the client's text: quoted at most
    /// [`ECHO_BYTES`] long (message and field).
    fn from(e: FieldError) -> ApiError {
        let e = match e {
            FieldError::Unknown { field, expected } => FieldError::Unknown {
                field: clip_to(&field, ECHO_BYTES),
                expected,
            },
            FieldError::Duplicate { field } => FieldError::Duplicate {
                field: clip_to(&field, ECHO_BYTES),
            },
            other => other,
        };
        let field = match &e {
            // `within("state")` leaves these unprefixed; the object itself is the field.
            FieldError::NotObject { what, .. } => Some((*what).to_string()),
            other => other.field().map(str::to_string),
        };
        let position = match &e {
            FieldError::Json { line, column, .. } => Some((*line, *column)),
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
        let a = ApiError::from(FieldError::from_serde(&e));
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

    /// Regression: a 404, a 415 and an unknown field quoted the client's text whole (an
    /// 8 KB path, content type or key became an 8 KB message, twice for the key).
    #[test]
    fn regression_client_text_in_errors_is_clipped() {
        let long = "p".repeat(8192);
        let a = ApiError::not_found(&format!("/v1/{long}"));
        assert!(
            a.message.len() <= "no route for ".len() + ECHO_BYTES + 16,
            "{}",
            a.message
        );
        let a = ApiError::unsupported_media_type(Some(&format!("text/{long}")));
        assert!(a.message.len() <= 200, "{}", a.message);
        assert!(a.message.ends_with("…[truncated]\""), "{}", a.message);
        // An unknown key, and a key given twice: the client's text either way.
        for (members, code) in [
            (format!("\"{long}\": 1"), "unknown_field"),
            (format!("\"{long}\": 1, \"{long}\": 2"), "duplicate_field"),
        ] {
            let body = format!("{{\"state\": {{{members}}}}}");
            let a = ApiError::from(State::from_body(body.as_bytes(), 0).unwrap_err());
            assert_eq!(a.code, code);
            let field = a.field.clone().unwrap();
            assert!(field.len() <= ECHO_BYTES + 16, "{field}");
            assert!(field.starts_with("state.ppp"), "{field}");
            assert!(a.message.len() <= 300, "{}", a.message);
        }
        // Short names are quoted as they are.
        let a = ApiError::from(State::from_body(br#"{"state": {"zone": 1}}"#, 0).unwrap_err());
        assert_eq!(a.field.as_deref(), Some("state.zone"));
    }

    /// Control characters in a quoted content type are escaped, not written raw.
    #[test]
    fn quoted_content_type_is_escaped() {
        let a = ApiError::unsupported_media_type(Some("text/x\n\"y"));
        assert!(a.message.ends_with(r#""text/x\n\"y""#), "{}", a.message);
    }

    #[test]
    fn method_not_allowed_carries_allow() {
        let a = ApiError::method_not_allowed("PUT", "POST");
        assert_eq!((a.status, a.allow), (405, Some("POST")));
        assert_eq!(a.body()["error"]["field"], Value::Null);
    }
}

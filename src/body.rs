//! Request bodies of the JSON API: content type, size limit, the `{"state": {…}}` envelope.
//!
//! Pure functions over bytes and header values; the Worker glue that reads the stream
//! lives in [`crate::http`].

use crate::error::ApiError;
use decider_core::State;
use serde_json::Value;

/// Largest accepted request body of the JSON API, in bytes.
pub const MAX_BODY_BYTES: usize = 16 * 1024;

/// Checks that a `content-type` header declares JSON (`application/json`, any parameters).
///
/// # Errors
/// 415 naming what was sent.
pub fn check_json_content_type(content_type: Option<&str>) -> Result<(), ApiError> {
    let is_json = content_type.is_some_and(|ct| {
        ct.split(';')
            .next()
            .is_some_and(|m| m.trim().eq_ignore_ascii_case("application/json"))
    });
    if is_json {
        Ok(())
    } else {
        Err(ApiError::unsupported_media_type(content_type))
    }
}

/// Checks a declared `content-length` against [`MAX_BODY_BYTES`] before reading anything.
///
/// # Errors
/// 413 when the declared length is over the limit.
pub fn check_declared_length(content_length: Option<&str>) -> Result<(), ApiError> {
    match content_length.and_then(|v| v.trim().parse::<u64>().ok()) {
        Some(n) if n > MAX_BODY_BYTES as u64 => Err(ApiError::payload_too_large(MAX_BODY_BYTES)),
        _ => Ok(()),
    }
}

/// Parses bytes as a JSON value, reporting the position of malformed input.
///
/// # Errors
/// 400 `invalid_json` with line and column.
pub fn parse_json(bytes: &[u8]) -> Result<Value, ApiError> {
    serde_json::from_slice(bytes)
        .map_err(|e| ApiError::from(decider_core::StateError::from_serde(&e)))
}

/// Validates a decision request body `{"state": {…}}` (no other keys) into a [`State`].
/// `default_hour` (the current UTC hour) fills an absent `hour`. The core reads a valid
/// body without building a JSON tree ([`State::from_body`]).
///
/// # Errors
/// 400 naming the field: `state.region_id`, `state`, or an unknown top-level key.
pub fn parse_state_body(bytes: &[u8], default_hour: u8) -> Result<State, ApiError> {
    State::from_body(bytes, default_hour).map_err(ApiError::from)
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn content_types() {
        assert!(check_json_content_type(Some("application/json")).is_ok());
        assert!(check_json_content_type(Some("Application/JSON; charset=utf-8")).is_ok());
        for bad in [
            None,
            Some("text/plain"),
            Some("application/jsonx"),
            Some(""),
        ] {
            assert_eq!(
                check_json_content_type(bad).unwrap_err().status,
                415,
                "{bad:?}"
            );
        }
    }

    #[test]
    fn declared_length() {
        assert!(check_declared_length(None).is_ok());
        assert!(check_declared_length(Some("16384")).is_ok());
        assert_eq!(
            check_declared_length(Some("16385")).unwrap_err().status,
            413
        );
        assert!(
            check_declared_length(Some("garbage")).is_ok(),
            "the read limit still applies"
        );
    }

    fn err(body: &str) -> ApiError {
        parse_state_body(body.as_bytes(), 0).unwrap_err()
    }

    #[test]
    fn envelope_errors_name_the_field() {
        let cases = [
            ("[]", "invalid_type", Some("body")),
            ("{}", "missing_field", Some("state")),
            (r#"{"state": 3}"#, "invalid_type", Some("state")),
            (
                r#"{"state": {}, "extra": 1}"#,
                "unknown_field",
                Some("extra"),
            ),
            (
                r#"{"state": {"request_type": 1, "region_id": 3, "current_load": 0.4, "recent_success_rate": 0.97, "queue_depth": "12"}}"#,
                "invalid_type",
                Some("state.queue_depth"),
            ),
            (
                r#"{"state": {"regoin_id": 3}}"#,
                "unknown_field",
                Some("state.regoin_id"),
            ),
            ("", "invalid_json", None),
            ("{\"state\": NaN}", "invalid_json", None),
        ];
        for (body, code, field) in cases {
            let e = err(body);
            assert_eq!(
                (e.status, e.code, e.field.as_deref()),
                (400, code, field),
                "{body}"
            );
        }
    }

    #[test]
    fn valid_body_uses_default_hour() {
        let s = parse_state_body(
            br#"{"state": {"request_type": 1, "region_id": 3, "current_load": 0.4, "recent_success_rate": 0.97, "queue_depth": 12}}"#,
            17,
        )
        .unwrap();
        assert_eq!(s.hour, 17);
    }

    #[test]
    fn invalid_utf8_is_invalid_json() {
        let e = parse_state_body(b"{\"state\": \"\xff\"}", 0).unwrap_err();
        assert_eq!(e.code, "invalid_json");
    }
}

//! What kind of request an edge request is: the (method, path prefix) → `request_type`
//! table (`REQUEST_TYPES`), first hit wins.

use crate::state::MAX_REQUEST_TYPE;
use serde::{Deserialize, Serialize};

/// One entry of the request-type table: a path prefix, optionally restricted to methods.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TypeRoute {
    /// Methods this entry applies to (upper case); absent: every method.
    #[serde(default)]
    pub methods: Option<Vec<String>>,
    /// Path prefix, starting with `/`.
    pub prefix: String,
    /// The request type, `0..=5`.
    #[serde(rename = "type")]
    pub request_type: u8,
}

/// The (method, path prefix) → request type table (`REQUEST_TYPES`), first hit wins.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RequestTypes {
    /// Type of a request no entry matches.
    pub default: u8,
    /// Entries in evaluation order.
    #[serde(default)]
    pub routes: Vec<TypeRoute>,
}

/// The shipped request-type table. Types follow the simulator the model was trained on:
/// 0–2 light interactive, 3 batch, 4–5 heavy (compute-bound).
pub const DEFAULT_REQUEST_TYPES: &str = r#"{"default": 0, "routes": [
  {"prefix": "/batch/", "type": 3},
  {"prefix": "/export/", "type": 4},
  {"prefix": "/render/", "type": 5},
  {"prefix": "/search", "type": 2},
  {"methods": ["POST", "PUT", "PATCH", "DELETE"], "prefix": "/", "type": 1}
]}"#;

impl RequestTypes {
    /// Parses and checks a table.
    ///
    /// # Errors
    /// A message naming the bad entry.
    pub fn from_json(text: &str) -> Result<RequestTypes, String> {
        let t: RequestTypes = serde_json::from_str(text).map_err(|e| e.to_string())?;
        if t.default > MAX_REQUEST_TYPE {
            return Err(format!(
                "default must be 0..={MAX_REQUEST_TYPE}, got {}",
                t.default
            ));
        }
        for (i, r) in t.routes.iter().enumerate() {
            if r.request_type > MAX_REQUEST_TYPE {
                return Err(format!(
                    "routes[{i}].type must be 0..={MAX_REQUEST_TYPE}, got {}",
                    r.request_type
                ));
            }
            if !r.prefix.starts_with('/') {
                return Err(format!(
                    "routes[{i}].prefix must start with /, got {:?}",
                    r.prefix
                ));
            }
        }
        Ok(t)
    }

    /// The shipped table.
    pub fn shipped() -> RequestTypes {
        RequestTypes::from_json(DEFAULT_REQUEST_TYPES).unwrap_or(RequestTypes {
            default: 0,
            routes: Vec::new(),
        })
    }

    /// The request type of a method and path.
    pub fn classify(&self, method: &str, path: &str) -> u8 {
        self.routes
            .iter()
            .find(|r| {
                path.starts_with(&r.prefix)
                    && r.methods
                        .as_ref()
                        .is_none_or(|ms| ms.iter().any(|m| m.eq_ignore_ascii_case(method)))
            })
            .map_or(self.default, |r| r.request_type)
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn shipped_table_parses() {
        assert!(RequestTypes::from_json(DEFAULT_REQUEST_TYPES).is_ok());
    }

    #[test]
    fn request_types_first_hit() {
        let t = RequestTypes::shipped();
        assert_eq!(t.classify("GET", "/"), 0);
        assert_eq!(t.classify("GET", "/batch/nightly"), 3);
        assert_eq!(t.classify("POST", "/batch/nightly"), 3);
        assert_eq!(t.classify("GET", "/export/x.csv"), 4);
        assert_eq!(t.classify("GET", "/render/1"), 5);
        assert_eq!(t.classify("GET", "/search?q=1"), 2);
        assert_eq!(t.classify("post", "/any/path"), 1);
        assert_eq!(t.classify("HEAD", "/any/path"), 0);
    }
    #[test]
    fn request_types_are_checked() {
        for (bad, needle) in [
            (r#"{"default": 6}"#, "default"),
            (
                r#"{"default": 0, "routes": [{"prefix": "/a", "type": 9}]}"#,
                "routes[0].type",
            ),
            (
                r#"{"default": 0, "routes": [{"prefix": "a", "type": 1}]}"#,
                "prefix",
            ),
            (
                r#"{"default": 0, "routes": [{"prefix": "/a", "type": 1, "x": 1}]}"#,
                "unknown field",
            ),
            ("[]", "expected struct RequestTypes"),
        ] {
            let e = RequestTypes::from_json(bad).unwrap_err();
            assert!(e.contains(needle), "{bad}: {e}");
        }
    }
}

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

/// The shipped request-type table, first hit wins: (methods, path prefix, type). Types follow
/// the simulator the model was trained on: 0–2 light interactive, 3 batch, 4–5 heavy
/// (compute-bound); anything else is 0. Data in code, not JSON: an isolate builds it without
/// compiling a reader.
const SHIPPED: &[(&[&str], &str, u8)] = &[
    (&[], "/batch/", 3),
    (&[], "/export/", 4),
    (&[], "/render/", 5),
    (&[], "/search", 2),
    (&["POST", "PUT", "PATCH", "DELETE"], "/", 1),
];

impl RequestTypes {
    /// Parses and checks a table.
    ///
    /// # Errors
    /// A message naming the bad entry.
    pub fn from_json(text: &str) -> Result<RequestTypes, String> {
        let t: RequestTypes = serde_json::from_slice(text.as_bytes()).map_err(|e| e.to_string())?;
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

    /// The shipped table (a test holds it to [`RequestTypes::from_json`]'s checks).
    pub fn shipped() -> RequestTypes {
        let routes = SHIPPED
            .iter()
            .map(|&(methods, prefix, request_type)| TypeRoute {
                methods: (!methods.is_empty())
                    .then(|| methods.iter().map(|&m| m.to_owned()).collect()),
                prefix: prefix.to_owned(),
                request_type,
            })
            .collect();
        RequestTypes { default: 0, routes }
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
    fn shipped_table_passes_the_checks_of_a_configured_one() {
        let shipped = RequestTypes::shipped();
        let text = serde_json::to_string(&shipped).unwrap();
        assert_eq!(RequestTypes::from_json(&text).unwrap(), shipped);
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

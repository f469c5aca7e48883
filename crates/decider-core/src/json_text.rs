//! JSON text written directly, byte for byte as serde_json writes it: the per-request
//! records (the decision body, the Worker's log line) are built with these instead of the
//! generic serialiser, which costs more than the model's forward pass in wasm.

/// Room for one number's text, as serde_json formats an `f64`: shortest round-trip form
/// (zmij, the formatter serde_json itself calls, so the text is the same), `null` when
/// not finite. Formatting writes straight into it: no copy, no UTF-8 check after.
#[derive(Default)]
pub struct NumberText(zmij::Buffer);

impl NumberText {
    /// Empty room.
    pub fn new() -> NumberText {
        NumberText(zmij::Buffer::new())
    }

    /// The text of `v` (`null` when not finite), kept in `self`.
    pub fn format(&mut self, v: f64) -> &str {
        if v.is_finite() {
            self.0.format_finite(v)
        } else {
            "null"
        }
    }
}

/// A number appended as serde_json writes an `f64` (see [`NumberText`]).
pub fn push_f64(out: &mut String, v: f64) {
    out.push_str(NumberText::new().format(v));
}

/// An integer as serde_json writes it (itoa, its own formatter; `write!` would go through
/// the much slower `core::fmt` machinery).
pub fn push_u64(out: &mut String, v: u64) {
    out.push_str(itoa::Buffer::new().format(v));
}

/// A string as a JSON string (serde_json's escaping), or `null`.
pub fn push_str_opt(out: &mut String, v: Option<&str>) {
    match v {
        // The plain case needs no escaping: printable ASCII without `"` or `\\`.
        Some(s)
            if s.bytes()
                .all(|b| (0x20..0x7f).contains(&b) && b != b'"' && b != b'\\') =>
        {
            out.push('"');
            out.push_str(s);
            out.push('"');
        }
        Some(s) => out.push_str(&serde_json::Value::from(s).to_string()),
        None => out.push_str("null"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn numbers_are_written_as_serde_json_writes_them() {
        for v in [
            0.0,
            -0.0,
            1.0,
            0.1,
            1e-8,
            1.2831194610736048e-8,
            0.9999990137378125,
            1e300,
            -2.5e-308,
            f64::MIN_POSITIVE,
            f64::MAX,
        ] {
            let mut out = String::new();
            push_f64(&mut out, v);
            assert_eq!(out, serde_json::to_string(&v).unwrap(), "{v:e}");
        }
        for v in [f64::NAN, f64::INFINITY, f64::NEG_INFINITY] {
            assert_eq!(NumberText::new().format(v), "null");
            assert_eq!(serde_json::to_string(&v).unwrap(), "null");
        }
        for v in [0, 7, 10, 12_345, u64::MAX] {
            let mut out = String::new();
            push_u64(&mut out, v);
            assert_eq!(out, v.to_string());
        }
    }
}

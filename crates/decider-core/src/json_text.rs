//! JSON text written directly, byte for byte as serde_json writes it: the per-request
//! records (the decision body, the Worker's log line) are built with these instead of the
//! generic serialiser, which costs more than the model's forward pass in wasm.

/// A number as serde_json writes it (its own formatter, so the text is the same in every
/// serde_json version): shortest round-trip form, `null` when not finite.
pub struct Number {
    buf: [u8; 32],
    len: usize,
}

impl Number {
    /// The text of `v` (`null` when not finite).
    pub fn of(v: f64) -> Number {
        use serde_json::ser::{CompactFormatter, Formatter};
        let mut n = Number {
            buf: [0; 32],
            len: 0,
        };
        let mut w = &mut n.buf[..];
        // At most 24 bytes ("-1.2345678901234567e-308"); a failure leaves `null`.
        if v.is_finite() && CompactFormatter.write_f64(&mut w, v).is_ok() {
            n.len = 32 - w.len();
        }
        n
    }

    /// The number's text.
    pub fn as_str(&self) -> &str {
        match std::str::from_utf8(&self.buf[..self.len]) {
            Ok(s) if !s.is_empty() => s,
            _ => "null",
        }
    }
}

/// An integer as serde_json writes it (its own formatter; `write!` would go through the
/// much slower `core::fmt` machinery).
pub fn push_u64(out: &mut String, v: u64) {
    use serde_json::ser::{CompactFormatter, Formatter};
    let mut buf = [0u8; 20];
    let mut w = &mut buf[..];
    // 20 bytes hold u64::MAX, so this cannot fail.
    if CompactFormatter.write_u64(&mut w, v).is_ok() {
        let n = 20 - w.len();
        out.push_str(std::str::from_utf8(&buf[..n]).unwrap_or("0"));
    }
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

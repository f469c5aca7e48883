//! Log lines: one JSON object per line through `console.log`, which Workers Logs,
//! `wrangler tail` and `wrangler dev` all collect. Decision records follow
//! [`decider_core::record`]; operational events (`internal_error`, `signals_stored`, …) are
//! `{"ts", "event", …}` objects.

use crate::clock;
use serde::Serialize;
use serde_json::Value;

pub use decider_core::record::{clip_to, CUT_MARK, ECHO_BYTES, TEXT_BYTES};

/// `s` cut to at most [`TEXT_BYTES`] on a character boundary, marked when cut: a 4 MiB
/// error message or a 60 KB header must not become a log line of that size.
pub fn clip(s: &str) -> String {
    clip_to(s, TEXT_BYTES)
}

/// Writes a serialisable record as one log line.
pub fn emit(record: &impl Serialize) {
    if let Ok(line) = serde_json::to_string(record) {
        write(&line);
    }
}

/// Writes one log line.
pub fn write(line: &str) {
    web_sys::console::log_1(&wasm_bindgen::JsValue::from_str(line));
}

/// Writes an operational event: `{"ts", "event": name}` plus `fields` (an object).
pub fn event(name: &str, fields: Value) {
    let mut line = serde_json::json!({"ts": clock::iso_now(), "event": name});
    if let (Some(out), Value::Object(extra)) = (line.as_object_mut(), fields) {
        out.extend(extra);
    }
    emit(&line);
}

/// A new decision id: a random (version 4) UUID from the runtime's CSPRNG, or, should the
/// runtime refuse, one made of the clock and `Math.random` (unique enough to join on).
pub fn new_decision_id() -> String {
    let global: web_sys::WorkerGlobalScope = wasm_bindgen::JsCast::unchecked_into(js_sys::global());
    match global.crypto() {
        Ok(c) => c.random_uuid(),
        Err(_) => format!(
            "{:x}-{:x}",
            clock::now_ms() as u64,
            (js_sys::Math::random() * 2f64.powi(52)) as u64
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Regression: a backend error of 4 MiB became a 4 MiB log line per request.
    #[test]
    fn regression_huge_text_is_clipped() {
        let huge = "é".repeat(2 << 20);
        let c = clip(&huge);
        assert!(c.len() <= TEXT_BYTES + "…[truncated]".len());
        assert!(c.ends_with("…[truncated]"));
        assert_eq!(clip("short"), "short");
    }
}

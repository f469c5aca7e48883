//! Workers KV: the `SIGNALS` namespace and its two keys — the signals snapshot and the
//! monitor's state — read and written in one place.

use crate::log;
use serde_json::json;
use worker::Env;

/// The KV binding name.
pub const BINDING: &str = "SIGNALS";
/// The key of the signals snapshot.
pub const SIGNALS_KEY: &str = "signals";
/// The key of the monitor's state (probe histories, down marks, the last run's report).
pub const MONITOR_KEY: &str = "monitor";

/// Reads a key: its text, or `None` when it is not set.
///
/// # Errors
/// Why it could not be read (no binding, a KV failure: its first line; the whole error,
/// stack included, goes to the log only, as `/v1/health` is readable by many).
pub async fn get(env: &Env, key: &str) -> Result<Option<String>, String> {
    let kv = env
        .kv(BINDING)
        .map_err(|e| format!("no {BINDING} KV binding: {e}"))?;
    kv.get(key).text().await.map_err(|e| {
        let full = e.to_string();
        log::event(
            "kv_read_failed",
            json!({"key": key, "error": log::clip(&full)}),
        );
        let first = full.lines().next().unwrap_or_default();
        format!("KV read failed: {}", log::clip(first))
    })
}

/// Writes a key.
///
/// # Errors
/// Why it could not be written (no binding, a KV failure).
pub async fn put(env: &Env, key: &str, text: String) -> Result<(), String> {
    let kv = env
        .kv(BINDING)
        .map_err(|e| format!("no {BINDING} KV binding: {e}"))?;
    kv.put(key, text)
        .map_err(|e| e.to_string())?
        .execute()
        .await
        .map_err(|e| e.to_string())
}

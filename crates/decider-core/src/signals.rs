//! Live backend signals: the three state fields the edge does not know by itself, the
//! snapshot of them the Worker stores (who wrote it and when), and the one freshness rule
//! for anything stamped with a time (a snapshot, the monitor's down marks).

use crate::json::{parse_text, FieldError, Fields, Nulls};
use serde::{Deserialize, Serialize};
use serde_json::{json, Value};

/// Live backend signals: the three state fields the edge does not know by itself.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Signals {
    /// Load of the serving system, `>= 0`.
    pub current_load: f64,
    /// Recent success ratio, `0..=1`.
    pub recent_success_rate: f64,
    /// Requests queued, `>= 0`.
    pub queue_depth: f64,
}

/// `(current_load, recent_success_rate, queue_depth)`, each present or not.
pub(crate) type SignalFields = (Option<f64>, Option<f64>, Option<f64>);

/// The three signal fields of an object (a state, a signals body), each checked if present.
pub(crate) fn signal_fields(f: &Fields<'_>) -> Result<SignalFields, FieldError> {
    Ok((
        f.num("current_load", None, "finite and >= 0")?,
        f.num("recent_success_rate", Some(1.0), "finite and 0..=1")?,
        f.num("queue_depth", None, "finite and >= 0")?,
    ))
}

impl Signals {
    /// Zeros: what a state holds when no signals are known (the decision is then
    /// `stale_signals`, and rules ignore signal fields).
    pub const NONE: Signals = Signals {
        current_load: 0.0,
        recent_success_rate: 0.0,
        queue_depth: 0.0,
    };

    /// Parses and validates a signals object from JSON text.
    ///
    /// # Errors
    /// [`FieldError::Json`] for malformed text, else as [`Signals::from_value`].
    pub fn from_json(bytes: &[u8]) -> Result<Signals, FieldError> {
        Signals::from_value(&parse_text(bytes)?)
    }

    /// Validates a JSON value as a signals object (the three live fields, all required,
    /// plus an optional `updated_at` that callers stamp themselves and is ignored here).
    ///
    /// # Errors
    /// A [`FieldError`] naming the first offending field.
    pub fn from_value(v: &Value) -> Result<Signals, FieldError> {
        let f = Fields::of(v, "signals", Nulls::Strict)?;
        f.only(&[
            "current_load",
            "recent_success_rate",
            "queue_depth",
            "updated_at",
        ])?;
        let (load, success, queue) = signal_fields(&f)?;
        Ok(Signals {
            current_load: f.require(load, "current_load")?,
            recent_success_rate: f.require(success, "recent_success_rate")?,
            queue_depth: f.require(queue, "queue_depth")?,
        })
    }
}

/// Whether something stamped at `at_ms` is current at `now_ms` within `max_age_s`: at most
/// that old, and not more than that far in the future either (a mis-clocked or corrupt stamp
/// must go stale, not stay fresh forever; small clock skew is tolerated). The one freshness
/// rule of signals snapshots and the monitor's down marks.
pub fn is_current(at_ms: f64, now_ms: f64, max_age_s: u32) -> bool {
    let window_ms = f64::from(max_age_s) * 1000.0;
    (now_ms - at_ms).abs() <= window_ms
}

/// Who wrote a signals snapshot.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SnapshotSource {
    /// `PUT /v1/admin/signals` (also a stored snapshot that names no source: every snapshot
    /// before the monitor existed was pushed).
    Admin,
    /// The scheduled monitor.
    Monitor,
}

impl SnapshotSource {
    /// The stored and shown name.
    pub fn name(self) -> &'static str {
        match self {
            SnapshotSource::Admin => "admin",
            SnapshotSource::Monitor => "monitor",
        }
    }
}

/// A signals snapshot as stored in KV: the three live fields, when the Worker stored them
/// (`updated_at`, milliseconds since the epoch) and who wrote them (`source`).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Snapshot {
    /// The live backend signals.
    pub signals: Signals,
    /// When the Worker stored them, ms since the epoch.
    pub updated_at_ms: f64,
    /// Who wrote them.
    pub source: SnapshotSource,
}

impl Snapshot {
    /// Parses a stored snapshot.
    ///
    /// # Errors
    /// A message when the stored value is not a valid snapshot.
    pub fn from_json(text: &str) -> Result<Snapshot, String> {
        let mut v: Value = serde_json::from_slice(text.as_bytes()).map_err(|e| e.to_string())?;
        let source = match v.as_object_mut().and_then(|o| o.remove("source")) {
            None => SnapshotSource::Admin,
            Some(s) if s == "admin" => SnapshotSource::Admin,
            Some(s) if s == "monitor" => SnapshotSource::Monitor,
            Some(s) => return Err(format!("source must be admin or monitor, got {s}")),
        };
        let signals = Signals::from_value(&v).map_err(|e| e.to_string())?;
        let updated_at_ms = v
            .get("updated_at")
            .and_then(Value::as_f64)
            .filter(|t| t.is_finite())
            .ok_or("updated_at (ms since the epoch) is missing")?;
        Ok(Snapshot {
            signals,
            updated_at_ms,
            source,
        })
    }

    /// The stored form.
    pub fn to_value(&self) -> Value {
        json!({
            "current_load": self.signals.current_load,
            "recent_success_rate": self.signals.recent_success_rate,
            "queue_depth": self.signals.queue_depth,
            "updated_at": self.updated_at_ms,
            "source": self.source.name(),
        })
    }

    /// Age in seconds at `now_ms` (negative clock skew counts as fresh).
    pub fn age_s(&self, now_ms: f64) -> f64 {
        ((now_ms - self.updated_at_ms) / 1000.0).max(0.0)
    }

    /// Whether the snapshot is current at `now_ms` ([`is_current`]).
    pub fn is_fresh(&self, now_ms: f64, max_age_s: u32) -> bool {
        is_current(self.updated_at_ms, now_ms, max_age_s)
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn signals_validate_like_state_fields() {
        let s = Signals::from_value(
            &json!({"current_load": 1.0, "recent_success_rate": 0.2, "queue_depth": 900}),
        )
        .unwrap();
        assert_eq!(s.queue_depth, 900.0);
        let e = Signals::from_value(
            &json!({"current_load": 1.0, "recent_success_rate": 2, "queue_depth": 9}),
        )
        .unwrap_err();
        assert_eq!(e.field(), Some("recent_success_rate"));
        let e = Signals::from_value(&json!({"current_load": 1.0, "queue_depth": 9})).unwrap_err();
        assert_eq!(e.code(), "missing_field");
    }
    #[test]
    fn snapshots() {
        let s = Snapshot::from_json(
            r#"{"current_load": 0.4, "recent_success_rate": 0.99, "queue_depth": 3, "updated_at": 1000000}"#,
        )
        .unwrap();
        assert_eq!(s.updated_at_ms, 1_000_000.0);
        assert_eq!(s.source, SnapshotSource::Admin, "no source: an admin push");
        assert!(s.is_fresh(1_000_000.0 + 60_000.0, 60));
        assert!(!s.is_fresh(1_000_000.0 + 60_001.0, 60));
        assert!(
            s.is_fresh(1_000_000.0 - 60_000.0, 60),
            "small skew behind the stamp is fresh"
        );
        assert!(
            !s.is_fresh(0.0, 60),
            "a stamp far in the future is not fresh"
        );
        assert_eq!(Snapshot::from_json(&s.to_value().to_string()).unwrap(), s);
        let m = Snapshot {
            source: SnapshotSource::Monitor,
            ..s
        };
        assert_eq!(Snapshot::from_json(&m.to_value().to_string()).unwrap(), m);
        let e = Snapshot::from_json(r#"{"current_load": 0.4, "recent_success_rate": 0.99, "queue_depth": 3, "updated_at": 1, "source": "cron"}"#).unwrap_err();
        assert!(e.contains("source must be admin or monitor"), "{e}");
        assert!(Snapshot::from_json(
            r#"{"current_load": 0.4, "recent_success_rate": 0.99, "queue_depth": 3}"#
        )
        .is_err());
        assert!(Snapshot::from_json(r#"{"current_load": -1, "recent_success_rate": 0.99, "queue_depth": 3, "updated_at": 1}"#).is_err());
    }
}

//! One JSON log line per decision (Workers Logs / `wrangler tail` pick up `console.log`).

use decider_core::Decision;
use serde_json::{json, Value};

/// Where a decision was made.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Endpoint {
    /// `POST /v1/decide`.
    Decide,
    /// Edge routing of any other request.
    Route,
}

impl Endpoint {
    /// Wire name.
    pub fn name(self) -> &'static str {
        match self {
            Endpoint::Decide => "decide",
            Endpoint::Route => "route",
        }
    }
}

/// The log record of one decision. `detail` is internal backend text (model errors):
/// it goes to the log and never to the client.
pub fn decision_record(
    ts: &str,
    request_id: Option<&str>,
    endpoint: Endpoint,
    d: &Decision,
    detail: Option<&str>,
) -> Value {
    let mut v = json!({
        "ts": ts,
        "event": "decision",
        "request_id": request_id,
        "endpoint": endpoint.name(),
        "action": d.action,
        "source": d.source,
        "fallback_reason": d.fallback_reason,
        "confidence": d.confidence,
        "model_version": d.model_version,
        "encoder_version": d.encoder_version,
        "decision_us": d.decision_us,
    });
    if let Some(rule) = &d.rule {
        v["rule"] = json!(rule);
    }
    if let Some(s) = &d.shadow {
        v["shadow"] = json!({
            "rules_action": d.action,
            "model_action": s.model_action,
            "agree": s.agree,
        });
    }
    if let Some(detail) = detail {
        v["detail"] = json!(detail);
    }
    v
}

/// Writes a record as one line to the Worker's log.
pub fn emit(record: &Value) {
    worker::console_log!("{}", record);
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use decider_core::policy::Shadow;
    use decider_core::{Action, Source};

    fn decision() -> Decision {
        Decision {
            action: Action::RouteB,
            confidence: Some(0.9),
            source: Source::Rules,
            fallback_reason: Some(decider_core::FallbackReason::LowConfidence),
            model_version: Some("m1".into()),
            encoder_version: 1,
            probabilities: None,
            decision_us: 7,
            rule: Some("home-b".into()),
            shadow: None,
        }
    }

    #[test]
    fn record_has_the_documented_fields() {
        let v = decision_record(
            "2026-01-01T00:00:00.000Z",
            Some("8f1-LHR"),
            Endpoint::Decide,
            &decision(),
            None,
        );
        for k in [
            "ts",
            "request_id",
            "action",
            "source",
            "fallback_reason",
            "confidence",
            "model_version",
            "encoder_version",
            "decision_us",
        ] {
            assert!(v.get(k).is_some(), "{k}");
        }
        assert_eq!(v["fallback_reason"], "low_confidence");
        assert_eq!(v["request_id"], "8f1-LHR");
        assert_eq!(v["rule"], "home-b");
        assert!(v.get("shadow").is_none());
        assert!(!v.to_string().contains('\n'));
    }

    #[test]
    fn shadow_records_both_actions() {
        let mut d = decision();
        d.shadow = Some(Shadow {
            model_action: Some(Action::RouteC),
            agree: false,
        });
        let v = decision_record("t", None, Endpoint::Route, &d, Some("boom"));
        assert_eq!(v["shadow"]["rules_action"], "route_b");
        assert_eq!(v["shadow"]["model_action"], "route_c");
        assert_eq!(v["shadow"]["agree"], false);
        assert_eq!(v["detail"], "boom");
        assert_eq!(v["request_id"], Value::Null);
    }
}

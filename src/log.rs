//! One JSON log line per decision (Workers Logs / `wrangler tail` pick up `console.log`).

use decider_core::json_text::{push_f64, push_str_opt, push_u64};
use decider_core::policy::FallbackReason;
use decider_core::{Action, Decision};
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

/// The log line of one decision, appended to `out` (a buffer kept between decisions spares
/// an allocation per decision): the text of [`decision_record`] (same fields, same order),
/// written straight from the decision instead of through a [`Value`] tree. This is the
/// per-request path of `POST /v1/decide`.
pub fn write_decision_line(
    out: &mut String,
    ts: &str,
    request_id: Option<&str>,
    endpoint: Endpoint,
    d: &Decision,
    detail: Option<&str>,
) {
    // Keys in alphabetical order: the order a `Value` object (a sorted map) prints them
    // in; the tests pin the equality. Written directly: serde's serialiser and `core::fmt`
    // were most of this line's cost in the running Worker (perf, JIT symbols).
    out.push_str("{\"action\":\"");
    out.push_str(d.action.name());
    out.push_str("\",\"confidence\":");
    match d.confidence {
        Some(c) => push_f64(out, c),
        None => out.push_str("null"),
    }
    out.push_str(",\"decision_us\":");
    push_u64(out, d.decision_us);
    if detail.is_some() {
        out.push_str(",\"detail\":");
        push_str_opt(out, detail);
    }
    out.push_str(",\"encoder_version\":");
    push_u64(out, u64::from(d.encoder_version));
    out.push_str(",\"endpoint\":\"");
    out.push_str(endpoint.name());
    out.push_str("\",\"event\":\"decision\",\"fallback_reason\":");
    push_str_opt(out, d.fallback_reason.map(FallbackReason::name));
    out.push_str(",\"model_version\":");
    push_str_opt(out, d.model_version.as_deref());
    out.push_str(",\"request_id\":");
    push_str_opt(out, request_id);
    if d.rule.is_some() {
        out.push_str(",\"rule\":");
        push_str_opt(out, d.rule.as_deref());
    }
    if let Some(sh) = &d.shadow {
        out.push_str(",\"shadow\":{\"agree\":");
        out.push_str(if sh.agree { "true" } else { "false" });
        out.push_str(",\"model_action\":");
        push_str_opt(out, sh.model_action.map(Action::name));
        out.push_str(",\"rules_action\":\"");
        out.push_str(d.action.name());
        out.push_str("\"}");
    }
    out.push_str(",\"source\":\"");
    out.push_str(d.source.name());
    out.push_str("\",\"ts\":");
    push_str_opt(out, Some(ts));
    out.push('}');
}

/// Writes a record as one line to the Worker's log.
pub fn emit(record: &Value) {
    emit_line(&record.to_string());
}

/// Writes an already serialised record as one line to the Worker's log.
pub fn emit_line(line: &str) {
    web_sys::console::log_1(&wasm_bindgen::JsValue::from_str(line));
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

    /// The fast line and the `Value` record are the same text, for every optional part.
    #[test]
    fn decision_line_is_the_record_text() {
        let plain = Decision {
            rule: None,
            fallback_reason: None,
            source: Source::Model,
            ..decision()
        };
        let no_confidence = Decision {
            confidence: None,
            model_version: None,
            ..decision()
        };
        let mut shadowed = decision();
        shadowed.shadow = Some(Shadow {
            model_action: None,
            agree: false,
        });
        let mut agreeing = decision();
        agreeing.shadow = Some(Shadow {
            model_action: Some(Action::RouteB),
            agree: true,
        });
        let odd = Decision {
            confidence: Some(f64::NAN),
            model_version: Some("quote\"back\\slash\u{1}é".into()),
            ..decision()
        };
        for d in [decision(), plain, no_confidence, shadowed, agreeing, odd] {
            for (request_id, endpoint, detail) in [
                (None, Endpoint::Decide, None),
                (Some("8f1-LHR"), Endpoint::Route, Some("boom \"x\"\n")),
            ] {
                let ts = "2026-01-01T00:00:00.000Z";
                let mut line = String::new();
                write_decision_line(&mut line, ts, request_id, endpoint, &d, detail);
                let record = decision_record(ts, request_id, endpoint, &d, detail);
                assert_eq!(line, record.to_string());
            }
        }
    }
}

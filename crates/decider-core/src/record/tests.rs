#![allow(clippy::unwrap_used)]

use super::*;
use crate::policy::{FallbackReason, ProbabilityMap, Shadow, Source};
use crate::rollout::Arm;
use crate::{Action, State};
use serde_json::Value;

fn decision() -> DecisionRecord {
    DecisionRecord {
        log_version: LOG_VERSION,
        ts: "2026-12-02T10:00:00.000Z".into(),
        decision_id: "0b0e6a8c-8a5e-4a49-9f6e-6c0e7f1d2a3b".into(),
        request_id: Some("8f00e2e-LHR".into()),
        endpoint: Endpoint::Route,
        state: State {
            request_type: 1,
            region_id: 3,
            current_load: 0.4,
            recent_success_rate: 0.97,
            queue_depth: 12.0,
            hour: 14,
        },
        action: Action::RouteB,
        source: Source::Model,
        fallback_reason: None,
        rule: None,
        confidence: Some(0.97),
        probabilities: Some(ProbabilityMap::from([0.01, 0.97, 0.01, 0.01])),
        propensity: 1.0,
        explored: false,
        model_version: Some("gbdt-1".into()),
        rules_version: Some("default-1".into()),
        encoder_version: 1,
        backend: "embedded".into(),
        arm: Arm::Champion,
        key: RoutingKey::Given,
        decision_us: 0,
        outcome: Some(RouteOutcome {
            origin: Some(Action::RouteC),
            status: Some(200),
            latency_ms: Some(12.5),
            failover: Some(Action::RouteC),
            origin_down: None,
            error: None,
            attempts: vec![
                Attempt {
                    origin: Action::RouteB,
                    status: Some(503),
                    error: Some(ErrorKind::UpstreamStatus),
                    latency_ms: Some(3.0),
                },
                Attempt {
                    origin: Action::RouteC,
                    status: Some(200),
                    error: None,
                    latency_ms: Some(9.5),
                },
            ],
        }),
        request: None,
        shadow: None,
        detail: None,
    }
}

#[test]
fn null_members_are_dropped_and_nothing_else() {
    let cases = [
        (r#"{"a":null}"#, "{}"),
        (r#"{"a":null,"b":1}"#, r#"{"b":1}"#),
        (r#"{"a":1,"b":null}"#, r#"{"a":1}"#),
        (r#"{"a":1,"b":null,"c":null,"d":2}"#, r#"{"a":1,"d":2}"#),
        (
            r#"{"o":{"x":null,"y":[{"z":null,"w":3},null,4]},"n":null}"#,
            r#"{"o":{"y":[{"w":3},null,4]}}"#,
        ),
        // Text that looks like a null member stays as it is.
        (
            r#"{"s":"\"k\":null,","t":"a\\","u":null}"#,
            r#"{"s":"\"k\":null,","t":"a\\"}"#,
        ),
        (r#"{"s":":null"}"#, r#"{"s":":null"}"#),
    ];
    for (json, want) in cases {
        let got = line::drop_null_members(json);
        assert_eq!(got, want, "{json}");
        let v: serde_json::Value = serde_json::from_str(&got).unwrap();
        let mut full: serde_json::Value = serde_json::from_str(json).unwrap();
        fn strip(v: &mut serde_json::Value) {
            match v {
                Value::Object(m) => {
                    m.retain(|_, x| !x.is_null());
                    m.values_mut().for_each(strip);
                }
                Value::Array(a) => a.iter_mut().for_each(strip),
                _ => {}
            }
        }
        strip(&mut full);
        assert_eq!(v, full, "{json}");
    }
}

#[test]
fn clip_to_cuts_on_a_character_boundary() {
    assert_eq!(clip_to("abc", 3), "abc");
    assert_eq!(clip_to("abcd", 3), format!("abc{CUT_MARK}"));
    assert_eq!(clip_to("aé", 2), format!("a{CUT_MARK}"));
    let ray = "R".repeat(60_000);
    assert_eq!(clip_to(&ray, 128).len(), 128 + CUT_MARK.len());
}

#[test]
fn a_line_that_fits_is_the_record_as_serialised() {
    let r = decision();
    let line = r.to_line();
    assert_eq!(line, serde_json::to_string(&Record::Decision(r)).unwrap());
}

/// A routed request that failed over, as the Worker logs one on Cloudflare: a real
/// `cf-ray`, the origin's status in the detail, client-sent state with every digit.
#[test]
fn a_failover_record_fits_and_keeps_what_it_can() {
    let mut r = decision();
    r.request_id = Some("8e9f6a1b2c3d4e5f-IAD".into());
    r.model_version = Some("gbdt-fe6ed1b269ed".into());
    r.rules_version = Some("default-2026-11-30".into());
    r.confidence = Some(0.995_982_948_435_956_8);
    r.probabilities = Some(ProbabilityMap::from([
        0.000_267_199_841_957_513_67,
        0.995_982_948_435_956_8,
        0.000_335_775_769_566_976_7,
        0.003_414_075_952_518_529_3,
    ]));
    r.detail = Some("route_b answered 503".into());
    r.request = Some(RequestInfo {
        method: "POST".into(),
        country: Some("US".into()),
        continent: Some("NA".into()),
        signals_age_s: Some(0.024),
        signals_detail: None,
    });
    let read = |r: &DecisionRecord| {
        let line = r.to_line();
        assert!(line.len() <= MAX_LINE_BYTES, "{} bytes: {line}", line.len());
        assert!(!line.contains("null"), "written compact: {line}");
        let Record::Decision(back) = Record::from_line(&line).unwrap() else {
            panic!("not a decision: {line}");
        };
        back
    };
    // Without its nulls it fits whole.
    assert_eq!(read(&r), r);
    // With a down origin and every digit of the state too, it fits without the
    // probabilities, and keeps the rest.
    r.state.current_load = 0.123_456_789_012_345_68;
    r.state.recent_success_rate = 0.987_654_321_098_765_4;
    r.outcome.as_mut().unwrap().origin_down = Some(Action::RouteA);
    assert_eq!(
        read(&r),
        DecisionRecord {
            probabilities: None,
            confidence: None,
            ..r
        }
    );
}

/// Regression: a routed record with a failover, a long `cf-ray`, an error detail and a
/// stale-signals detail came to about 1,180 bytes. The longest records the Worker can
/// write: rules deciding in shadow mode after a Workers AI timeout, a failover away from
/// a down origin, all text at its longest; with fresh signals of many digits, or with
/// stale ones (the state's defaults) and their detail.
#[test]
fn the_longest_records_fit_in_a_line_and_keep_their_numbers() {
    // Text as long as the Worker lets any of it be (256 bytes plus the mark), with
    // characters JSON escapes to six bytes each.
    let text = |c: &str| clip_to(&format!("{c}\"\u{1}").repeat(200), 256);
    for fresh in [true, false] {
        let mut r = decision();
        r.endpoint = Endpoint::Route;
        if fresh {
            r.state.current_load = 0.123_456_789_012_345_68;
            r.state.recent_success_rate = 0.987_654_321_098_765_4;
            r.state.queue_depth = 12_345.678_901_234_5;
        }
        r.model_version = Some("gbdt-fe6ed1b269ed".into());
        r.rules_version = Some("default-2026-11-30".into());
        r.backend = "workers-ai".into();
        r.request_id = Some(text("ray"));
        r.rule = Some(text("rule"));
        r.detail = Some(text("detail"));
        r.source = Source::Rules;
        r.fallback_reason = Some(FallbackReason::ModelTimeout);
        r.probabilities = Some(ProbabilityMap::from([
            0.123_456_789_012_345_68,
            0.223_456_789_012_345_68,
            0.323_456_789_012_345_7,
            0.000_000_123_456_789_012_345,
        ]));
        r.confidence = Some(0.323_456_789_012_345_7);
        r.arm = Arm::Challenger;
        // AI_TIMEOUT_MS is at most 10 s.
        r.decision_us = 10_000_000;
        r.shadow = Some(Shadow {
            model_action: Some(Action::RouteB),
            agree: false,
        });
        r.request = Some(RequestInfo {
            method: text("PATCH"),
            country: Some(text("US")),
            continent: Some(text("NA")),
            signals_age_s: Some(86_399.999),
            signals_detail: (!fresh).then(|| text("KV read failed")),
        });
        let outcome = r.outcome.as_mut().unwrap();
        outcome.origin_down = Some(Action::RouteA);
        outcome.error = Some(ErrorKind::UpstreamStatus);
        // ORIGIN_TIMEOUT_MS is at most 60 s per attempt.
        outcome.latency_ms = Some(119_999.0);
        for a in &mut outcome.attempts {
            a.latency_ms = Some(59_999.0);
        }
        let line = r.to_line();
        assert!(line.len() <= MAX_LINE_BYTES, "{} bytes: {line}", line.len());
        let Record::Decision(back) = Record::from_line(&line).unwrap() else {
            panic!("not a decision: {line}");
        };
        // Only the free text was cut, and the probabilities dropped.
        let mut expect = r.clone();
        expect.probabilities = None;
        expect.confidence = None;
        expect.request_id = back.request_id.clone();
        expect.rule = back.rule.clone();
        expect.detail = back.detail.clone();
        let req = expect.request.as_mut().unwrap();
        let got = back.request.as_ref().unwrap();
        req.method = got.method.clone();
        req.country = got.country.clone();
        req.continent = got.continent.clone();
        req.signals_detail = got.signals_detail.clone();
        assert_eq!(back, expect);
    }
}

#[test]
fn records_round_trip_with_the_event_tag() {
    let r = Record::Decision(decision());
    let text = serde_json::to_string(&r).unwrap();
    assert!(
        text.starts_with(r#"{"event":"decision","log_version":1,"#),
        "{text}"
    );
    assert!(text.len() < 1024, "{} bytes", text.len());
    assert_eq!(Record::from_line(&text).unwrap(), r);
    let o = Record::Outcome(OutcomeRecord {
        log_version: 1,
        ts: "2026-12-02T10:00:00.000Z".into(),
        decision_id: "d".into(),
        reward: Some(0.5),
        status: None,
        latency_ms: None,
    });
    let text = serde_json::to_string(&o).unwrap();
    assert_eq!(Record::from_line(&text).unwrap(), o);
}

#[test]
fn wire_names_are_the_serde_names() {
    let serde_name = |v: serde_json::Value| v.as_str().unwrap().to_owned();
    for e in Endpoint::ALL {
        assert_eq!(serde_name(serde_json::to_value(e).unwrap()), e.name());
    }
    for e in Endpoint::ALL {
        assert_eq!(Endpoint::parse_name(e.name()), Some(e));
    }
    for k in ErrorKind::ALL {
        assert_eq!(ErrorKind::parse_name(k.name()), Some(k));
    }
    for k in ErrorKind::ALL {
        assert_eq!(serde_name(serde_json::to_value(k).unwrap()), k.name());
    }
}

#[test]
fn readers_ignore_unknown_keys_and_take_absent_optionals() {
    let text = r#"{"event":"decision","log_version":1,"ts":"2026-12-02T10:00:00Z","decision_id":"d","endpoint":"decide",
      "state":{"request_type":0,"region_id":0,"current_load":0,"recent_success_rate":1,"queue_depth":0,"hour":0},
      "action":"reject","source":"rules","propensity":1,"encoder_version":1,"backend":"embedded",
      "arm":"holdout","something_new":[1,2]}"#;
    let Record::Decision(d) = Record::from_line(text).unwrap() else {
        panic!("not a decision");
    };
    assert_eq!(
        (d.action, d.arm, d.outcome),
        (Action::Reject, Arm::Holdout, None)
    );
}

#[test]
fn outcome_bodies_are_validated_naming_the_field() {
    let ok = |b: &str| OutcomeRecord::from_body(b.as_bytes(), "t".into());
    let r = ok(r#"{"decision_id": "abc-1", "reward": 0.25}"#).unwrap();
    assert_eq!((r.reward, r.status), (Some(0.25), None));
    let r = ok(r#"{"decision_id": "abc-1", "status": 503, "latency_ms": 12.5}"#).unwrap();
    assert_eq!((r.status, r.latency_ms), (Some(503), Some(12.5)));
    for (body, code, field) in [
        ("[]", "invalid_type", None),
        ("{", "invalid_json", None),
        (r#"{"reward": 1}"#, "missing_field", Some("decision_id")),
        (
            r#"{"decision_id": 7, "reward": 1}"#,
            "invalid_type",
            Some("decision_id"),
        ),
        (
            r#"{"decision_id": "", "reward": 1}"#,
            "out_of_range",
            Some("decision_id"),
        ),
        (
            r#"{"decision_id": "a b", "reward": 1}"#,
            "out_of_range",
            Some("decision_id"),
        ),
        (
            r#"{"decision_id": "a", "reward": 1.5}"#,
            "out_of_range",
            Some("reward"),
        ),
        (
            r#"{"decision_id": "a", "reward": -0.1}"#,
            "out_of_range",
            Some("reward"),
        ),
        (
            r#"{"decision_id": "a", "reward": "1"}"#,
            "invalid_type",
            Some("reward"),
        ),
        (
            r#"{"decision_id": "a", "reward": NaN}"#,
            "invalid_json",
            Some("reward"),
        ),
        (
            r#"{"decision_id": "a", "status": 99}"#,
            "out_of_range",
            Some("status"),
        ),
        (
            r#"{"decision_id": "a", "status": 200.5}"#,
            "invalid_type",
            Some("status"),
        ),
        (
            r#"{"decision_id": "a", "status": 600}"#,
            "out_of_range",
            Some("status"),
        ),
        (
            r#"{"decision_id": "a", "latency_ms": 3}"#,
            "missing_field",
            Some("reward"),
        ),
        (
            r#"{"decision_id": "a", "status": 200, "latency_ms": -1}"#,
            "out_of_range",
            Some("latency_ms"),
        ),
        (r#"{"decision_id": "a"}"#, "missing_field", Some("reward")),
        (
            r#"{"decision_id": "a", "reward": 1, "extra": 1}"#,
            "unknown_field",
            Some("extra"),
        ),
    ] {
        let e = ok(body).unwrap_err();
        assert_eq!((e.code(), e.field()), (code, field), "{body}");
    }
    let long = format!(r#"{{"decision_id": "{}", "reward": 1}}"#, "a".repeat(129));
    assert_eq!(ok(&long).unwrap_err().field(), Some("decision_id"));
    assert!(ok(&long).unwrap_err().to_string().len() < 200);
}

#[test]
fn a_decision_reads_back_as_written_and_a_decided_state_needs_its_hour() {
    let r = decision();
    let back = Record::from_line(&r.to_line()).unwrap();
    assert_eq!(back, Record::Decision(r.clone()));
    let mut v: Value = serde_json::from_str(&r.to_line()).unwrap();
    v["state"].as_object_mut().unwrap().remove("hour");
    let e = Record::from_value(&v).unwrap_err();
    assert_eq!((e.code(), e.field()), ("missing_field", Some("state.hour")));
    // Nulls read as absent; unknown nested keys too, except in the state.
    let mut v: Value = serde_json::from_str(&r.to_line()).unwrap();
    v["rule"] = Value::Null;
    v["outcome"]["new_key"] = serde_json::json!(1);
    assert!(Record::from_value(&v).is_ok());
    v["outcome"]["attempts"][1] = serde_json::json!("x");
    let e = Record::from_value(&v).unwrap_err();
    assert_eq!(e.field(), Some("outcome.attempts[1]"));
}

/// A request without a routing key is marked `"key":"none"`; one with a key writes nothing
/// (lines stay as they were), and both read back as written.
#[test]
fn a_keyless_request_says_key_none() {
    let mut r = decision();
    let line = r.to_line();
    assert!(!line.contains(r#""key""#), "{line}");
    assert_eq!(
        Record::from_line(&line).unwrap(),
        Record::Decision(r.clone())
    );
    r.key = RoutingKey::None;
    let line = r.to_line();
    assert!(line.contains(r#""arm":"champion","key":"none","#), "{line}");
    assert_eq!(
        Record::from_line(&line).unwrap(),
        Record::Decision(r.clone())
    );
    let bad = line.replace(r#""key":"none""#, r#""key":"ip""#);
    let e = Record::from_line(&bad).unwrap_err();
    assert_eq!((e.code(), e.field()), ("out_of_range", Some("key")));
    assert_eq!(serde_json::to_value(RoutingKey::None).unwrap(), "none");
}

/// A request's final outcome has a status only when the client got a usable answer: a body
/// cut short keeps the origin's 200 in the record and counts as none (a failure).
#[test]
fn an_outcome_with_an_error_scores_no_status() {
    let mut o = decision().outcome.unwrap();
    assert_eq!((o.status, o.final_status()), (Some(200), Some(200)));
    o.body_went_idle();
    assert_eq!((o.status, o.final_status()), (Some(200), None));
    assert_eq!(o.error, Some(ErrorKind::BodyIdle));
    let answered = o.attempts.last().unwrap();
    assert_eq!(
        (answered.status, answered.error),
        (Some(200), Some(ErrorKind::BodyIdle))
    );
    // The attempt before it keeps its own error.
    assert_eq!(o.attempts[0].error, Some(ErrorKind::UpstreamStatus));
    o.error = Some(ErrorKind::BadUpstream);
    o.status = Some(103);
    assert_eq!(o.final_status(), None);
    assert_eq!(
        RouteOutcome::answered_by_worker(503).final_status(),
        Some(503)
    );
}

/// A decision is scored by its decided origin's first attempt: the fixture's route_b answered
/// 503 and route_c rescued the request with a 200, so the client succeeded and the decision
/// failed.
#[test]
fn a_decision_is_scored_by_its_origins_first_attempt() {
    let d = decision();
    let mut o = d.outcome.unwrap();
    assert_eq!(d.action, Action::RouteB);
    assert_eq!(o.final_status(), Some(200));
    assert_eq!(o.decided(Action::RouteB), (None, Some(3.0)));
    // Had route_c been decided, its own answer would count.
    assert_eq!(o.decided(Action::RouteC).0, Some(200));
    // The decided origin never asked (marked down, or no origin) while another was: failure.
    assert_eq!(o.decided(Action::RouteA), (None, None));
    // Only the first attempt at the decided origin counts.
    o.attempts.push(Attempt {
        origin: Action::RouteB,
        status: Some(200),
        error: None,
        latency_ms: Some(1.0),
    });
    assert_eq!(o.decided(Action::RouteB).0, None);
    // An origin that answered in one attempt: its status, its latency.
    o.attempts.truncate(0);
    o.attempts.push(Attempt {
        origin: Action::RouteB,
        status: Some(404),
        error: None,
        latency_ms: Some(7.0),
    });
    assert_eq!(o.decided(Action::RouteB), (Some(404), Some(7.0)));
    // Its body cut short: a failure.
    o.body_went_idle();
    assert_eq!(o.decided(Action::RouteB), (None, Some(7.0)));
    // The Worker answered by itself (a refused body): its own status.
    let w = RouteOutcome::answered_by_worker(400);
    assert_eq!(w.decided(Action::RouteB), (Some(400), Some(0.0)));
}

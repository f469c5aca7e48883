//! Bytes → the whole decision path, as the Worker runs it: a request body `{"state": …}` is
//! validated, encoded and scored by the model (the shipped artifact when present, else the
//! tiny test one), and `decider_core::request::decide` — the composition the Worker calls —
//! decides under every model outcome (a remote model's, fed in), gate and mode, with
//! exploration on and off. The same bytes are also read as a remote model's answer
//! (`ModelOutput::from_remote_json`). Laws: nothing panics; an accepted body is a valid
//! state; usable outputs are finite with probabilities summing to 1; the decision's source,
//! fallback reason and action agree with each other and with the inputs; its record fits in
//! a line, says what the decision says, and reads back as written; the answer is its JSON.
#![no_main]

use decider_core::record::{Endpoint, Record, RoutingKey, MAX_LINE_BYTES};
use decider_core::request::{self, Remote, Request};
use decider_core::rollout::Arm;
use decider_core::{
    encode, Action, Decider, Decision, Explore, FallbackReason, Gates, Model, ModelError,
    ModelOutcome, ModelOutput, ModelSource, Params, PolicyConfig, RuleTable, Source, State,
    Threshold, DEFAULT_RULES_JSON,
};
use decider_fuzz::{check_features, check_probabilities, check_state, model, sample_states};
use libfuzzer_sys::fuzz_target;
use serde_json::Value;
use std::sync::OnceLock;

fn fixtures() -> &'static (Model, RuleTable) {
    static F: OnceLock<(Model, RuleTable)> = OnceLock::new();
    F.get_or_init(|| {
        let rules = RuleTable::from_json(DEFAULT_RULES_JSON).expect("default rules load");
        (model(), rules)
    })
}

fn check_output(o: &ModelOutput) {
    assert!(
        o.confidence.is_finite() && (0.0..=1.0).contains(&o.confidence),
        "{o:?}"
    );
    if let Some(p) = &o.probabilities {
        check_probabilities(p);
        assert_eq!(p[o.action.index()], o.confidence, "{o:?}");
    }
}

fn check_decision(
    d: &Decision,
    outcome: &ModelOutcome,
    gates: Gates,
    cfg: &PolicyConfig,
    rules: bool,
) {
    serde_json::to_string(d).expect("a decision serialises");
    if gates.stale_signals {
        assert_eq!(d.fallback_reason, Some(FallbackReason::StaleSignals));
    } else if gates.holdout {
        assert_eq!(d.fallback_reason, Some(FallbackReason::Holdout));
    }
    match d.source {
        Source::Model => {
            assert!(!cfg.shadow && d.fallback_reason.is_none(), "{d:?}");
            let ModelOutcome::Output(o) = outcome else {
                panic!("model decided without an output: {d:?}")
            };
            assert_eq!(d.action, o.action);
            assert!(o.confidence >= cfg.threshold, "{d:?}");
        }
        Source::Rules => {
            assert!(rules && d.rule.is_some(), "{d:?}");
            assert!(cfg.shadow || d.fallback_reason.is_some(), "{d:?}");
        }
        Source::Default => {
            // The default table ends in a catch-all: with it, rules always decide.
            assert!(!rules, "{d:?}");
            assert_eq!(d.action, cfg.default_action);
        }
    }
    assert_eq!(d.shadow.is_some(), cfg.shadow);
}

/// An f64 from the input's last 8 bytes: every bit pattern, NaN and infinities included.
fn tail_f64(data: &[u8]) -> f64 {
    let mut b = [0u8; 8];
    let n = data.len().min(8);
    b[..n].copy_from_slice(&data[data.len() - n..]);
    f64::from_le_bytes(b)
}

fuzz_target!(|data: &[u8]| {
    let (model, rules) = fixtures();
    let samples = sample_states();
    let body: Option<Value> = serde_json::from_slice(data).ok();

    // The request body: `{"state": {...}}`; anything else decides a sample state instead.
    let default_hour = (data.len() % 24) as u8;
    // The Worker's parser never panics and, when it accepts a body, yields a valid state.
    if let Ok(s) = State::from_body(data, default_hour) {
        check_state(&s);
    }
    let parsed = body
        .as_ref()
        .and_then(|b| b.get("state"))
        .map(|v| State::from_value(v, default_hour));
    let state = match parsed {
        Some(Ok(s)) => {
            check_state(&s);
            s
        }
        _ => samples[data.len() % samples.len()],
    };
    let x = encode(&state);
    check_features(&x);
    let p = model.predict(&x);
    check_probabilities(&p);
    let from_model = ModelOutput::from_probabilities(p).expect("model probabilities are usable");
    check_output(&from_model);

    // The same bytes as a remote model's answer.
    let remote = body.as_ref().map(ModelOutput::from_remote_json);
    if let Some(Ok(o)) = &remote {
        check_output(o);
    }

    let c = tail_f64(data);
    let action = Action::ALL[data.len() % 4];
    match ModelOutput::from_action(action, c) {
        Ok(o) => check_output(&o),
        Err(_) => assert!(!(c.is_finite() && (0.0..=1.0).contains(&c))),
    }
    let bad = [c, f64::NAN, f64::INFINITY, -c];
    assert!(ModelOutput::from_probabilities([f64::NAN, 0.5, 0.5, 0.0]).is_err());
    let odd = ModelOutput::from_probabilities([bad[data.len() % 4], 0.25, 0.25, 0.25]);
    if let Ok(o) = &odd {
        check_output(o);
    }

    let mut outcomes = vec![
        ModelOutcome::Output(from_model),
        ModelOutcome::Error(ModelError::Backend("fuzz".into())),
        ModelOutcome::Timeout,
        ModelOutcome::Unavailable,
        ModelOutcome::NotRun,
        // Built by hand, past the constructors: the policy must still not trust it.
        ModelOutcome::Output(ModelOutput {
            action,
            confidence: c,
            probabilities: Some([c; 4]),
        }),
    ];
    match remote {
        Some(Ok(o)) => outcomes.push(ModelOutcome::Output(o)),
        Some(Err(e)) => outcomes.push(ModelOutcome::Error(e)),
        None => {}
    }
    if let Ok(o) = odd {
        outcomes.push(ModelOutcome::Output(o));
    }

    let threshold = Threshold::new(model.threshold()).expect("the artifact's threshold is valid");
    for outcome in &outcomes {
        for (stale_signals, holdout) in [(false, false), (true, false), (false, true), (true, true)]
        {
            let gates = Gates {
                stale_signals,
                holdout,
            };
            for (shadow, with_rules, explore) in [
                (false, true, 0.0),
                (true, true, 0.0),
                (false, false, 0.0),
                (false, true, 20.0),
            ] {
                let params = Params {
                    threshold: Some(threshold),
                    default_action: Action::ALL[(data.len() / 4) % 4],
                    ood_check: true,
                    shadow,
                    explore: Explore::from_percent(explore).expect("a valid share"),
                };
                // A remote model's decider is handed each outcome, as the Worker hands it
                // the Workers AI answer.
                let decider = Decider::new(
                    ModelSource::Remote {
                        name: model.version().to_string(),
                        threshold: Some(model.threshold()),
                    },
                    with_rules.then(|| rules.clone()),
                    params,
                );
                let req = Request {
                    state,
                    gates,
                    endpoint: if holdout { Endpoint::Route } else { Endpoint::Decide },
                    arm: if holdout { Arm::Holdout } else { Arm::Champion },
                    key: if data.len() % 2 == 0 { RoutingKey::Given } else { RoutingKey::None },
                    decision_id: format!("fuzz-{}", data.len()),
                    keys: None,
                    request_id: std::str::from_utf8(data).ok(),
                    backend: "workers-ai",
                    now_ms: c,
                    decision_us: data.len() as u64,
                };
                let remote = Remote {
                    outcome: outcome.clone(),
                    detail: None,
                };
                let decided = request::decide(&decider, req, Some(remote));
                let cfg = decider.policy();
                let d = &decided.decision;
                if explore == 0.0 {
                    check_decision(d, outcome, gates, cfg, with_rules);
                }
                // The record says what the decision says, fits a line, reads back as written.
                let r = &decided.record;
                assert_eq!((r.action, r.source, r.fallback_reason), (d.action, d.source, d.fallback_reason));
                assert!(r.propensity > 0.0 && r.propensity <= 1.0, "{r:?}");
                let line = r.to_line();
                assert!(line.len() <= MAX_LINE_BYTES, "{} bytes", line.len());
                let back = Record::from_line(&line).expect("a written record reads back");
                let Record::Decision(back) = back else {
                    panic!("not a decision: {line}")
                };
                assert_eq!((back.action, back.state, back.propensity), (r.action, r.state, r.propensity));
                let answer: serde_json::Value =
                    serde_json::from_str(&decided.answer()).expect("the answer is JSON");
                assert_eq!(answer["action"], d.action.name());
            }
        }
    }
});

//! One decision request, served: the decision, its record and its answer, composed once.
//!
//! Both endpoints of the Worker (`POST /v1/decide` and edge routing), the wasm benchmark
//! and the fuzz target decide through [`decide`]: a [`Decider`], the parsed request, the
//! remote model's outcome when there is one, the rollout arm, the ids and the clock in;
//! the [`Decision`], its [`DecisionRecord`] and the `/v1/decide` answer out. The Worker only
//! awaits I/O around it (the Workers AI call, the origins) and writes the results.

use crate::decider::{draw_from_id, Decider, ModelSource};
use crate::decision_id::{self, Claims, DecisionKeys};
use crate::output::ModelOutcome;
use crate::policy::{self, Decision, Gates};
use crate::record::{
    clip_to, DecisionRecord, Endpoint, RoutingKey, ECHO_BYTES, LOG_VERSION, TEXT_BYTES,
};
use crate::rollout::Arm;
use crate::state::State;
use crate::time::iso_from_ms;

/// What is being decided, for whom, and when.
#[derive(Debug, Clone)]
pub struct Request<'a> {
    /// The validated state.
    pub state: State,
    /// The gates the edge decided before the model (stale signals, holdout).
    pub gates: Gates,
    /// The endpoint.
    pub endpoint: Endpoint,
    /// The rollout arm, whose decider decides.
    pub arm: Arm,
    /// Whether the request had its routing key (the arm's bucket is then sticky).
    pub key: RoutingKey,
    /// The new decision's id (`crypto.randomUUID()` in the Worker). Its last character is
    /// replaced by the tag of the arm and the deciding source
    /// ([`decision_id::tag_base`]); exploration draws from this base, so an explored
    /// decision can be replayed from its record. With `keys`, the base is then signed with
    /// what an outcome needs ([`decision_id::sign`]).
    pub decision_id: String,
    /// The keys decision ids are signed with (`DECISION_ID_KEY`); None: unsigned ids.
    pub keys: Option<&'a DecisionKeys>,
    /// The platform's request id (`cf-ray`), when present; kept at most [`ECHO_BYTES`].
    pub request_id: Option<&'a str>,
    /// The model backend's name for the record (`embedded`, `workers-ai`).
    pub backend: &'a str,
    /// When the decision was made, ms since the epoch.
    pub now_ms: f64,
    /// Time spent deciding, µs (the remote model's wait; 0 for the embedded model, whose
    /// work the Workers clock does not see).
    pub decision_us: u64,
}

/// A remote model's outcome, with the detail worth logging when it failed.
#[derive(Debug, Clone, PartialEq)]
pub struct Remote {
    /// What the model answered, or why not.
    pub outcome: ModelOutcome,
    /// The backend's own words about a failure (for the log, never for clients).
    pub detail: Option<String>,
}

/// A served decision and the record logged for it.
#[derive(Debug, Clone, PartialEq)]
pub struct Decided {
    /// The decision (its action possibly replaced by exploration).
    pub decision: Decision,
    /// Its record; a routed request adds its outcome and request info before logging.
    pub record: DecisionRecord,
    /// The serving policy's probability of each action in this state (the record's
    /// `propensity` is the served action's): what an off-policy evaluation of the logger needs.
    pub distribution: [f64; crate::NUM_ACTIONS],
}

impl Decided {
    /// The `/v1/decide` answer: the decision JSON followed by its `decision_id`.
    pub fn answer(&self) -> String {
        // The decision's object with one member more, appended before its closing brace
        // (a decision always has members). The same bytes as a struct flattening the
        // decision, without serde's map serialiser for `flatten`.
        // A decision has no maps with non-string keys: serialising cannot fail.
        let mut out = serde_json::to_string(&self.decision).unwrap_or_else(|_| "{}".into());
        out.pop();
        if out.len() > 1 {
            out.push(',');
        }
        out.push_str(r#""decision_id":"#);
        let id = serde_json::to_string(&self.record.decision_id).unwrap_or_default();
        out.push_str(&id);
        out.push('}');
        out
    }
}

/// Decides `req` with `decider` (the arm's), given the remote model's outcome when
/// [`Decider::needs_remote`] said it was needed: runs the policy, applies exploration
/// (drawn from the decision id), and writes the record.
pub fn decide(decider: &Decider, req: Request<'_>, remote: Option<Remote>) -> Decided {
    let (outcome, detail) = match remote {
        Some(r) => (Some(r.outcome), r.detail),
        None => (None, None),
    };
    let mut greedy = decider.decide_with(&req.state, req.gates, outcome);
    greedy.decision_us = req.decision_us;
    let source = greedy.source;
    let base = decision_id::tag_base(req.decision_id, req.arm, source);
    let served = decider.serve(greedy, draw_from_id(&base));
    let d = served.decision;
    let decision_id = match req.keys {
        Some(keys) => {
            let claims = Claims {
                arm: req.arm,
                source,
                endpoint: req.endpoint,
                action: d.action,
                issued_ms: req.now_ms.clamp(0.0, decision_id::MAX_ISSUED_MS as f64) as u64,
            };
            decision_id::sign(&base, &claims, keys)
        }
        None => base,
    };
    // A decision that needed an unavailable model says why in its record.
    let needed = policy::model_needed(req.gates, decider.policy());
    let detail = detail.or_else(|| match decider.model() {
        ModelSource::Unavailable(why) if needed => Some(clip_to(why, TEXT_BYTES)),
        _ => None,
    });
    let record = DecisionRecord {
        log_version: LOG_VERSION,
        ts: iso_from_ms(req.now_ms),
        decision_id,
        request_id: req.request_id.map(|r| clip_to(r, ECHO_BYTES)),
        endpoint: req.endpoint,
        state: req.state,
        action: d.action,
        source: d.source,
        fallback_reason: d.fallback_reason,
        rule: d.rule.clone(),
        confidence: d.confidence,
        probabilities: d.probabilities,
        propensity: served.propensity,
        explored: served.explored,
        model_version: d.model_version.clone(),
        rules_version: decider.rules_version().map(str::to_owned),
        encoder_version: d.encoder_version,
        backend: req.backend.to_string(),
        arm: req.arm,
        key: req.key,
        decision_us: d.decision_us,
        outcome: None,
        request: None,
        shadow: d.shadow,
        detail,
    };
    Decided {
        decision: d,
        record,
        distribution: served.distribution,
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use crate::decider::Params;
    use crate::model::tests_support::TINY_ARTIFACT;
    use crate::rules::Rules;
    use crate::Model;
    use serde::Serialize;
    use std::sync::Arc;

    /// What the answer was written as before: the decision flattened beside its id.
    #[derive(Serialize)]
    struct Flattened<'a> {
        #[serde(flatten)]
        decision: &'a Decision,
        decision_id: &'a str,
    }

    #[test]
    fn the_answer_is_the_decision_flattened_beside_its_id() {
        let model = Arc::new(Model::from_json(TINY_ARTIFACT).unwrap());
        let deciders = [
            Decider::new(
                ModelSource::Local(model),
                Some(Rules::Shipped),
                Params::default(),
            ),
            Decider::new(
                ModelSource::Unavailable("none \"here\"".into()),
                Some(Rules::Shipped),
                Params::default(),
            ),
        ];
        let keys = DecisionKeys::new(b"k1-0123456789abcdef", None).unwrap();
        let mut sources = Vec::new();
        for decider in &deciders {
            for load in [0.1, 0.5, 0.99] {
                let state = State {
                    request_type: 1,
                    region_id: 2,
                    current_load: load,
                    recent_success_rate: 0.97,
                    queue_depth: 3.0,
                    hour: 14,
                };
                let d = decide(
                    decider,
                    Request {
                        state,
                        gates: Gates::default(),
                        endpoint: Endpoint::Decide,
                        arm: Arm::Champion,
                        key: RoutingKey::Given,
                        decision_id: "4ae12971-112e-44b1-a38b-7063b8e5186f".into(),
                        keys: Some(&keys),
                        request_id: None,
                        backend: "embedded",
                        now_ms: 1_796_205_600_000.0,
                        decision_us: 0,
                    },
                    None,
                );
                let want = serde_json::to_string(&Flattened {
                    decision: &d.decision,
                    decision_id: &d.record.decision_id,
                })
                .unwrap();
                assert_eq!(d.answer(), want);
                sources.push(d.decision.source);
            }
        }
        // Both shapes were written: the model's (probabilities) and the rules' (a rule).
        assert!(sources.contains(&policy::Source::Model), "{sources:?}");
        assert!(sources.contains(&policy::Source::Rules), "{sources:?}");
    }

    /// The distribution a decision carries is the serving policy's in its state, whether or
    /// not exploration replaced the greedy action; the record's propensity is its entry.
    #[test]
    fn a_decision_carries_the_serving_distribution_of_its_state() {
        let model = Arc::new(Model::from_json(TINY_ARTIFACT).unwrap());
        let decider = Decider::new(
            ModelSource::Local(model),
            Some(Rules::Shipped),
            Params {
                explore: crate::decider::Explore::from_percent(20.0).unwrap(),
                ..Params::default()
            },
        );
        let mut explored = 0;
        for i in 0..400 {
            let state = State {
                request_type: (i % 4) as u8,
                region_id: (i % 7) as u8,
                current_load: (i % 10) as f64 / 10.0,
                recent_success_rate: 0.97,
                queue_depth: 3.0,
                hour: (i % 24) as u8,
            };
            let d = decide(
                &decider,
                Request {
                    state,
                    gates: Gates::default(),
                    endpoint: Endpoint::Route,
                    arm: Arm::Champion,
                    key: RoutingKey::Given,
                    decision_id: format!("id-{i}"),
                    keys: None,
                    request_id: None,
                    backend: "embedded",
                    now_ms: 0.0,
                    decision_us: 0,
                },
                None,
            );
            let greedy = decider.decide(&state, Gates::default());
            assert_eq!(d.distribution, decider.serving_distribution(&greedy), "{i}");
            assert_eq!(
                d.distribution[d.decision.action.index()],
                d.record.propensity
            );
            explored += usize::from(d.record.explored);
        }
        // Some decisions were explored: the distribution is the greedy one's there too.
        assert!(explored > 0);
    }
}

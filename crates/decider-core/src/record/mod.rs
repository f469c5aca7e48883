//! Decision records: the one JSON log line per decision that the Worker writes and that
//! `decider report`, `decider ope` and `decider train --logs` read back — one codec, here.
//!
//! A record holds what a learner needs on its own: the state as decided, the action, the
//! probability with which the serving policy chose it (`propensity`), who decided and why,
//! the versions in force, the rollout arm, and for a routed request its outcome. A caller
//! of `/v1/decide` reports its outcome later in an [`OutcomeRecord`] with the same
//! `decision_id`; the logs are the event store and the two are joined offline.
//!
//! - This module: the record types and the rules every record obeys.
//! - [`line`]: writing a record as its log line (at most [`MAX_LINE_BYTES`]).
//! - The control plane's events ([`RolloutRecord`], [`JudgedRecord`], [`AlarmRecord`]): what
//!   the rollout's judge did and found, written by the rollout Worker through this codec; their
//!   statistics and judgement are the judge's own JSON objects (`decider-rollout` writes their
//!   inside), the codec holds what every reader relies on.
//! - [`read`]: reading records back — one validation for the Worker's `POST /v1/outcome`
//!   bodies and for every log line a reader meets — and the lenient [`Reader`] that skips
//!   and counts what is not a good record, naming the field that was wrong.

mod line;
pub mod read;
mod reader;

pub use line::{clip_to, CUT_MARK, ECHO_BYTES, MAX_LINE_BYTES, TEXT_BYTES};
pub use reader::{id_key, Found, ReadStats, Reader, SkipReason, Skipped};

use crate::actions::Action;
use crate::policy::{FallbackReason, ProbabilityMap, Shadow, Source};
use crate::rollout::{Arm, Phase, Setting};
use crate::state::State;
use serde::Serialize;
use serde_json::Value;
use std::ops::RangeInclusive;

/// Schema version of [`Record`]; readers refuse other versions.
pub const LOG_VERSION: u32 = 1;

/// One log line of the event store.
// Records are read and written one at a time, so the size difference costs nothing.
#[allow(clippy::large_enum_variant)]
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(tag = "event", rename_all = "snake_case")]
pub enum Record {
    /// A decision (both endpoints).
    Decision(DecisionRecord),
    /// An outcome reported for a decision by a `/v1/decide` caller.
    Outcome(OutcomeRecord),
    /// A change of the rollout's setting, made by the control plane's judge.
    Rollout(RolloutRecord),
    /// One look of the judge.
    RolloutJudged(JudgedRecord),
    /// An alarm the judge raised.
    RolloutAlarm(AlarmRecord),
    /// An alarm the judge cleared.
    RolloutAlarmCleared(AlarmRecord),
}

/// Which endpoint decided.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Endpoint {
    /// `POST /v1/decide`: the caller routes by itself.
    Decide,
    /// Edge routing: the Worker proxied the request.
    Route,
}

impl Endpoint {
    /// All endpoints, in wire order.
    pub const ALL: [Endpoint; 2] = [Endpoint::Decide, Endpoint::Route];

    /// The endpoint of a wire name.
    pub fn parse_name(s: &str) -> Option<Endpoint> {
        Endpoint::ALL.into_iter().find(|x| x.name() == s)
    }

    /// Wire name.
    pub fn name(self) -> &'static str {
        match self {
            Endpoint::Decide => "decide",
            Endpoint::Route => "route",
        }
    }
}

/// One decision as logged.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct DecisionRecord {
    /// [`LOG_VERSION`].
    pub log_version: u32,
    /// When, ISO-8601 UTC with milliseconds.
    pub ts: String,
    /// Unique id; `/v1/decide` callers quote it in their outcome.
    pub decision_id: String,
    /// The platform's request id (`cf-ray`), when present.
    pub request_id: Option<String>,
    /// Which endpoint decided.
    pub endpoint: Endpoint,
    /// The state as decided, defaults filled in.
    pub state: State,
    /// The action taken.
    pub action: Action,
    /// Who decided.
    pub source: Source,
    /// Why the model did not decide.
    pub fallback_reason: Option<FallbackReason>,
    /// The rule that decided, when rules decided.
    pub rule: Option<String>,
    /// The model's confidence in its top action.
    pub confidence: Option<f64>,
    /// The model's probabilities, when it gave them.
    pub probabilities: Option<ProbabilityMap>,
    /// Probability with which the serving policy chose `action` (1 when deterministic).
    pub propensity: f64,
    /// Whether exploration replaced the policy's own action.
    pub explored: bool,
    /// The model version consulted (or configured).
    pub model_version: Option<String>,
    /// The rule table's version.
    pub rules_version: Option<String>,
    /// Encoder version of the build that decided (0 when a line does not say: readers take
    /// hand-written and trimmed lines without it).
    pub encoder_version: u32,
    /// `embedded` or `workers-ai` (empty when a line does not say).
    pub backend: String,
    /// The rollout arm.
    pub arm: Arm,
    /// Whether the request had a routing key (`CANARY_KEY`); written only when it had none.
    #[serde(skip_serializing_if = "RoutingKey::is_given")]
    pub key: RoutingKey,
    /// Time spent deciding, µs.
    pub decision_us: u64,
    /// Routed requests: what the origin did.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub outcome: Option<RouteOutcome>,
    /// Routed requests: where the state came from.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub request: Option<RequestInfo>,
    /// Shadow mode: the model's action beside the rules'.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub shadow: Option<Shadow>,
    /// Internal detail of a model failure (never sent to clients).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub detail: Option<String>,
}

/// Whether a request had the routing key its arm is bucketed by (`CANARY_KEY`: the client's
/// `cf-connecting-ip`, which Cloudflare sets on every request at the edge, or a header).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum RoutingKey {
    /// The request had one: its bucket is sticky. Not written (a line without `key`).
    #[default]
    Given,
    /// The request had none: its bucket was drawn at random for it alone (not one bucket
    /// shared by every keyless request). Written `"key":"none"`.
    None,
}

impl RoutingKey {
    /// Wire names.
    pub const NAMES: &'static str = "one of given, none";

    /// Whether the request had a key (the record then leaves `key` out).
    pub fn is_given(&self) -> bool {
        *self == RoutingKey::Given
    }

    /// The value of a wire name.
    pub fn parse_name(s: &str) -> Option<RoutingKey> {
        match s {
            "given" => Some(RoutingKey::Given),
            "none" => Some(RoutingKey::None),
            _ => None,
        }
    }
}

/// Where a routed request's state came from, for reading a record on its own.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct RequestInfo {
    /// The request method.
    pub method: String,
    /// The client's country (`request.cf`), when known.
    pub country: Option<String>,
    /// The client's continent, when known.
    pub continent: Option<String>,
    /// Age of the signals snapshot, seconds, when there is one.
    pub signals_age_s: Option<f64>,
    /// Why the signals are not usable, when they are not.
    pub signals_detail: Option<String>,
}

/// What became of a routed request at the origins.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct RouteOutcome {
    /// The origin that answered last (or was tried last), by action name.
    pub origin: Option<Action>,
    /// That origin's status (also one it could not relay, e.g. 103); the Worker's own when
    /// no origin was asked: 503 for a rejected request, 400 for a GET or HEAD with a body.
    pub status: Option<u16>,
    /// Time to the final response headers, ms, failover included.
    pub latency_ms: Option<f64>,
    /// The failover target, when a failover was taken.
    pub failover: Option<Action>,
    /// The decided origin, when the monitor marked it down and the request went straight to
    /// its failover (`failover`) without trying it. Absent otherwise.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub origin_down: Option<Action>,
    /// Why the request got no usable answer, when it did not (a body cut short included:
    /// [`ErrorKind::BodyIdle`] with the origin's status kept).
    pub error: Option<ErrorKind>,
    /// Every origin contacted, in order.
    pub attempts: Vec<Attempt>,
}

impl RouteOutcome {
    /// The Worker answered by itself with `status` (a rejected request, a refused body): no
    /// origin was asked, so there is no origin, failover or attempt to record.
    pub fn answered_by_worker(status: u16) -> RouteOutcome {
        RouteOutcome {
            origin: None,
            status: Some(status),
            latency_ms: Some(0.0),
            failover: None,
            origin_down: None,
            error: None,
            attempts: Vec::new(),
        }
    }

    /// The answer's body stalled and was cut (`ORIGIN_BODY_IDLE_MS`): the outcome and the
    /// attempt that answered say [`ErrorKind::BodyIdle`], the origin's status kept beside
    /// it; the outcome then scores as a failure ([`RouteOutcome::decided`]).
    pub fn body_went_idle(&mut self) {
        self.error = Some(ErrorKind::BodyIdle);
        if let Some(answered) = self.attempts.last_mut() {
            answered.error = Some(ErrorKind::BodyIdle);
        }
    }

    /// The request's final outcome: the final status when the client got a usable answer;
    /// none when it did not (`error` set: a timeout, a failed connection, an answer the proxy
    /// could not relay, a body cut short), whatever status an origin sent first.
    pub fn final_status(&self) -> Option<u16> {
        match self.error {
            None => self.status,
            Some(_) => None,
        }
    }

    /// The decision's own outcome, `(status, latency_ms)`, which its reward is scored by:
    /// the first attempt at the `decided` origin. Its status is none — a failure — when that
    /// attempt gave no usable answer (an error, a body cut short), and so is the outcome
    /// when the decided origin was never asked (marked down, or no origin configured) while
    /// another was: failover rescues the client, not the decision. A request the Worker
    /// answered itself, asking no origin (a refused body), keeps the Worker's status.
    pub fn decided(&self, decided: Action) -> (Option<u16>, Option<f64>) {
        match self.attempts.iter().find(|a| a.origin == decided) {
            Some(a) => (a.status.filter(|_| a.error.is_none()), a.latency_ms),
            None if self.answered_by_itself() => (self.status, self.latency_ms),
            None => (None, None),
        }
    }

    /// Whether the Worker answered without planning any origin (a rejected request, a refused
    /// body): no attempt, no error, no origin marked down.
    pub fn answered_by_itself(&self) -> bool {
        self.attempts.is_empty() && self.error.is_none() && self.origin_down.is_none()
    }
}

/// One request to one origin.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Attempt {
    /// The origin, by action name.
    pub origin: Action,
    /// Its status, when it answered.
    pub status: Option<u16>,
    /// Why it gave no usable answer.
    pub error: Option<ErrorKind>,
    /// Time to its response headers (or to the failure), ms.
    pub latency_ms: Option<f64>,
}

/// Why an origin gave no usable answer.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum ErrorKind {
    /// No response headers within `ORIGIN_TIMEOUT_MS`.
    Timeout,
    /// The connection failed.
    Connect,
    /// A status that means the origin could not serve (502, 503, 504).
    UpstreamStatus,
    /// A response the proxy cannot relay (an informational or out-of-range status).
    BadUpstream,
    /// No origin is configured for the action.
    NoOrigin,
    /// The origin's body stalled: no byte for `ORIGIN_BODY_IDLE_MS`, so the Worker cut it
    /// (the client saw the status and a body cut short).
    BodyIdle,
}

impl ErrorKind {
    /// All kinds, in declaration order.
    pub const ALL: [ErrorKind; 6] = [
        ErrorKind::Timeout,
        ErrorKind::Connect,
        ErrorKind::UpstreamStatus,
        ErrorKind::BadUpstream,
        ErrorKind::NoOrigin,
        ErrorKind::BodyIdle,
    ];

    /// The kind of a wire name.
    pub fn parse_name(s: &str) -> Option<ErrorKind> {
        ErrorKind::ALL.into_iter().find(|x| x.name() == s)
    }

    /// Wire name.
    pub fn name(self) -> &'static str {
        match self {
            ErrorKind::Timeout => "timeout",
            ErrorKind::Connect => "connect",
            ErrorKind::UpstreamStatus => "upstream_status",
            ErrorKind::BadUpstream => "bad_upstream",
            ErrorKind::NoOrigin => "no_origin",
            ErrorKind::BodyIdle => "body_idle",
        }
    }
}

/// An outcome reported by a caller of `/v1/decide`.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct OutcomeRecord {
    /// [`LOG_VERSION`].
    pub log_version: u32,
    /// When it was reported.
    pub ts: String,
    /// The decision it belongs to.
    pub decision_id: String,
    /// The caller's reward in `[0, 1]`.
    pub reward: Option<f64>,
    /// The status the caller observed, when it reports no reward.
    pub status: Option<u16>,
    /// The latency the caller observed, ms.
    pub latency_ms: Option<f64>,
}

/// Why a setting changed: the judge's verdicts, the bake's end, and an operator's verbs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Why {
    /// The challenger is better than the champion, with enough outcomes: the next step.
    Better,
    /// The challenger is worse than the champion by more than the tolerated loss: rollback.
    Worse,
    /// Rules beat the model on the holdout arm (`ROLLOUT_RULES_SWITCH`).
    RulesBeatModel,
    /// The bake ended without a rollback: the challenger is promoted to 100%.
    Baked,
    /// An operator paused the judge: it keeps judging and changes nothing.
    Pause,
    /// An operator resumed it.
    Resume,
    /// An operator aborted the rollout: the challenger's share is 0 now.
    Abort,
    /// An operator promoted the challenger: 100% now (its bake still applies unless skipped).
    Promote,
    /// An operator restarted the rollout of the same challenger on fresh counts.
    Restart,
}

impl Why {
    /// Every reason, in wire order.
    pub const ALL: [Why; 9] = [
        Why::Better,
        Why::Worse,
        Why::RulesBeatModel,
        Why::Baked,
        Why::Pause,
        Why::Resume,
        Why::Abort,
        Why::Promote,
        Why::Restart,
    ];

    /// Wire name.
    pub fn name(self) -> &'static str {
        match self {
            Why::Better => "better",
            Why::Worse => "worse",
            Why::RulesBeatModel => "rules_beat_model",
            Why::Baked => "baked",
            Why::Pause => "pause",
            Why::Resume => "resume",
            Why::Abort => "abort",
            Why::Promote => "promote",
            Why::Restart => "restart",
        }
    }

    /// The reason of a wire name.
    pub fn parse_name(s: &str) -> Option<Why> {
        Why::ALL.into_iter().find(|w| w.name() == s)
    }

    /// Whether an operator's verb made the change (not the judge).
    pub fn by_operator(self) -> bool {
        matches!(
            self,
            Why::Pause | Why::Resume | Why::Abort | Why::Promote | Why::Restart
        )
    }
}

/// Which alarm.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum AlarmKind {
    /// Rules beat the model on the holdout arm: retrain.
    Holdout,
    /// The fallback rate rose sharply.
    Fallback,
    /// An arm has more outcomes than decisions on the step: outcomes are being counted that
    /// no decision of the step earned (the judge withholds its verdict while it holds).
    ExcessOutcomes,
}

impl AlarmKind {
    /// Every kind, in wire order.
    pub const ALL: [AlarmKind; 3] = [
        AlarmKind::Holdout,
        AlarmKind::Fallback,
        AlarmKind::ExcessOutcomes,
    ];

    /// Wire name.
    pub fn name(self) -> &'static str {
        match self {
            AlarmKind::Holdout => "holdout",
            AlarmKind::Fallback => "fallback",
            AlarmKind::ExcessOutcomes => "excess_outcomes",
        }
    }

    /// The kind of a wire name.
    pub fn parse_name(s: &str) -> Option<AlarmKind> {
        AlarmKind::ALL.into_iter().find(|k| k.name() == s)
    }
}

/// A change of the rollout's setting (the `rollout` event): the judge's step on a look that
/// ramped the challenger, rolled it back or switched to rules.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct RolloutRecord {
    /// [`LOG_VERSION`].
    pub log_version: u32,
    /// When the judge made the change.
    pub ts: String,
    /// The challenger model the rollout is about.
    pub challenger_version: Option<String>,
    /// The setting before: the challenger's percent of routing keys, or `"rules"`.
    pub from: Setting,
    /// The setting after.
    pub to: Setting,
    /// Why.
    pub why: Why,
    /// One sentence for people.
    pub text: String,
    /// When the step that ended began.
    pub step_since: Option<String>,
    /// The comparison that decided (the judge's JSON object); none for an operator's verb.
    pub statistics: Option<Value>,
    /// The operator's reason, for an operator's verb.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
}

impl RolloutRecord {
    /// Whether this change made the challenger the effective champion (100%).
    pub fn promotes(&self) -> bool {
        self.to == Setting::Share(100)
            && matches!(self.why, Why::Better | Why::Baked | Why::Promote)
    }
}

/// One look of the judge (the `rollout_judged` event).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct JudgedRecord {
    /// [`LOG_VERSION`].
    pub log_version: u32,
    /// When the judge looked.
    pub ts: String,
    /// The challenger model the rollout is about.
    pub challenger_version: Option<String>,
    /// Where the rollout stands after the look.
    pub phase: Phase,
    /// The setting in force after the look.
    pub setting: Setting,
    /// What the judge found (the judge's JSON object).
    pub judgement: Option<Value>,
}

/// An alarm raised (`rollout_alarm`) or cleared (`rollout_alarm_cleared`).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct AlarmRecord {
    /// [`LOG_VERSION`].
    pub log_version: u32,
    /// When.
    pub ts: String,
    /// The challenger model the rollout is about.
    pub challenger_version: Option<String>,
    /// Which alarm.
    pub kind: AlarmKind,
    /// One sentence for people (empty when cleared).
    pub text: String,
    /// The numbers that raised it (the judge's JSON object).
    pub evidence: Option<Value>,
}

/// Longest `decision_id` a record may carry (the Worker's are 36 characters).
pub const MAX_ID_LEN: usize = 128;

/// The statuses a `/v1/decide` caller may report in an outcome.
pub const CALLER_STATUS: RangeInclusive<u16> = 100..=599;

/// The statuses a routed outcome may record for an origin: any three-digit status, an
/// answer the proxy could not relay (a 103, a 999) included.
pub const ORIGIN_STATUS: RangeInclusive<u16> = 100..=999;

/// Whether `id` is a valid `decision_id`: 1 to [`MAX_ID_LEN`] characters of
/// `A-Z a-z 0-9 . _ : -`.
pub fn valid_decision_id(id: &str) -> bool {
    (1..=MAX_ID_LEN).contains(&id.len())
        && id
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b".-_:".contains(&b))
}

#[cfg(test)]
mod tests;

//! Typed decision and outcome records (log_version 1), checked field by field from the
//! lenient parse so that a bad record is reported with the field that was wrong.

use super::raw::{Lax, RawLine, RawOutcome, RawProbabilities, RawState, Scalar};
use super::time::parse_iso_ms;
use decider_core::{Action, FallbackReason, Source, State};
use std::borrow::Cow;
use std::fmt;

/// The record schema version this reader understands.
pub const LOG_VERSION: u32 = 1;

/// One record read from the logs. Strings borrow from the line being read: a visitor that
/// keeps them calls [`Cow::into_owned`].
// One record lives at a time, on the stack, on its way to the visitor: boxing the larger
// variant would cost an allocation per line.
#[allow(clippy::large_enum_variant)]
#[derive(Debug, Clone, PartialEq)]
pub enum Record<'a> {
    /// A decision the Worker made.
    Decision(Decision<'a>),
    /// A caller's outcome for a `/v1/decide` decision.
    Outcome(Outcome<'a>),
}

/// Where the decision was made.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Endpoint {
    /// `POST /v1/decide`: the caller routes and may report an outcome line.
    Decide,
    /// Edge routing: the Worker proxied the request and logged the outcome itself.
    Route,
}

/// The rollout arm that served the decision.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Arm {
    /// The current model policy (with its fallbacks).
    Champion,
    /// A candidate model serving a share.
    Challenger,
    /// Canary traffic kept on the rules.
    Holdout,
}

impl Endpoint {
    /// All endpoints, in wire order.
    pub const ALL: [Endpoint; 2] = [Endpoint::Decide, Endpoint::Route];
    /// Wire name.
    pub fn name(self) -> &'static str {
        match self {
            Endpoint::Decide => "decide",
            Endpoint::Route => "route",
        }
    }
}

impl Arm {
    /// All arms, in wire order.
    pub const ALL: [Arm; 3] = [Arm::Champion, Arm::Challenger, Arm::Holdout];
    /// Wire name.
    pub fn name(self) -> &'static str {
        match self {
            Arm::Champion => "champion",
            Arm::Challenger => "challenger",
            Arm::Holdout => "holdout",
        }
    }
}

/// What happened to a routed request (the decision's `outcome` object).
#[derive(Debug, Clone, PartialEq)]
pub struct RouteOutcome<'a> {
    /// The origin that finally answered or was tried.
    pub origin: Option<Action>,
    /// HTTP status, when a response arrived.
    pub status: Option<u16>,
    /// Milliseconds to response headers, across failover.
    pub latency_ms: Option<f64>,
    /// The failover target taken, if any.
    pub failover: Option<Action>,
    /// Error kind (`timeout`, `connect`, …), if any.
    pub error: Option<Cow<'a, str>>,
}

/// A decision record.
#[derive(Debug, Clone, PartialEq)]
pub struct Decision<'a> {
    /// Milliseconds since the Unix epoch.
    pub ts_ms: i64,
    /// Unique id, joined with outcome lines.
    pub decision_id: Cow<'a, str>,
    /// cf-ray, when present.
    pub request_id: Option<Cow<'a, str>>,
    /// `/v1/decide` or edge routing.
    pub endpoint: Endpoint,
    /// The state as decided.
    pub state: State,
    /// The action taken.
    pub action: Action,
    /// Who decided.
    pub source: Source,
    /// Why the model did not decide.
    pub fallback_reason: Option<FallbackReason>,
    /// Rule name, when rules decided.
    pub rule: Option<Cow<'a, str>>,
    /// The model's top-action probability.
    pub confidence: Option<f64>,
    /// The model's probabilities in action order.
    pub probabilities: Option<[f64; 4]>,
    /// Probability that the serving policy chose `action`.
    pub propensity: f64,
    /// Exploration replaced the greedy action.
    pub explored: bool,
    /// The model consulted or configured.
    pub model_version: Option<Cow<'a, str>>,
    /// Version of the rule table.
    pub rules_version: Option<Cow<'a, str>>,
    /// Feature encoder version.
    pub encoder_version: Option<u32>,
    /// `embedded` or `workers-ai`.
    pub backend: Option<Cow<'a, str>>,
    /// Rollout arm.
    pub arm: Arm,
    /// Decision time in microseconds.
    pub decision_us: Option<u64>,
    /// Routed requests only.
    pub outcome: Option<RouteOutcome<'a>>,
}

/// An outcome line (`POST /v1/outcome`).
#[derive(Debug, Clone, PartialEq)]
pub struct Outcome<'a> {
    /// Milliseconds since the Unix epoch.
    pub ts_ms: i64,
    /// The decision it belongs to.
    pub decision_id: Cow<'a, str>,
    /// The caller's reward in `[0, 1]`.
    pub reward: Option<f64>,
    /// The caller's observed status.
    pub status: Option<u16>,
    /// The caller's observed latency.
    pub latency_ms: Option<f64>,
}

/// Why a record was refused: the field (dotted path) and what was wrong with it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BadField {
    /// Dotted path of the field, e.g. `state.hour`.
    pub field: String,
    /// What was wrong.
    pub problem: String,
}

impl fmt::Display for BadField {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.field, self.problem)
    }
}

fn bad(field: &str, problem: impl Into<String>) -> BadField {
    BadField {
        field: field.to_owned(),
        problem: problem.into(),
    }
}

fn got(field: &str, expected: &str, v: &Scalar<'_>) -> BadField {
    bad(field, format!("expected {expected}, got {}", v.kind()))
}

fn absent_or_null(v: &Option<Scalar<'_>>) -> bool {
    matches!(v, None | Some(Scalar::Null))
}

fn req_str<'b, 'a>(field: &str, v: &'b Option<Scalar<'a>>) -> Result<&'b Cow<'a, str>, BadField> {
    match v {
        Some(Scalar::Str(s)) => Ok(s),
        None => Err(bad(field, "missing or null")),
        Some(other) => Err(got(field, "a string", other)),
    }
}

fn opt_str<'a>(field: &str, v: &Option<Scalar<'a>>) -> Result<Option<Cow<'a, str>>, BadField> {
    match v {
        None | Some(Scalar::Null) => Ok(None),
        Some(Scalar::Str(s)) => Ok(Some(s.clone())),
        Some(other) => Err(got(field, "a string or null", other)),
    }
}

fn opt_num(field: &str, v: &Option<Scalar<'_>>) -> Result<Option<f64>, BadField> {
    match v {
        None | Some(Scalar::Null) => Ok(None),
        Some(Scalar::Num(n)) => Ok(Some(*n)),
        Some(other) => Err(got(field, "a number or null", other)),
    }
}

fn num_in(field: &str, v: &Option<Scalar<'_>>, lo: f64, hi: f64) -> Result<f64, BadField> {
    match v {
        Some(Scalar::Num(n)) if (lo..=hi).contains(n) => Ok(*n),
        Some(Scalar::Num(n)) => Err(bad(field, format!("must be in {lo}..={hi}, got {n}"))),
        None => Err(bad(field, "missing or null")),
        Some(other) => Err(got(field, "a number", other)),
    }
}

fn int_in(field: &str, v: &Option<Scalar<'_>>, lo: f64, hi: f64) -> Result<f64, BadField> {
    let n = num_in(field, v, lo, hi)?;
    if n.fract() != 0.0 {
        return Err(bad(field, format!("must be an integer, got {n}")));
    }
    Ok(n)
}

fn opt_int(field: &str, v: &Option<Scalar<'_>>, hi: f64) -> Result<Option<f64>, BadField> {
    match v {
        None | Some(Scalar::Null) => Ok(None),
        Some(Scalar::Num(_)) => int_in(field, v, 0.0, hi).map(Some),
        Some(other) => Err(got(field, "a number or null", other)),
    }
}

fn enum_of<T>(
    field: &str,
    v: &Option<Scalar<'_>>,
    names: &str,
    parse: impl Fn(&str) -> Option<T>,
) -> Result<T, BadField> {
    let s = req_str(field, v)?;
    parse(s).ok_or_else(|| bad(field, format!("expected one of {names}, got {s:?}")))
}

fn opt_enum<T>(
    field: &str,
    v: &Option<Scalar<'_>>,
    names: &str,
    parse: impl Fn(&str) -> Option<T>,
) -> Result<Option<T>, BadField> {
    if absent_or_null(v) {
        return Ok(None);
    }
    enum_of(field, v, names, parse).map(Some)
}

const ACTION_NAMES: &str = "route_a, route_b, route_c, reject";

fn parse_source(s: &str) -> Option<Source> {
    [Source::Model, Source::Rules, Source::Default]
        .into_iter()
        .find(|x| x.name() == s)
}

/// Parses a fallback reason by its wire name.
pub fn parse_reason(s: &str) -> Option<FallbackReason> {
    use FallbackReason as F;
    [
        F::LowConfidence,
        F::ModelError,
        F::ModelTimeout,
        F::ModelUnavailable,
        F::OutOfDistribution,
        F::StaleSignals,
        F::Holdout,
    ]
    .into_iter()
    .find(|x| x.name() == s)
}

fn parse_endpoint(s: &str) -> Option<Endpoint> {
    Endpoint::ALL.into_iter().find(|x| x.name() == s)
}

fn parse_arm(s: &str) -> Option<Arm> {
    Arm::ALL.into_iter().find(|x| x.name() == s)
}

fn status(field: &str, v: &Option<Scalar<'_>>) -> Result<Option<u16>, BadField> {
    Ok(opt_int(field, v, 999.0)?.map(|s| s as u16))
}

fn latency(field: &str, v: &Option<Scalar<'_>>) -> Result<Option<f64>, BadField> {
    match opt_num(field, v)? {
        Some(l) if !(l >= 0.0 && l.is_finite()) => {
            Err(bad(field, format!("must be a finite number ≥ 0, got {l}")))
        }
        l => Ok(l),
    }
}

fn ts(v: &Option<Scalar<'_>>) -> Result<i64, BadField> {
    parse_iso_ms(req_str("ts", v)?).map_err(|e| bad("ts", e))
}

fn decision_id<'a>(v: &Option<Scalar<'a>>) -> Result<Cow<'a, str>, BadField> {
    let id = req_str("decision_id", v)?;
    if id.is_empty() {
        return Err(bad("decision_id", "must not be empty"));
    }
    Ok(id.clone())
}

fn state(v: &Option<Lax<'_, RawState<'_>>>) -> Result<State, BadField> {
    let s = match v {
        Some(Lax::Map(s)) => s,
        None => return Err(bad("state", "missing or null")),
        Some(other) => {
            return Err(bad(
                "state",
                format!("expected an object, got {}", other.kind()),
            ))
        }
    };
    Ok(State {
        request_type: int_in("state.request_type", &s.request_type, 0.0, 5.0)? as u8,
        region_id: int_in("state.region_id", &s.region_id, 0.0, 9.0)? as u8,
        current_load: num_in("state.current_load", &s.current_load, 0.0, f64::MAX)?,
        recent_success_rate: num_in(
            "state.recent_success_rate",
            &s.recent_success_rate,
            0.0,
            1.0,
        )?,
        queue_depth: num_in("state.queue_depth", &s.queue_depth, 0.0, f64::MAX)?,
        hour: int_in("state.hour", &s.hour, 0.0, 23.0)? as u8,
    })
}

fn probabilities(v: &Option<Lax<'_, RawProbabilities<'_>>>) -> Result<Option<[f64; 4]>, BadField> {
    let p = match v {
        None | Some(Lax::Scalar(Scalar::Null)) => return Ok(None),
        Some(Lax::Map(p)) => p,
        Some(other) => {
            return Err(bad(
                "probabilities",
                format!("expected an object or null, got {}", other.kind()),
            ))
        }
    };
    Ok(Some([
        num_in("probabilities.route_a", &p.route_a, 0.0, 1.0)?,
        num_in("probabilities.route_b", &p.route_b, 0.0, 1.0)?,
        num_in("probabilities.route_c", &p.route_c, 0.0, 1.0)?,
        num_in("probabilities.reject", &p.reject, 0.0, 1.0)?,
    ]))
}

fn route_outcome<'a>(
    v: &Option<Lax<'a, RawOutcome<'a>>>,
) -> Result<Option<RouteOutcome<'a>>, BadField> {
    let o = match v {
        None | Some(Lax::Scalar(Scalar::Null)) => return Ok(None),
        Some(Lax::Map(o)) => o,
        Some(other) => {
            return Err(bad(
                "outcome",
                format!("expected an object or null, got {}", other.kind()),
            ))
        }
    };
    Ok(Some(RouteOutcome {
        origin: opt_enum(
            "outcome.origin",
            &o.origin,
            ACTION_NAMES,
            Action::parse_name,
        )?,
        status: status("outcome.status", &o.status)?,
        latency_ms: latency("outcome.latency_ms", &o.latency_ms)?,
        failover: opt_enum(
            "outcome.failover",
            &o.failover,
            ACTION_NAMES,
            Action::parse_name,
        )?,
        error: opt_str("outcome.error", &o.error)?,
    }))
}

/// True when the object claims to be one of our records (an `event` of "decision" or
/// "outcome" and a `log_version`): it is then either a record or a bad record.
pub(crate) fn is_record(r: &RawLine<'_>) -> bool {
    r.log_version.is_some()
        && matches!(&r.event, Some(Scalar::Str(e)) if e == "decision" || e == "outcome")
}

/// Checks an object that [`is_record`] into a typed record.
pub(crate) fn to_record<'a>(r: &RawLine<'a>) -> Result<Record<'a>, BadField> {
    match &r.log_version {
        Some(Scalar::Num(v)) if *v == f64::from(LOG_VERSION) => {}
        Some(Scalar::Num(v)) => {
            return Err(bad(
                "log_version",
                format!("unsupported version {v} (this reader knows {LOG_VERSION})"),
            ))
        }
        Some(other) => return Err(got("log_version", "a number", other)),
        None => return Err(bad("log_version", "missing or null")),
    }
    let ts = ts(&r.ts)?;
    let decision_id = decision_id(&r.decision_id)?;
    if matches!(&r.event, Some(Scalar::Str(e)) if e == "outcome") {
        let reward = opt_num("reward", &r.reward)?;
        if let Some(x) = reward {
            if !(0.0..=1.0).contains(&x) {
                return Err(bad("reward", format!("must be in 0..=1, got {x}")));
            }
        }
        let out = Outcome {
            ts_ms: ts,
            decision_id,
            reward,
            status: status("status", &r.status)?,
            latency_ms: latency("latency_ms", &r.latency_ms)?,
        };
        if out.reward.is_none() && out.status.is_none() && out.latency_ms.is_none() {
            return Err(bad(
                "reward",
                "an outcome needs a reward, a status or a latency_ms",
            ));
        }
        return Ok(Record::Outcome(out));
    }
    let source = match &r.source {
        Some(Lax::Scalar(s)) => enum_of(
            "source",
            &Some(s.clone()),
            "model, rules, default",
            parse_source,
        )?,
        None => return Err(bad("source", "missing or null")),
        Some(other) => {
            return Err(bad(
                "source",
                format!("expected a string, got {}", other.kind()),
            ))
        }
    };
    let propensity = match opt_num("propensity", &r.propensity)? {
        Some(p) if p > 0.0 && p <= 1.0 => p,
        Some(p) => return Err(bad("propensity", format!("must be in (0, 1], got {p}"))),
        None => return Err(bad("propensity", "missing or null")),
    };
    let explored = match &r.explored {
        None | Some(Scalar::Null) => false,
        Some(Scalar::Bool(b)) => *b,
        Some(other) => return Err(got("explored", "a boolean", other)),
    };
    let confidence = opt_num("confidence", &r.confidence)?;
    if let Some(c) = confidence {
        if !(0.0..=1.0).contains(&c) {
            return Err(bad("confidence", format!("must be in 0..=1, got {c}")));
        }
    }
    Ok(Record::Decision(Decision {
        ts_ms: ts,
        decision_id,
        request_id: opt_str("request_id", &r.request_id)?,
        endpoint: enum_of("endpoint", &r.endpoint, "decide, route", parse_endpoint)?,
        state: state(&r.state)?,
        action: enum_of("action", &r.action, ACTION_NAMES, Action::parse_name)?,
        source,
        fallback_reason: opt_enum(
            "fallback_reason",
            &r.fallback_reason,
            "low_confidence, model_error, model_timeout, model_unavailable, out_of_distribution, stale_signals, holdout",
            parse_reason,
        )?,
        rule: opt_str("rule", &r.rule)?,
        confidence,
        probabilities: probabilities(&r.probabilities)?,
        propensity,
        explored,
        model_version: opt_str("model_version", &r.model_version)?,
        rules_version: opt_str("rules_version", &r.rules_version)?,
        encoder_version: opt_int("encoder_version", &r.encoder_version, f64::from(u32::MAX))?
            .map(|v| v as u32),
        backend: opt_str("backend", &r.backend)?,
        arm: enum_of("arm", &r.arm, "champion, challenger, holdout", parse_arm)?,
        decision_us: opt_int("decision_us", &r.decision_us, 9.0e15)?.map(|v| v as u64),
        outcome: route_outcome(&r.outcome)?,
    }))
}

//! Decision and outcome records (`decider_core::record`, log_version 1) checked field by
//! field from the lenient parse, so that a bad record is reported with the field that was
//! wrong. The records are decider-core's own types: the Worker writes them, this reads them.

use super::raw::{
    Lax, RawAttempt, RawLine, RawOutcome, RawProbabilities, RawRequest, RawShadow, RawState, Scalar,
};
use super::time::parse_iso_ms;
use decider_core::policy::{ProbabilityMap, Shadow};
use decider_core::record::{
    Arm, Attempt, DecisionRecord, Endpoint, ErrorKind, OutcomeRecord, Record, RequestInfo,
    RouteOutcome, LOG_VERSION,
};
use decider_core::{Action, FallbackReason, Source, State};
use std::fmt;

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

fn req_str<'b>(field: &str, v: &'b Option<Scalar<'_>>) -> Result<&'b str, BadField> {
    match v {
        Some(Scalar::Str(s)) => Ok(s),
        None => Err(bad(field, "missing or null")),
        Some(other) => Err(got(field, "a string", other)),
    }
}

fn opt_str(field: &str, v: &Option<Scalar<'_>>) -> Result<Option<String>, BadField> {
    match v {
        None | Some(Scalar::Null) => Ok(None),
        Some(Scalar::Str(s)) => Ok(Some(s.to_string())),
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

fn parse_error_kind(s: &str) -> Option<ErrorKind> {
    ErrorKind::ALL.into_iter().find(|x| x.name() == s)
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

/// The timestamp as written, once it is known to parse.
fn ts(v: &Option<Scalar<'_>>) -> Result<String, BadField> {
    let s = req_str("ts", v)?;
    parse_iso_ms(s).map_err(|e| bad("ts", e))?;
    Ok(s.to_owned())
}

fn decision_id(v: &Option<Scalar<'_>>) -> Result<String, BadField> {
    let id = req_str("decision_id", v)?;
    if id.is_empty() {
        return Err(bad("decision_id", "must not be empty"));
    }
    Ok(id.to_owned())
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

fn probabilities(
    v: &Option<Lax<'_, RawProbabilities<'_>>>,
) -> Result<Option<ProbabilityMap>, BadField> {
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
    Ok(Some(ProbabilityMap {
        route_a: num_in("probabilities.route_a", &p.route_a, 0.0, 1.0)?,
        route_b: num_in("probabilities.route_b", &p.route_b, 0.0, 1.0)?,
        route_c: num_in("probabilities.route_c", &p.route_c, 0.0, 1.0)?,
        reject: num_in("probabilities.reject", &p.reject, 0.0, 1.0)?,
    }))
}

fn error_kind(field: &str, v: &Option<Scalar<'_>>) -> Result<Option<ErrorKind>, BadField> {
    opt_enum(
        field,
        v,
        "timeout, connect, upstream_status, bad_upstream, no_origin",
        parse_error_kind,
    )
}

fn attempt(at: &str, a: &RawAttempt<'_>) -> Result<Attempt, BadField> {
    Ok(Attempt {
        origin: enum_of(
            &format!("{at}.origin"),
            &a.origin,
            ACTION_NAMES,
            Action::parse_name,
        )?,
        status: status(&format!("{at}.status"), &a.status)?,
        error: error_kind(&format!("{at}.error"), &a.error)?,
        latency_ms: latency(&format!("{at}.latency_ms"), &a.latency_ms)?,
    })
}

fn attempts(v: &Option<Lax<'_, RawAttempt<'_>>>) -> Result<Vec<Attempt>, BadField> {
    match v {
        None | Some(Lax::Scalar(Scalar::Null)) => Ok(Vec::new()),
        Some(Lax::Seq(items)) => items
            .iter()
            .enumerate()
            .map(|(i, item)| {
                let at = format!("outcome.attempts[{i}]");
                match item {
                    Lax::Map(a) => attempt(&at, a),
                    other => Err(bad(
                        &at,
                        format!("expected an object, got {}", other.kind()),
                    )),
                }
            })
            .collect(),
        Some(other) => Err(bad(
            "outcome.attempts",
            format!("expected an array, got {}", other.kind()),
        )),
    }
}

fn route_outcome(v: &Option<Lax<'_, RawOutcome<'_>>>) -> Result<Option<RouteOutcome>, BadField> {
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
        origin_down: opt_enum(
            "outcome.origin_down",
            &o.origin_down,
            ACTION_NAMES,
            Action::parse_name,
        )?,
        error: error_kind("outcome.error", &o.error)?,
        attempts: attempts(&o.attempts)?,
    }))
}

fn request(v: &Option<Lax<'_, RawRequest<'_>>>) -> Result<Option<RequestInfo>, BadField> {
    let r = match v {
        None | Some(Lax::Scalar(Scalar::Null)) => return Ok(None),
        Some(Lax::Map(r)) => r,
        Some(other) => {
            return Err(bad(
                "request",
                format!("expected an object or null, got {}", other.kind()),
            ))
        }
    };
    Ok(Some(RequestInfo {
        method: req_str("request.method", &r.method)?.to_owned(),
        country: opt_str("request.country", &r.country)?,
        continent: opt_str("request.continent", &r.continent)?,
        signals_age_s: opt_num("request.signals_age_s", &r.signals_age_s)?,
        signals_detail: opt_str("request.signals_detail", &r.signals_detail)?,
    }))
}

fn shadow(v: &Option<Lax<'_, RawShadow<'_>>>) -> Result<Option<Shadow>, BadField> {
    let s = match v {
        None | Some(Lax::Scalar(Scalar::Null)) => return Ok(None),
        Some(Lax::Map(s)) => s,
        Some(other) => {
            return Err(bad(
                "shadow",
                format!("expected an object or null, got {}", other.kind()),
            ))
        }
    };
    Ok(Some(Shadow {
        model_action: opt_enum(
            "shadow.model_action",
            &s.model_action,
            ACTION_NAMES,
            Action::parse_name,
        )?,
        agree: boolean("shadow.agree", &s.agree)?,
    }))
}

fn boolean(field: &str, v: &Option<Scalar<'_>>) -> Result<bool, BadField> {
    match v {
        None | Some(Scalar::Null) => Ok(false),
        Some(Scalar::Bool(b)) => Ok(*b),
        Some(other) => Err(got(field, "a boolean", other)),
    }
}

/// True when the object claims to be one of our records (an `event` of "decision" or
/// "outcome" and a `log_version`): it is then either a record or a bad record.
pub(crate) fn is_record(r: &RawLine<'_>) -> bool {
    r.log_version.is_some()
        && matches!(&r.event, Some(Scalar::Str(e)) if e == "decision" || e == "outcome")
}

/// Checks an object that [`is_record`] into a typed record.
pub(crate) fn to_record(r: &RawLine<'_>) -> Result<Record, BadField> {
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
        let out = OutcomeRecord {
            log_version: LOG_VERSION,
            ts,
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
    let explored = boolean("explored", &r.explored)?;
    let confidence = opt_num("confidence", &r.confidence)?;
    if let Some(c) = confidence {
        if !(0.0..=1.0).contains(&c) {
            return Err(bad("confidence", format!("must be in 0..=1, got {c}")));
        }
    }
    Ok(Record::Decision(DecisionRecord {
        log_version: LOG_VERSION,
        ts,
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
        // Absent in hand-written or trimmed lines: 0 and "" say "not recorded", as decider-core
        // reads them.
        encoder_version: opt_int("encoder_version", &r.encoder_version, f64::from(u32::MAX))?
            .map_or(0, |v| v as u32),
        backend: opt_str("backend", &r.backend)?.unwrap_or_default(),
        arm: enum_of("arm", &r.arm, "champion, challenger, holdout", parse_arm)?,
        decision_us: opt_int("decision_us", &r.decision_us, 9.0e15)?.map_or(0, |v| v as u64),
        outcome: route_outcome(&r.outcome)?,
        request: request(&r.request)?,
        shadow: shadow(&r.shadow)?,
        detail: opt_str("detail", &r.detail)?,
    }))
}

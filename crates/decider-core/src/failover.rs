//! Where a routed request goes and what became of it there: the failover map
//! (`FAILOVER`), the plan around origins the monitor marks down, each attempt's result, the
//! outcome the decision record keeps, and the words of a 502.
//!
//! The Worker sends the requests; [`Forwarding`] tells it which origin to ask next and
//! keeps the books, so every failover rule is a native unit test.

use crate::actions::Action;
use crate::record::{Attempt, ErrorKind, RouteOutcome};
use std::collections::BTreeMap;

/// A set of routed actions (the origins the monitor marks down), small and `Copy`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct OriginSet(u8);

impl OriginSet {
    /// The empty set.
    pub const EMPTY: OriginSet = OriginSet(0);

    /// Whether `a` is in the set.
    pub fn contains(self, a: Action) -> bool {
        self.0 & (1 << a.index()) != 0
    }

    /// The set with `a` added.
    pub fn with(self, a: Action) -> OriginSet {
        OriginSet(self.0 | (1 << a.index()))
    }

    /// Whether the set is empty.
    pub fn is_empty(self) -> bool {
        self.0 == 0
    }

    /// The members, in action order.
    pub fn iter(self) -> impl Iterator<Item = Action> {
        Action::ROUTED
            .into_iter()
            .filter(move |a| self.contains(*a))
    }

    /// The members' names, in action order.
    pub fn names(self) -> Vec<&'static str> {
        self.iter().map(Action::name).collect()
    }
}

/// Where a routed request goes, given the origins the monitor marks down.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Plan {
    /// The origin asked first.
    pub first: Action,
    /// The decided origin, when it was passed over because it is down (the request went
    /// straight to `first`, its failover).
    pub skipped: Option<Action>,
    /// The origin asked once more when `first` gives no usable answer.
    pub retry: Option<Action>,
}

/// Where a request decided for `action` goes, as a load balancer treats an unhealthy pool:
/// a down origin is passed over for the first origin along its failover chain that is
/// configured and up, which then serves as if it had been decided; its own failover (when
/// configured, up, and not the passed-over origin) is the one retry. When nothing along the
/// chain is up, the decided origin is asked anyway: with every candidate down, a request
/// that may succeed beats one that surely fails.
pub fn plan(
    action: Action,
    failover: &Failover,
    down: OriginSet,
    configured: impl Fn(Action) -> bool,
) -> Plan {
    let usable = |a: Action| configured(a) && !down.contains(a);
    // Never back to the passed-over origin.
    let retry_of = |first: Action| failover.of(first).filter(|&t| t != action && usable(t));
    if down.contains(action) {
        let mut at = action;
        // The chain has at most three members; the bound stops a cycle.
        for _ in 0..Action::ROUTED.len() {
            match failover.of(at) {
                Some(next) if next == action => break,
                Some(next) if usable(next) => {
                    return Plan {
                        first: next,
                        skipped: Some(action),
                        retry: retry_of(next),
                    }
                }
                Some(next) => at = next,
                None => break,
            }
        }
    }
    Plan {
        first: action,
        skipped: None,
        retry: failover.of(action).filter(|&t| usable(t)),
    }
}

/// Where each routed action goes when its origin fails (`FAILOVER`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Failover(pub BTreeMap<Action, Action>);

/// The shipped failover order: each cluster spills to the next one, as the simulator's
/// operators do (a → b → c → a).
const SHIPPED_FAILOVER: [(Action, Action); 3] = [
    (Action::RouteA, Action::RouteB),
    (Action::RouteB, Action::RouteC),
    (Action::RouteC, Action::RouteA),
];

impl Failover {
    /// Parses `{"route_a": "route_b", …}`; routed actions only, no self-loops. An action
    /// without an entry has no failover.
    ///
    /// # Errors
    /// A message naming the bad entry.
    pub fn from_json(text: &str) -> Result<Failover, String> {
        let raw: BTreeMap<String, String> =
            serde_json::from_slice(text.as_bytes()).map_err(|e| e.to_string())?;
        let mut out = BTreeMap::new();
        for (from, to) in raw {
            let parse = |name: &str| {
                Action::parse_name(name)
                    .filter(|a| *a != Action::Reject)
                    .ok_or_else(|| {
                        format!("{name:?} is not a routed action (route_a, route_b, route_c)")
                    })
            };
            let (f, t) = (parse(&from)?, parse(&to)?);
            if f == t {
                return Err(format!("{from} cannot fail over to itself"));
            }
            out.insert(f, t);
        }
        Ok(Failover(out))
    }

    /// The shipped order (a test holds it to [`Failover::from_json`]'s checks).
    pub fn shipped() -> Failover {
        let mut map = BTreeMap::new();
        for (from, to) in SHIPPED_FAILOVER {
            map.insert(from, to);
        }
        Failover(map)
    }

    /// The failover target of an action, if any.
    pub fn of(&self, a: Action) -> Option<Action> {
        self.0.get(&a).copied()
    }
}

/// What became of one request to one origin.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum AttemptResult {
    /// The origin answered with a status that can be relayed (200..=599).
    Answered(u16),
    /// No answer: connection failure or an invalid upstream request (the runtime's text,
    /// for the log only).
    Failed(String),
    /// A status that cannot be relayed (outside 200..=599); the connection was dropped.
    InvalidStatus(u16),
    /// No response headers within `ORIGIN_TIMEOUT_MS` of the body being sent.
    TimedOut,
    /// The origin left a chunk of the request body untaken for `ORIGIN_TIMEOUT_MS`.
    UploadStalled,
}

impl AttemptResult {
    /// Whether this attempt warrants the failover origin: no answer, or 502/503/504.
    pub fn should_fail_over(&self) -> bool {
        match self {
            AttemptResult::Answered(status) => matches!(status, 502..=504),
            AttemptResult::Failed(_)
            | AttemptResult::InvalidStatus(_)
            | AttemptResult::TimedOut
            | AttemptResult::UploadStalled => true,
        }
    }

    /// A description for the log, with the runtime's text (never sent to clients).
    pub fn describe(&self) -> String {
        match self {
            AttemptResult::Failed(e) => format!("failed: {e}"),
            AttemptResult::UploadStalled => "timed out: the origin stopped taking the body".into(),
            other => other.public(),
        }
    }

    /// What the client is told about the attempt: what became of it, in words of the
    /// Worker's own (see [`bad_gateway_message`]).
    pub fn public(&self) -> String {
        match self {
            AttemptResult::Answered(status) => format!("answered {status}"),
            AttemptResult::Failed(_) => "failed".into(),
            AttemptResult::InvalidStatus(s) => format!("answered invalid status {s}"),
            AttemptResult::TimedOut | AttemptResult::UploadStalled => "timed out".into(),
        }
    }

    /// The attempt as the decision record keeps it.
    pub fn record(&self, origin: Action, latency_ms: f64) -> Attempt {
        let (status, error) = match self {
            AttemptResult::Answered(s) if self.should_fail_over() => {
                (Some(*s), Some(ErrorKind::UpstreamStatus))
            }
            AttemptResult::Answered(s) => (Some(*s), None),
            AttemptResult::Failed(_) => (None, Some(ErrorKind::Connect)),
            AttemptResult::InvalidStatus(s) => (Some(*s), Some(ErrorKind::BadUpstream)),
            AttemptResult::TimedOut | AttemptResult::UploadStalled => {
                (None, Some(ErrorKind::Timeout))
            }
        };
        Attempt {
            origin,
            status,
            error,
            latency_ms: Some(latency_ms),
        }
    }
}

/// What a 502 says of an action without an origin.
pub const NOT_CONFIGURED: &str = "not configured";

/// The whole of a 502's message: `origin for <action> <outcome>`, then
/// `, failover <action> <outcome>` when a failover was tried. An outcome is `failed`,
/// `timed out`, `answered <status>`, `answered invalid status <status>` or `not configured`
/// ([`AttemptResult::public`]): the Worker's words only, whatever the runtime said.
pub fn bad_gateway_message(
    action: Action,
    first: &str,
    failover: Option<(Action, &str)>,
) -> String {
    match failover {
        Some((target, second)) => {
            format!("origin for {action} {first}, failover {target} {second}")
        }
        None => format!("origin for {action} {first}"),
    }
}

/// What the Worker does next with a routed request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Next {
    /// Send it to this origin, then report with [`Forwarding::attempted`].
    Send(Action),
    /// Relay the last answer; `failover` names the origin that gave it when it is not the
    /// decided one (the `x-decision-failover` header).
    Relay {
        /// The failover origin that answered, if any.
        failover: Option<Action>,
    },
    /// Answer 502 `bad_gateway` with this message (no origin gave a usable answer).
    BadGateway {
        /// The client's message ([`bad_gateway_message`]).
        message: String,
        /// The failover origin tried last, if any.
        failover: Option<Action>,
    },
}

/// The books of one routed request across its attempts: at most the planned origin and one
/// failover retry. Built by [`Forwarding::start`]; the Worker asks [`Forwarding::next`],
/// sends, and reports each [`AttemptResult`] with [`Forwarding::attempted`] until `next`
/// says to relay or to answer 502; [`Forwarding::finish`] gives the record's outcome.
#[derive(Debug, Clone)]
pub struct Forwarding {
    decided: Action,
    plan: Plan,
    /// Whether the origin asked first has an origin URL (else nothing was sent to it).
    first_configured: bool,
    /// Whether a failover may resend the request (an idempotent method).
    retryable: bool,
    /// Which origin has an origin URL.
    configured: [bool; 4],
    outcome: RouteOutcome,
    details: Vec<String>,
    /// The first attempt's result in the client's words, once known.
    first_public: Option<String>,
    /// The failover target, once tried.
    second: Option<Action>,
    /// The last attempt's result.
    last: Option<AttemptResult>,
    /// Where the next attempt goes.
    pending: Option<Action>,
}

impl Forwarding {
    /// The books of a request decided for `decided` (a routed action): the plan around the
    /// origins in `down`, and whether a failover may resend it (`retryable`: an idempotent
    /// method). `configured` says which actions have an origin.
    pub fn start(
        decided: Action,
        failover: &Failover,
        down: OriginSet,
        configured: impl Fn(Action) -> bool,
        retryable: bool,
    ) -> Forwarding {
        let configured = Action::ALL.map(&configured);
        let plan = plan(decided, failover, down, |a| configured[a.index()]);
        let first = plan.first;
        let mut details = Vec::new();
        if let Some(down) = plan.skipped {
            details.push(format!(
                "{down} marked down by the monitor, sent to {first}"
            ));
        }
        let first_configured = configured[first.index()];
        let mut f = Forwarding {
            decided,
            plan,
            first_configured,
            retryable,
            configured,
            outcome: RouteOutcome {
                origin: None,
                status: None,
                latency_ms: None,
                // Passing over a down origin is a failover taken before any attempt.
                failover: plan.skipped.map(|_| first),
                origin_down: plan.skipped,
                error: None,
                attempts: Vec::new(),
            },
            details,
            first_public: None,
            second: None,
            last: None,
            pending: None,
        };
        if first_configured {
            f.pending = Some(first);
        } else {
            f.outcome.error = Some(ErrorKind::NoOrigin);
            let nothing = AttemptResult::Failed(format!("no origin configured for {first}"));
            f.details.push(format!("{first} {}", nothing.describe()));
            f.first_public = Some(NOT_CONFIGURED.to_string());
            f.last = Some(nothing);
            f.settle(0.0);
        }
        f
    }

    /// Whether a second attempt may need the request body again (a body worth keeping a
    /// copy of): a failover target is planned.
    pub fn may_retry(&self) -> bool {
        self.plan.retry.is_some()
    }

    /// The decided action.
    pub fn decided(&self) -> Action {
        self.decided
    }

    /// What to do now.
    pub fn next(&self) -> Next {
        if let Some(origin) = self.pending {
            return Next::Send(origin);
        }
        let first = self.plan.first;
        let skipped_to = self.plan.skipped.map(|_| first);
        match (&self.last, self.second) {
            (Some(r), None) if !r.should_fail_over() => Next::Relay {
                failover: skipped_to,
            },
            (Some(r), Some(target)) if !r.should_fail_over() => Next::Relay {
                failover: Some(target),
            },
            (_, None) => Next::BadGateway {
                message: bad_gateway_message(first, self.first_public(), None),
                failover: skipped_to,
            },
            (last, Some(target)) => Next::BadGateway {
                message: bad_gateway_message(
                    first,
                    self.first_public(),
                    Some((
                        target,
                        &last.as_ref().map(AttemptResult::public).unwrap_or_default(),
                    )),
                ),
                failover: Some(target),
            },
        }
    }

    fn first_public(&self) -> &str {
        self.first_public.as_deref().unwrap_or_default()
    }

    /// Records the result of the attempt [`Forwarding::next`] asked for, which took
    /// `attempt_ms`; `elapsed_ms` is the time since the request was first sent (to the
    /// response headers, failover included).
    pub fn attempted(&mut self, result: AttemptResult, attempt_ms: f64, elapsed_ms: f64) {
        let Some(origin) = self.pending.take() else {
            return;
        };
        self.outcome
            .attempts
            .push(result.record(origin, attempt_ms));
        self.outcome.origin = Some(origin);
        let is_second = self.second == Some(origin);
        if !is_second {
            self.first_public = Some(result.public());
        }
        if result.should_fail_over() {
            let described = if is_second {
                format!("failover {origin} {}", result.describe())
            } else {
                format!("{origin} {}", result.describe())
            };
            self.details.push(described);
        }
        self.last = Some(result);
        self.settle(elapsed_ms);
    }

    /// After an attempt (or none, for an origin that has none): the outcome's status and
    /// error, and the failover attempt when one is due.
    fn settle(&mut self, elapsed_ms: f64) {
        let last_attempt = self.outcome.attempts.last();
        let (status, error) = (
            last_attempt.and_then(|a| a.status),
            last_attempt.and_then(|a| a.error),
        );
        let answered = self.last.as_ref().is_some_and(|r| !r.should_fail_over());
        if answered {
            self.outcome.status = status;
            self.outcome.error = None;
            self.outcome.latency_ms = Some(elapsed_ms);
            return;
        }
        self.outcome.status = status;
        self.outcome.error = if self.second.is_some() {
            error
        } else {
            self.outcome.error.or(error)
        };
        if self.second.is_none() {
            let unsent = !self.first_configured;
            let target = self
                .plan
                .retry
                .filter(|_| unsent || self.retryable)
                .filter(|t| self.configured[t.index()]);
            if let Some(t) = target {
                self.second = Some(t);
                self.outcome.failover = Some(t);
                self.pending = Some(t);
                return;
            }
        }
        self.outcome.latency_ms = Some(elapsed_ms);
    }

    /// The outcome for the decision record, and the runtime's words of failed attempts
    /// (for the log only), once [`Forwarding::next`] no longer says to send.
    pub fn finish(self) -> (RouteOutcome, Option<String>) {
        let detail = (!self.details.is_empty()).then(|| self.details.join("; "));
        (self.outcome, detail)
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use super::*;

    const A: Action = Action::RouteA;
    const B: Action = Action::RouteB;
    const C: Action = Action::RouteC;

    fn all(_: Action) -> bool {
        true
    }

    fn none(_: Action) -> bool {
        false
    }

    /// Runs a request through the books: `results[i]` is what the i-th origin asked answers.
    fn run(f: &mut Forwarding, results: &[AttemptResult]) -> (Next, Vec<Action>) {
        let mut asked = Vec::new();
        let mut i = 0;
        loop {
            match f.next() {
                Next::Send(origin) => {
                    asked.push(origin);
                    let r = results.get(i).cloned().expect("an answer for each attempt");
                    i += 1;
                    f.attempted(r, 10.0, 10.0 * i as f64);
                }
                done => return (done, asked),
            }
        }
    }

    #[test]
    fn an_answer_is_relayed_and_recorded() {
        let mut f = Forwarding::start(A, &Failover::shipped(), OriginSet::EMPTY, all, true);
        let (next, asked) = run(&mut f, &[AttemptResult::Answered(404)]);
        assert_eq!((next, asked), (Next::Relay { failover: None }, vec![A]));
        let (o, detail) = f.finish();
        assert_eq!(
            (o.origin, o.status, o.error, o.failover),
            (Some(A), Some(404), None, None)
        );
        assert_eq!(o.latency_ms, Some(10.0));
        assert_eq!(o.attempts.len(), 1);
        assert_eq!(detail, None);
    }

    #[test]
    fn a_failing_origin_fails_over_once_for_idempotent_methods() {
        let mut f = Forwarding::start(A, &Failover::shipped(), OriginSet::EMPTY, all, true);
        let (next, asked) = run(
            &mut f,
            &[AttemptResult::Answered(503), AttemptResult::Answered(200)],
        );
        assert_eq!(next, Next::Relay { failover: Some(B) });
        assert_eq!(asked, [A, B]);
        let (o, detail) = f.finish();
        assert_eq!(
            (o.origin, o.status, o.error, o.failover),
            (Some(B), Some(200), None, Some(B))
        );
        assert_eq!(o.attempts[0].error, Some(ErrorKind::UpstreamStatus));
        assert_eq!(o.latency_ms, Some(20.0));
        assert_eq!(detail.as_deref(), Some("route_a answered 503"));

        // Both fail: 502 naming both, the record keeps the last attempt's status and error.
        let mut f = Forwarding::start(A, &Failover::shipped(), OriginSet::EMPTY, all, true);
        let (next, _) = run(
            &mut f,
            &[AttemptResult::InvalidStatus(103), AttemptResult::TimedOut],
        );
        assert_eq!(
            next,
            Next::BadGateway {
                message:
                    "origin for route_a answered invalid status 103, failover route_b timed out"
                        .into(),
                failover: Some(B)
            }
        );
        let (o, detail) = f.finish();
        assert_eq!((o.status, o.error), (None, Some(ErrorKind::Timeout)));
        assert_eq!(
            detail.as_deref(),
            Some("route_a answered invalid status 103; failover route_b timed out")
        );
    }

    #[test]
    fn a_non_idempotent_request_is_not_resent() {
        let mut f = Forwarding::start(A, &Failover::shipped(), OriginSet::EMPTY, all, false);
        assert!(f.may_retry(), "a failover is planned, the method decides");
        let (next, asked) = run(&mut f, &[AttemptResult::Failed("reset".into())]);
        assert_eq!(
            next,
            Next::BadGateway {
                message: "origin for route_a failed".into(),
                failover: None
            }
        );
        assert_eq!(asked, [A]);
        let (o, detail) = f.finish();
        assert_eq!((o.error, o.failover), (Some(ErrorKind::Connect), None));
        assert_eq!(detail.as_deref(), Some("route_a failed: reset"));
    }

    #[test]
    fn an_action_without_an_origin_goes_to_its_failover_for_any_method() {
        let only_b = |a: Action| a == B;
        let mut f = Forwarding::start(A, &Failover::shipped(), OriginSet::EMPTY, only_b, false);
        let (next, asked) = run(&mut f, &[AttemptResult::Answered(200)]);
        assert_eq!((next, asked), (Next::Relay { failover: Some(B) }, vec![B]));
        let (o, _) = f.finish();
        assert_eq!((o.status, o.error, o.failover), (Some(200), None, Some(B)));

        // Nothing configured at all: 502 at once, nothing sent.
        let mut f = Forwarding::start(A, &Failover::shipped(), OriginSet::EMPTY, none, true);
        let (next, asked) = run(&mut f, &[]);
        assert_eq!(
            next,
            Next::BadGateway {
                message: "origin for route_a not configured".into(),
                failover: None
            }
        );
        assert!(asked.is_empty());
        let (o, detail) = f.finish();
        assert_eq!((o.origin, o.error), (None, Some(ErrorKind::NoOrigin)));
        assert!(o.attempts.is_empty());
        assert_eq!(
            detail.as_deref(),
            Some("route_a failed: no origin configured for route_a")
        );
    }

    #[test]
    fn a_down_origin_is_passed_over_and_says_so() {
        let down = OriginSet::EMPTY.with(A);
        let mut f = Forwarding::start(A, &Failover::shipped(), down, all, true);
        let (next, asked) = run(&mut f, &[AttemptResult::Answered(200)]);
        assert_eq!((next, asked), (Next::Relay { failover: Some(B) }, vec![B]));
        let (o, detail) = f.finish();
        assert_eq!(
            (o.origin, o.origin_down, o.failover),
            (Some(B), Some(A), Some(B))
        );
        assert_eq!(
            detail.as_deref(),
            Some("route_a marked down by the monitor, sent to route_b")
        );

        // The passed-to origin fails and its own failover answers.
        let mut f = Forwarding::start(A, &Failover::shipped(), down, all, true);
        let (next, asked) = run(
            &mut f,
            &[AttemptResult::UploadStalled, AttemptResult::Answered(201)],
        );
        assert_eq!(
            (next, asked),
            (Next::Relay { failover: Some(C) }, vec![B, C])
        );
        let (o, detail) = f.finish();
        assert_eq!(
            (o.origin, o.failover, o.status),
            (Some(C), Some(C), Some(201))
        );
        assert_eq!(
            detail.as_deref(),
            Some("route_a marked down by the monitor, sent to route_b; route_b timed out: the origin stopped taking the body")
        );
    }

    #[test]
    fn bad_gateway_messages_are_the_workers_words() {
        assert_eq!(
            bad_gateway_message(Action::RouteA, "failed", None),
            "origin for route_a failed"
        );
        assert_eq!(
            bad_gateway_message(
                Action::RouteC,
                NOT_CONFIGURED,
                Some((Action::RouteA, "answered 503"))
            ),
            "origin for route_c not configured, failover route_a answered 503"
        );
    }

    #[test]
    fn attempts_as_recorded() {
        let r = |a: AttemptResult| {
            let x = a.record(B, 1.5);
            (x.status, x.error)
        };
        assert_eq!(r(AttemptResult::Answered(200)), (Some(200), None));
        assert_eq!(
            r(AttemptResult::Answered(504)),
            (Some(504), Some(ErrorKind::UpstreamStatus))
        );
        assert_eq!(
            r(AttemptResult::InvalidStatus(999)),
            (Some(999), Some(ErrorKind::BadUpstream))
        );
        assert_eq!(
            r(AttemptResult::Failed("x".into())),
            (None, Some(ErrorKind::Connect))
        );
        assert_eq!(r(AttemptResult::TimedOut), (None, Some(ErrorKind::Timeout)));
        assert!(!AttemptResult::Answered(500).should_fail_over());
    }

    #[test]
    fn failover_order() {
        let f = Failover::shipped();
        assert_eq!(f.of(Action::RouteA), Some(Action::RouteB));
        assert_eq!(f.of(Action::RouteC), Some(Action::RouteA));
        assert_eq!(f.of(Action::Reject), None);
        // The shipped order passes the checks of a configured one.
        let text = r#"{"route_a": "route_b", "route_b": "route_c", "route_c": "route_a"}"#;
        assert_eq!(Failover::from_json(text).unwrap(), f);
        let f = Failover::from_json(r#"{"route_a": "route_c"}"#).unwrap();
        assert_eq!(f.of(Action::RouteA), Some(Action::RouteC));
        assert_eq!(f.of(Action::RouteB), None);
        assert!(Failover::from_json(r#"{"route_a": "route_a"}"#).is_err());
        assert!(Failover::from_json(r#"{"route_a": "reject"}"#).is_err());
        assert!(Failover::from_json(r#"{"route_x": "route_a"}"#).is_err());
    }
    #[test]
    fn origin_sets() {
        let s = OriginSet::EMPTY.with(C).with(A);
        assert!(s.contains(A) && s.contains(C) && !s.contains(B));
        assert_eq!(s.names(), ["route_a", "route_c"]);
        assert!(OriginSet::EMPTY.is_empty() && !s.is_empty());
    }
    #[test]
    fn an_up_origin_is_asked_with_its_failover_as_retry() {
        let f = Failover::shipped();
        let p = plan(A, &f, OriginSet::EMPTY, all);
        assert_eq!(
            p,
            Plan {
                first: A,
                skipped: None,
                retry: Some(B)
            }
        );
        // A down failover target is no retry.
        let p = plan(A, &f, OriginSet::EMPTY.with(B), all);
        assert_eq!(p.retry, None);
        // An unconfigured one neither.
        let p = plan(A, &f, OriginSet::EMPTY, |a| a != B);
        assert_eq!(p.retry, None);
    }
    #[test]
    fn a_down_origin_goes_straight_to_its_failover() {
        let f = Failover::shipped();
        let p = plan(A, &f, OriginSet::EMPTY.with(A), all);
        assert_eq!(
            p,
            Plan {
                first: B,
                skipped: Some(A),
                retry: Some(C)
            }
        );
        // Its failover down too: the next one along the chain, never back to the down one.
        let p = plan(A, &f, OriginSet::EMPTY.with(A).with(B), all);
        assert_eq!(
            p,
            Plan {
                first: C,
                skipped: Some(A),
                retry: None
            }
        );
        // A two-cycle: C's failover is A, which is the skipped one, so no retry.
        let two = Failover::from_json(r#"{"route_a": "route_b", "route_b": "route_a"}"#).unwrap();
        let p = plan(A, &two, OriginSet::EMPTY.with(A), all);
        assert_eq!(
            p,
            Plan {
                first: B,
                skipped: Some(A),
                retry: None
            }
        );
    }
    #[test]
    fn everything_down_asks_the_decided_origin() {
        let f = Failover::shipped();
        let down = OriginSet::EMPTY.with(A).with(B).with(C);
        let p = plan(B, &f, down, all);
        assert_eq!(
            p,
            Plan {
                first: B,
                skipped: None,
                retry: None
            }
        );
        // No failover configured for a down origin: it is asked anyway.
        let none = Failover::from_json("{}").unwrap();
        assert_eq!(plan(A, &none, OriginSet::EMPTY.with(A), all).first, A);
        // A failover target without an origin is passed over along the chain.
        let p = plan(A, &f, OriginSet::EMPTY.with(A), |a| a != B);
        assert_eq!((p.first, p.skipped), (C, Some(A)));
    }
}

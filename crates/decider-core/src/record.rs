//! Decision records: the one JSON log line per decision that the Worker writes and that
//! `decider report`, `decider ope` and `decider train --logs` read back.
//!
//! A record holds what a learner needs on its own: the state as decided, the action, the
//! probability with which the serving policy chose it (`propensity`), who decided and why,
//! the versions in force, the rollout arm, and for a routed request its outcome. A caller
//! of `/v1/decide` reports its outcome later in an [`OutcomeRecord`] with the same
//! `decision_id`; the logs are the event store and the two are joined offline.

use crate::actions::Action;
use crate::policy::{FallbackReason, ProbabilityMap, Shadow, Source};
use crate::state::{
    as_object, check_known, json_type, num_field, parse_text, require, short, State, StateError,
};
use serde::{Deserialize, Serialize};
use serde_json::Value;

/// Schema version of [`Record`]; readers refuse other versions.
pub const LOG_VERSION: u32 = 1;

/// One log line of the event store.
// Records are read and written one at a time, so the size difference costs nothing.
#[allow(clippy::large_enum_variant)]
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "event", rename_all = "snake_case")]
pub enum Record {
    /// A decision (both endpoints).
    Decision(DecisionRecord),
    /// An outcome reported for a decision by a `/v1/decide` caller.
    Outcome(OutcomeRecord),
}

/// Which endpoint decided.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Endpoint {
    /// `POST /v1/decide`: the caller routes by itself.
    Decide,
    /// Edge routing: the Worker proxied the request.
    Route,
}

/// The rollout arm a decision belongs to.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Arm {
    /// Decided by the champion model's policy.
    Champion,
    /// Decided by the challenger model's policy.
    Challenger,
    /// Held out on rules (outside the canary share): the baseline the model is compared to.
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

/// One decision as logged.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct DecisionRecord {
    /// [`LOG_VERSION`].
    pub log_version: u32,
    /// When, ISO-8601 UTC with milliseconds.
    pub ts: String,
    /// Unique id; `/v1/decide` callers quote it in their outcome.
    pub decision_id: String,
    /// The platform's request id (`cf-ray`), when present.
    #[serde(default)]
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
    #[serde(default)]
    pub fallback_reason: Option<FallbackReason>,
    /// The rule that decided, when rules decided.
    #[serde(default)]
    pub rule: Option<String>,
    /// The model's confidence in its top action.
    #[serde(default)]
    pub confidence: Option<f64>,
    /// The model's probabilities, when it gave them.
    #[serde(default)]
    pub probabilities: Option<ProbabilityMap>,
    /// Probability with which the serving policy chose `action` (1 when deterministic).
    pub propensity: f64,
    /// Whether exploration replaced the policy's own action.
    #[serde(default)]
    pub explored: bool,
    /// The model version consulted (or configured).
    #[serde(default)]
    pub model_version: Option<String>,
    /// The rule table's version.
    #[serde(default)]
    pub rules_version: Option<String>,
    /// Encoder version of the build that decided (0 when a line does not say: readers take
    /// hand-written and trimmed lines without it).
    #[serde(default)]
    pub encoder_version: u32,
    /// `embedded` or `workers-ai` (empty when a line does not say).
    #[serde(default)]
    pub backend: String,
    /// The rollout arm.
    pub arm: Arm,
    /// Time spent deciding, µs.
    #[serde(default)]
    pub decision_us: u64,
    /// Routed requests: what the origin did.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub outcome: Option<RouteOutcome>,
    /// Routed requests: where the state came from.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub request: Option<RequestInfo>,
    /// Shadow mode: the model's action beside the rules'.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub shadow: Option<Shadow>,
    /// Internal detail of a model failure (never sent to clients).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub detail: Option<String>,
}

/// Where a routed request's state came from, for reading a record on its own.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RequestInfo {
    /// The request method.
    pub method: String,
    /// The client's country (`request.cf`), when known.
    #[serde(default)]
    pub country: Option<String>,
    /// The client's continent, when known.
    #[serde(default)]
    pub continent: Option<String>,
    /// Age of the signals snapshot, seconds, when there is one.
    #[serde(default)]
    pub signals_age_s: Option<f64>,
    /// Why the signals are not usable, when they are not.
    #[serde(default)]
    pub signals_detail: Option<String>,
}

/// What became of a routed request at the origins.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RouteOutcome {
    /// The origin that answered last (or was tried last), by action name.
    #[serde(default)]
    pub origin: Option<Action>,
    /// That origin's status (also one it could not relay, e.g. 103); the Worker's own when
    /// no origin was asked: 503 for a rejected request, 400 for a GET or HEAD with a body.
    #[serde(default)]
    pub status: Option<u16>,
    /// Time to the final response headers, ms, failover included.
    #[serde(default)]
    pub latency_ms: Option<f64>,
    /// The failover target, when a failover was taken.
    #[serde(default)]
    pub failover: Option<Action>,
    /// The decided origin, when the monitor marked it down and the request went straight to
    /// its failover (`failover`) without trying it. Absent otherwise.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub origin_down: Option<Action>,
    /// Why the request got no usable answer, when it did not.
    #[serde(default)]
    pub error: Option<ErrorKind>,
    /// Every origin contacted, in order.
    #[serde(default)]
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
}

/// One request to one origin.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Attempt {
    /// The origin, by action name.
    pub origin: Action,
    /// Its status, when it answered.
    #[serde(default)]
    pub status: Option<u16>,
    /// Why it gave no usable answer.
    #[serde(default)]
    pub error: Option<ErrorKind>,
    /// Time to its response headers (or to the failure), ms.
    #[serde(default)]
    pub latency_ms: Option<f64>,
}

/// Why an origin gave no usable answer.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
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
}

impl ErrorKind {
    /// All kinds, in declaration order.
    pub const ALL: [ErrorKind; 5] = [
        ErrorKind::Timeout,
        ErrorKind::Connect,
        ErrorKind::UpstreamStatus,
        ErrorKind::BadUpstream,
        ErrorKind::NoOrigin,
    ];

    /// Wire name.
    pub fn name(self) -> &'static str {
        match self {
            ErrorKind::Timeout => "timeout",
            ErrorKind::Connect => "connect",
            ErrorKind::UpstreamStatus => "upstream_status",
            ErrorKind::BadUpstream => "bad_upstream",
            ErrorKind::NoOrigin => "no_origin",
        }
    }
}

/// An outcome reported by a caller of `/v1/decide`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct OutcomeRecord {
    /// [`LOG_VERSION`].
    pub log_version: u32,
    /// When it was reported.
    pub ts: String,
    /// The decision it belongs to.
    pub decision_id: String,
    /// The caller's reward in `[0, 1]`.
    #[serde(default)]
    pub reward: Option<f64>,
    /// The status the caller observed, when it reports no reward.
    #[serde(default)]
    pub status: Option<u16>,
    /// The latency the caller observed, ms.
    #[serde(default)]
    pub latency_ms: Option<f64>,
}

/// Longest `decision_id` an outcome may quote (the Worker's are 36 characters).
pub const MAX_ID_LEN: usize = 128;

/// Longest decision line the Worker writes, in bytes: log pipelines (Workers Logs, Logpush
/// destinations) bill and cap by line, and a learner reads millions of them.
pub const MAX_LINE_BYTES: usize = 1024;

/// What [`clip_to`] appends to text it cuts.
pub const CUT_MARK: &str = "…[truncated]";

/// `s` cut to at most `max` bytes on a character boundary, followed by [`CUT_MARK`] when
/// cut. The text stays text: it is escaped where it is written (a JSON string value).
pub fn clip_to(s: &str, max: usize) -> String {
    if s.len() <= max {
        return s.to_string();
    }
    let end = (0..=max)
        .rev()
        .find(|&i| s.is_char_boundary(i))
        .unwrap_or(0);
    format!("{}{CUT_MARK}", &s[..end])
}

impl DecisionRecord {
    /// The record as its log line, `{"event":"decision",…}`, at most [`MAX_LINE_BYTES`].
    ///
    /// A longer record (a failover, shadow mode's second action) is written without its
    /// null fields, which readers take as null. Should that not fit, it goes without
    /// `probabilities` and `confidence` too (the embedded model's are recomputed exactly
    /// from `state` and `model_version`), and then with its free text (the detail, the
    /// signals detail, the request id, the request's method, country and continent, the
    /// rule) cut to the longest common length that fits. The state, action, propensity and
    /// outcome a learner needs are never cut.
    pub fn to_line(&self) -> String {
        let line = tagged(serde_json::to_string(self));
        if line.len() <= MAX_LINE_BYTES {
            return line;
        }
        let line = self.compact_line();
        if line.len() <= MAX_LINE_BYTES {
            return line;
        }
        let mut r = self.clone();
        r.probabilities = None;
        r.confidence = None;
        let line = r.compact_line();
        if line.len() <= MAX_LINE_BYTES {
            return line;
        }
        let longest = r.free_text().iter().map(|t| t.len()).max().unwrap_or(0);
        // Every text capped at the same length, the longest cap that fits (each text keeps
        // its share, whichever is longest), found by bisection.
        let capped = |cap: usize| {
            let mut c = r.clone();
            for text in c.free_text() {
                if text.len() > cap {
                    *text = if cap == 0 {
                        String::new()
                    } else {
                        clip_to(text, cap)
                    };
                }
            }
            // Optional text cut to nothing is left out, as null.
            for text in [&mut c.detail, &mut c.request_id, &mut c.rule] {
                text.take_if(|t| t.is_empty());
            }
            if let Some(req) = c.request.as_mut() {
                for text in [
                    &mut req.country,
                    &mut req.continent,
                    &mut req.signals_detail,
                ] {
                    text.take_if(|t| t.is_empty());
                }
            }
            c.compact_line()
        };
        let (mut fits, mut over) = (0, longest);
        while over - fits > 1 {
            let mid = (fits + over) / 2;
            if capped(mid).len() <= MAX_LINE_BYTES {
                fits = mid;
            } else {
                over = mid;
            }
        }
        capped(fits)
    }

    /// The line without null fields.
    fn compact_line(&self) -> String {
        drop_null_members(&tagged(serde_json::to_string(self)))
    }

    /// The record's free text, which [`DecisionRecord::to_line`] may cut.
    fn free_text(&mut self) -> Vec<&mut String> {
        let mut out: Vec<&mut String> = Vec::new();
        out.extend(self.detail.as_mut());
        out.extend(self.request_id.as_mut());
        out.extend(self.rule.as_mut());
        if let Some(req) = self.request.as_mut() {
            out.push(&mut req.method);
            out.extend(req.country.as_mut());
            out.extend(req.continent.as_mut());
            out.extend(req.signals_detail.as_mut());
        }
        out
    }
}

/// A decision's serialised object as its log line: `{"event":"decision",…}`, the same
/// bytes `Record::Decision` serialises to, without copying the record into one.
fn tagged(body: serde_json::Result<String>) -> String {
    // A record always has members, and serialising one cannot fail (no maps, no
    // non-string keys); "{}" only keeps the line well formed should that change.
    let mut line = body.unwrap_or_else(|_| "{}".into());
    let tag = if line.len() > 2 {
        r#""event":"decision","#
    } else {
        r#""event":"decision""#
    };
    line.insert_str(1, tag);
    line
}

/// `json` (compact, as serde_json writes it) without the members of its objects whose value
/// is null. A byte scan rather than a parse into `serde_json::Value`: it keeps the members'
/// order, and it keeps a map type and its serialiser out of the Worker's wasm.
fn drop_null_members(json: &str) -> String {
    let b = json.as_bytes();
    let mut out = String::with_capacity(json.len());
    let (mut i, mut copied) = (0, 0);
    while i < b.len() {
        match b[i] {
            // A string followed by a colon is a key.
            b'"' => {
                let start = i;
                i += 1;
                while i < b.len() && b[i] != b'"' {
                    i += if b[i] == b'\\' { 2 } else { 1 };
                }
                i += 1;
                let rest = &b[i.min(b.len())..];
                if rest.starts_with(b":null") {
                    let after = i + ":null".len();
                    out.push_str(&json[copied..start]);
                    match b.get(after) {
                        // Drop the member and its comma.
                        Some(b',') => copied = after + 1,
                        // The object's last member: drop the comma before it instead.
                        _ => {
                            if out.ends_with(',') {
                                out.pop();
                            }
                            copied = after;
                        }
                    }
                    i = copied;
                }
            }
            _ => i += 1,
        }
    }
    out.push_str(&json[copied.min(json.len())..]);
    out
}

impl OutcomeRecord {
    /// Validates a `POST /v1/outcome` body: `{"decision_id", "reward"}` with a reward in
    /// `[0, 1]`, or `{"decision_id", "status", "latency_ms"?}` with what the caller observed.
    /// `ts` stamps the record.
    ///
    /// # Errors
    /// A [`StateError`] naming the field: malformed JSON, an unknown key, a missing
    /// `decision_id` or one that is not 1 to [`MAX_ID_LEN`] characters of `A-Z a-z 0-9 . _ :
    /// -`, a reward outside `[0, 1]`, a status outside `100..=599`, a negative latency, or
    /// neither a reward nor a status.
    pub fn from_body(bytes: &[u8], ts: String) -> Result<OutcomeRecord, StateError> {
        let v = parse_text(bytes)?;
        let obj = as_object(&v, "body")?;
        check_known(obj, &["decision_id", "reward", "status", "latency_ms"])?;
        let id = match obj.get("decision_id") {
            None => None,
            Some(Value::String(s)) => Some(s),
            Some(other) => {
                return Err(StateError::WrongType {
                    field: "decision_id".into(),
                    expected: "a string",
                    got: format!("{} {}", json_type(other), short(other)),
                })
            }
        };
        let decision_id = require(id, "decision_id")?;
        let id_ok = (1..=MAX_ID_LEN).contains(&decision_id.len())
            && decision_id
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || b".-_:".contains(&b));
        if !id_ok {
            return Err(StateError::OutOfRange {
                field: "decision_id".into(),
                range: "1 to 128 characters of A-Z a-z 0-9 . _ : -",
                got: short(&Value::String(decision_id.chars().take(64).collect())),
            });
        }
        let reward = num_field(obj, "reward", Some(1.0), "a number 0..=1")?;
        let status = match obj.get("status") {
            None => None,
            Some(s) => Some(
                s.as_u64()
                    .filter(|c| (100..=599).contains(c))
                    .map(|c| c as u16)
                    .ok_or_else(|| StateError::OutOfRange {
                        field: "status".into(),
                        range: "an integer 100..=599",
                        got: short(s),
                    })?,
            ),
        };
        let latency_ms = num_field(obj, "latency_ms", None, "a number >= 0")?;
        if reward.is_none() && status.is_none() {
            return Err(StateError::Missing {
                field: "reward".into(),
            });
        }
        Ok(OutcomeRecord {
            log_version: LOG_VERSION,
            ts,
            decision_id: decision_id.clone(),
            reward,
            status,
            latency_ms,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

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
            let got = drop_null_members(json);
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
            let Record::Decision(back) = serde_json::from_str::<Record>(&line).unwrap() else {
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
            let Record::Decision(back) = serde_json::from_str::<Record>(&line).unwrap() else {
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
        assert_eq!(serde_json::from_str::<Record>(&text).unwrap(), r);
        let o = Record::Outcome(OutcomeRecord {
            log_version: 1,
            ts: "t".into(),
            decision_id: "d".into(),
            reward: Some(0.5),
            status: None,
            latency_ms: None,
        });
        let text = serde_json::to_string(&o).unwrap();
        assert_eq!(serde_json::from_str::<Record>(&text).unwrap(), o);
    }

    #[test]
    fn wire_names_are_the_serde_names() {
        let serde_name = |v: serde_json::Value| v.as_str().unwrap().to_owned();
        for e in Endpoint::ALL {
            assert_eq!(serde_name(serde_json::to_value(e).unwrap()), e.name());
        }
        for a in Arm::ALL {
            assert_eq!(serde_name(serde_json::to_value(a).unwrap()), a.name());
        }
        for k in ErrorKind::ALL {
            assert_eq!(serde_name(serde_json::to_value(k).unwrap()), k.name());
        }
    }

    #[test]
    fn readers_ignore_unknown_keys_and_take_absent_optionals() {
        let text = r#"{"event":"decision","log_version":1,"ts":"t","decision_id":"d","endpoint":"decide",
          "state":{"request_type":0,"region_id":0,"current_load":0,"recent_success_rate":1,"queue_depth":0,"hour":0},
          "action":"reject","source":"rules","propensity":1,"encoder_version":1,"backend":"embedded",
          "arm":"holdout","something_new":[1,2]}"#;
        let Record::Decision(d) = serde_json::from_str::<Record>(text).unwrap() else {
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
                "out_of_range",
                Some("status"),
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
}

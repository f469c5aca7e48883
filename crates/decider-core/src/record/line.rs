//! Writing records: one JSON line each, `{"event":"decision",…}` or `{"event":"outcome",…}`,
//! a decision line at most [`MAX_LINE_BYTES`].

use super::{
    AlarmKind, AlarmRecord, DecisionRecord, JudgedRecord, OutcomeRecord, Record, RolloutRecord,
    Why, LOG_VERSION,
};
use crate::rollout::{Phase, Setting};
use crate::time::iso_from_ms;
use serde_json::Value;

/// Longest decision line the Worker writes, in bytes: log pipelines (Workers Logs, Logpush
/// destinations) bill and cap by line, and a learner reads millions of them.
pub const MAX_LINE_BYTES: usize = 1024;

/// Longest piece of client- or backend-controlled free text a record carries (a detail,
/// a rule name, a method): a 4 MiB error message must not become a log line of that size.
pub const TEXT_BYTES: usize = 256;

/// Longest piece of client-sent text the Worker repeats: the `cf-ray` kept as a record's
/// `request_id`, and what an error message quotes (a path, a content type, a field name).
pub const ECHO_BYTES: usize = 128;

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
pub(super) fn drop_null_members(json: &str) -> String {
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
    /// The record as its log line, `{"event":"outcome",…}`.
    pub fn to_line(&self) -> String {
        Record::Outcome(self.clone()).to_line()
    }
}

impl RolloutRecord {
    /// The record of a change made at `at_ms` about `challenger_version`.
    #[allow(clippy::too_many_arguments)]
    pub fn new(
        at_ms: i64,
        challenger_version: Option<&str>,
        from: Setting,
        to: Setting,
        why: Why,
        text: &str,
        step_since_ms: i64,
        statistics: Option<Value>,
        reason: Option<&str>,
    ) -> RolloutRecord {
        RolloutRecord {
            log_version: LOG_VERSION,
            ts: iso_from_ms(at_ms as f64),
            challenger_version: challenger_version.map(|v| clip_to(v, ECHO_BYTES)),
            from,
            to,
            why,
            text: clip_to(text, 2 * TEXT_BYTES),
            step_since: Some(iso_from_ms(step_since_ms as f64)),
            statistics,
            reason: reason.map(|r| clip_to(r, TEXT_BYTES)),
        }
    }
}

impl JudgedRecord {
    /// The record of a look at `at_ms`.
    pub fn new(
        at_ms: i64,
        challenger_version: Option<&str>,
        phase: Phase,
        setting: Setting,
        judgement: Value,
    ) -> JudgedRecord {
        JudgedRecord {
            log_version: LOG_VERSION,
            ts: iso_from_ms(at_ms as f64),
            challenger_version: challenger_version.map(|v| clip_to(v, ECHO_BYTES)),
            phase,
            setting,
            judgement: Some(judgement),
        }
    }
}

impl AlarmRecord {
    /// The record of an alarm of `kind` at `at_ms`.
    pub fn new(
        at_ms: i64,
        challenger_version: Option<&str>,
        kind: AlarmKind,
        text: &str,
        evidence: Option<Value>,
    ) -> AlarmRecord {
        AlarmRecord {
            log_version: LOG_VERSION,
            ts: iso_from_ms(at_ms as f64),
            challenger_version: challenger_version.map(|v| clip_to(v, ECHO_BYTES)),
            kind,
            text: clip_to(text, 2 * TEXT_BYTES),
            evidence,
        }
    }
}

impl RolloutRecord {
    /// The record as its log line, `{"event":"rollout",…}`.
    pub fn to_line(&self) -> String {
        Record::Rollout(self.clone()).to_line()
    }
}

impl JudgedRecord {
    /// The record as its log line, `{"event":"rollout_judged",…}`.
    pub fn to_line(&self) -> String {
        Record::RolloutJudged(self.clone()).to_line()
    }
}

impl AlarmRecord {
    /// The record as its log line: `{"event":"rollout_alarm",…}`, or
    /// `{"event":"rollout_alarm_cleared",…}` when `cleared`.
    pub fn to_line(&self, cleared: bool) -> String {
        if cleared {
            Record::RolloutAlarmCleared(self.clone()).to_line()
        } else {
            Record::RolloutAlarm(self.clone()).to_line()
        }
    }
}

impl Record {
    /// The record as its log line (a decision through [`DecisionRecord::to_line`]).
    pub fn to_line(&self) -> String {
        match self {
            Record::Decision(d) => d.to_line(),
            // Short and fixed: no free text to cut. Serialising one cannot fail (no maps).
            Record::Outcome(_) => serde_json::to_string(self).unwrap_or_else(|_| "{}".into()),
            // The control plane's: their text is clipped when made, the rest is numbers.
            Record::Rollout(_)
            | Record::RolloutJudged(_)
            | Record::RolloutAlarm(_)
            | Record::RolloutAlarmCleared(_) => {
                drop_null_members(&serde_json::to_string(self).unwrap_or_else(|_| "{}".into()))
            }
        }
    }
}

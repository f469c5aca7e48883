//! Deterministic synthetic Worker logs, for `decider report` and its tests and benchmarks.
//!
//! [`write()`] writes `lines` log lines mixing what a Worker's logs hold:
//! - decision records on both endpoints, with every source, fallback reason and rollout arm;
//!   routed ones carry their outcome (origin, status, latency, failover, attempts);
//! - outcome records for `/v1/decide` decisions, written when they fall due (0.05–5 s after
//!   their decision, so they come late and interleaved), 1% of them twice (a caller retrying
//!   its `POST /v1/outcome`), and orphans (outcomes for decisions these logs do not hold);
//! - the noise `wrangler dev` prints around them: request lines, start-up banners, blank
//!   lines, lines cut short, and records with one out-of-range field.
//!
//! Every record line is a [`DecisionRecord`] or [`OutcomeRecord`] value written with the
//! record codec, the Worker's own writer ([`DecisionRecord::to_line`]); a bad record is
//! a record value holding an out-of-range field (an hour of 24, a reward of 1.5), written
//! the same way. The same [`Options`] give the same bytes.
//!
//! [`Scenario`]s give the statistics a shape that `decider report` should see; [`Format`]s
//! put each line in the envelope of a log source.

use crate::logs::format_iso_s;
use crate::rng::Rng;
use crate::CliError;
use decider_core::policy::ProbabilityMap;
use decider_core::record::{
    Attempt, DecisionRecord, Endpoint, ErrorKind, OutcomeRecord, RequestInfo, RouteOutcome,
    RoutingKey, LOG_VERSION,
};
use decider_core::rollout::Arm;
use decider_core::{Action, FallbackReason, Source, State, ENCODER_VERSION};
use serde::Serialize;
use std::cmp::{Ordering, Reverse};
use std::collections::BinaryHeap;
use std::io::{self, BufWriter, Write};

/// Time of the first decision: 2026-12-02T10:00:00Z, ms since the Unix epoch.
pub const START_MS: i64 = 1_796_205_600_000;

/// Longest log time [`Options`] may span, seconds (100 years): times stay in four-digit
/// years and in range of the µs clock.
const MAX_SPAN_S: f64 = 100.0 * 365.25 * 86_400.0;

/// The champion's model version.
pub const CHAMPION: &str = "m-2026-11-20";
/// The challenger's model version.
pub const CHALLENGER: &str = "m-2026-12-01";
/// The rule table's version.
pub const RULES: &str = "rules-2026-11-01";

/// Share of champion and challenger decisions falling back, by reason, before a scenario
/// changes it (`stale_signals` only on the routing endpoint).
const REASONS: [(FallbackReason, f64); 6] = [
    (FallbackReason::LowConfidence, 0.050),
    (FallbackReason::OutOfDistribution, 0.012),
    (FallbackReason::StaleSignals, 0.008),
    (FallbackReason::ModelError, 0.004),
    (FallbackReason::ModelTimeout, 0.004),
    (FallbackReason::ModelUnavailable, 0.002),
];

/// The shape the statistics take.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Scenario {
    /// Every arm as good as the others: nothing for `decider report` to act on.
    Steady,
    /// The holdout arm (rules) succeeds more often than the model's arms: retrain.
    RulesBetter,
    /// The challenger fails more often than the champion: roll it back.
    ChallengerWorse,
    /// Out-of-distribution fallbacks jump twelvefold over the last tenth of the run.
    OodSpike,
}

impl Scenario {
    /// All scenarios, in documentation order.
    pub const ALL: [Scenario; 4] = [
        Scenario::Steady,
        Scenario::RulesBetter,
        Scenario::ChallengerWorse,
        Scenario::OodSpike,
    ];

    /// Name on the command line.
    pub fn name(self) -> &'static str {
        match self {
            Scenario::Steady => "steady",
            Scenario::RulesBetter => "rules-better",
            Scenario::ChallengerWorse => "challenger-worse",
            Scenario::OodSpike => "ood-spike",
        }
    }

    /// The scenario named `name`.
    pub fn parse_name(name: &str) -> Option<Scenario> {
        Scenario::ALL.into_iter().find(|s| s.name() == name)
    }
}

/// The log source whose envelope each line is written in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Format {
    /// Raw lines, as `wrangler dev` and workerd print them.
    Dev,
    /// `wrangler tail --format json`: one pretty-printed event per line.
    Tail,
    /// Logpush `workers_trace_events`: one JSON event per line (NDJSON).
    Logpush,
    /// A Workers Logs export: one JSON array of events, records parsed into `source`.
    WorkersLogs,
}

impl Format {
    /// All formats, in documentation order.
    pub const ALL: [Format; 4] = [
        Format::Dev,
        Format::Tail,
        Format::Logpush,
        Format::WorkersLogs,
    ];

    /// Name on the command line.
    pub fn name(self) -> &'static str {
        match self {
            Format::Dev => "dev",
            Format::Tail => "tail",
            Format::Logpush => "logpush",
            Format::WorkersLogs => "workers-logs",
        }
    }

    /// The format named `name`.
    pub fn parse_name(name: &str) -> Option<Format> {
        Format::ALL.into_iter().find(|f| f.name() == name)
    }
}

/// What to write.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Options {
    /// Log lines to write (records and noise; a line is one event in an envelope format).
    pub lines: u64,
    /// Seed: the same options give the same bytes.
    pub seed: u64,
    /// The statistics' shape.
    pub scenario: Scenario,
    /// The envelope.
    pub format: Format,
    /// Decisions per second of log time.
    pub rate: f64,
    /// Share of noise lines, `[0, 1)`.
    pub noise: f64,
}

impl Default for Options {
    fn default() -> Self {
        Options {
            lines: 10_000,
            seed: 1,
            scenario: Scenario::Steady,
            format: Format::Dev,
            rate: 200.0,
            noise: 0.08,
        }
    }
}

impl Options {
    /// Checks the options once, before anything is written.
    ///
    /// # Errors
    /// [`CliError::Usage`] naming the first option out of range.
    pub fn check(&self) -> Result<(), CliError> {
        if self.lines < 1 {
            return Err(CliError::Usage(format!(
                "lines must be at least 1, got {}",
                self.lines
            )));
        }
        if !(self.rate.is_finite() && self.rate > 0.0) {
            return Err(CliError::Usage(format!(
                "rate must be a finite number > 0, got {}",
                self.rate
            )));
        }
        if self.lines as f64 / self.rate > MAX_SPAN_S {
            return Err(CliError::Usage(format!(
                "rate must give a log shorter than 100 years, got {} lines at {}/s",
                self.lines, self.rate
            )));
        }
        if !(0.0..1.0).contains(&self.noise) {
            return Err(CliError::Usage(format!(
                "noise must be in [0, 1), got {}",
                self.noise
            )));
        }
        Ok(())
    }
}

/// What [`write()`] wrote, line by line (before envelopes).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct Written {
    /// Lines written: the sum of all the counts below except the subsets of `outcomes`.
    pub lines: u64,
    /// Decision records (distinct decisions).
    pub decisions: u64,
    /// Outcome records, `duplicate_outcomes` and `orphan_outcomes` included.
    pub outcomes: u64,
    /// Outcome records repeating an earlier one for the same decision.
    pub duplicate_outcomes: u64,
    /// Outcome records for decisions these logs do not hold.
    pub orphan_outcomes: u64,
    /// `[wrangler:info] POST /v1/decide 200 OK (3ms)` lines.
    pub request_lines: u64,
    /// Start-up and reload banners.
    pub banners: u64,
    /// Empty lines.
    pub blank_lines: u64,
    /// Decision records cut short (a process that crashed mid-line).
    pub truncated: u64,
    /// Records with one field out of range (a decision's state, an outcome's reward).
    pub bad_records: u64,
}

/// An outcome's log line as the Worker writes it.
fn outcome_line(o: OutcomeRecord) -> String {
    o.to_line()
}

/// Writes `opts.lines` lines of synthetic logs to `out` (see the [module docs](self)).
///
/// # Errors
/// [`CliError::Usage`] for options out of range (nothing is written), [`CliError::Io`] when
/// `out` fails.
pub fn write<W: Write>(opts: &Options, out: W) -> Result<Written, CliError> {
    opts.check()?;
    let mut out = BufWriter::with_capacity(1 << 16, out);
    let mut gen = Gen::new(*opts);
    let mut envelope = Envelope::new(opts.format, opts.seed);
    envelope.open(&mut out)?;
    for i in 0..opts.lines {
        let ms = START_MS + gen.t_us / 1000;
        let (line, object) = gen.next_line(i);
        envelope.put(&mut out, &line, object, ms)?;
    }
    envelope.close(&mut out)?;
    out.flush()?;
    Ok(gen.written)
}

/// [`write()`], gzip-compressed (with no name and a zero modification time in the header, so
/// the same options still give the same bytes).
///
/// # Errors
/// As [`write()`].
pub fn write_gzip<W: Write>(opts: &Options, out: W) -> Result<Written, CliError> {
    // Checked before the encoder exists: dropped, it would still write an empty stream.
    opts.check()?;
    let mut gz = flate2::write::GzEncoder::new(out, flate2::Compression::default());
    let written = write(opts, &mut gz)?;
    gz.finish()?.flush()?;
    Ok(written)
}

/// `2026-12-02T10:00:00.123Z` for `ms` since the epoch: the reader's own formatter (whole
/// seconds) with the milliseconds the Worker's timestamps carry.
fn iso_ms(ms: i64) -> String {
    let mut s = format_iso_s(ms);
    s.pop();
    s.push_str(&format!(".{:03}Z", ms.rem_euclid(1000)));
    s
}

/// `x` rounded to `places` decimals, as log lines carry measured values.
fn round(x: f64, places: i32) -> f64 {
    let k = 10f64.powi(places);
    (x * k).round() / k
}

/// An outcome not yet reported, in the order it falls due.
struct Late {
    due_us: i64,
    seq: u64,
    record: OutcomeRecord,
    duplicate: bool,
}

impl PartialEq for Late {
    fn eq(&self, other: &Self) -> bool {
        self.cmp(other) == Ordering::Equal
    }
}
impl Eq for Late {}
impl PartialOrd for Late {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}
impl Ord for Late {
    fn cmp(&self, other: &Self) -> Ordering {
        (self.due_us, self.seq).cmp(&(other.due_us, other.seq))
    }
}

/// The record stream (envelopes aside).
struct Gen {
    rng: Rng,
    opts: Options,
    /// Log time of the next decision, µs after [`START_MS`].
    t_us: i64,
    decided: u64,
    late: BinaryHeap<Reverse<Late>>,
    seq: u64,
    written: Written,
}

impl Gen {
    fn new(opts: Options) -> Gen {
        Gen {
            rng: Rng::new(opts.seed),
            opts,
            t_us: 0,
            decided: 0,
            late: BinaryHeap::new(),
            seq: 0,
            written: Written::default(),
        }
    }

    /// Line number `i` (0-based), and whether it is a JSON object.
    fn next_line(&mut self, i: u64) -> (String, bool) {
        self.written.lines += 1;
        if self.late.peek().is_some_and(|l| l.0.due_us <= self.t_us) {
            if let Some(Reverse(late)) = self.late.pop() {
                self.written.outcomes += 1;
                self.written.duplicate_outcomes += u64::from(late.duplicate);
                return (outcome_line(late.record), true);
            }
        }
        if self.rng.chance(self.opts.noise) {
            return self.noise();
        }
        let frac = i as f64 / (self.opts.lines.max(2) - 1) as f64;
        let (rec, p) = self.decision(frac);
        if rec.endpoint == Endpoint::Decide && self.rng.chance(0.8) {
            self.report_later(&rec.decision_id, p);
        }
        self.written.decisions += 1;
        self.decided += 1;
        self.t_us = (self.decided as f64 * 1e6 / self.opts.rate) as i64;
        (rec.to_line(), true)
    }

    /// Schedules the outcome a `/v1/decide` caller reports, and sometimes its retry.
    fn report_later(&mut self, decision_id: &str, p: f64) {
        let due_us = self.t_us + self.rng.range(50_000.0, 5_000_000.0) as i64;
        let record = self.outcome(decision_id, p, due_us);
        if self.rng.chance(0.01) {
            let retry_us = due_us + self.rng.range(100_000.0, 2_000_000.0) as i64;
            let retry = OutcomeRecord {
                ts: self.iso(retry_us),
                ..record.clone()
            };
            self.push_late(retry_us, retry, true);
        }
        self.push_late(due_us, record, false);
    }

    fn push_late(&mut self, due_us: i64, record: OutcomeRecord, duplicate: bool) {
        self.seq += 1;
        self.late.push(Reverse(Late {
            due_us,
            seq: self.seq,
            record,
            duplicate,
        }));
    }

    fn iso(&self, t_us: i64) -> String {
        iso_ms(START_MS + t_us.div_euclid(1000))
    }

    /// A random UUID (version 4), the shape of the Worker's `crypto.randomUUID()` ids.
    fn uuid(&mut self) -> String {
        let a = (self.rng.next_u64() & !0xF000) | 0x4000;
        let b = (self.rng.next_u64() & !(0b11 << 62)) | (0b10 << 62);
        format!(
            "{:08x}-{:04x}-{:04x}-{:04x}-{:012x}",
            a >> 32,
            (a >> 16) & 0xFFFF,
            a & 0xFFFF,
            b >> 48,
            b & 0xFFFF_FFFF_FFFF
        )
    }

    fn pick<T: Copy>(&mut self, xs: &[T]) -> T {
        xs[self.rng.below(xs.len() as u64) as usize]
    }

    fn state(&mut self, ood: bool) -> State {
        let r = &mut self.rng;
        let request_type = r.below(6) as u8;
        let region_id = r.below(10) as u8;
        let current_load = if ood {
            r.range(1.6, 3.0)
        } else {
            // Beta(2, 3): the second smallest of four uniforms.
            let mut u = [r.f64(), r.f64(), r.f64(), r.f64()];
            u.sort_by(f64::total_cmp);
            u[1]
        };
        let recent_success_rate = if ood {
            r.range(0.2, 0.6)
        } else {
            r.range(0.85, 1.0)
        };
        let queue_depth = if ood {
            400 + r.below(1600)
        } else {
            r.below(120)
        };
        State {
            request_type,
            region_id,
            current_load: round(current_load, 4),
            recent_success_rate: round(recent_success_rate, 4),
            queue_depth: queue_depth as f64,
            hour: ((START_MS + self.t_us / 1000).div_euclid(3_600_000) % 24) as u8,
        }
    }

    /// A decision at `frac` of the run, and the probability that it succeeds.
    fn decision(&mut self, frac: f64) -> (DecisionRecord, f64) {
        let endpoint = if self.rng.chance(0.7) {
            Endpoint::Route
        } else {
            Endpoint::Decide
        };
        let u = self.rng.f64();
        let arm = if endpoint == Endpoint::Route && u < 0.05 {
            Arm::Holdout
        } else if u < 0.15 {
            Arm::Challenger
        } else {
            Arm::Champion
        };
        let spike = self.opts.scenario == Scenario::OodSpike && frac > 0.9;
        let reason = if arm == Arm::Holdout {
            Some(FallbackReason::Holdout)
        } else {
            let v = self.rng.f64();
            let mut acc = 0.0;
            REASONS.iter().find_map(|&(reason, share)| {
                if reason == FallbackReason::StaleSignals && endpoint == Endpoint::Decide {
                    return None;
                }
                let spiked = spike && reason == FallbackReason::OutOfDistribution;
                acc += share * if spiked { 12.0 } else { 1.0 };
                (v < acc).then_some(reason)
            })
        };
        let source = match reason {
            None => Source::Model,
            Some(_) if self.rng.chance(0.02) => Source::Default,
            Some(_) => Source::Rules,
        };
        let mut probs = [0.0; 4];
        for p in &mut probs {
            *p = self.rng.f64() + 0.01;
        }
        probs[self.rng.below(3) as usize] += 4.0;
        let total: f64 = probs.iter().sum();
        let probs = probs.map(|p| round(p / total, 4));
        let best = (0..4).fold(0, |b, i| if probs[i] > probs[b] { i } else { b });
        let mut action = if self.rng.chance(0.03) {
            Action::Reject
        } else {
            Action::ALL[best]
        };
        let explored = arm != Arm::Holdout && source == Source::Model && self.rng.chance(0.05);
        if explored {
            action = self.pick(&Action::ALL);
        }
        let model_out = source == Source::Model || reason == Some(FallbackReason::LowConfidence);
        let state = self.state(reason == Some(FallbackReason::OutOfDistribution));
        let rule = (source != Source::Model).then(|| format!("r{}", 1 + self.rng.below(11)));
        let p = self.p_success(arm, source);
        let mut rec = DecisionRecord {
            log_version: LOG_VERSION,
            ts: self.iso(self.t_us),
            decision_id: self.uuid(),
            request_id: None,
            endpoint,
            state,
            action,
            source,
            fallback_reason: reason,
            rule,
            confidence: model_out.then(|| probs[best]),
            probabilities: model_out.then(|| ProbabilityMap::from(probs)),
            propensity: if explored { 0.05 / 4.0 } else { 1.0 },
            explored,
            model_version: Some(
                if arm == Arm::Challenger {
                    CHALLENGER
                } else {
                    CHAMPION
                }
                .into(),
            ),
            rules_version: Some(RULES.into()),
            encoder_version: ENCODER_VERSION,
            backend: "embedded".into(),
            arm,
            key: RoutingKey::Given,
            decision_us: 3 + self.rng.below(57),
            outcome: None,
            request: None,
            shadow: None,
            detail: None,
        };
        if endpoint == Endpoint::Route {
            let ray = self.rng.next_u64();
            rec.request_id = Some(format!("{ray:016x}-AMS"));
            rec.outcome = Some(self.route_outcome(action, p));
            rec.request = Some(self.request_info(reason == Some(FallbackReason::StaleSignals)));
        }
        (rec, p)
    }

    fn p_success(&self, arm: Arm, source: Source) -> f64 {
        let s = self.opts.scenario;
        match arm {
            Arm::Holdout if s == Scenario::RulesBetter => 0.99,
            Arm::Holdout => 0.955,
            Arm::Challenger if s == Scenario::ChallengerWorse => 0.90,
            _ if source == Source::Model => 0.965,
            _ => 0.93,
        }
    }

    /// Where a routed request's state came from.
    fn request_info(&mut self, stale: bool) -> RequestInfo {
        let (country, continent) = self.pick(&[
            ("NL", "EU"),
            ("DE", "EU"),
            ("GB", "EU"),
            ("US", "NA"),
            ("BR", "SA"),
            ("JP", "AS"),
        ]);
        let method = self.pick(&["GET", "POST"]);
        let (signals_age_s, signals_detail) = match (stale, self.rng.chance(0.2)) {
            (false, _) => (Some(round(self.rng.range(0.0, 30.0), 3)), None),
            (true, false) => (Some(round(self.rng.range(90.0, 900.0), 3)), None),
            (true, true) => (None, Some("no signals stored".to_string())),
        };
        RequestInfo {
            method: method.into(),
            country: Some(country.into()),
            continent: Some(continent.into()),
            signals_age_s,
            signals_detail,
        }
    }

    /// What the origins did with a routed request that succeeds with probability `p`.
    fn route_outcome(&mut self, action: Action, p: f64) -> RouteOutcome {
        if action == Action::Reject {
            return RouteOutcome::answered_by_worker(503);
        }
        let latency = round((3.7 + 0.6 * self.rng.normal()).exp(), 2);
        if self.rng.chance(p) {
            let failover =
                (action != Action::RouteB && self.rng.chance(0.02)).then_some(Action::RouteB);
            let status = if self.rng.chance(0.97) { 200 } else { 404 };
            let mut attempts = Vec::with_capacity(2);
            if failover.is_some() {
                let first = round(latency * self.rng.range(0.1, 0.5), 2);
                attempts.push(Attempt {
                    origin: action,
                    status: Some(503),
                    error: Some(ErrorKind::UpstreamStatus),
                    latency_ms: Some(first),
                });
            }
            attempts.push(Attempt {
                origin: failover.unwrap_or(action),
                status: Some(status),
                error: None,
                latency_ms: Some(latency),
            });
            return RouteOutcome {
                origin: Some(failover.unwrap_or(action)),
                status: Some(status),
                latency_ms: Some(latency),
                failover,
                origin_down: None,
                error: None,
                attempts,
            };
        }
        let error = self.pick(&[
            ErrorKind::UpstreamStatus,
            ErrorKind::Timeout,
            ErrorKind::Connect,
        ]);
        let status = (error == ErrorKind::UpstreamStatus).then(|| self.pick(&[502, 503, 504]));
        RouteOutcome {
            origin: Some(action),
            status,
            latency_ms: status.map(|_| latency),
            failover: None,
            origin_down: None,
            error: Some(error),
            attempts: vec![Attempt {
                origin: action,
                status,
                error: Some(error),
                latency_ms: Some(latency),
            }],
        }
    }

    /// The outcome a caller reports at `t_us` for a decision that succeeds with
    /// probability `p`: a 0/1 reward, a graded reward, or a status and latency.
    fn outcome(&mut self, decision_id: &str, p: f64, t_us: i64) -> OutcomeRecord {
        let u = self.rng.f64();
        let (reward, status, latency_ms) = if u < 0.5 {
            let ok = self.rng.chance(p);
            (Some(if ok { 1.0 } else { 0.0 }), None, None)
        } else if u < 0.6 {
            let graded = (p + 0.1 * self.rng.normal()).clamp(0.0, 1.0);
            (Some(round(graded, 3)), None, None)
        } else {
            let status = if self.rng.chance(p) { 200 } else { 502 };
            let latency = round((3.7 + 0.6 * self.rng.normal()).exp(), 2);
            (None, Some(status), Some(latency))
        };
        OutcomeRecord {
            log_version: LOG_VERSION,
            ts: self.iso(t_us),
            decision_id: decision_id.into(),
            reward,
            status,
            latency_ms,
        }
    }

    /// A line that is not a record of a logged decision, and whether it is a JSON object.
    fn noise(&mut self) -> (String, bool) {
        let u = self.rng.f64();
        let w = &mut self.written;
        if u < 0.5 {
            w.request_lines += 1;
            let method = self.pick(&["GET", "POST"]);
            let path = self.pick(&["/v1/decide", "/v1/outcome", "/api/items", "/v1/health"]);
            let ms = 1 + self.rng.below(39);
            return (
                format!("[wrangler:info] {method} {path} 200 OK ({ms}ms)"),
                false,
            );
        }
        if u < 0.65 {
            w.blank_lines += 1;
            return (String::new(), false);
        }
        if u < 0.75 {
            w.banners += 1;
            let banner = self.pick(&[
                "⎔ Starting local server...",
                "[wrangler:info] Ready on http://127.0.0.1:8787",
                "\x1b[2m[wrangler:info]\x1b[0m Reloading local server...",
            ]);
            return (banner.into(), false);
        }
        if u < 0.85 {
            w.outcomes += 1;
            w.orphan_outcomes += 1;
            let id = self.uuid();
            return (outcome_line(self.outcome(&id, 0.9, self.t_us)), true);
        }
        if u < 0.95 {
            w.truncated += 1;
            let line = self.decision(0.0).0.to_line();
            let mut cut = 10 + self.rng.below(190) as usize;
            while !line.is_char_boundary(cut) {
                cut -= 1;
            }
            return (line[..cut].to_string(), false);
        }
        self.written.bad_records += 1;
        let (mut rec, _) = self.decision(0.0);
        let line = match self.rng.below(4) {
            0 => {
                rec.state.hour = 24;
                rec.to_line()
            }
            1 => {
                rec.state.region_id = 12;
                rec.to_line()
            }
            2 => {
                rec.state.recent_success_rate = 1.5;
                rec.to_line()
            }
            _ => {
                let mut o = self.outcome(&rec.decision_id, 0.9, self.t_us);
                o.reward = Some(1.5);
                (o.status, o.latency_ms) = (None, None);
                outcome_line(o)
            }
        };
        (line, true)
    }
}

/// Puts lines into the envelope of a log source.
struct Envelope {
    format: Format,
    /// Ray ids and event ids: its own stream, so every format holds the same records.
    rng: Rng,
    first: bool,
}

/// A `wrangler tail --format json` event.
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct TailEvent<'a> {
    outcome: &'a str,
    script_name: &'a str,
    diagnostics_channel_events: [(); 0],
    exceptions: [(); 0],
    logs: [TailLog<'a>; 1],
    event_timestamp: i64,
    event: TailTrigger<'a>,
}

#[derive(Serialize)]
struct TailLog<'a> {
    message: [&'a str; 1],
    level: &'a str,
    timestamp: i64,
}

#[derive(Serialize)]
struct TailTrigger<'a> {
    request: TailRequest<'a>,
}

#[derive(Serialize)]
struct TailRequest<'a> {
    url: &'a str,
    method: &'a str,
    headers: Empty,
}

/// `{}`.
#[derive(Serialize)]
struct Empty {}

/// A Logpush `workers_trace_events` event.
#[derive(Serialize)]
#[serde(rename_all = "PascalCase")]
struct LogpushEvent<'a> {
    dispatch_namespace: &'a str,
    event: LogpushRay,
    event_timestamp_ms: i64,
    event_type: &'a str,
    exceptions: [(); 0],
    logs: [LogpushLog<'a>; 1],
    outcome: &'a str,
    script_name: &'a str,
    script_tags: [(); 0],
}

#[derive(Serialize)]
struct LogpushRay {
    #[serde(rename = "RayID")]
    ray_id: String,
}

#[derive(Serialize)]
#[serde(rename_all = "PascalCase")]
struct LogpushLog<'a> {
    level: &'a str,
    message: [&'a str; 1],
    timestamp_ms: i64,
}

impl Envelope {
    fn new(format: Format, seed: u64) -> Envelope {
        Envelope {
            format,
            // "envelope" in ASCII: a stream apart from the records' for any seed.
            rng: Rng::new(seed ^ 0x656E_7665_6C6F_7065),
            first: true,
        }
    }

    fn open(&mut self, out: &mut impl Write) -> io::Result<()> {
        match self.format {
            Format::WorkersLogs => out.write_all(b"[\n"),
            _ => Ok(()),
        }
    }

    /// Writes `line` (a JSON object when `object`) logged at `ms`.
    fn put(&mut self, out: &mut impl Write, line: &str, object: bool, ms: i64) -> io::Result<()> {
        match self.format {
            Format::Dev => {
                out.write_all(line.as_bytes())?;
                out.write_all(b"\n")
            }
            Format::Tail => {
                let ev = TailEvent {
                    outcome: "ok",
                    script_name: "edge-decider",
                    diagnostics_channel_events: [],
                    exceptions: [],
                    logs: [TailLog {
                        message: [line],
                        level: "log",
                        timestamp: ms,
                    }],
                    event_timestamp: ms,
                    event: TailTrigger {
                        request: TailRequest {
                            url: "https://edge.example/v1/decide",
                            method: "POST",
                            headers: Empty {},
                        },
                    },
                };
                serde_json::to_writer_pretty(&mut *out, &ev)?;
                out.write_all(b"\n")
            }
            Format::Logpush => {
                let ev = LogpushEvent {
                    dispatch_namespace: "",
                    event: LogpushRay {
                        ray_id: format!("{:016x}", self.rng.next_u64()),
                    },
                    event_timestamp_ms: ms,
                    event_type: "fetch",
                    exceptions: [],
                    logs: [LogpushLog {
                        level: "log",
                        message: [line],
                        timestamp_ms: ms,
                    }],
                    outcome: "ok",
                    script_name: "edge-decider",
                    script_tags: [],
                };
                serde_json::to_writer(&mut *out, &ev)?;
                out.write_all(b"\n")
            }
            Format::WorkersLogs => {
                out.write_all(if self.first { b"  " } else { b",\n  " })?;
                self.first = false;
                // Workers Logs parses a JSON line into `source`: the record's own bytes go
                // there as they are; other text stays a string.
                out.write_all(b"{\"source\":")?;
                if object {
                    out.write_all(line.as_bytes())?;
                } else {
                    serde_json::to_writer(&mut *out, line)?;
                }
                let (hi, lo) = (self.rng.next_u64(), self.rng.next_u64());
                write!(
                    out,
                    ",\"dataset\":\"cloudflare-workers\",\"timestamp\":{ms},\
                     \"$workers\":{{\"scriptName\":\"edge-decider\",\"outcome\":\"ok\",\"eventType\":\"fetch\"}},\
                     \"$metadata\":{{\"id\":\"{hi:016x}{lo:016x}\",\"message\":"
                )?;
                serde_json::to_writer(&mut *out, line)?;
                out.write_all(b",\"type\":\"cf-worker-log\"}}")
            }
        }
    }

    fn close(&mut self, out: &mut impl Write) -> io::Result<()> {
        match self.format {
            Format::WorkersLogs => out.write_all(b"\n]\n"),
            _ => Ok(()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn times_carry_milliseconds() {
        assert_eq!(iso_ms(START_MS), "2026-12-02T10:00:00.000Z");
        assert_eq!(iso_ms(START_MS + 3_723_045), "2026-12-02T11:02:03.045Z");
    }

    #[test]
    fn options_out_of_range_are_refused_naming_the_option() {
        for (opts, name) in [
            (
                Options {
                    lines: 0,
                    ..Options::default()
                },
                "lines",
            ),
            (
                Options {
                    rate: 0.0,
                    ..Options::default()
                },
                "rate",
            ),
            (
                Options {
                    rate: f64::INFINITY,
                    ..Options::default()
                },
                "rate",
            ),
            (
                Options {
                    rate: 1e-6,
                    ..Options::default()
                },
                "rate",
            ),
            (
                Options {
                    noise: 1.0,
                    ..Options::default()
                },
                "noise",
            ),
        ] {
            let mut out = Vec::new();
            let e = write(&opts, &mut out).unwrap_err();
            assert!(e.to_string().starts_with(name), "{e}");
            assert!(out.is_empty());
        }
    }

    #[test]
    fn names_round_trip() {
        for s in Scenario::ALL {
            assert_eq!(Scenario::parse_name(s.name()), Some(s));
        }
        for f in Format::ALL {
            assert_eq!(Format::parse_name(f.name()), Some(f));
        }
        assert_eq!(Scenario::parse_name("calm"), None);
    }
}

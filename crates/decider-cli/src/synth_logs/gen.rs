//! The generator: one log line at a time, decisions with their outcomes, late outcome
//! records, and noise (see the [module docs](super)).

use super::options::{
    iso_ms, outcome_line, round, Options, Scenario, Written, CHALLENGER, CHAMPION, REASONS, RULES,
    START_MS,
};
use crate::rng::Rng;
use decider_core::policy::ProbabilityMap;
use decider_core::record::{
    Attempt, DecisionRecord, Endpoint, ErrorKind, OutcomeRecord, RequestInfo, RouteOutcome,
    RoutingKey, LOG_VERSION,
};
use decider_core::rollout::Arm;
use decider_core::{Action, FallbackReason, Source, State, ENCODER_VERSION};
use std::cmp::{Ordering, Reverse};
use std::collections::BinaryHeap;

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
pub(super) struct Gen {
    rng: Rng,
    opts: Options,
    /// Log time of the next decision, µs after [`START_MS`].
    pub(super) t_us: i64,
    decided: u64,
    late: BinaryHeap<Reverse<Late>>,
    seq: u64,
    pub(super) written: Written,
}

impl Gen {
    pub(super) fn new(opts: Options) -> Gen {
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
    pub(super) fn next_line(&mut self, i: u64) -> (String, bool) {
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

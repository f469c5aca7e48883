//! The join of outcome lines to decisions by `decision_id`, and the per-group tallies.
//!
//! Lines arrive in any order (Logpush batches, several files), so the join keeps one small
//! fixed-size entry per decision id until the end — the group keys and the outcome fields
//! the success definition needs, never the record. Ids are keyed by a 64-bit hash: two ids
//! colliding (probability about n²/2⁶⁵, 3·10⁻⁸ for a million ids) would merge two decisions.
//! Fallbacks over time are counted as decisions stream by (they need no outcome).

use super::stats::GroupStats;
use super::timeline::{Timeline, REASONS};
use crate::logs::{parse_iso_ms, Arm, Endpoint, Record};
pub use decider_core::record::id_key;
use decider_core::record::RolloutRecord;
use decider_core::rollout::Observation;
use decider_core::{Action, FallbackReason, Source};
use decider_rollout::alarm::reason_index;
use decider_rollout::Sample;
use std::collections::HashMap;
use std::hash::{BuildHasherDefault, Hasher};

/// How a decision's reward is defined: the one definition, shared with the Worker's live
/// counters.
pub use decider_core::rollout::SuccessRule;

const SOURCES: [Source; 3] = [Source::Model, Source::Rules, Source::Default];
const HAS_DECISION: u8 = 1;
const HAS_EMBEDDED: u8 = 2;
const HAS_LINE: u8 = 4;
const REJECT: u8 = 8;
const NO_MODEL_VERSION: u16 = u16::MAX;

/// What is kept per decision id until the end: 24 bytes.
#[derive(Debug, Clone, Copy)]
struct Pending {
    /// When the decision was made, ms since the epoch (which rollout step it belongs to).
    ts_ms: i64,
    latency_ms: f32,
    reward: f32,
    status: u16,
    model_version: u16,
    /// 0 = none, else 1 + action index.
    origin: u8,
    /// Source index | arm << 2 | endpoint << 4.
    dims: u8,
    flags: u8,
}

impl Pending {
    fn source(&self) -> usize {
        usize::from(self.dims & 3)
    }
    fn arm(&self) -> usize {
        usize::from((self.dims >> 2) & 3)
    }
    fn endpoint(&self) -> usize {
        usize::from((self.dims >> 4) & 1)
    }
}

impl Default for Pending {
    fn default() -> Self {
        Pending {
            ts_ms: 0,
            latency_ms: f32::NAN,
            reward: f32::NAN,
            status: 0,
            model_version: NO_MODEL_VERSION,
            origin: 0,
            dims: 0,
            flags: 0,
        }
    }
}

/// The ids are already hashes: the map uses them as they are.
#[derive(Default)]
struct IdHasher(u64);

impl Hasher for IdHasher {
    fn finish(&self) -> u64 {
        self.0
    }
    fn write(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.0 = self.0.rotate_left(8) ^ u64::from(b);
        }
    }
    fn write_u64(&mut self, v: u64) {
        self.0 = v;
    }
}

/// The streaming join; feed it with [`Join::add`], then [`Join::finish`].
pub struct Join {
    pending: HashMap<u64, Pending, BuildHasherDefault<IdHasher>>,
    model_versions: Vec<String>,
    mv_index: HashMap<String, u16>,
    last_mv: Option<(u16, String)>,
    duplicate_decisions: u64,
    rescued: u64,
    outcome_lines: u64,
    timeline: Timeline,
    holdout: u64,
    rollouts: Vec<RolloutRecord>,
}

/// Most `rollout` records a report keeps (the judge keeps a history of 50 per rollout).
pub const MAX_ROLLOUTS: usize = 1_000;

/// Everything the report prints, before verdicts.
#[derive(Debug, Clone, Default)]
pub struct Aggregates {
    /// Distinct decisions.
    pub decisions: u64,
    /// Decision lines whose id was already seen (the first one counts).
    pub duplicate_decisions: u64,
    /// Routed decisions whose origin failed them while failover gave the client a usable
    /// answer: failures of the decision, successes of the request.
    pub rescued: u64,
    /// Outcome lines read.
    pub outcome_lines: u64,
    /// Outcome lines whose decision_id never appeared as a decision (one per id).
    pub orphan_outcomes: u64,
    /// Groups by source, arm, endpoint, origin and model version (name, tally).
    pub by_source: Vec<(String, GroupStats)>,
    /// By rollout arm.
    pub by_arm: Vec<(String, GroupStats)>,
    /// By endpoint.
    pub by_endpoint: Vec<(String, GroupStats)>,
    /// By the origin the decision chose ("(none)": rejected, or answered by the Worker).
    pub by_origin: Vec<(String, GroupStats)>,
    /// By model version ("(none)" without one).
    pub by_model_version: Vec<(String, GroupStats)>,
    /// Arm × endpoint, for comparisons restricted to the endpoints both arms serve.
    pub arm_endpoint: Vec<(Arm, Endpoint, GroupStats)>,
    /// Decisions per model version within each arm, most first.
    pub arm_versions: Vec<(Arm, Vec<(String, u64)>)>,
    /// Decisions outside the holdout arm, and their fallbacks by reason ([`REASONS`]).
    pub fallback_n: u64,
    /// Fallbacks by reason, in [`REASONS`] order.
    pub fallback_by_reason: [u64; 7],
    /// Holdout decisions (rules by design, left out of the fallback rate).
    pub holdout: u64,
    /// Fallbacks over time.
    pub timeline: Option<Timeline>,
    /// The rollout's changes (`rollout` records), oldest first, at most [`MAX_ROLLOUTS`].
    pub rollouts: Vec<RolloutRecord>,
    /// The log's own counts of each rollout period: the step each change ended, then the one
    /// in force since the last change (the whole log when there is none).
    pub periods: Vec<Period>,
}

/// One period of the rollout, as the log counts it: the decisions made in it by arm, with
/// the rewards of their outcomes.
#[derive(Debug, Clone, PartialEq)]
pub struct Period {
    /// The change that ended it (an index in [`Aggregates::rollouts`]); None for the period
    /// in force.
    pub ended_by: Option<usize>,
    /// Its first ms (the change's `step_since`; `i64::MIN` from the log's beginning).
    pub from_ms: i64,
    /// Its end, excluded (`i64::MAX` for the period in force).
    pub to_ms: i64,
    /// Each arm's outcomes ([`Arm::ALL`] order).
    pub arms: [Sample; 3],
    /// Each arm's decisions.
    pub decisions: [u64; 3],
}

/// The periods the rollout records delimit: `[step_since, ts)` of each change, then from
/// the last change on.
fn periods(rollouts: &[RolloutRecord]) -> Vec<Period> {
    let empty = |ended_by, from_ms, to_ms| Period {
        ended_by,
        from_ms,
        to_ms,
        arms: [Sample::default(); 3],
        decisions: [0; 3],
    };
    let mut out: Vec<Period> = rollouts
        .iter()
        .enumerate()
        .filter_map(|(i, r)| {
            let to = parse_iso_ms(&r.ts).ok()?;
            let from = r
                .step_since
                .as_deref()
                .and_then(|t| parse_iso_ms(t).ok())
                .unwrap_or(i64::MIN);
            Some(empty(Some(i), from.min(to), to))
        })
        .collect();
    let last = out.last().map_or(i64::MIN, |p| p.to_ms);
    out.push(empty(None, last, i64::MAX));
    out
}

impl Join {
    /// An empty join; `bucket_ms` fixes the width of the fallback buckets.
    pub fn new(bucket_ms: Option<i64>) -> Join {
        Join {
            pending: HashMap::default(),
            model_versions: Vec::new(),
            mv_index: HashMap::new(),
            last_mv: None,
            duplicate_decisions: 0,
            rescued: 0,
            outcome_lines: 0,
            timeline: Timeline::new(bucket_ms),
            holdout: 0,
            rollouts: Vec::new(),
        }
    }

    fn intern(&mut self, mv: Option<&str>) -> u16 {
        let Some(mv) = mv else {
            return NO_MODEL_VERSION;
        };
        // Consecutive decisions almost always name the same model: skip the map for them.
        if let Some(&(i, _)) = self.last_mv.as_ref().filter(|(_, s)| s == mv) {
            return i;
        }
        let i = self.intern_new(mv);
        self.last_mv = Some((i, mv.to_owned()));
        i
    }

    fn intern_new(&mut self, mv: &str) -> u16 {
        if let Some(&i) = self.mv_index.get(mv) {
            return i;
        }
        // More distinct versions than this is not a rollout; the rest share the last slot.
        if self.model_versions.len() >= usize::from(NO_MODEL_VERSION - 1) {
            return NO_MODEL_VERSION - 1;
        }
        let i = self.model_versions.len() as u16;
        self.model_versions.push(mv.to_owned());
        self.mv_index.insert(mv.to_owned(), i);
        i
    }

    /// Adds one record. True when it is a decision whose id was not seen before (the one
    /// the join keeps: later duplicates are counted and ignored).
    pub fn add(&mut self, r: &Record) -> bool {
        match r {
            Record::Decision(d) => {
                let key = id_key(&d.decision_id);
                let mv = self.intern(d.model_version.as_deref());
                let p = self.pending.entry(key).or_default();
                if p.flags & HAS_DECISION != 0 {
                    self.duplicate_decisions += 1;
                    return false;
                }
                p.flags |= HAS_DECISION;
                if d.action == Action::Reject {
                    p.flags |= REJECT;
                }
                p.model_version = mv;
                // The reader admits only timestamps that parse.
                p.ts_ms = parse_iso_ms(&d.ts).unwrap_or(0);
                let source = SOURCES.iter().position(|s| *s == d.source).unwrap_or(0) as u8;
                p.dims = source | (d.arm as u8) << 2 | (d.endpoint as u8) << 4;
                if let Some(o) = &d.outcome {
                    // Grouped by the origin the decision chose, scored by that origin's first
                    // attempt: failover rescues the client, not the decision.
                    let routed = d.action != Action::Reject && !o.answered_by_itself();
                    p.origin = if routed {
                        1 + d.action.index() as u8
                    } else {
                        0
                    };
                    p.flags |= HAS_EMBEDDED;
                    let (status, latency_ms) = o.decided(d.action);
                    if routed && status.is_none() && o.final_status().is_some() {
                        // Counted by status alone: whatever --success says, the decided
                        // origin gave no usable answer and another one did.
                        self.rescued += 1;
                    }
                    // An outcome line read earlier is newer information: it stays.
                    if p.flags & HAS_LINE == 0 {
                        // No usable answer (an error, a body cut short): no status, a failure.
                        p.status = status.unwrap_or(0);
                        p.latency_ms = latency_ms.map_or(f32::NAN, |l| l as f32);
                    }
                }
                let holdout =
                    d.arm == Arm::Holdout || d.fallback_reason == Some(FallbackReason::Holdout);
                if holdout {
                    self.holdout += 1;
                } else if let Ok(ts_ms) = parse_iso_ms(&d.ts) {
                    // The reader admits only timestamps that parse.
                    let fell_back = d.source != Source::Model;
                    self.timeline.add(
                        ts_ms,
                        fell_back
                            .then(|| reason_index(d.fallback_reason).unwrap_or(REASONS.len() - 1)),
                    );
                }
                true
            }
            Record::Outcome(o) => {
                self.outcome_lines += 1;
                // The reader hands on one outcome per decision (the first it reads).
                let p = self.pending.entry(id_key(&o.decision_id)).or_default();
                p.flags |= HAS_LINE;
                p.reward = o.reward.map_or(f32::NAN, |r| r as f32);
                p.status = o.status.unwrap_or(0);
                p.latency_ms = o.latency_ms.map_or(f32::NAN, |l| l as f32);
                false
            }
            Record::Rollout(r) => {
                if self.rollouts.len() < MAX_ROLLOUTS {
                    self.rollouts.push(r.clone());
                }
                false
            }
            // The judge's looks and alarms: the report judges its own counts.
            Record::RolloutJudged(_) | Record::RolloutAlarm(_) | Record::RolloutAlarmCleared(_) => {
                false
            }
        }
    }

    /// The reward of the decision with key `key` ([`id_key`]) under `rule`, from everything
    /// added so far; None when no outcome is known for it.
    pub fn reward_of(&self, key: u64, rule: &SuccessRule) -> Option<f64> {
        self.pending
            .get(&key)
            .filter(|p| p.flags & HAS_DECISION != 0)
            .and_then(|p| Join::reward(p, rule))
    }

    /// The reward of one joined decision under `rule`, or None without an outcome.
    fn reward(p: &Pending, rule: &SuccessRule) -> Option<f64> {
        if p.flags & (HAS_LINE | HAS_EMBEDDED) == 0 {
            return None;
        }
        // Kept as f32 to keep the entry small; 6 decimals give the caller's value back.
        let reward = (p.flags & HAS_LINE != 0 && !p.reward.is_nan())
            .then(|| (f64::from(p.reward) * 1e6).round() / 1e6);
        Some(rule.reward(&Observation {
            reward,
            status: (p.status != 0).then_some(p.status),
            latency_ms: (!p.latency_ms.is_nan()).then(|| f64::from(p.latency_ms)),
            rejected: p.flags & REJECT != 0,
        }))
    }

    /// Joins and tallies everything read.
    pub fn finish(self, rule: &SuccessRule) -> Aggregates {
        let nv = self.model_versions.len();
        let mut source = vec![GroupStats::default(); 3];
        let mut arm = vec![GroupStats::default(); 3];
        let mut endpoint = vec![GroupStats::default(); 2];
        let mut origin = vec![GroupStats::default(); 5];
        // One slot per interned version, then "(other)", then "(none)".
        let mut version = vec![GroupStats::default(); nv + 2];
        let mut arm_endpoint = vec![GroupStats::default(); 6];
        let mut arm_versions: Vec<HashMap<usize, u64>> = vec![HashMap::new(); 3];
        let mut rollouts = self.rollouts;
        // ISO times with milliseconds sort as text; the sort is stable.
        rollouts.sort_by(|a, b| a.ts.cmp(&b.ts));
        let mut periods = periods(&rollouts);
        let (mut decisions, mut orphans) = (0u64, 0u64);
        for p in self.pending.values() {
            if p.flags & HAS_DECISION == 0 {
                orphans += 1;
                continue;
            }
            decisions += 1;
            let reward = Join::reward(p, rule);
            let rejected = p.flags & REJECT != 0;
            let latency = (!rejected && !p.latency_ms.is_nan() && reward.is_some())
                .then_some(f64::from(p.latency_ms));
            let v = match p.model_version {
                NO_MODEL_VERSION => nv + 1,
                i => usize::from(i).min(nv),
            };
            let (a, e) = (p.arm(), p.endpoint());
            for g in [
                &mut source[p.source()],
                &mut arm[a],
                &mut endpoint[e],
                &mut origin[usize::from(p.origin)],
                &mut version[v],
                &mut arm_endpoint[a * 2 + e],
            ] {
                g.add(reward, latency, rejected);
            }
            *arm_versions[a].entry(v).or_default() += 1;
            let at = periods.partition_point(|q| q.from_ms <= p.ts_ms);
            if let Some(q) = at.checked_sub(1).map(|i| &mut periods[i]) {
                if p.ts_ms < q.to_ms {
                    q.decisions[a] += 1;
                    if let Some(r) = reward {
                        let s = &mut q.arms[a];
                        s.n += 1;
                        s.sum += r;
                        s.sum_sq += r * r;
                    }
                }
            }
        }
        let name_v = |i: usize| match i {
            i if i < nv => self.model_versions[i].clone(),
            i if i == nv => "(other)".to_owned(),
            _ => "(none)".to_owned(),
        };
        let keep = |v: Vec<GroupStats>, names: &dyn Fn(usize) -> String| {
            v.into_iter()
                .enumerate()
                .filter(|(_, g)| g.n > 0)
                .map(|(i, g)| (names(i), g))
                .collect::<Vec<_>>()
        };
        let mut by_model_version = keep(version, &name_v);
        by_model_version.sort_by(|a, b| a.0.cmp(&b.0));
        let (fallback_n, fallback_by_reason) =
            self.timeline
                .buckets()
                .1
                .iter()
                .fold((0u64, [0u64; 7]), |(n, mut by), b| {
                    for (x, y) in by.iter_mut().zip(b.bin.by_reason) {
                        *x += y;
                    }
                    (n + b.bin.n, by)
                });
        Aggregates {
            decisions,
            duplicate_decisions: self.duplicate_decisions,
            rescued: self.rescued,
            outcome_lines: self.outcome_lines,
            orphan_outcomes: orphans,
            by_source: keep(source, &|i| SOURCES[i].name().to_owned()),
            by_arm: keep(arm, &|i| Arm::ALL[i].name().to_owned()),
            by_endpoint: keep(endpoint, &|i| Endpoint::ALL[i].name().to_owned()),
            by_origin: keep(origin, &|i| match i {
                0 => "(none)".to_owned(),
                i => Action::ALL[i - 1].name().to_owned(),
            }),
            by_model_version,
            arm_endpoint: arm_endpoint
                .into_iter()
                .enumerate()
                .map(|(i, g)| (Arm::ALL[i / 2], Endpoint::ALL[i % 2], g))
                .collect(),
            arm_versions: arm_versions
                .into_iter()
                .enumerate()
                .map(|(i, m)| {
                    let mut v: Vec<(String, u64)> =
                        m.into_iter().map(|(k, c)| (name_v(k), c)).collect();
                    v.sort_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(&b.0)));
                    (Arm::ALL[i], v)
                })
                .collect(),
            fallback_n,
            fallback_by_reason,
            holdout: self.holdout,
            timeline: Some(self.timeline),
            rollouts,
            periods,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_pending_entry_stays_small() {
        // The join's memory is one of these plus an 8-byte key per decision id.
        assert_eq!(std::mem::size_of::<Pending>(), 24);
    }

    #[test]
    fn reward_follows_the_success_rule() {
        let rule = SuccessRule {
            slo_ms: Some(100.0),
            reject_reward: 0.25,
            ..SuccessRule::default()
        };
        let p = |flags, status, latency: f32, reward: f32| Pending {
            flags,
            status,
            latency_ms: latency,
            reward,
            ..Pending::default()
        };
        let r = |x: Pending| Join::reward(&x, &rule);
        assert_eq!(r(p(HAS_DECISION, 200, 50.0, f32::NAN)), None);
        assert_eq!(
            r(p(HAS_DECISION | HAS_EMBEDDED, 200, 50.0, f32::NAN)),
            Some(1.0)
        );
        assert_eq!(
            r(p(HAS_DECISION | HAS_EMBEDDED, 200, 150.0, f32::NAN)),
            Some(0.0)
        );
        assert_eq!(
            r(p(HAS_DECISION | HAS_EMBEDDED, 200, f32::NAN, f32::NAN)),
            Some(1.0)
        );
        assert_eq!(
            r(p(HAS_DECISION | HAS_EMBEDDED, 500, 50.0, f32::NAN)),
            Some(0.0)
        );
        assert_eq!(
            r(p(HAS_DECISION | HAS_EMBEDDED, 0, f32::NAN, f32::NAN)),
            Some(0.0)
        );
        assert_eq!(
            r(p(HAS_DECISION | HAS_EMBEDDED | REJECT, 503, 0.0, f32::NAN)),
            Some(0.25)
        );
        assert_eq!(
            r(p(HAS_DECISION | HAS_LINE | REJECT, 0, f32::NAN, 0.7)),
            Some(0.7)
        );
        assert_eq!(
            r(p(HAS_DECISION | HAS_LINE, 404, 20.0, f32::NAN)),
            Some(1.0)
        );
    }
}

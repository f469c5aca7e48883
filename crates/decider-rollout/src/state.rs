//! The rollout's state, kept by the control plane's object, and [`step`], the pure step of
//! every cron run: fold the complete windows into the current step's tally, compare the
//! arms, and ramp, roll back, alarm or switch to rules.
//!
//! # What the judge does
//! - **Challenger vs champion** (while ramping): Better with at least `min_outcomes`
//!   outcomes on both arms → the next step of `ROLLOUT_STEPS`; the last step (100%) makes
//!   the challenger the effective champion ([`Phase::Promoted`]). Worse → share 0 at once
//!   ([`Phase::RolledBack`]), whatever the number of outcomes.
//! - **Model vs rules** on the holdout arm, as `decider report` reads it: the effective
//!   champion's arm (the champion, or the challenger once promoted) against the holdout arm,
//!   which rules decide by design. Worse → a holdout alarm, which holds until the model is
//!   shown Better or the rollout starts over; with `ROLLOUT_RULES_SWITCH` (and
//!   `min_outcomes` on both arms) all traffic switches to rules too.
//! - **Fallback rate**: the alarm of [`super::alarm`] over the complete windows, raised
//!   while it fires and cleared when the rate is steady again.
//! - With `ROLLOUT_AUTO=false` nothing changes: the judgement ([`RolloutState::last`]) says
//!   what the judge would do, and alarms are still raised.
//!
//! # Each step is a new test, and the rollout keeps α
//! The test restarts on every change of setting: the step's tally starts empty and counts
//! only the windows that begin after the change. Two reasons. A step exists to check the
//! challenger at its new exposure: its routing moves load between origins, so what holds at
//! 5% of the traffic need not hold at 50%. And within a step the shares are fixed, so both
//! arms see the same hours of traffic in the same proportion and a drift over the day moves
//! both means alike; a test that continued across steps would compare a challenger whose
//! outcomes lean towards the later, larger steps with a champion whose outcomes lean
//! towards the earlier ones.
//!
//! Restarting spends the error rate again, so the rollout splits α over its periods: period
//! k (the k-th setting since the rollout began, from 0) is judged at α·2^−(k+1) — α/2 on the
//! first step, α/4 on the second, and so on. These add up to less than α, so over the whole
//! rollout, every step and every look included, the probability that a comparison ever
//! declares a wrong sign is at most α. The first step, the slowest (its share is the
//! smallest), gets the largest part. A challenger that is no better than the champion
//! leaves its first step only through a wrong Better (at most α/2), and an identical one
//! (an A/A rollout) makes any false decision, promotion or rollback, with probability at
//! most α/2.
//!
//! # How much traffic a step takes
//! `decider rollout plan` simulates rollouts through [`step`] (`crate::sim`) and says, per
//! step, the outcomes and minutes it takes and how often it decides wrongly; docs/rollout.md
//! has its tables.

use crate::alarm::{fallback_alarm, Evidence, FallbackAlarm, REASONS};
use crate::allocation::{self, CanaryHeard};
use crate::policy::Policy;
use crate::sequential::{compare, pct, Comparison, Sample, Verdict};
use crate::tally::{Tally, Windows};
use decider_core::record::{AlarmKind, Why};
use decider_core::rollout::{Arm, Phase, Setting};
use serde::{Deserialize, Serialize};

/// Most changes the history keeps (the oldest go first).
pub const MAX_HISTORY: usize = 50;

/// One change of setting: the `rollout` log event.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Change {
    /// When, ms since the epoch (the cron run's time).
    pub at_ms: i64,
    /// The setting before.
    pub from: Setting,
    /// The setting after.
    pub to: Setting,
    /// Why.
    pub why: Why,
    /// One sentence for people.
    pub text: String,
    /// When the step that ended began.
    pub step_since_ms: i64,
    /// The comparison that decided; none for an operator's verb or the bake's end.
    #[serde(default)]
    pub statistics: Option<Comparison>,
    /// The operator's reason, for an operator's verb.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
}

/// A raised alarm.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Alarm {
    /// Which.
    pub kind: AlarmKind,
    /// Raised at, ms since the epoch.
    pub since_ms: i64,
    /// One sentence for people.
    pub text: String,
    /// The holdout comparison that raised it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub holdout: Option<Comparison>,
    /// The fallback numbers that raised it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fallback: Option<Evidence>,
}

/// A change the judge made, or with `ROLLOUT_AUTO=false` would make.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Proposal {
    /// The setting it leads to.
    pub to: Setting,
    /// Why.
    pub why: Why,
    /// Whether it was applied.
    pub applied: bool,
}

/// What the last cron run found.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Judgement {
    /// When, ms since the epoch.
    pub at_ms: i64,
    /// The error rate of this period's comparisons.
    pub alpha: f64,
    /// Challenger vs champion on this step, while ramping.
    pub challenger: Option<Comparison>,
    /// Model vs rules, when the holdout arm has traffic.
    pub holdout: Option<Comparison>,
    /// The fallback alarm's numbers, when there were enough windows.
    pub fallback: Option<Evidence>,
    /// What the judge did or would do.
    pub proposals: Vec<Proposal>,
    /// Why the judge waits, when a verdict is in but the outcomes are too few.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub waiting: Option<String>,
    /// When the look before this one was (the period of the looks, for the next one).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub previous_at_ms: Option<i64>,
}

/// The rollout's state, kept between cron runs.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RolloutState {
    /// The challenger this rollout is about (its model version); None without one.
    pub challenger_version: Option<String>,
    /// Where the rollout stands.
    pub phase: Phase,
    /// Index of the current step in `ROLLOUT_STEPS`.
    pub step: usize,
    /// The challenger's share in force, percent of routing keys.
    pub share: u8,
    /// Every decision on rules (`ROLLOUT_RULES_SWITCH` after a holdout alarm).
    pub rules_only: bool,
    /// Settings since the rollout began, less one: period k is judged at α·2^−(k+1).
    pub period: u32,
    /// When the current step (period) began, ms since the epoch.
    pub since_ms: i64,
    /// Windows starting before this are counted in `tally` or belong to an earlier step.
    pub counted_through_ms: i64,
    /// The counts since the step began.
    pub tally: Tally,
    /// The changes, oldest first, at most [`MAX_HISTORY`].
    pub history: Vec<Change>,
    /// Alarms raised and not cleared.
    pub alarms: Vec<Alarm>,
    /// The last look's judgement.
    pub last: Option<Judgement>,
    /// Challengers this rollout superseded, with when (ms): a serving isolate that still
    /// names one (a deploy reaching every isolate takes a while) does not start the old
    /// rollout again. Forgotten after [`RETIRED_MS`].
    #[serde(default)]
    pub retired: Vec<(Option<String>, i64)>,
    /// Caller outcomes received and not counted, by why ([`crate::outcomes`]).
    #[serde(default)]
    pub uncounted: Uncounted,
    /// An operator paused the judge: it keeps judging and changes nothing until resumed.
    #[serde(default)]
    pub paused: bool,
    /// The serving isolates' `CANARY_PERCENT`, as their batches name it ([`crate::allocation`]).
    #[serde(default)]
    pub canary: Option<CanaryHeard>,
}

/// Caller outcomes received and not counted, by why (since the rollout began).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Uncounted {
    /// A repeat of an outcome already counted for its decision.
    pub duplicate: u64,
    /// For a decision made before the current step began.
    pub before_step: u64,
    /// For a decision older than the memory of counted ids reaches.
    pub beyond_horizon: u64,
}

/// How long a superseded challenger is remembered ([`RolloutState::for_challenger`]).
pub const RETIRED_MS: i64 = 15 * 60 * 1000;

impl RolloutState {
    /// A rollout beginning at `now_ms`: the challenger (`Some` version) at the first step's
    /// share, or no challenger at share 0.
    pub fn start(challenger_version: Option<String>, policy: &Policy, now_ms: i64) -> RolloutState {
        let (phase, share) = match challenger_version {
            Some(_) if policy.steps.last() == 0 => (Phase::Promoted, 100),
            Some(_) => (Phase::Ramping, policy.steps.share(0)),
            None => (Phase::NoChallenger, 0),
        };
        RolloutState {
            challenger_version,
            phase,
            step: 0,
            share,
            rules_only: false,
            period: 0,
            since_ms: now_ms,
            counted_through_ms: now_ms,
            tally: Tally::new(),
            history: Vec::new(),
            alarms: Vec::new(),
            last: None,
            retired: Vec::new(),
            uncounted: Uncounted::default(),
            paused: false,
            canary: None,
        }
    }

    /// The setting in force.
    pub fn setting(&self) -> Setting {
        if self.rules_only {
            Setting::Rules
        } else {
            Setting::Share(self.share)
        }
    }

    /// Whether the challenger is the effective champion.
    pub fn promoted(&self) -> bool {
        self.phase == Phase::Promoted
    }

    /// The error rate of the current period's comparisons: α·2^−(period+1).
    pub fn period_alpha(&self, alpha: f64) -> f64 {
        alpha * 0.5f64.powi(self.period.saturating_add(1).min(1_000) as i32)
    }

    /// Keeps the canary share a flush batch named; true when the kept value changed.
    pub fn hear_canary(&mut self, named: Option<u8>, now_ms: i64) -> bool {
        allocation::hear(&mut self.canary, named, now_ms)
    }

    /// The treatment's share of two arms' traffic on this step, when known.
    pub fn allocation(&self, treatment: Arm, baseline: Arm) -> Option<f64> {
        allocation::between(treatment, baseline, self.share, self.canary, self.since_ms)
    }

    /// The raised alarm of this kind, if any.
    pub fn alarm(&self, kind: AlarmKind) -> Option<&Alarm> {
        self.alarms.iter().find(|a| a.kind == kind)
    }

    /// Counts the complete windows not counted yet that began at or after the step.
    fn count(&mut self, windows: &Windows, now_ms: i64) {
        if let Some(f) = windows.folded() {
            if f.from_ms >= self.counted_through_ms && f.to_ms <= now_ms {
                self.tally.merge(&f.tally);
                self.counted_through_ms = f.to_ms;
            }
        }
        for (start, t) in windows.complete(now_ms) {
            if start >= self.counted_through_ms {
                self.tally.merge(t);
                self.counted_through_ms = start + windows.width_ms();
            }
        }
    }

    /// Where the challenger goes when it passes the current step (or an operator promotes
    /// it, `from_last`): the next step's share; past the last step, the bake at
    /// [`Policy::bake_share`] (phase [`Phase::Baking`]) unless there is none (or it is
    /// skipped), else 100% (phase [`Phase::Promoted`]).
    pub(crate) fn next(&self, policy: &Policy, from_last: bool, skip_bake: bool) -> Target {
        let last = policy.steps.last();
        let step = if from_last {
            last
        } else {
            (self.step + 1).min(last)
        };
        if step < last {
            return Target {
                setting: Setting::Share(policy.steps.share(step)),
                phase: Phase::Ramping,
                step,
            };
        }
        let bake = policy.bake_percent > 0 && !skip_bake && self.phase != Phase::Baking;
        Target {
            setting: Setting::Share(if bake { policy.bake_share() } else { 100 }),
            phase: if bake { Phase::Baking } else { Phase::Promoted },
            step: last,
        }
    }

    /// Applies a change at `now_ms` and starts the next period (a new test on fresh counts).
    pub(crate) fn apply(&mut self, t: Target, now_ms: i64) {
        match t.setting {
            Setting::Rules => self.rules_only = true,
            Setting::Share(p) => {
                self.rules_only = false;
                self.share = p;
                self.phase = t.phase;
                self.step = t.step;
            }
        }
        self.period = self.period.saturating_add(1);
        self.since_ms = now_ms;
        self.counted_through_ms = now_ms;
        self.tally = Tally::new();
    }

    /// Records a change in the history (at most [`MAX_HISTORY`]).
    pub(crate) fn remember(&mut self, c: &Change) {
        self.history.push(c.clone());
        if self.history.len() > MAX_HISTORY {
            self.history.drain(..self.history.len() - MAX_HISTORY);
        }
    }
}

/// A setting the rollout moves to, with its phase and step.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Target {
    pub(crate) setting: Setting,
    pub(crate) phase: Phase,
    pub(crate) step: usize,
}

/// What a look did, in order: each becomes a record ([`crate::events`]).
#[derive(Debug, Clone, PartialEq)]
pub enum Event {
    /// The setting changed.
    Changed(Change),
    /// An alarm was raised.
    Raised(Alarm),
    /// An alarm was cleared.
    Cleared(AlarmKind),
}

/// The arm whose outcomes exceed its decisions on the step, if any: those outcomes are no
/// evidence (more outcomes than decisions cannot all be the step's own).
fn excess(t: &Tally) -> Option<(Arm, u64, u64)> {
    Arm::ALL.into_iter().find_map(|a| {
        let c = t.arm(a);
        (c.outcomes > c.decisions).then_some((a, c.outcomes, c.decisions))
    })
}

/// One look of the judge: counts the complete windows, judges, and returns the new state
/// and what it did (no change with `ROLLOUT_AUTO=false`; alarms are raised all the same).
/// Never reads a clock: `now_ms` is the look's time, and windows that end after it are
/// left for a later look.
pub fn step(
    state: &RolloutState,
    policy: &Policy,
    windows: &Windows,
    now_ms: i64,
) -> (RolloutState, Vec<Event>) {
    let mut s = state.clone();
    s.count(windows, now_ms);
    let alpha = s.period_alpha(policy.alpha);
    let sample = |t: &Tally, arm: Arm| Sample::from_counts(&t.arm(arm));
    // The challenger is judged while it ramps and while it bakes.
    let judging = matches!(s.phase, Phase::Ramping | Phase::Baking) && !s.rules_only;
    let challenger = judging.then(|| {
        compare(
            &sample(&s.tally, Arm::Challenger),
            &sample(&s.tally, Arm::Champion),
            alpha,
            policy.max_loss,
            s.allocation(Arm::Challenger, Arm::Champion),
        )
    });
    let model_arm = if matches!(s.phase, Phase::Promoted | Phase::Baking) {
        Arm::Challenger
    } else {
        Arm::Champion
    };
    let held = s.tally.arm(Arm::Holdout);
    let holdout = (!s.rules_only && (held.decisions > 0 || held.outcomes > 0)).then(|| {
        compare(
            &sample(&s.tally, model_arm),
            &Sample::from_counts(&held),
            alpha,
            policy.max_loss,
            s.allocation(model_arm, Arm::Holdout),
        )
    });
    let enough = |c: &Comparison| {
        c.treatment.n >= policy.min_outcomes && c.baseline.n >= policy.min_outcomes
    };
    let before = s.alarms.clone();
    let excess = excess(&s.tally);
    match excess {
        Some((arm, outcomes, decisions)) if s.alarm(AlarmKind::ExcessOutcomes).is_none() => {
            s.alarms.push(Alarm {
                kind: AlarmKind::ExcessOutcomes,
                since_ms: now_ms,
                text: format!(
                    "the {} arm has {outcomes} outcomes for {decisions} decisions on this step: \
                     outcomes are counted that no decision of the step earned; the judge waits",
                    arm.name()
                ),
                holdout: None,
                fallback: None,
            });
        }
        None => s.alarms.retain(|a| a.kind != AlarmKind::ExcessOutcomes),
        _ => {}
    }

    let mut proposals: Vec<(Target, Why, Option<Comparison>)> = Vec::new();
    let mut waiting = excess.map(|(arm, o, d)| {
        format!(
            "the {} arm has more outcomes ({o}) than decisions ({d}) on this step",
            arm.name()
        )
    });
    let lasted = now_ms - s.since_ms;
    let rollback = Target {
        setting: Setting::Share(0),
        phase: Phase::RolledBack,
        step: s.step,
    };
    if let Some(c) = challenger.filter(|_| excess.is_none()) {
        match c.verdict {
            Verdict::Worse => proposals.push((rollback, Why::Worse, Some(c))),
            // The bake ends with its time, not with evidence.
            Verdict::Better if s.phase == Phase::Baking => {}
            Verdict::Better if !enough(&c) => {
                let (need, t, b) = (policy.min_outcomes, c.treatment.n, c.baseline.n);
                waiting = Some(format!(
                    "the challenger is better; the step needs {need} outcomes on each arm, has {t} and {b}"
                ));
            }
            Verdict::Better if lasted < policy.min_step_ms => {
                waiting = Some(format!(
                    "the challenger is better; the step has lasted {} s of its {} s (ROLLOUT_MIN_STEP_S)",
                    lasted / 1_000,
                    policy.min_step_ms / 1_000
                ));
            }
            Verdict::Better => proposals.push((s.next(policy, false, false), Why::Better, Some(c))),
            Verdict::Undecided => {}
        }
    }
    if s.phase == Phase::Baking && proposals.is_empty() && excess.is_none() {
        if lasted >= policy.bake_ms {
            let done = s.next(policy, true, false);
            proposals.push((done, Why::Baked, challenger));
        } else if waiting.is_none() {
            waiting = Some(format!(
                "baking: {} s of {} s (ROLLOUT_BAKE_S); the judge rolls back on a worse challenger",
                lasted / 1_000,
                policy.bake_ms / 1_000
            ));
        }
    }
    if let Some(h) = holdout.filter(|_| excess.is_none()) {
        match h.verdict {
            Verdict::Worse => {
                if s.alarm(AlarmKind::Holdout).is_none() {
                    s.alarms.push(Alarm {
                        kind: AlarmKind::Holdout,
                        since_ms: now_ms,
                        text: format!(
                            "rules beat the model on the holdout arm: model {}: retrain",
                            h.describe()
                        ),
                        holdout: Some(h),
                        fallback: None,
                    });
                }
                if policy.rules_switch && enough(&h) {
                    let rules = Target {
                        setting: Setting::Rules,
                        phase: s.phase,
                        step: s.step,
                    };
                    proposals.push((rules, Why::RulesBeatModel, Some(h)));
                }
            }
            Verdict::Better => s.alarms.retain(|a| a.kind != AlarmKind::Holdout),
            Verdict::Undecided => {}
        }
    }
    let bins: Vec<_> = windows
        .complete(now_ms)
        .map(|(_, t)| t.fallback_bin())
        .collect();
    let fallback = fallback_alarm(&bins);
    match fallback {
        FallbackAlarm::Alarm(e) if s.alarm(AlarmKind::Fallback).is_none() => {
            s.alarms.push(Alarm {
                kind: AlarmKind::Fallback,
                since_ms: now_ms,
                text: format!(
                    "fallback alarm: the last windows fell back on {} of decisions vs a median of {}; {} rose most ({} vs {})",
                    pct(e.recent_rate),
                    pct(e.median_rate),
                    REASONS[e.rose_most],
                    pct(e.rose_most_recent),
                    pct(e.rose_most_median),
                ),
                holdout: None,
                fallback: Some(e),
            });
        }
        FallbackAlarm::Steady(_) => s.alarms.retain(|a| a.kind != AlarmKind::Fallback),
        _ => {}
    }

    let mut events = Vec::new();
    let mut applied = Vec::new();
    if s.paused && !proposals.is_empty() {
        waiting = Some("paused by an operator: the judge changes nothing until resumed".into());
    }
    for (target, why, c) in proposals {
        let to = target.setting;
        if !policy.auto || s.paused || s.setting() == to {
            applied.push(Proposal {
                to,
                why,
                applied: false,
            });
            continue;
        }
        let from = s.setting();
        let verb = match why {
            Why::Better if target.phase == Phase::Baking => "bakes",
            Why::Better | Why::Baked if to == Setting::Share(100) => "promoted",
            Why::Better => "next step",
            Why::Worse => "rolled back",
            Why::RulesBeatModel => "switched to rules",
            _ => "changed",
        };
        let who = match why {
            Why::RulesBeatModel => "model vs rules",
            Why::Baked => "baked without a rollback; challenger vs champion",
            _ => "challenger vs champion",
        };
        let evidence = c
            .as_ref()
            .map_or("no comparison".into(), Comparison::describe);
        let change = Change {
            at_ms: now_ms,
            from,
            to,
            why,
            text: format!("{from} → {to} ({verb}): {who} {evidence}"),
            step_since_ms: s.since_ms,
            statistics: c,
            reason: None,
        };
        s.apply(target, now_ms);
        s.remember(&change);
        events.push(Event::Changed(change));
        applied.push(Proposal {
            to,
            why,
            applied: true,
        });
    }
    let gone = |a: &Alarm, among: &[Alarm]| !among.iter().any(|b| b.kind == a.kind);
    for a in s.alarms.iter().filter(|a| gone(a, &before)) {
        events.push(Event::Raised(a.clone()));
    }
    for b in before.iter().filter(|b| gone(b, &s.alarms)) {
        events.push(Event::Cleared(b.kind));
    }
    let previous_at_ms = state.last.as_ref().map(|j| j.at_ms);
    s.last = Some(Judgement {
        previous_at_ms,
        at_ms: now_ms,
        alpha,
        challenger,
        holdout,
        fallback: fallback.evidence().copied(),
        proposals: applied,
        waiting,
    });
    (s, events)
}

#[cfg(test)]
mod tests {
    use super::*;
    use decider_core::rollout::Counts;
    use decider_core::{FallbackReason, Source};

    /// One look, and the changes it made.
    fn judge(
        s: &RolloutState,
        p: &Policy,
        w: &Windows,
        now_ms: i64,
    ) -> (RolloutState, Vec<Change>) {
        let (s, events) = step(s, p, w, now_ms);
        let changes = events
            .into_iter()
            .filter_map(|e| match e {
                Event::Changed(c) => Some(c),
                _ => None,
            })
            .collect();
        (s, changes)
    }

    const T0: i64 = 1_796_205_600_000;
    const MIN: i64 = 60_000;

    /// A window's batch: `n` outcomes per arm with `ok` successes.
    fn batch(arms: &[(Arm, u64, u64)]) -> Tally {
        let mut t = Tally::new();
        for &(arm, n, ok) in arms {
            let (mv, src, reason) = match arm {
                Arm::Holdout => (Some("m-1"), Source::Rules, Some(FallbackReason::Holdout)),
                Arm::Challenger => (Some("m-2"), Source::Model, None),
                Arm::Champion => (Some("m-1"), Source::Model, None),
            };
            let mut c = Counts::default();
            for i in 0..n {
                c.add_reward(if i < ok { 1.0 } else { 0.0 });
            }
            c.decisions = n;
            if reason == Some(FallbackReason::Holdout) {
                c.fallbacks[6] = n;
            }
            t.add_counts(arm, mv, src, &c);
        }
        t
    }

    /// The default policy with steps that may advance at once and no bake.
    fn policy() -> Policy {
        Policy {
            min_outcomes: 100,
            min_step_ms: 0,
            bake_percent: 0,
            ..Policy::default()
        }
    }

    #[test]
    fn a_clearly_better_challenger_steps_up_and_the_next_step_starts_empty() {
        let p = policy();
        let s0 = RolloutState::start(Some("m-2".into()), &p, T0);
        assert_eq!(
            (s0.phase, s0.share, s0.setting()),
            (Phase::Ramping, 5, Setting::Share(5))
        );
        let mut w = Windows::default();
        // The window that holds the start is not counted: it may hold the old share's traffic.
        w.add(
            &batch(&[(Arm::Challenger, 1000, 1000), (Arm::Champion, 1000, 0)]),
            T0 - 1,
        );
        w.add(
            &batch(&[(Arm::Challenger, 1000, 990), (Arm::Champion, 5000, 4000)]),
            T0 + MIN,
        );
        // Not complete yet at T0 + MIN: nothing counted.
        let (s1, ch) = judge(&s0, &p, &w, T0 + MIN + 1);
        assert!(ch.is_empty());
        assert_eq!(s1.tally.total().decisions, 0);
        let (s2, ch) = judge(&s1, &p, &w, T0 + 2 * MIN);
        assert_eq!(ch.len(), 1, "{:?}", s2.last);
        let c = &ch[0];
        assert_eq!(
            (c.from, c.to, c.why),
            (Setting::Share(5), Setting::Share(20), Why::Better)
        );
        assert_eq!(c.statistics.unwrap().treatment.n, 1000);
        assert_eq!(c.statistics.unwrap().baseline.n, 5000);
        assert!(
            c.text
                .starts_with("5% → 20% (next step): challenger vs champion 99.0% vs 80.0%"),
            "{}",
            c.text
        );
        assert_eq!(
            (s2.step, s2.share, s2.period, s2.since_ms),
            (1, 20, 1, T0 + 2 * MIN)
        );
        assert!(s2.tally.is_empty());
        assert_eq!(s2.history, ch);
        // The same windows are never counted again.
        let (s3, ch) = judge(&s2, &p, &w, T0 + 10 * MIN);
        assert!(ch.is_empty());
        assert!(s3.tally.is_empty());
        assert_eq!(s3.period_alpha(0.05), 0.0125);
    }

    #[test]
    fn better_but_too_few_outcomes_waits() {
        let p = Policy {
            min_outcomes: 5000,
            ..policy()
        };
        let s0 = RolloutState::start(Some("m-2".into()), &p, T0);
        let mut w = Windows::default();
        w.add(
            &batch(&[(Arm::Challenger, 1000, 990), (Arm::Champion, 5000, 4000)]),
            T0 + 1,
        );
        let (s1, ch) = judge(&s0, &p, &w, T0 + MIN);
        assert!(ch.is_empty());
        let last = s1.last.unwrap();
        assert_eq!(last.challenger.unwrap().verdict, Verdict::Better);
        assert!(last
            .waiting
            .unwrap()
            .contains("needs 5000 outcomes on each arm, has 1000 and 5000"));
    }

    #[test]
    fn a_worse_challenger_is_rolled_back_at_once() {
        let p = Policy {
            min_outcomes: 1_000_000,
            ..policy()
        };
        let s0 = RolloutState::start(Some("m-2".into()), &p, T0);
        let mut w = Windows::default();
        w.add(
            &batch(&[(Arm::Challenger, 300, 200), (Arm::Champion, 5000, 4800)]),
            T0 + 1,
        );
        let (s1, ch) = judge(&s0, &p, &w, T0 + MIN);
        assert_eq!(ch.len(), 1);
        assert_eq!((ch[0].to, ch[0].why), (Setting::Share(0), Why::Worse));
        assert_eq!((s1.phase, s1.share), (Phase::RolledBack, 0));
        // Rolled back: the challenger is judged no more.
        w.add(&batch(&[(Arm::Champion, 5000, 4800)]), T0 + MIN + 1);
        let (s2, ch) = judge(&s1, &p, &w, T0 + 2 * MIN);
        assert!(ch.is_empty() && s2.last.unwrap().challenger.is_none());
    }

    #[test]
    fn without_auto_nothing_changes_but_the_verdict_is_reported() {
        let p = Policy {
            auto: false,
            ..policy()
        };
        let s0 = RolloutState::start(Some("m-2".into()), &p, T0);
        let mut w = Windows::default();
        w.add(
            &batch(&[(Arm::Challenger, 300, 200), (Arm::Champion, 5000, 4800)]),
            T0 + 1,
        );
        let (s1, ch) = judge(&s0, &p, &w, T0 + MIN);
        assert!(ch.is_empty());
        assert_eq!((s1.phase, s1.share, s1.period), (Phase::Ramping, 5, 0));
        let last = s1.last.unwrap();
        assert_eq!(
            last.proposals,
            vec![Proposal {
                to: Setting::Share(0),
                why: Why::Worse,
                applied: false
            }]
        );
        assert_eq!(last.challenger.unwrap().verdict, Verdict::Worse);
    }

    #[test]
    fn rules_beating_the_model_raise_an_alarm_and_switch_only_when_allowed() {
        let arms = [(Arm::Champion, 5000, 4500), (Arm::Holdout, 2000, 1950)];
        for switch in [false, true] {
            let p = Policy {
                rules_switch: switch,
                ..policy()
            };
            let s0 = RolloutState::start(None, &p, T0);
            assert_eq!((s0.phase, s0.share), (Phase::NoChallenger, 0));
            let mut w = Windows::default();
            w.add(&batch(&arms), T0 + 1);
            let (s1, ch) = judge(&s0, &p, &w, T0 + MIN);
            let alarm = s1.alarm(AlarmKind::Holdout).expect("holdout alarm");
            assert!(
                alarm
                    .text
                    .starts_with("rules beat the model on the holdout arm"),
                "{}",
                alarm.text
            );
            assert_eq!(alarm.holdout.unwrap().verdict, Verdict::Worse);
            if switch {
                assert_eq!(ch.len(), 1);
                assert_eq!(
                    (ch[0].from, ch[0].to, ch[0].why),
                    (Setting::Share(0), Setting::Rules, Why::RulesBeatModel)
                );
                assert!(s1.rules_only);
            } else {
                assert!(ch.is_empty());
                assert!(!s1.rules_only);
            }
            // The alarm holds on a later run without new evidence.
            let (s2, _) = judge(&s1, &p, &w, T0 + 5 * MIN);
            assert!(s2.alarm(AlarmKind::Holdout).is_some());
        }
        // The model shown better clears it.
        let p = policy();
        let s0 = RolloutState::start(None, &p, T0);
        let mut w = Windows::default();
        w.add(&batch(&arms), T0 + 1);
        let (s1, _) = judge(&s0, &p, &w, T0 + MIN);
        w.add(
            &batch(&[(Arm::Champion, 50_000, 49_900), (Arm::Holdout, 2000, 1)]),
            T0 + MIN + 1,
        );
        let (s2, _) = judge(&s1, &p, &w, T0 + 2 * MIN);
        assert!(s2.alarm(AlarmKind::Holdout).is_none(), "{:?}", s2.last);
    }

    #[test]
    fn the_fallback_alarm_runs_on_the_windows() {
        let p = policy();
        let mut s = RolloutState::start(None, &p, T0);
        let mut w = Windows::default();
        let window = |ood: u64| {
            let mut t = Tally::new();
            for i in 0..50 {
                let (src, r) = if i < ood {
                    (Source::Rules, Some(FallbackReason::OutOfDistribution))
                } else if i % 20 == 0 {
                    (Source::Rules, Some(FallbackReason::LowConfidence))
                } else {
                    (Source::Model, None)
                };
                t.add_decision(Arm::Champion, Some("m-1"), src, r);
            }
            t
        };
        for m in 0..20 {
            w.add(&window(0), T0 + m * MIN + 1);
            s = judge(&s, &p, &w, T0 + (m + 1) * MIN).0;
            assert!(s.alarm(AlarmKind::Fallback).is_none());
        }
        // The first window of the spike already fires (20 of 150 recent decisions).
        w.add(&window(20), T0 + 20 * MIN + 1);
        s = judge(&s, &p, &w, T0 + 21 * MIN).0;
        let a = s
            .alarm(AlarmKind::Fallback)
            .expect("fallback alarm")
            .clone();
        assert_eq!(
            REASONS[a.fallback.unwrap().rose_most],
            "out_of_distribution"
        );
        assert_eq!(
            a.text,
            "fallback alarm: the last windows fell back on 18.7% of decisions vs a median of 6.0%; out_of_distribution rose most (13.3% vs 0.0%)"
        );
        assert_eq!(a.since_ms, T0 + 21 * MIN);
        // It holds, unchanged, while it fires.
        for m in 21..23 {
            w.add(&window(20), T0 + m * MIN + 1);
            s = judge(&s, &p, &w, T0 + (m + 1) * MIN).0;
        }
        assert_eq!(s.alarm(AlarmKind::Fallback), Some(&a));
        assert!((s.last.as_ref().unwrap().fallback.unwrap().recent_ood_rate - 0.4).abs() < 1e-12);
        for m in 23..26 {
            w.add(&window(0), T0 + m * MIN + 1);
            s = judge(&s, &p, &w, T0 + (m + 1) * MIN).0;
        }
        assert!(s.alarm(AlarmKind::Fallback).is_none());
    }

    #[test]
    fn the_state_round_trips_and_settings_read_as_percent_or_rules() {
        let p = policy();
        let s0 = RolloutState::start(Some("m-2".into()), &p, T0);
        let mut w = Windows::default();
        w.add(
            &batch(&[
                (Arm::Challenger, 1000, 990),
                (Arm::Champion, 5000, 4000),
                (Arm::Holdout, 100, 90),
            ]),
            T0 + 1,
        );
        let (s1, _) = judge(&s0, &p, &w, T0 + MIN);
        let text = serde_json::to_string(&s1).unwrap();
        assert_eq!(serde_json::from_str::<RolloutState>(&text).unwrap(), s1);
    }

    #[test]
    fn no_step_ends_before_its_minimum_time() {
        let p = Policy {
            min_step_ms: 10 * MIN,
            ..policy()
        };
        let s0 = RolloutState::start(Some("m-2".into()), &p, T0);
        let mut w = Windows::default();
        w.add(
            &batch(&[(Arm::Challenger, 1000, 1000), (Arm::Champion, 1000, 0)]),
            T0 + 1,
        );
        // Clearly better after a minute: it waits, and says for what.
        let (s1, ch) = judge(&s0, &p, &w, T0 + MIN);
        assert!(ch.is_empty());
        let waiting = s1.last.as_ref().unwrap().waiting.clone().unwrap();
        assert!(waiting.contains("lasted 60 s of its 600 s"), "{waiting}");
        // A worse one never waits.
        let mut worse = Windows::default();
        worse.add(
            &batch(&[(Arm::Challenger, 1000, 0), (Arm::Champion, 1000, 1000)]),
            T0 + 1,
        );
        assert_eq!(judge(&s0, &p, &worse, T0 + MIN).1[0].why, Why::Worse);
        let (s2, ch) = judge(&s1, &p, &w, T0 + 10 * MIN);
        assert_eq!(ch[0].to, Setting::Share(20));
        assert_eq!(s2.since_ms, T0 + 10 * MIN);
    }

    #[test]
    fn after_the_last_step_the_challenger_bakes_and_can_still_be_rolled_back() {
        let p = Policy {
            steps: crate::policy::parse_steps("50,100").unwrap(),
            bake_percent: 5,
            bake_ms: 30 * MIN,
            ..policy()
        };
        let better = |n| batch(&[(Arm::Challenger, n, n), (Arm::Champion, n, 0)]);
        let s0 = RolloutState::start(Some("m-2".into()), &p, T0);
        let mut w = Windows::default();
        w.add(&better(500), T0 + 1);
        let (s1, ch) = judge(&s0, &p, &w, T0 + MIN);
        assert_eq!(
            (ch[0].from, ch[0].to, s1.phase),
            (Setting::Share(50), Setting::Share(95), Phase::Baking)
        );
        assert!(
            ch[0].text.starts_with("50% → 95% (bakes)"),
            "{}",
            ch[0].text
        );
        // Better during the bake changes nothing before its time.
        w.add(&better(500), T0 + 2 * MIN);
        let (s2, ch) = judge(&s1, &p, &w, T0 + 10 * MIN);
        assert!(ch.is_empty(), "{ch:?}");
        assert!(s2
            .last
            .as_ref()
            .unwrap()
            .waiting
            .as_ref()
            .unwrap()
            .starts_with("baking: 540 s of 1800 s"));
        // The bake ends: promoted to 100%.
        let (s3, ch) = judge(&s2, &p, &w, T0 + 31 * MIN);
        assert_eq!(
            (ch[0].to, ch[0].why, s3.phase),
            (Setting::Share(100), Why::Baked, Phase::Promoted)
        );
        // A challenger that degrades during the bake is rolled back after 100% was reached.
        let mut w = Windows::default();
        w.add(
            &batch(&[(Arm::Challenger, 500, 0), (Arm::Champion, 500, 500)]),
            T0 + 2 * MIN,
        );
        let (s, ch) = judge(&s1, &p, &w, T0 + 5 * MIN);
        assert_eq!(
            (ch[0].from, ch[0].to, ch[0].why, s.phase),
            (
                Setting::Share(95),
                Setting::Share(0),
                Why::Worse,
                Phase::RolledBack
            )
        );
    }

    #[test]
    fn history_is_bounded() {
        let p = Policy {
            steps: crate::policy::parse_steps(
                &(1..=20)
                    .map(|i| (i * 5).to_string())
                    .collect::<Vec<_>>()
                    .join(","),
            )
            .unwrap(),
            min_outcomes: 1,
            ..policy()
        };
        let mut s = RolloutState::start(Some("m-2".into()), &p, T0);
        s.history = vec![
            Change {
                at_ms: 0,
                from: Setting::Share(1),
                to: Setting::Share(2),
                why: Why::Better,
                text: String::new(),
                step_since_ms: 0,
                statistics: Some(compare(
                    &Sample::default(),
                    &Sample::default(),
                    0.05,
                    0.0,
                    None
                )),
                reason: None,
            };
            MAX_HISTORY
        ];
        let mut w = Windows::default();
        w.add(
            &batch(&[(Arm::Challenger, 1000, 1000), (Arm::Champion, 1000, 0)]),
            T0 + 1,
        );
        let (s1, ch) = judge(&s, &p, &w, T0 + MIN);
        assert_eq!(ch.len(), 1);
        assert_eq!(s1.history.len(), MAX_HISTORY);
        assert_eq!(s1.history.last(), ch.last());
    }
}

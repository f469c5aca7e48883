//! Verdicts: what the numbers say to do.
//!
//! - Model vs rules is read on the rollout arms — holdout (rules by design) against
//!   champion (the model policy with its fallbacks) — over the endpoints both arms served.
//!   Arms are assigned independently of the state, so the comparison is unbiased; source
//!   against source is not (states fall back because they are unusual).
//! - Champion vs challenger: the two model arms, same endpoints rule.
//! - Both are judged by the rollout's own comparison ([`decider_rollout::compare`]: the
//!   always-valid confidence sequence of the difference of mean rewards, at `--alpha` with
//!   `--max-loss`), the one the control plane judges with, so that a report and the live
//!   rollout cannot disagree on the same counts. Undecided, the verdict estimates how many
//!   more decisions with outcomes would separate them if the observed difference held.
//! - The rollout: the log's own counts of each step the control plane's `rollout` records
//!   delimit, judged again by the same comparison at the same error rate; the report says
//!   whether its counts support each recorded change, and where the step in force stands.
//!   It never takes the control plane's verdict over its counts.
//! - Fallback alarm: the last [`RECENT`] buckets' pooled fallback rate against the median
//!   of the earlier buckets; "far above" = at least twice the median, 5 points more, and
//!   the recent rate's Wilson lower bound above the median. The detection is
//!   `decider_rollout::alarm`, the one the rollout judge runs in the control plane.

use super::join::{Aggregates, Period};
use super::stats::GroupStats;
use super::timeline::{Bucket, OOD, REASONS};
use crate::logs::{Arm, Endpoint};
use decider_core::record::{RolloutRecord, Why};
use decider_core::rollout::Setting;
#[cfg(test)]
use decider_rollout::alarm::median;
/// Buckets at the end of the run compared with the rest, and the fewest non-empty buckets
/// for the fallback alarm to be judged.
pub use decider_rollout::alarm::{MIN_BUCKETS, RECENT};
use decider_rollout::sequential::{Comparison, Verdict as Sign};
use decider_rollout::{compare, fallback_alarm as detect, FallbackAlarm, Sample};
use serde::Serialize;
use serde_json::{json, Value};

/// How the report judges: the rollout's comparison at this error rate with this tolerated
/// loss (`--alpha`, `--max-loss`; the control plane's `ROLLOUT_ALPHA`, `ROLLOUT_MAX_LOSS`).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Judging {
    /// Error rate of a comparison (a rollout's whole error rate for its steps).
    pub alpha: f64,
    /// Largest tolerated loss of mean reward.
    pub max_loss: f64,
}

impl Default for Judging {
    fn default() -> Judging {
        Judging {
            alpha: decider_rollout::sequential::DEFAULT_ALPHA,
            max_loss: 0.0,
        }
    }
}

impl Judging {
    /// Checks the parameters once.
    ///
    /// # Errors
    /// A message naming the option (`--alpha`, `--max-loss`) and the value.
    pub fn new(alpha: f64, max_loss: f64) -> Result<Judging, String> {
        decider_rollout::policy::parse_alpha(&alpha.to_string())
            .map_err(|e| format!("--alpha {e}, got {alpha}"))?;
        decider_rollout::policy::parse_max_loss(&max_loss.to_string())
            .map_err(|e| format!("--max-loss {e}, got {max_loss}"))?;
        Ok(Judging { alpha, max_loss })
    }
}

/// One verdict.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Verdict {
    /// `model_vs_rules`, `champion_vs_challenger` or `fallback_alarm`.
    pub kind: &'static str,
    /// What to do, in a few words (`retrain`, `keep collecting`, `promote the challenger`, …).
    pub action: String,
    /// The sentence printed.
    pub text: String,
    /// The numbers behind it.
    pub evidence: Value,
}

/// A group's outcomes as the comparison's sample.
fn sample(g: &GroupStats) -> Sample {
    Sample {
        n: g.with_outcome,
        sum: g.successes,
        sum_sq: g.sum_sq(),
    }
}

fn comparison_json(c: &Comparison) -> Value {
    serde_json::to_value(c).unwrap_or(Value::Null)
}

/// The two arms' tallies over the endpoints where both have outcomes.
fn shared(agg: &Aggregates, a: Arm, b: Arm) -> (GroupStats, GroupStats, Vec<&'static str>) {
    let (mut ga, mut gb, mut eps) = (GroupStats::default(), GroupStats::default(), Vec::new());
    for e in Endpoint::ALL {
        let find = |arm: Arm| {
            agg.arm_endpoint
                .iter()
                .find(|(x, y, _)| *x == arm && *y == e)
                .map(|(_, _, g)| g)
        };
        if let (Some(x), Some(y)) = (find(a), find(b)) {
            if x.with_outcome > 0 && y.with_outcome > 0 {
                ga.merge(x);
                gb.merge(y);
                eps.push(e.name());
            }
        }
    }
    (ga, gb, eps)
}

/// Rough count of further decisions with outcomes (both arms, current split) that would
/// settle a comparison if the observed difference held: the arms' sequences shrink about
/// as 1/√n (a little slower: they widen with ln n), so k = ((h₁ + h₂) / |Δ|)² times the
/// current sample, i.e. (k − 1)·n more. None when no difference shows.
pub fn more_needed(c: &Comparison) -> Option<u64> {
    let d = c.delta?.abs();
    if d < 1e-12 {
        return None;
    }
    let half = |a: &decider_rollout::sequential::ArmSummary| (a.hi - a.lo) / 2.0;
    let k = ((half(&c.treatment) + half(&c.baseline)) / d).powi(2);
    let more = ((k - 1.0).max(0.0) * (c.treatment.n + c.baseline.n) as f64).ceil();
    (more.is_finite() && more < 1e15).then_some(more as u64)
}

fn more_text(m: Option<u64>) -> String {
    match m {
        Some(0) => "a few more decisions with outcomes should settle it".to_owned(),
        Some(m) => format!(
            "roughly {} more decisions with outcomes at the current split would settle it if the difference holds",
            thousands(m)
        ),
        None => "no difference observed yet".to_owned(),
    }
}

/// 1234567 → "1,234,567".
pub fn thousands(n: u64) -> String {
    let s = n.to_string();
    let mut out = String::new();
    for (i, c) in s.chars().enumerate() {
        if i > 0 && (s.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(c);
    }
    out
}

/// Model vs rules on the arms.
pub fn model_vs_rules(agg: &Aggregates, j: Judging) -> Verdict {
    let (champ, hold, eps) = shared(agg, Arm::Champion, Arm::Holdout);
    if champ.with_outcome == 0 || hold.with_outcome == 0 {
        return Verdict {
            kind: "model_vs_rules",
            action: "no data".into(),
            text: "model vs rules: no holdout and champion outcomes on a common endpoint; the unbiased comparison needs a holdout share (rules-only canary traffic)".into(),
            evidence: json!({"endpoints": eps}),
        };
    }
    // The allocations behind these counts are the Worker's variables, not in the log: the
    // union of the arms' confidence sequences judges them.
    let c = compare(&sample(&champ), &sample(&hold), j.alpha, j.max_loss, None);
    let more = more_needed(&c);
    let evidence =
        json!({"comparison": comparison_json(&c), "endpoints": eps, "more_needed": more});
    let (action, text) = match c.verdict {
        Sign::Worse => (
            "retrain",
            format!(
                "rules beat the model on the holdout arm: model {}: retrain",
                c.describe()
            ),
        ),
        Sign::Better => (
            "keep the model",
            format!(
                "the model beats the rules on the holdout arm: model {}: keep the model",
                c.describe()
            ),
        ),
        Sign::Undecided => (
            "keep collecting",
            format!(
                "model vs rules: not yet decided: model {}; {}",
                c.describe(),
                more_text(more)
            ),
        ),
    };
    Verdict {
        kind: "model_vs_rules",
        action: action.into(),
        text,
        evidence,
    }
}

fn top_version(agg: &Aggregates, arm: Arm) -> String {
    agg.arm_versions
        .iter()
        .find(|(a, _)| *a == arm)
        .and_then(|(_, v)| v.first())
        .map_or_else(|| "(none)".to_owned(), |(name, _)| name.clone())
}

/// Champion vs challenger, ranked.
pub fn champion_vs_challenger(agg: &Aggregates, j: Judging) -> Verdict {
    let (chal, champ, eps) = shared(agg, Arm::Challenger, Arm::Champion);
    let (vc, vn) = (
        top_version(agg, Arm::Champion),
        top_version(agg, Arm::Challenger),
    );
    if chal.with_outcome == 0 || champ.with_outcome == 0 {
        return Verdict {
            kind: "champion_vs_challenger",
            action: "no challenger".into(),
            text: "champion vs challenger: no challenger outcomes on an endpoint the champion also served".into(),
            evidence: json!({"endpoints": eps}),
        };
    }
    let c = compare(&sample(&chal), &sample(&champ), j.alpha, j.max_loss, None);
    let more = more_needed(&c);
    let ranking = if c.delta.unwrap_or(0.0) > 0.0 {
        ["challenger", "champion"]
    } else {
        ["champion", "challenger"]
    };
    let evidence = json!({
        "comparison": comparison_json(&c),
        "champion_model_version": vc, "challenger_model_version": vn,
        "ranking": ranking, "endpoints": eps, "more_needed": more,
    });
    let who = format!("challenger {vn} vs champion {vc}: {}", c.describe());
    let (action, text) = match c.verdict {
        Sign::Worse => (
            "roll the challenger back",
            format!("{who}: roll the challenger back"),
        ),
        Sign::Better => (
            "promote the challenger",
            format!("{who}: promote the challenger"),
        ),
        Sign::Undecided => (
            "keep collecting",
            format!(
                "{who}: not yet decided, keep collecting; {}",
                more_text(more)
            ),
        ),
    };
    Verdict {
        kind: "champion_vs_challenger",
        action: action.into(),
        text,
        evidence,
    }
}

fn advice(reason: usize) -> &'static str {
    match REASONS[reason] {
        "out_of_distribution" => {
            "states the model never saw — check the inputs, then retrain on recent traffic"
        }
        "low_confidence" => "the model is unsure on current traffic — retrain on recent logs",
        "model_error" | "model_timeout" | "model_unavailable" => {
            "the model backend is failing — check it before anything else"
        }
        "stale_signals" => "backend signals are stale — check the signals feed",
        _ => "rules are deciding without a recorded reason — check the Worker's configuration",
    }
}

/// The fallback-rate alarm over the report buckets.
pub fn fallback_alarm(buckets: &[Bucket]) -> Verdict {
    let judged = detect(buckets.iter().map(|b| &b.bin));
    let e = match judged {
        FallbackAlarm::TooFewBins { used } => {
            return Verdict {
                kind: "fallback_alarm",
                action: "not enough buckets".into(),
                text: format!(
                    "fallback over time: {used} non-empty time buckets, at least {MIN_BUCKETS} are needed to compare the last {RECENT} with the run"
                ),
                evidence: json!({"buckets": used}),
            };
        }
        FallbackAlarm::Steady(e) | FallbackAlarm::Alarm(e) => e,
    };
    let evidence = json!({
        "recent_buckets": RECENT, "recent_n": e.recent_n, "recent_rate": e.recent_rate,
        "recent_rate_lo": e.recent_rate_lo, "median_rate": e.median_rate,
        "recent_ood_rate": e.recent_ood_rate, "median_ood_rate": e.median_ood_rate,
        "rose_most": REASONS[e.rose_most],
    });
    let pct = |x: f64| format!("{:.1}%", x * 100.0);
    let (now, base) = (e.recent_rate, e.median_rate);
    let ood = (e.recent_ood_rate, e.median_ood_rate);
    if judged.firing() {
        let why = if e.rose_most == OOD {
            format!("out_of_distribution {} vs {}", pct(ood.0), pct(ood.1))
        } else {
            format!(
                "{} rose most ({} vs {}; out_of_distribution {} vs {})",
                REASONS[e.rose_most],
                pct(e.rose_most_recent),
                pct(e.rose_most_median),
                pct(ood.0),
                pct(ood.1)
            )
        };
        Verdict {
            kind: "fallback_alarm",
            action: "alarm".into(),
            text: format!(
                "fallback alarm: the last {RECENT} buckets fell back on {} of decisions vs the run's median {}; {why}: {}",
                pct(now),
                pct(base),
                advice(e.rose_most)
            ),
            evidence,
        }
    } else {
        Verdict {
            kind: "fallback_alarm",
            action: "steady".into(),
            text: format!(
                "fallback rate steady: last {RECENT} buckets {} vs the run's median {} (out_of_distribution {} vs {})",
                pct(now),
                pct(base),
                pct(ood.0),
                pct(ood.1)
            ),
            evidence,
        }
    }
}

/// What a change's own comparison must show for the log's counts to support it (a sign, or
/// for the bake's end anything but worse), and the arms compared (treatment, baseline);
/// None for an operator's verb, which no count decides.
fn expected(r: &RolloutRecord, promoted_before: bool) -> Option<(Option<Sign>, Arm, Arm)> {
    match r.why {
        Why::Better => Some((Some(Sign::Better), Arm::Challenger, Arm::Champion)),
        Why::Worse => Some((Some(Sign::Worse), Arm::Challenger, Arm::Champion)),
        Why::Baked => Some((None, Arm::Challenger, Arm::Champion)),
        Why::RulesBeatModel => {
            let model = if promoted_before {
                Arm::Challenger
            } else {
                Arm::Champion
            };
            Some((Some(Sign::Worse), model, Arm::Holdout))
        }
        Why::Pause | Why::Resume | Why::Abort | Why::Promote | Why::Restart => None,
    }
}

/// ": <reason>" when the operator gave one.
fn reason(r: &RolloutRecord) -> String {
    r.reason
        .as_deref()
        .map_or_else(String::new, |x| format!(": {x}"))
}

/// Whether a change put the challenger into its bake (its text says so).
fn baking(r: &RolloutRecord) -> bool {
    r.text.contains("(bakes)") || (r.why == Why::Promote && r.to != Setting::Share(100))
}

/// The error rate a change was judged at: its statistics' `alpha` when they say it, else
/// the period's share of `--alpha` (the k-th setting of a rollout at α·2^−(k+1)).
fn period_alpha(r: Option<&RolloutRecord>, k: usize, j: Judging) -> f64 {
    r.and_then(|r| r.statistics.as_ref())
        .and_then(|s| s.get("alpha"))
        .and_then(Value::as_f64)
        .unwrap_or_else(|| j.alpha * 0.5f64.powi(k.min(1_000) as i32 + 1))
}

fn arms(
    p: &Period,
    t: Arm,
    b: Arm,
    alpha: f64,
    max_loss: f64,
    allocation: Option<f64>,
) -> Comparison {
    compare(
        &p.arms[t.index()],
        &p.arms[b.index()],
        alpha,
        max_loss,
        allocation,
    )
}

/// The allocation a change's comparison was judged at, as its statistics say (the control
/// plane's: the challenger's share and the isolates' `CANARY_PERCENT`).
fn allocation_of(r: &RolloutRecord) -> Option<f64> {
    r.statistics.as_ref()?.get("allocation")?.as_f64()
}

/// The challenger's allocation on the step in force after `last`, from the canary share the
/// last challenger-vs-champion change implies (its step's share over its allocation).
fn allocation_now(rollouts: &[RolloutRecord]) -> Option<f64> {
    let last = rollouts.last()?;
    let judged = rollouts
        .iter()
        .rev()
        .find(|r| matches!(r.why, Why::Better | Why::Worse))?;
    let (Setting::Share(from), Setting::Share(now)) = (judged.from, last.to) else {
        return None;
    };
    let canary = (f64::from(from) / allocation_of(judged)?).round();
    let share = f64::from(now).min(canary);
    (canary > 0.0 && canary <= 100.0 && share > 0.0 && share < canary).then(|| share / canary)
}

/// Where the automatic rollout stands, judged on the log's own counts: each change the
/// control plane recorded is judged again on the decisions of its step (does the log
/// support it?), and the step in force on the decisions since the last change.
pub fn rollout(agg: &Aggregates, j: Judging) -> Verdict {
    let mut steps = Vec::new();
    let mut agrees = true;
    let mut first_disagreement = None;
    // The k-th setting of the rollout each record belongs to (a new challenger starts at 0).
    let mut k = 0usize;
    let mut promoted = false;
    let mut version: Option<&str> = None;
    let mut next_alpha = j.alpha / 2.0;
    for p in &agg.periods {
        let Some(i) = p.ended_by else { continue };
        let r = &agg.rollouts[i];
        if r.challenger_version.as_deref() != version {
            (k, promoted, version) = (0, false, r.challenger_version.as_deref());
        }
        let Some((want, t, b)) = expected(r, promoted) else {
            // An operator's verb: recorded with its reason, judged by nobody. A restart is a
            // new rollout (a fresh error budget); pause and resume keep the step.
            steps.push(json!({
                "ts": r.ts, "challenger_version": r.challenger_version, "from": r.from,
                "to": r.to, "why": r.why.name(), "by": "operator", "reason": r.reason,
            }));
            match r.why {
                Why::Restart => (k, promoted, next_alpha) = (0, false, j.alpha / 2.0),
                Why::Pause | Why::Resume => {}
                _ => {
                    promoted |= r.promotes();
                    k += 1;
                    next_alpha = j.alpha * 0.5f64.powi(k.min(1_000) as i32 + 1);
                }
            }
            continue;
        };
        let alpha = period_alpha(Some(r), k, j);
        let max_loss = r
            .statistics
            .as_ref()
            .and_then(|s| s.get("max_loss"))
            .and_then(Value::as_f64)
            .unwrap_or(j.max_loss);
        let c = arms(p, t, b, alpha, max_loss, allocation_of(r));
        let ok = want.map_or(c.verdict != Sign::Worse, |w| c.verdict == w);
        if !ok && first_disagreement.is_none() {
            first_disagreement = Some(format!(
                "the change {} → {} ({}) on {}: the log's counts of that step say {}: {}",
                r.from,
                r.to,
                r.why.name(),
                r.ts,
                c.verdict.name(),
                c.describe()
            ));
        }
        agrees &= ok;
        steps.push(json!({
            "ts": r.ts, "challenger_version": r.challenger_version, "from": r.from, "to": r.to,
            "why": r.why.name(), "decisions": p.decisions, "comparison": comparison_json(&c),
            "supported": ok,
        }));
        promoted |= r.promotes();
        k += 1;
        next_alpha = alpha / 2.0;
    }
    let last = agg.rollouts.last();
    let current = agg.periods.last();
    // The step in force: challenger vs champion while a challenger has outcomes there.
    let now = current
        .filter(|p| p.arms[Arm::Challenger.index()].n > 0 && p.arms[Arm::Champion.index()].n > 0)
        .map(|p| {
            let allocation = allocation_now(&agg.rollouts);
            arms(
                p,
                Arm::Challenger,
                Arm::Champion,
                next_alpha,
                j.max_loss,
                allocation,
            )
        });
    let evidence = json!({
        "steps": steps,
        "agrees_with_records": agrees,
        "current": now.as_ref().map(comparison_json),
        "challenger_version": last.and_then(|r| r.challenger_version.clone()),
    });
    let current_text = |c: &Comparison| {
        format!(
            "on the step in force the log's counts say {}: challenger vs champion {}",
            c.verdict.name(),
            c.describe()
        )
    };
    let (action, text) = match (last, first_disagreement) {
        (_, Some(d)) => (
            "records not supported",
            format!("rollout: the log's counts do not support the control plane's records: {d}"),
        ),
        (None, _) => match &now {
            Some(c) => (
                "ramping",
                format!(
                    "rollout: no `rollout` records in these logs; {}",
                    current_text(c)
                ),
            ),
            None => (
                "no rollout records",
                "rollout: no `rollout` records in these logs and no challenger outcomes to judge"
                    .into(),
            ),
        },
        (Some(r), None) => {
            let v = r.challenger_version.as_deref().unwrap_or("(unnamed)");
            let n = agg.rollouts.len();
            if r.promotes() {
                (
                    "ship the challenger",
                    format!("rollout: challenger {v} reached 100% on {}, and the log's counts support each of its {n} changes: it is the effective champion; ship it (copy its artifact to model/decision-model.json and deploy)", r.ts),
                )
            } else {
                match r.why {
                    Why::Worse => (
                        "rolled back",
                        format!("rollout: challenger {v} rolled back to 0% on {}; the log's counts of that step agree: it is worse", r.ts),
                    ),
                    Why::Abort => (
                        "aborted",
                        format!("rollout: challenger {v} aborted by an operator on {}{}", r.ts, reason(r)),
                    ),
                    Why::RulesBeatModel => (
                        "switched to rules",
                        format!("rollout: every decision on rules since {}; the log's counts of that step agree: rules beat the model", r.ts),
                    ),
                    Why::Pause => (
                        "paused",
                        format!("rollout: challenger {v} at {} paused by an operator on {}{}", r.to, r.ts, reason(r)),
                    ),
                    Why::Better | Why::Promote if r.to != Setting::Share(100) && r.from != Setting::Share(0) && baking(r) => (
                        "baking",
                        format!("rollout: challenger {v} baking at {} since {}: the judge can still roll it back", r.to, r.ts),
                    ),
                    Why::Better | Why::Baked | Why::Promote | Why::Resume | Why::Restart => (
                        "ramping",
                        format!(
                            "rollout: challenger {v} at {} since {} ({n} changes, each the judge made supported by the log's counts){}",
                            r.to,
                            r.ts,
                            now.as_ref().map_or(String::new(), |c| format!("; {}", current_text(c)))
                        ),
                    ),
                }
            }
        }
    };
    Verdict {
        kind: "rollout",
        action: action.into(),
        text,
        evidence,
    }
}

/// All verdicts, in report order, and the one-line summary.
pub fn verdicts(agg: &Aggregates, buckets: &[Bucket], j: Judging) -> (String, Vec<Verdict>) {
    let v = vec![
        model_vs_rules(agg, j),
        champion_vs_challenger(agg, j),
        fallback_alarm(buckets),
        rollout(agg, j),
    ];
    let summary = format!(
        "model vs rules: {}; challenger: {}; fallback: {}; rollout: {}",
        v[0].action, v[1].action, v[2].action, v[3].action
    );
    (summary, v)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn bernoulli(n: u64, ok: u64) -> Sample {
        Sample {
            n,
            sum: ok as f64,
            sum_sq: ok as f64,
        }
    }

    #[test]
    fn more_needed_scales_the_sample_until_the_sequences_part() {
        // Undecided at 1000 per arm; the estimate says how many more at the same split.
        let c = compare(
            &bernoulli(1000, 920),
            &bernoulli(1000, 900),
            0.05,
            0.0,
            None,
        );
        assert_eq!(c.verdict, Sign::Undecided);
        let more = more_needed(&c).unwrap();
        assert!(more > 2_000, "{more}");
        // With that many more outcomes and the same difference, it is decided.
        let n = (2_000 + more) / 2;
        let later = compare(
            &bernoulli(n * 2, n * 2 * 92 / 100),
            &bernoulli(n * 2, n * 2 * 90 / 100),
            0.05,
            0.0,
            None,
        );
        assert_eq!(later.verdict, Sign::Better, "{more}");
        assert_eq!(
            more_needed(&compare(
                &bernoulli(10, 9),
                &bernoulli(10, 9),
                0.05,
                0.0,
                None
            )),
            None
        );
    }

    #[test]
    fn thousands_separators() {
        assert_eq!(thousands(0), "0");
        assert_eq!(thousands(999), "999");
        assert_eq!(thousands(1000), "1,000");
        assert_eq!(thousands(1_234_567), "1,234,567");
    }

    #[test]
    fn too_few_buckets_is_said_not_alarmed() {
        let v = fallback_alarm(&[]);
        assert_eq!(v.action, "not enough buckets");
        assert_eq!(median(vec![3.0, 1.0, 2.0]), 2.0);
        assert_eq!(median(vec![4.0, 1.0, 2.0, 3.0]), 2.5);
    }
}

//! Verdicts: what the numbers say to do.
//!
//! - Model vs rules is read on the rollout arms — holdout (rules by design) against
//!   champion (the model policy with its fallbacks) — over the endpoints both arms served.
//!   Arms are assigned independently of the state, so the comparison is unbiased; source
//!   against source is not (states fall back because they are unusual).
//! - Champion vs challenger: the two model arms, same endpoints rule.
//! - A difference counts when the two 95% intervals do not overlap. Otherwise the verdict
//!   estimates how many more decisions with outcomes would separate them if the observed
//!   difference held: intervals shrink as 1/√n, so k = ((h₁ + h₂) / |p₁ − p₂|)² times the
//!   current sample, i.e. (k − 1)·n more at the current split.
//! - Fallback alarm: the last [`RECENT`] buckets' pooled fallback rate against the median
//!   of the earlier buckets; "far above" = at least twice the median, 5 points more, and
//!   the recent rate's Wilson lower bound above the median. The detection is
//!   `decider_core::rollout::alarm`, the one the rollout judge runs at the edge.

use super::join::Aggregates;
use super::stats::{GroupStats, Rate};
use super::timeline::{Bucket, OOD, REASONS};
use crate::logs::{Arm, Endpoint};
#[cfg(test)]
use decider_core::rollout::alarm::median;
/// Buckets at the end of the run compared with the rest, and the fewest non-empty buckets
/// for the fallback alarm to be judged.
pub use decider_core::rollout::alarm::{MIN_BUCKETS, RECENT};
use decider_core::rollout::{fallback_alarm as detect, FallbackAlarm, Why};
use serde::Serialize;
use serde_json::{json, Value};

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

fn rate_json(r: &Rate) -> Value {
    json!({"p": r.p, "lo": r.lo, "hi": r.hi, "n": r.n, "interval": r.method})
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

/// Rough count of further decisions with outcomes (both groups, current split) that would
/// separate the intervals if the observed difference held; None when no difference shows.
pub fn more_needed(a: &Rate, b: &Rate) -> Option<u64> {
    let d = (a.p - b.p).abs();
    if d < 1e-12 {
        return None;
    }
    let k = ((a.half_width() + b.half_width()) / d).powi(2);
    let more = ((k - 1.0).max(0.0) * (a.n + b.n) as f64).ceil();
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
pub fn model_vs_rules(agg: &Aggregates) -> Verdict {
    let (champ, hold, eps) = shared(agg, Arm::Champion, Arm::Holdout);
    let (Some(c), Some(h)) = (champ.rate(), hold.rate()) else {
        return Verdict {
            kind: "model_vs_rules",
            action: "no data".into(),
            text: "model vs rules: no holdout and champion outcomes on a common endpoint; the unbiased comparison needs a holdout share (rules-only canary traffic)".into(),
            evidence: json!({"endpoints": eps}),
        };
    };
    let more = more_needed(&c, &h);
    let evidence = json!({"champion": rate_json(&c), "holdout": rate_json(&h), "endpoints": eps, "more_needed": more});
    let (action, text) = if c.separated_from(&h) && h.p > c.p {
        (
            "retrain",
            format!(
                "rules beat the model on the holdout arm ({} vs {}): retrain",
                h.pm(),
                c.pm()
            ),
        )
    } else if c.separated_from(&h) {
        (
            "keep the model",
            format!(
                "the model beats the rules (champion arm {} vs holdout {}): keep the model",
                c.pm(),
                h.pm()
            ),
        )
    } else {
        (
            "keep collecting",
            format!(
                "model vs rules: not yet significant (champion {} vs holdout {}); {}",
                c.pm(),
                h.pm(),
                more_text(more)
            ),
        )
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
pub fn champion_vs_challenger(agg: &Aggregates) -> Verdict {
    let (chal, champ, eps) = shared(agg, Arm::Challenger, Arm::Champion);
    let (vc, vn) = (
        top_version(agg, Arm::Champion),
        top_version(agg, Arm::Challenger),
    );
    let (Some(n), Some(c)) = (chal.rate(), champ.rate()) else {
        return Verdict {
            kind: "champion_vs_challenger",
            action: "no challenger".into(),
            text: "champion vs challenger: no challenger outcomes on an endpoint the champion also served".into(),
            evidence: json!({"endpoints": eps}),
        };
    };
    let more = more_needed(&n, &c);
    let ranking = if n.p > c.p {
        ["challenger", "champion"]
    } else {
        ["champion", "challenger"]
    };
    let evidence = json!({
        "champion": rate_json(&c), "challenger": rate_json(&n),
        "champion_model_version": vc, "challenger_model_version": vn,
        "ranking": ranking, "endpoints": eps, "more_needed": more,
    });
    let champ_s = format!("champion {vc} ({})", c.pm());
    let chal_s = format!("challenger {vn} ({})", n.pm());
    let (action, text) = if n.separated_from(&c) && n.p < c.p {
        (
            "roll the challenger back",
            format!("{champ_s} beats {chal_s}: roll the challenger back"),
        )
    } else if n.separated_from(&c) {
        (
            "promote the challenger",
            format!("{chal_s} beats {champ_s}: promote the challenger"),
        )
    } else {
        let (first, second) = if n.p > c.p {
            (&chal_s, &champ_s)
        } else {
            (&champ_s, &chal_s)
        };
        (
            "keep collecting",
            format!(
                "{first} ahead of {second}, not yet significant: keep collecting; {}",
                more_text(more)
            ),
        )
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

/// Where the automatic rollout stands, from the judge's `rollout` records: the last change
/// says it (100% → ship the challenger; a rollback; a switch to rules; a step up).
pub fn rollout(agg: &Aggregates) -> Verdict {
    let history: Vec<Value> = agg
        .rollouts
        .iter()
        .map(|r| json!({"ts": r.ts, "challenger_version": r.challenger_version, "from": r.from, "to": r.to, "why": r.why.name()}))
        .collect();
    let Some(last) = agg.rollouts.last() else {
        return Verdict {
            kind: "rollout",
            action: "no rollout records".into(),
            text: "rollout: no `rollout` records in these logs (the judge logs one on every change of the challenger's share)".into(),
            evidence: json!({"changes": history}),
        };
    };
    let version = last.challenger_version.as_deref().unwrap_or("(unnamed)");
    let evidence = json!({
        "changes": history, "challenger_version": last.challenger_version,
        "setting": last.to, "since": last.ts, "statistics": last.statistics,
    });
    let (action, text) = if last.promotes() {
        (
            "ship the challenger",
            format!(
                "rollout: challenger {version} reached 100% on {}: it is the effective champion; ship it (copy its artifact to model/decision-model.json and deploy). {}",
                last.ts, last.text
            ),
        )
    } else {
        match last.why {
            Why::Worse => (
                "rolled back",
                format!(
                    "rollout: challenger {version} rolled back to 0% on {}: {}",
                    last.ts, last.text
                ),
            ),
            Why::RulesBeatModel => (
                "switched to rules",
                format!(
                    "rollout: every decision on rules since {}: {}",
                    last.ts, last.text
                ),
            ),
            Why::Better => (
                "ramping",
                format!(
                    "rollout: challenger {version} at {} since {} ({} changes): {}",
                    last.to,
                    last.ts,
                    agg.rollouts.len(),
                    last.text
                ),
            ),
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
pub fn verdicts(agg: &Aggregates, buckets: &[Bucket]) -> (String, Vec<Verdict>) {
    let v = vec![
        model_vs_rules(agg),
        champion_vs_challenger(agg),
        fallback_alarm(buckets),
        rollout(agg),
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
    use crate::report::stats::Method;

    fn rate(p: f64, half: f64, n: u64) -> Rate {
        Rate {
            p,
            lo: p - half,
            hi: p + half,
            n,
            method: Method::Wilson,
        }
    }

    #[test]
    fn more_needed_scales_the_sample_until_the_intervals_part() {
        // Half-widths 0.02 + 0.02 against a difference of 0.02: k = 4, three times the
        // current 2000 more.
        assert_eq!(
            more_needed(&rate(0.90, 0.02, 1000), &rate(0.92, 0.02, 1000)),
            Some(6000)
        );
        assert_eq!(
            more_needed(&rate(0.90, 0.01, 1000), &rate(0.95, 0.01, 1000)),
            Some(0)
        );
        assert_eq!(
            more_needed(&rate(0.9, 0.02, 10), &rate(0.9, 0.03, 10)),
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

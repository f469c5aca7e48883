//! The `--json` object.

use super::stats::GroupStats;
use super::timeline::{OOD, REASONS};
use super::Report;
use crate::logs::format_iso_s;
use serde_json::{json, Map, Value};

/// One group: n, outcomes, successes, the rate with its interval, latency percentiles.
pub(super) fn group(g: &GroupStats) -> Value {
    let r = g.rate();
    json!({
        "n": g.n,
        "with_outcome": g.with_outcome,
        "successes": g.successes,
        "success_rate": r.map(|r| r.p),
        "ci95": r.map(|r| [r.lo, r.hi]),
        "interval": r.map(|r| r.method),
        "rejected": g.rejected,
        "latency_ms": {
            "p50": g.latency_ms(0.5),
            "p99": g.latency_ms(0.99),
            "n": g.latency_count(),
        },
    })
}

fn groups(v: &[(String, GroupStats)]) -> Value {
    Value::Object(
        v.iter()
            .map(|(k, g)| (k.clone(), group(g)))
            .collect::<Map<_, _>>(),
    )
}

fn ratio(a: u64, b: u64) -> Option<f64> {
    (b > 0).then(|| a as f64 / b as f64)
}

fn by_reason(counts: &[u64; 7], n: u64) -> Value {
    Value::Object(
        REASONS
            .iter()
            .zip(counts)
            .filter(|(_, &c)| c > 0)
            .map(|(r, &c)| (r.to_string(), json!({"count": c, "rate": ratio(c, n)})))
            .collect(),
    )
}

// The renderers add their method to `Report` here, so that the report's own module does
// not depend on them.
impl Report {
    /// The `--json` object.
    pub fn to_json(&self) -> Value {
        report(self)
    }
}

fn report(r: &Report) -> Value {
    let a = &r.agg;
    let fallbacks: u64 = a.fallback_by_reason.iter().sum();
    let over_time: Vec<Value> = r
        .buckets
        .iter()
        .map(|b| {
            let f = b.bin.fallbacks();
            json!({
                "start": format_iso_s(b.start_ms),
                "n": b.bin.n,
                "fallbacks": f,
                "rate": ratio(f, b.bin.n),
                "ood": b.bin.by_reason[OOD],
                "ood_rate": ratio(b.bin.by_reason[OOD], b.bin.n),
                "by_reason": by_reason(&b.bin.by_reason, b.bin.n),
            })
        })
        .collect();
    json!({
        "files": r.read.files,
        "bytes": r.read.bytes,
        "lines": r.read.lines,
        "records": r.read.decisions + r.read.outcomes + r.read.rollouts,
        "skipped": r.read.skipped,
        "skipped_samples": r.read.samples,
        "decisions": a.decisions,
        "duplicate_decisions": a.duplicate_decisions,
        "rescued_by_failover": a.rescued,
        "outcomes": a.outcome_lines,
        "orphan_outcomes": a.orphan_outcomes,
        "rollout_changes": a.rollouts.len(),
        "success": {
            "statuses": r.rule.statuses.describe(),
            "slo_ms": r.rule.slo_ms,
            "reject_reward": r.rule.reject_reward,
        },
        "by_source": groups(&a.by_source),
        "by_model_version": groups(&a.by_model_version),
        "by_origin": groups(&a.by_origin),
        "by_arm": groups(&a.by_arm),
        "by_endpoint": groups(&a.by_endpoint),
        "fallback": {
            "n": a.fallback_n,
            "fallbacks": fallbacks,
            "rate": ratio(fallbacks, a.fallback_n),
            "holdout": a.holdout,
            "by_reason": by_reason(&a.fallback_by_reason, a.fallback_n),
            "bucket_seconds": r.bucket_ms as f64 / 1000.0,
            "bucket_widened": r.bucket_widened,
            "over_time": over_time,
        },
        "verdict": r.verdict,
        "verdicts": r.verdicts,
    })
}

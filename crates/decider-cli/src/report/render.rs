//! The readable tables.

use super::stats::{GroupStats, Method};
use super::timeline::{OOD, REASONS};
use super::verdict::thousands;
use super::Report;
use crate::logs::{format_iso_s, SkipReason};
use std::fmt::Write;

fn pct(a: u64, b: u64) -> String {
    if b == 0 {
        "-".into()
    } else {
        format!("{:.2}%", a as f64 * 100.0 / b as f64)
    }
}

fn ms(v: Option<f64>) -> String {
    v.map_or("-".into(), |v| format!("{v:.1}"))
}

fn table(s: &mut String, title: &str, rows: &[(String, GroupStats)]) {
    let _ = writeln!(
        s,
        "\n{:<22}{:>11}{:>11}{:>10}  {:<17}{:>9}{:>9}{:>9}",
        title, "n", "outcomes", "success", "95% interval", "rejected", "p50 ms", "p99 ms"
    );
    if rows.is_empty() {
        let _ = writeln!(s, "  (no decisions)");
    }
    for (name, g) in rows {
        let (rate, ci) = match g.rate() {
            Some(r) => (
                format!("{:.2}%", r.p * 100.0),
                format!(
                    "[{:.2}, {:.2}]{}",
                    r.lo * 100.0,
                    r.hi * 100.0,
                    if r.method == Method::Normal { "*" } else { "" }
                ),
            ),
            None => ("-".into(), "-".into()),
        };
        let _ = writeln!(
            s,
            "  {:<20}{:>11}{:>11}{:>10}  {:<17}{:>9}{:>9}{:>9}",
            name,
            thousands(g.n),
            thousands(g.with_outcome),
            rate,
            ci,
            thousands(g.rejected),
            ms(g.latency_ms(0.5)),
            ms(g.latency_ms(0.99))
        );
    }
}

fn width(ms: i64) -> String {
    match ms {
        m if m % 86_400_000 == 0 => format!("{}d", m / 86_400_000),
        m if m % 3_600_000 == 0 => format!("{}h", m / 3_600_000),
        m if m % 60_000 == 0 => format!("{}m", m / 60_000),
        m => format!("{}s", m / 1000),
    }
}

// The renderers add their method to `Report` here, so that the report's own module does
// not depend on them.
impl Report {
    /// The readable tables.
    pub fn to_text(&self) -> String {
        text(self)
    }
}

fn text(r: &Report) -> String {
    let (rd, a) = (&r.read, &r.agg);
    let mut s = String::new();
    let _ = writeln!(
        s,
        "decider report: {} file(s), {} lines, {} bytes; {} decisions, {} outcome lines",
        rd.files,
        thousands(rd.lines),
        thousands(rd.bytes),
        thousands(a.decisions),
        thousands(a.outcome_lines)
    );
    let reasons: Vec<String> = SkipReason::ALL
        .iter()
        .map(|&x| format!("{} {}", x.name(), thousands(rd.skipped.get(x))))
        .collect();
    let _ = writeln!(
        s,
        "skipped {}: {}",
        thousands(rd.skipped.total()),
        reasons.join(", ")
    );
    for sample in &rd.samples {
        let _ = writeln!(s, "  e.g. {sample}");
    }
    let _ = writeln!(
        s,
        "join: {} orphan outcomes (no such decision), {} duplicate decisions (the first counts; a duplicate outcome is skipped above, the first counts)",
        thousands(a.orphan_outcomes),
        thousands(a.duplicate_decisions)
    );
    let slo = r
        .rule
        .slo_ms
        .map_or(String::new(), |v| format!(" and latency ≤ {v} ms"));
    let _ = writeln!(
        s,
        "success: the caller's reward when an outcome line has one, else {}{slo} at the decided origin's first attempt; a rejected request scores {}",
        r.rule.statuses.describe(),
        r.rule.reject_reward
    );
    if a.rescued > 0 {
        let _ = writeln!(
            s,
            "failover: {} decision(s) failed at their origin and were rescued by another (failures of the decision, answers for the client)",
            thousands(a.rescued)
        );
    }
    let _ = writeln!(
        s,
        "intervals: Wilson for 0/1 outcomes; * = normal interval on the mean (fractional rewards)"
    );
    table(&mut s, "BY ARM", &a.by_arm);
    table(&mut s, "BY SOURCE", &a.by_source);
    let _ = writeln!(
        s,
        "  note: source vs source is confounded (states fall back because they are unusual, so\n  \"rules\" serves the harder traffic); the arm comparison below is the unbiased one"
    );
    table(&mut s, "BY MODEL VERSION", &a.by_model_version);
    table(&mut s, "BY ORIGIN", &a.by_origin);
    table(&mut s, "BY ENDPOINT", &a.by_endpoint);
    let fallbacks: u64 = a.fallback_by_reason.iter().sum();
    let _ = writeln!(
        s,
        "\nFALLBACK: {} of {} decisions outside the holdout arm ({} holdout decisions are rules by design)",
        pct(fallbacks, a.fallback_n),
        thousands(a.fallback_n),
        thousands(a.holdout)
    );
    for (name, &c) in REASONS.iter().zip(&a.fallback_by_reason) {
        if c > 0 {
            let _ = writeln!(
                s,
                "  {name:<22}{:>11}{:>10}",
                thousands(c),
                pct(c, a.fallback_n)
            );
        }
    }
    if !r.buckets.is_empty() {
        let _ = writeln!(
            s,
            "\nFALLBACK OVER TIME (buckets of {}{})",
            width(r.bucket_ms),
            if r.bucket_widened {
                ", widened from --bucket to fit"
            } else {
                ""
            }
        );
        let _ = writeln!(
            s,
            "  {:<22}{:>11}{:>10}{:>10}",
            "start", "n", "fallback", "ood"
        );
        let top = r
            .buckets
            .iter()
            .filter(|b| b.bin.n > 0)
            .map(|b| b.bin.fallbacks() as f64 / b.bin.n as f64)
            .fold(0.0f64, f64::max);
        for b in &r.buckets {
            let rate = if b.bin.n > 0 {
                b.bin.fallbacks() as f64 / b.bin.n as f64
            } else {
                0.0
            };
            let bar = if top > 0.0 {
                (rate / top * 30.0).round() as usize
            } else {
                0
            };
            let _ = writeln!(
                s,
                "  {:<22}{:>11}{:>10}{:>10}  {}",
                format_iso_s(b.start_ms),
                thousands(b.bin.n),
                pct(b.bin.fallbacks(), b.bin.n),
                pct(b.bin.by_reason[OOD], b.bin.n),
                "#".repeat(bar)
            );
        }
    }
    let _ = writeln!(s, "\nVERDICTS");
    for v in &r.verdicts {
        let _ = writeln!(s, "  {}", v.text);
    }
    s
}

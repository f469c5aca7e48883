//! The report's charts: fallback rate over time (stacked by reason, with the
//! out-of-distribution rate as a line) and success rates with 95% intervals as error bars.

use super::stats::GroupStats;
use super::timeline::{OOD, REASONS};
use super::Report;
use crate::logs::format_iso_s;
use crate::svg::{Svg, PALETTE};

const W: f64 = 760.0;
const H: f64 = 420.0;
const PAD: f64 = 60.0;

/// A round upper limit for a percentage axis.
fn round_up(x: f64) -> f64 {
    for step in [0.01, 0.02, 0.05, 0.1, 0.2, 0.25, 0.5, 1.0] {
        if x <= step {
            return step;
        }
    }
    1.0
}

fn fallback_over_time(r: &Report) -> String {
    let mut s = Svg::new(
        W,
        H,
        "fallback rate over time, by reason (holdout excluded)",
    );
    let b = &r.buckets;
    let rate = |c: u64, n: u64| if n > 0 { c as f64 / n as f64 } else { 0.0 };
    let top = round_up(
        b.iter()
            .map(|x| rate(x.bin.fallbacks(), x.bin.n))
            .fold(0.0, f64::max)
            .max(1e-9),
    );
    let (x0, x1, y0, y1) = (PAD + 16.0, W - 200.0, H - PAD, PAD);
    let y = |v: f64| y0 - v / top * (y0 - y1);
    for i in 0..=5 {
        let v = top * f64::from(i) / 5.0;
        s.hgrid(x0, x1, y(v), &format!("{:.1}%", v * 100.0));
    }
    let slot = (x1 - x0) / b.len().max(1) as f64;
    let every = b.len().div_ceil(6).max(1);
    for (i, bucket) in b.iter().enumerate() {
        let x = x0 + i as f64 * slot;
        if i % every == 0 {
            let label = format_iso_s(bucket.start_ms);
            s.vgrid(x + slot / 2.0, y0, y1, label.get(5..16).unwrap_or(&label));
        }
        let mut acc = 0.0;
        for (k, &c) in bucket.bin.by_reason.iter().enumerate() {
            let v = rate(c, bucket.bin.n);
            if v > 0.0 {
                s.rect(
                    x + 1.0,
                    y(acc + v),
                    (slot - 2.0).max(1.0),
                    y(acc) - y(acc + v),
                    PALETTE[k],
                );
            }
            acc += v;
        }
    }
    let ood: Vec<(f64, f64)> = b
        .iter()
        .enumerate()
        .map(|(i, x)| {
            (
                x0 + (i as f64 + 0.5) * slot,
                y(rate(x.bin.by_reason[OOD], x.bin.n)),
            )
        })
        .collect();
    if ood.len() > 1 {
        s.polyline(&ood, "#000", 2.0, Some("6 3"));
    }
    for (k, name) in REASONS.iter().enumerate() {
        let ly = y1 + 18.0 * k as f64;
        s.rect(x1 + 16.0, ly - 10.0, 12.0, 12.0, PALETTE[k]);
        s.text(x1 + 34.0, ly, "start", "#000", name);
    }
    let ly = y1 + 18.0 * REASONS.len() as f64;
    s.polyline(
        &[(x1 + 16.0, ly - 4.0), (x1 + 28.0, ly - 4.0)],
        "#000",
        2.0,
        Some("6 3"),
    );
    s.text(x1 + 34.0, ly, "start", "#000", "out_of_distribution rate");
    s.y_title(16.0, H / 2.0, "share of decisions outside the holdout arm");
    s.finish()
}

fn rates(title: &str, rows: &[(String, GroupStats)]) -> String {
    let mut s = Svg::new(W, H, title);
    let rated: Vec<_> = rows
        .iter()
        .filter_map(|(n, g)| g.rate().map(|r| (n, r)))
        .collect();
    let lo = rated.iter().map(|(_, r)| r.lo).fold(1.0, f64::min);
    let hi = rated.iter().map(|(_, r)| r.hi).fold(0.0, f64::max);
    // Zoom on the data in steps of 5 points so that close rates stay distinguishable.
    let (lo, hi) = (
        (lo * 20.0).floor() / 20.0,
        ((hi * 20.0).ceil() / 20.0).max(0.05),
    );
    let lo = lo.min(hi - 0.05);
    let (x0, x1, y0, y1) = (PAD + 10.0, W - 30.0, H - PAD, PAD);
    let y = |v: f64| y0 - (v - lo) / (hi - lo) * (y0 - y1);
    for i in 0..=5 {
        let v = lo + (hi - lo) * f64::from(i) / 5.0;
        s.hgrid(x0, x1, y(v), &format!("{:.1}%", v * 100.0));
    }
    if rated.is_empty() {
        s.text(
            W / 2.0,
            H / 2.0,
            "middle",
            "#777",
            "no outcomes in these logs",
        );
    }
    let slot = (x1 - x0) / rated.len().max(1) as f64;
    for (i, (name, r)) in rated.iter().enumerate() {
        let x = x0 + (i as f64 + 0.5) * slot;
        let colour = PALETTE[i % PALETTE.len()];
        s.error_bar(x, y(r.p), y(r.lo), y(r.hi), colour);
        s.text(x + 12.0, y(r.p) + 4.0, "start", colour, &r.pm());
        s.text(x, y0 + 18.0, "middle", "#000", name);
        s.text(x, y0 + 34.0, "middle", "#777", &format!("n = {}", r.n));
    }
    s.y_title(16.0, H / 2.0, "success rate (95% interval)");
    s.finish()
}

// The renderers add their method to `Report` here, so that the report's own module does
// not depend on them.
impl Report {
    /// The charts, as (file name, SVG text).
    pub fn charts(&self) -> Vec<(String, String)> {
        all(self)
    }
}

fn all(r: &Report) -> Vec<(String, String)> {
    let a = &r.agg;
    vec![
        ("fallback-over-time.svg".into(), fallback_over_time(r)),
        (
            "success-by-source.svg".into(),
            rates(
                "success rate by source (confounded: compare arms)",
                &a.by_source,
            ),
        ),
        (
            "success-by-model-version.svg".into(),
            rates("success rate by model version", &a.by_model_version),
        ),
        (
            "success-by-arm.svg".into(),
            rates("success rate by rollout arm", &a.by_arm),
        ),
    ]
}

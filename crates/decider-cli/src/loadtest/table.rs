//! The human-readable report printed without `--json`.

use super::report::{fmt_ms, Knee, Report, StepReport, SOURCE_HEADER};
use super::ticker::Clock;
use std::fmt::Write as _;

fn clock_name(c: Clock) -> &'static str {
    match c {
        Clock::Timerfd => "timerfd",
        Clock::Thread => "timer thread",
        Clock::Auto => "auto",
    }
}

/// The human-readable report.
pub fn render_table(r: &Report) -> String {
    let mut out = String::new();
    if r.targets.len() > 1 {
        let _ = writeln!(
            out,
            "{} to {} targets in turn, each at the rate below; open loop ({} clock), warmup {}s, {}s per rate, ≤{} connections each, timeout {} ms",
            r.method,
            r.targets.len(),
            clock_name(r.clock),
            r.warmup_s,
            r.duration_s,
            r.connections,
            r.timeout_ms
        );
        for t in &r.targets {
            let _ = writeln!(out, "\n{}", t.url);
            render_steps(&mut out, &t.steps, t.knee.as_ref(), r.p99_limit_us);
        }
    } else {
        let _ = writeln!(
            out,
            "{} {}  open loop ({} clock), warmup {}s, {}s per rate, ≤{} connections, timeout {} ms",
            r.method,
            r.url,
            clock_name(r.clock),
            r.warmup_s,
            r.duration_s,
            r.connections,
            r.timeout_ms
        );
        render_steps(&mut out, &r.steps, r.knee.as_ref(), r.p99_limit_us);
    }
    out
}

/// One target's table, sources and knee.
fn render_steps(out: &mut String, steps: &[StepReport], knee: Option<&Knee>, p99_limit_us: u64) {
    let _ = writeln!(
        out,
        "{:>9} {:>10} {:>8} {:>8} {:>7} {:>9} {:>9} {:>9} {:>9} {:>9}",
        "rate/s",
        "achieved/s",
        "sent",
        "ok",
        "errors",
        "p50 ms",
        "p90 ms",
        "p99 ms",
        "p99.9 ms",
        "max ms"
    );
    for s in steps {
        let ms = |v: u64| format!("{:.3}", v as f64 / 1e3);
        let (p50, p90, p99, p999, max) = match s.latency {
            Some(l) => (
                ms(l.p50_us),
                ms(l.p90_us),
                ms(l.p99_us),
                ms(l.p999_us),
                ms(l.max_us),
            ),
            None => Default::default(),
        };
        let _ = writeln!(
            out,
            "{:>9} {:>10.1} {:>8} {:>8} {:>7} {:>9} {:>9} {:>9} {:>9} {:>9}",
            s.target_rate,
            s.achieved_rate,
            s.sent,
            s.ok,
            s.error_count(),
            p50,
            p90,
            p99,
            p999,
            max
        );
    }
    for s in steps {
        let prefix = if steps.len() > 1 {
            format!("  at {}/s ", s.target_rate)
        } else {
            String::new()
        };
        if !s.errors.is_empty() {
            let kinds: Vec<String> = s.errors.iter().map(|(k, v)| format!("{k} {v}")).collect();
            let _ = writeln!(out, "{prefix}errors: {}", kinds.join(", "));
        }
        if let Some(l) = s.send_lag {
            let _ = writeln!(
                out,
                "{prefix}send lag (scheduled → sent): p50 {}, p99 {}, max {}",
                fmt_ms(l.p50_us),
                fmt_ms(l.p99_us),
                fmt_ms(l.max_us)
            );
        }
        if !s.sources.is_empty() {
            let total: u64 = s.sources.values().sum();
            let parts: Vec<String> = s
                .sources
                .iter()
                .map(|(k, v)| format!("{k} {v} ({:.1}%)", 100.0 * *v as f64 / total as f64))
                .collect();
            let _ = writeln!(out, "{prefix}{SOURCE_HEADER}: {}", parts.join(", "));
        }
    }
    match knee {
        Some(k) => {
            let _ = writeln!(out, "knee: {}/s ({})", k.rate, k.reason);
        }
        None => {
            let top = steps.last().map_or(0.0, |s| s.target_rate);
            let _ = writeln!(
                out,
                "knee: none up to {top}/s (p99 limit {})",
                fmt_ms(p99_limit_us)
            );
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::loadtest::report::{Latency, SendLag, TargetReport};

    fn step(rate: f64, errors: &[(&str, u64)], sources: &[(&str, u64)]) -> StepReport {
        StepReport {
            target_rate: rate,
            sent: 100,
            responses: 100,
            ok: 100 - errors.iter().map(|e| e.1).sum::<u64>(),
            achieved_rate: rate - 0.25,
            latency: Some(Latency {
                p50_us: 812,
                p90_us: 1_250,
                p99_us: 4_096,
                p999_us: 12_000,
                max_us: 15_500,
                mean_us: 900.0,
            }),
            errors: errors.iter().map(|(k, v)| (k.to_string(), *v)).collect(),
            error_rate: 0.0,
            sources: sources.iter().map(|(k, v)| (k.to_string(), *v)).collect(),
            send_lag: Some(SendLag {
                p50_us: 90,
                p99_us: 310,
                max_us: 2_000,
            }),
            max_send_lag_us: 2_000,
        }
    }

    fn run(steps: Vec<StepReport>, knee: Option<Knee>) -> Report {
        Report {
            url: "http://127.0.0.1:8787/v1/decide".into(),
            method: "POST".into(),
            connections: 64,
            warmup_s: 2.0,
            duration_s: 10.0,
            timeout_ms: 5000.0,
            clock: Clock::Timerfd,
            p99_limit_us: 10_000,
            steps,
            knee,
            targets: vec![],
        }
    }

    #[test]
    fn one_rate_renders_as_one_row_with_its_lag_and_sources() {
        let r = run(vec![step(500.0, &[], &[("model", 97), ("rules", 3)])], None);
        let want = "\
POST http://127.0.0.1:8787/v1/decide  open loop (timerfd clock), warmup 2s, 10s per rate, ≤64 connections, timeout 5000 ms
   rate/s achieved/s     sent       ok  errors    p50 ms    p90 ms    p99 ms  p99.9 ms    max ms
      500      499.8      100      100       0     0.812     1.250     4.096    12.000    15.500
send lag (scheduled → sent): p50 0.090 ms, p99 0.310 ms, max 2.000 ms
x-decision-source: model 97 (97.0%), rules 3 (3.0%)
knee: none up to 500/s (p99 limit 10.000 ms)
";
        assert_eq!(render_table(&r), want);
    }

    #[test]
    fn a_ramp_prefixes_each_rate_and_names_the_knee() {
        let knee = Knee {
            rate: 200.0,
            reason: "2 error(s): timeout 2".into(),
        };
        let mut r = run(
            vec![
                step(100.0, &[], &[("model", 100)]),
                step(200.0, &[("timeout", 2)], &[]),
            ],
            Some(knee),
        );
        r.clock = Clock::Thread;
        let table = render_table(&r);
        assert!(table.contains("(timer thread clock)"), "{table}");
        assert!(
            table.contains("\n  at 100/s x-decision-source: model 100 (100.0%)\n"),
            "{table}"
        );
        assert!(
            table.contains("\n  at 200/s errors: timeout 2\n"),
            "{table}"
        );
        assert!(
            table.ends_with("knee: 200/s (2 error(s): timeout 2)\n"),
            "{table}"
        );

        // Several targets: a heading line, then each target's URL and table.
        r.targets = vec![
            TargetReport {
                url: "http://a/".into(),
                steps: r.steps.clone(),
                knee: r.knee.clone(),
            },
            TargetReport {
                url: "http://b/".into(),
                steps: vec![step(100.0, &[], &[])],
                knee: None,
            },
        ];
        let table = render_table(&r);
        assert!(
            table.starts_with("POST to 2 targets in turn, each at the rate below; open loop"),
            "{table}"
        );
        assert!(
            table.contains("\nhttp://a/\n") && table.contains("\nhttp://b/\n"),
            "{table}"
        );
        assert!(
            table.ends_with("knee: none up to 100/s (p99 limit 10.000 ms)\n"),
            "{table}"
        );
    }
}

//! The knee of a `--step` ramp: the first rate the target no longer keeps up with.

use super::report::{fmt_ms, Knee, StepReport};
use std::time::Duration;

/// Why one step is over the limit (p99 above it, or any error), or `None`.
fn over_limit(s: &StepReport, limit_us: u64) -> Option<String> {
    let errors = s.error_count();
    if errors > 0 {
        let kinds: Vec<String> = s.errors.iter().map(|(k, v)| format!("{k} {v}")).collect();
        return Some(format!("{errors} error(s): {}", kinds.join(", ")));
    }
    match s.latency {
        Some(l) if l.p99_us > limit_us => Some(format!(
            "p99 {} above the {} limit",
            fmt_ms(l.p99_us),
            fmt_ms(limit_us)
        )),
        _ => None,
    }
}

/// The knee: the first of `confirm` consecutive steps that are all over the limit (p99
/// above `limit`, or any error). Over-limit steps that run to the end of the ramp before
/// `confirm` of them are a knee too: the ramp ended, not the overload. With `confirm` 1,
/// the first over-limit step.
pub fn find_knee(steps: &[StepReport], limit: Duration, confirm: usize) -> Option<Knee> {
    knee_in(steps, limit, confirm, true)
}

/// [`find_knee`]; with `ramp_done` false, over-limit steps at the end of `steps` are not a
/// knee until `confirm` of them are in (the ramp goes on).
pub(super) fn knee_in(
    steps: &[StepReport],
    limit: Duration,
    confirm: usize,
    ramp_done: bool,
) -> Option<Knee> {
    let limit_us = limit.as_micros() as u64;
    let confirm = confirm.max(1);
    (0..steps.len()).find_map(|i| {
        let reason = over_limit(&steps[i], limit_us)?;
        let run = &steps[i..steps.len().min(i + confirm)];
        let complete = ramp_done || run.len() == confirm;
        (complete && run.iter().all(|s| over_limit(s, limit_us).is_some())).then(|| Knee {
            rate: steps[i].target_rate,
            reason: if run.len() > 1 {
                format!(
                    "{reason}; over the limit in the next {} step(s) too",
                    run.len() - 1
                )
            } else {
                reason
            },
        })
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::commands::loadtest::parse_step;
    use crate::loadtest::report::Latency;
    use crate::loadtest::table::render_table;
    use crate::loadtest::testing::{args, report, server};
    use std::collections::BTreeMap;

    fn step(rate: f64, p99: u64, errors: &[(&str, u64)]) -> StepReport {
        StepReport {
            target_rate: rate,
            sent: 10,
            responses: 10,
            ok: 10,
            achieved_rate: rate,
            latency: Some(Latency {
                p50_us: 1,
                p90_us: 1,
                p99_us: p99,
                p999_us: p99,
                max_us: p99,
                mean_us: 1.0,
            }),
            errors: errors.iter().map(|(k, v)| (k.to_string(), *v)).collect(),
            error_rate: 0.0,
            sources: BTreeMap::new(),
            send_lag: None,
            max_send_lag_us: 0,
        }
    }

    #[test]
    fn knee_is_the_first_step_over_the_limit_or_with_errors() {
        let limit = Duration::from_millis(5);
        let steps = [
            step(100.0, 1000, &[]),
            step(200.0, 5000, &[]),
            step(300.0, 4000, &[("timeout", 1)]),
            step(400.0, 9000, &[]),
        ];
        let k = find_knee(&steps, limit, 1).unwrap();
        assert_eq!(k.rate, 300.0, "p99 equal to the limit is not above it");
        assert!(k.reason.contains("timeout 1"));
        let k = find_knee(&[steps[0].clone(), steps[3].clone()], limit, 1).unwrap();
        assert_eq!(k.rate, 400.0);
        assert!(k.reason.contains("9.000 ms"), "{}", k.reason);
        assert_eq!(find_knee(&steps[..2], limit, 1), None);
        // Confirmed by the next step: 300 and 400 are both over.
        let k = find_knee(&steps, limit, 2).unwrap();
        assert_eq!(k.rate, 300.0);
        assert!(k.reason.contains("next 1 step(s) too"), "{}", k.reason);
        // One noisy step with a quiet one after it is no knee when two are needed.
        let noisy = [
            step(100.0, 9000, &[]),
            step(200.0, 1000, &[]),
            step(300.0, 1000, &[]),
        ];
        assert_eq!(find_knee(&noisy, limit, 1).unwrap().rate, 100.0);
        assert_eq!(find_knee(&noisy, limit, 2), None);
        // Over the limit at the last step: the ramp ended before it could confirm; a knee.
        assert_eq!(find_knee(&steps[..3], limit, 3).unwrap().rate, 300.0);
    }

    #[test]
    fn while_the_ramp_goes_on_an_unconfirmed_knee_waits_for_more_steps() {
        let limit = Duration::from_millis(5);
        let steps = [step(100.0, 1000, &[]), step(200.0, 9000, &[])];
        assert_eq!(knee_in(&steps, limit, 2, false), None);
        assert_eq!(knee_in(&steps, limit, 2, true).unwrap().rate, 200.0);
        assert_eq!(knee_in(&steps, limit, 1, false).unwrap().rate, 200.0);
    }

    #[test]
    fn step_ramp_reports_every_rate_until_the_knee() {
        fn fast(_: u64) -> (u16, Duration, Option<&'static str>) {
            (200, Duration::ZERO, Some("model"))
        }
        fn slow_after_50(n: u64) -> (u16, Duration, Option<&'static str>) {
            // Fast for the first step (50 requests), then 200 ms per request: far enough
            // apart that a loaded test machine cannot blur the knee.
            let d = if n < 50 { 0 } else { 200 };
            (200, Duration::from_millis(d), Some("model"))
        }
        let mut a = args(format!("http://{}/", server(fast)));
        a.step = Some(parse_step("100:300:100").unwrap());
        let r = report(&a);
        let rates: Vec<f64> = r.steps.iter().map(|s| s.target_rate).collect();
        assert_eq!(rates, vec![100.0, 200.0, 300.0]);
        assert_eq!(
            r.steps.iter().map(|s| s.sent).collect::<Vec<_>>(),
            vec![50, 100, 150]
        );
        assert_eq!(r.knee, None);

        let mut a = args(format!("http://{}/", server(slow_after_50)));
        a.step = Some(parse_step("100:400:100").unwrap());
        a.p99_limit = Duration::from_millis(120);
        a.connections = 64;
        let r = report(&a);
        let knee = r.knee.clone().unwrap();
        assert_eq!(knee.rate, 200.0, "{knee:?}");
        assert!(knee.reason.contains("p99"), "{}", knee.reason);
        assert_eq!(r.steps.len(), 2, "stops at the knee");
        let table = render_table(&r);
        assert!(table.contains("knee: 200/s"), "{table}");
        assert!(table.contains("x-decision-source: model"), "{table}");

        // --knee-confirm 2: the ramp goes one step past the knee to confirm it.
        let mut a = args(format!("http://{}/", server(slow_after_50)));
        a.step = Some(parse_step("100:400:100").unwrap());
        a.p99_limit = Duration::from_millis(120);
        a.connections = 64;
        a.knee_confirm = 2;
        let r = report(&a);
        assert_eq!(r.knee.clone().unwrap().rate, 200.0, "{:?}", r.knee);
        assert_eq!(r.steps.len(), 3, "stops once the knee is confirmed");

        // --no-stop-at-knee: every rate is measured.
        let mut a = args(format!("http://{}/", server(slow_after_50)));
        a.step = Some(parse_step("100:300:100").unwrap());
        a.duration = Duration::from_millis(300);
        a.p99_limit = Duration::from_millis(120);
        a.no_stop_at_knee = true;
        let r = report(&a);
        assert_eq!(r.steps.len(), 3);
        assert!(r.knee.is_some());
    }
}

//! One target's results during a step (latency and send-lag histograms, counts by status,
//! error kind and decision source) and the [`StepReport`] made from them.

use super::client::Outcome;
use super::plan::MAX_DURATION;
use super::report::{Latency, SendLag, StepReport};
use hdrhistogram::Histogram;
use std::collections::BTreeMap;
use std::time::{Duration, Instant};

/// Results of one step for one target, filled in by the request tasks.
pub(super) struct Tally {
    /// From each request's scheduled send time to the end of its response body, µs.
    hist: Histogram<u64>,
    /// From each request's scheduled send time to the start of its sending, µs.
    lag: Histogram<u64>,
    responses: u64,
    ok: u64,
    errors: BTreeMap<String, u64>,
    sources: BTreeMap<String, u64>,
    last_done: Option<Instant>,
}

/// A histogram of µs up to 1 h at 3 significant digits (constant, valid bounds).
fn micros_histogram() -> Histogram<u64> {
    Histogram::new_with_bounds(1, MAX_DURATION.as_micros() as u64, 3)
        .expect("valid histogram bounds")
}

impl Tally {
    pub(super) fn new() -> Tally {
        Tally {
            hist: micros_histogram(),
            lag: micros_histogram(),
            responses: 0,
            ok: 0,
            errors: BTreeMap::new(),
            sources: BTreeMap::new(),
            last_done: None,
        }
    }

    /// Counts one request: it started sending `lag` after its scheduled time and ended at
    /// `done`, `latency_us` after it. Only answered requests go into the latency histogram;
    /// a 4xx or 5xx answer is both a response and an error.
    pub(super) fn record(
        &mut self,
        lag: Duration,
        done: Instant,
        latency_us: u64,
        outcome: Outcome,
    ) {
        self.lag.saturating_record(lag.as_micros() as u64);
        self.last_done = Some(self.last_done.map_or(done, |l| l.max(done)));
        match outcome {
            Outcome::Response { status, source } => {
                self.responses += 1;
                // The histogram's lowest value is 1 µs.
                self.hist.saturating_record(latency_us.max(1));
                let src = source.unwrap_or_else(|| "(none)".to_string());
                *self.sources.entry(src).or_default() += 1;
                match status {
                    100..=399 => self.ok += 1,
                    400..=499 => *self.errors.entry("status_4xx".into()).or_default() += 1,
                    _ => *self.errors.entry("status_5xx".into()).or_default() += 1,
                }
            }
            Outcome::Failed(kind) => *self.errors.entry(kind.into()).or_default() += 1,
        }
    }

    /// The step's measurement: `n` requests scheduled at `rate` for `d` from `start`.
    pub(super) fn report(&self, rate: f64, n: u64, d: Duration, start: Instant) -> StepReport {
        // The window runs to the last answer, so a backlog that drains after the schedule
        // ends lowers the achieved rate instead of hiding.
        let window = self
            .last_done
            .map_or(d, |l| l.saturating_duration_since(start))
            .max(d);
        let latency = (!self.hist.is_empty()).then(|| Latency {
            p50_us: self.hist.value_at_quantile(0.50),
            p90_us: self.hist.value_at_quantile(0.90),
            p99_us: self.hist.value_at_quantile(0.99),
            p999_us: self.hist.value_at_quantile(0.999),
            max_us: self.hist.max(),
            mean_us: self.hist.mean(),
        });
        let failed: u64 = self.errors.values().sum();
        StepReport {
            target_rate: rate,
            sent: n,
            responses: self.responses,
            ok: self.ok,
            achieved_rate: self.responses as f64 / window.as_secs_f64(),
            latency,
            errors: self.errors.clone(),
            error_rate: if n == 0 {
                0.0
            } else {
                failed as f64 / n as f64
            },
            sources: self.sources.clone(),
            send_lag: (!self.lag.is_empty()).then(|| SendLag {
                p50_us: self.lag.value_at_quantile(0.50),
                p99_us: self.lag.value_at_quantile(0.99),
                max_us: self.lag.max(),
            }),
            max_send_lag_us: self.lag.max(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn answered(status: u16, source: Option<&str>) -> Outcome {
        Outcome::Response {
            status,
            source: source.map(str::to_string),
        }
    }

    #[test]
    fn a_tally_counts_statuses_errors_and_sources() {
        let start = Instant::now();
        let d = Duration::from_secs(1);
        let mut t = Tally::new();
        let ms = Duration::from_millis;
        t.record(ms(1), start + ms(100), 1_000, answered(200, Some("model")));
        t.record(ms(2), start + ms(200), 2_000, answered(302, Some("rules")));
        t.record(ms(3), start + ms(300), 3_000, answered(404, None));
        t.record(ms(4), start + ms(400), 4_000, answered(503, Some("model")));
        t.record(ms(5), start + ms(500), 9_000, Outcome::Failed("timeout"));
        let s = t.report(5.0, 5, d, start);
        assert_eq!((s.target_rate, s.sent, s.responses, s.ok), (5.0, 5, 4, 2));
        assert_eq!(s.error_count(), 3);
        assert_eq!(
            s.errors,
            BTreeMap::from([
                ("status_4xx".to_string(), 1),
                ("status_5xx".to_string(), 1),
                ("timeout".to_string(), 1)
            ])
        );
        assert!((s.error_rate - 0.6).abs() < 1e-12);
        // Sources count every answer, errors included; a missing header is `(none)`.
        assert_eq!(
            s.sources,
            BTreeMap::from([
                ("(none)".to_string(), 1),
                ("model".to_string(), 2),
                ("rules".to_string(), 1)
            ])
        );
        // Only answers are in the latency histogram: the 9 ms timeout is not. Values come
        // back at the histogram's 3 significant digits.
        let near = |got: u64, want: u64| got.abs_diff(want) <= want / 1000;
        let l = s.latency.unwrap();
        assert!(near(l.p50_us, 2_000) && near(l.max_us, 4_000), "{l:?}");
        assert!((l.mean_us - 2_500.0).abs() < 3.0, "{}", l.mean_us);
        // Every request has a send lag.
        let lag = s.send_lag.unwrap();
        assert!(
            near(lag.p50_us, 3_000) && near(lag.max_us, 5_000),
            "{lag:?}"
        );
        assert_eq!(s.max_send_lag_us, lag.max_us);
        // Last answer inside the scheduled second: the window is the second.
        assert!((s.achieved_rate - 4.0).abs() < 1e-9, "{}", s.achieved_rate);
    }

    #[test]
    fn a_backlog_that_ends_after_the_schedule_lowers_the_achieved_rate() {
        let start = Instant::now();
        let mut t = Tally::new();
        for i in 0..4 {
            let done = start + Duration::from_secs(2) * (i + 1) / 4;
            t.record(Duration::ZERO, done, 10, answered(200, None));
        }
        let s = t.report(4.0, 4, Duration::from_secs(1), start);
        assert!((s.achieved_rate - 2.0).abs() < 1e-9, "{}", s.achieved_rate);
    }

    #[test]
    fn an_empty_step_has_no_percentiles() {
        let s = Tally::new().report(10.0, 0, Duration::from_secs(1), Instant::now());
        assert_eq!((s.latency, s.send_lag, s.max_send_lag_us), (None, None, 0));
        assert_eq!((s.error_rate, s.achieved_rate), (0.0, 0.0));
    }
}

//! One step: every target loaded at one rate for one duration on a shared open-loop schedule.
//! The targets take turns on that schedule, so a stall of the machine falls on all of them
//! alike and their latencies stay comparable.

use super::client::{Client, Outcome};
use super::latency_log::{Record, RecordOutcome};
use super::plan::Plan;
use super::report::StepReport;
use super::stats::Tally;
use super::ticker::{Schedule, Ticker};
use indicatif::ProgressBar;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

/// Runs `rate` requests/s to each target for `d`; returns each target's measurement, in
/// target order.
///
/// With `k` targets the schedule sends every `1 / (k × rate)`: round `c` sends one request to
/// each target, starting with target `c mod k`, so each target gets exactly `rate × d`
/// requests and no target is always first. With `record`, every request's [`Record`] is
/// returned too, in the order they finished.
pub(super) async fn run_step(
    clients: &[Arc<Client>],
    rate: f64,
    d: Duration,
    bar: &ProgressBar,
    record: bool,
) -> (Vec<StepReport>, Vec<Record>) {
    let k = clients.len();
    let n = Plan::count(rate, d);
    let tallies: Arc<Vec<Mutex<Tally>>> =
        Arc::new((0..k).map(|_| Mutex::new(Tally::new())).collect());
    let interval = Duration::from_secs_f64(1.0 / (rate * k as f64));
    // A little slack so the first request is not already late when the loop starts.
    let start = Instant::now() + Duration::from_millis(5);
    // The schedule's origin on the wall clock, for the latency log.
    let start_unix_us = (SystemTime::now() + Duration::from_millis(5))
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_micros() as u64);
    // Only with `record`: without it a request costs no lock and no reference count more.
    let records: Option<Arc<Mutex<Vec<Record>>>> = record.then(|| Arc::new(Mutex::new(Vec::new())));
    let schedule = Schedule {
        start,
        interval,
        targets: k,
        total: n * k as u64,
    };
    let mut ticker = Ticker::start(schedule, clients[0].plan.clock);
    let mut tasks = tokio::task::JoinSet::new();
    while let Some((at, target)) = ticker.next().await {
        let client = Arc::clone(&clients[target]);
        let tallies = Arc::clone(&tallies);
        let bar = bar.clone();
        let timeout = client.plan.timeout;
        let records = records.clone();
        tasks.spawn(async move {
            let lag = Instant::now().saturating_duration_since(at);
            // The timeout runs from the scheduled time, so it bounds the whole run.
            let outcome = tokio::time::timeout_at((at + timeout).into(), client.send())
                .await
                .unwrap_or(Outcome::Failed("timeout"));
            let done = Instant::now();
            let us = done.saturating_duration_since(at).as_micros() as u64;
            if let Some(records) = &records {
                let outcome = match &outcome {
                    Outcome::Response { status, .. } => RecordOutcome::Status(*status),
                    Outcome::Failed(kind) => RecordOutcome::Failed(kind),
                };
                records
                    .lock()
                    .unwrap_or_else(|e| e.into_inner())
                    .push(Record {
                        target,
                        scheduled_unix_us: start_unix_us
                            + at.saturating_duration_since(start).as_micros() as u64,
                        latency_us: us,
                        outcome,
                    });
            }
            tallies[target]
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .record(lag, done, us, outcome);
            bar.inc(1);
        });
        // Reap finished tasks as we go so the set stays as small as the backlog.
        while tasks.try_join_next().is_some() {}
    }
    while tasks.join_next().await.is_some() {}
    let reports = tallies
        .iter()
        .map(|t| {
            t.lock()
                .unwrap_or_else(|e| e.into_inner())
                .report(rate, n, d, start)
        })
        .collect();
    let records = records.map_or_else(Vec::new, |r| {
        std::mem::take(&mut *r.lock().unwrap_or_else(|e| e.into_inner()))
    });
    (reports, records)
}

#[cfg(test)]
mod tests {
    use crate::loadtest::testing::{args, report, server};
    use crate::loadtest::{render_table, Clock};
    use std::sync::Mutex;
    use std::time::Duration;

    #[test]
    fn constant_rate_sends_exactly_rate_times_duration_and_counts_sources() {
        fn b(n: u64) -> (u16, Duration, Option<&'static str>) {
            let src = if n.is_multiple_of(4) {
                "rules"
            } else {
                "model"
            };
            (200, Duration::ZERO, Some(src))
        }
        let addr = server(b);
        let mut a = args(format!("http://{addr}/v1/decide"));
        a.warmup = Duration::from_millis(100);
        let r = report(&a);
        let s = &r.steps[0];
        assert_eq!(s.sent, 100);
        assert_eq!((s.responses, s.ok, s.error_count()), (100, 100, 0));
        // Warmup requests went to the server too (20 of them), but only measured ones count.
        assert_eq!(s.sources.values().sum::<u64>(), 100);
        assert!(
            s.sources["rules"] >= 20 && s.sources["model"] >= 70,
            "{:?}",
            s.sources
        );
        // Open loop at a constant rate: the answered rate tracks the scheduled one (the
        // window ends at the last answer, so a slow test machine lowers it a little).
        assert!(
            s.achieved_rate > 120.0 && s.achieved_rate < 220.0,
            "achieved {}",
            s.achieved_rate
        );
        let l = s.latency.unwrap();
        assert!(l.p50_us <= l.p90_us && l.p90_us <= l.p99_us && l.p99_us <= l.max_us);
        assert_eq!(r.knee, None);
    }

    #[test]
    fn several_targets_share_one_schedule_and_are_measured_apart() {
        fn fast(_: u64) -> (u16, Duration, Option<&'static str>) {
            (200, Duration::ZERO, Some("model"))
        }
        fn slow(_: u64) -> (u16, Duration, Option<&'static str>) {
            (200, Duration::from_millis(30), Some("rules"))
        }
        fn failing(_: u64) -> (u16, Duration, Option<&'static str>) {
            (503, Duration::ZERO, None)
        }
        let urls = [server(fast), server(slow), server(failing)].map(|a| format!("http://{a}/x"));
        let mut a = args(urls[0].clone());
        a.url = urls.to_vec();
        a.rate = 100.0;
        a.warmup = Duration::from_millis(100);
        let r = report(&a);
        assert_eq!(r.targets.len(), 3);
        for (t, u) in r.targets.iter().zip(&urls) {
            assert_eq!(&t.url, u);
            // Each target gets --rate × --duration, not a third of it.
            assert_eq!(
                (t.steps.len(), t.steps[0].sent, t.steps[0].responses),
                (1, 50, 50)
            );
        }
        let [f, s, e] = [0, 1, 2].map(|i| &r.targets[i].steps[0]);
        // Each target's histogram and sources are its own.
        assert_eq!((f.ok, f.sources.get("model")), (50, Some(&50)));
        assert_eq!((s.ok, s.sources.get("rules")), (50, Some(&50)));
        assert!(f.latency.unwrap().p50_us < 25_000, "{:?}", f.latency);
        assert!(s.latency.unwrap().p50_us >= 30_000, "{:?}", s.latency);
        assert_eq!((e.ok, e.errors.get("status_5xx")), (0, Some(&50)));
        // The top-level fields are the first target's; the knee is per target.
        assert_eq!((&r.url, &r.steps), (&urls[0], &r.targets[0].steps));
        assert_eq!(r.targets[0].knee, None);
        assert!(r.targets[2]
            .knee
            .as_ref()
            .unwrap()
            .reason
            .contains("status_5xx 50"));
        let v = serde_json::to_value(&r).unwrap();
        assert_eq!(v["targets"].as_array().unwrap().len(), 3);
        assert_eq!(v["targets"][1]["steps"][0]["sources"]["rules"], 50);
        let table = render_table(&r);
        assert!(
            table.contains("3 targets in turn") && table.contains(&urls[2]),
            "{table}"
        );
        // One target: no `targets` field.
        let one = serde_json::to_value(report(&args(urls[0].clone()))).unwrap();
        assert!(one.get("targets").is_none());
    }

    #[test]
    fn the_interleaved_schedule_rotates_which_target_goes_first() {
        // Two targets at 20/s each for 400 ms: 16 sends, 25 ms apart, so the servers see them
        // in schedule order. The turn order rotates every round: a b, b a, a b, ...
        static ORDER: Mutex<Vec<usize>> = Mutex::new(Vec::new());
        fn first(_: u64) -> (u16, Duration, Option<&'static str>) {
            ORDER.lock().unwrap().push(0);
            (200, Duration::ZERO, None)
        }
        fn second(_: u64) -> (u16, Duration, Option<&'static str>) {
            ORDER.lock().unwrap().push(1);
            (200, Duration::ZERO, None)
        }
        let mut a = args(String::new());
        a.url = vec![
            format!("http://{}/", server(first)),
            format!("http://{}/", server(second)),
        ];
        a.rate = 20.0;
        a.duration = Duration::from_millis(400);
        // Both clocks keep the same schedule.
        for clock in [Clock::Auto, Clock::Thread] {
            ORDER.lock().unwrap().clear();
            a.clock = clock;
            let r = report(&a);
            assert_eq!(r.clock, clock.resolve());
            assert_eq!((r.targets[0].steps[0].ok, r.targets[1].steps[0].ok), (8, 8));
            let order = ORDER.lock().unwrap().clone();
            assert_eq!(
                order,
                [0, 1, 1, 0, 0, 1, 1, 0, 0, 1, 1, 0, 0, 1, 1, 0],
                "{clock:?}"
            );
        }
    }

    #[test]
    fn latency_counts_queueing_from_the_scheduled_time() {
        // One connection, 20 ms service time, a request every 10 ms: a closed-loop
        // generator would report ~20 ms for every request. Open loop, request i waits for
        // the i requests before it: latency ≈ 20(i+1) − 10i ms, up to ~1 s for i = 99.
        fn b(_: u64) -> (u16, Duration, Option<&'static str>) {
            (200, Duration::from_millis(20), None)
        }
        let addr = server(b);
        let mut a = args(format!("http://{addr}/"));
        a.rate = 100.0;
        a.duration = Duration::from_secs(1);
        a.connections = 1;
        a.timeout = Duration::from_secs(5);
        let s = report(&a).steps.remove(0);
        assert_eq!(s.ok, 100);
        let l = s.latency.unwrap();
        assert!(l.p50_us > 350_000, "p50 {} µs hides the queue", l.p50_us);
        assert!(l.max_us > 800_000, "max {} µs", l.max_us);
        // The queue is the target's (waiting for the one connection), not the generator's:
        // every request still started on time.
        let lag = s.send_lag.unwrap();
        assert!(lag.p99_us < 100_000, "send lag p99 {} µs", lag.p99_us);
        assert_eq!(lag.max_us, s.max_send_lag_us);
        // The backlog bounds the achieved rate at 1 / service time.
        assert!(s.achieved_rate < 60.0, "achieved {}", s.achieved_rate);
        assert_eq!(s.sources.get("(none)"), Some(&100));
    }
}

//! What a run reports. These types serialize to the `--json` output, so their field names
//! are its keys.

use super::ticker::Clock;
use serde::Serialize;
use std::collections::BTreeMap;

/// Header whose values are counted per response ([`StepReport::sources`]).
pub const SOURCE_HEADER: &str = "x-decision-source";

/// Latency percentiles of one step, microseconds.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct Latency {
    /// Median.
    pub p50_us: u64,
    /// 90th percentile.
    pub p90_us: u64,
    /// 99th percentile.
    pub p99_us: u64,
    /// 99.9th percentile.
    pub p999_us: u64,
    /// Largest.
    pub max_us: u64,
    /// Mean.
    pub mean_us: f64,
}

/// The measurement at one rate.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct StepReport {
    /// Scheduled arrival rate, requests/s.
    pub target_rate: f64,
    /// Requests scheduled in the measured window.
    pub sent: u64,
    /// Requests answered with any HTTP status.
    pub responses: u64,
    /// Responses with a 1xx/2xx/3xx status.
    pub ok: u64,
    /// Answered requests per second over the measured window (first schedule to last answer).
    pub achieved_rate: f64,
    /// Latency from scheduled send time to the end of the response body, over all responses.
    pub latency: Option<Latency>,
    /// Failures by kind: connect, timeout, io, status_4xx, status_5xx.
    pub errors: BTreeMap<String, u64>,
    /// Failed requests over sent requests.
    pub error_rate: f64,
    /// Responses by `x-decision-source` value (`(none)` when absent).
    pub sources: BTreeMap<String, u64>,
    /// How late the generator started sending its requests, from their scheduled send time
    /// (the generator's own delay, included in the latency; a saturated generator shows
    /// here, not only as target latency). `None` when nothing was sent.
    pub send_lag: Option<SendLag>,
    /// `send_lag.max_us` (0 when nothing was sent), as a flat key for readers of the JSON
    /// that use it.
    pub max_send_lag_us: u64,
}

/// The generator's own delay: from scheduled send time to the start of sending, µs.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct SendLag {
    /// Median.
    pub p50_us: u64,
    /// 99th percentile.
    pub p99_us: u64,
    /// Largest.
    pub max_us: u64,
}

impl StepReport {
    /// Total failed requests.
    pub fn error_count(&self) -> u64 {
        self.errors.values().sum()
    }
}

/// The first step past the limit.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Knee {
    /// Its rate, requests/s.
    pub rate: f64,
    /// Why: p99 above the limit, or errors.
    pub reason: String,
}

/// The measurements of one target.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct TargetReport {
    /// Its URL.
    pub url: String,
    /// One entry per rate, in order.
    pub steps: Vec<StepReport>,
    /// Its knee, when a step crossed the limit.
    pub knee: Option<Knee>,
}

/// The whole run. `url`, `steps` and `knee` are the first target's; with several `--url`s,
/// `targets` has every target's, in `--url` order (the first included).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Report {
    /// Target URL (the first).
    pub url: String,
    /// HTTP method.
    pub method: String,
    /// Connection cap.
    pub connections: usize,
    /// Warmup before the first step, seconds.
    pub warmup_s: f64,
    /// Measured time per step, seconds.
    pub duration_s: f64,
    /// Per-request timeout from scheduled time, milliseconds.
    pub timeout_ms: f64,
    /// The schedule's clock: `timerfd` or `thread` (see `--clock`).
    pub clock: Clock,
    /// The knee limit, microseconds.
    pub p99_limit_us: u64,
    /// One entry per rate, in order.
    pub steps: Vec<StepReport>,
    /// The knee, when a step crossed the limit.
    pub knee: Option<Knee>,
    /// Every target, when there are several.
    #[serde(skip_serializing_if = "single")]
    pub targets: Vec<TargetReport>,
}

/// `1234` µs as `1.234 ms`, as the table and the knee's reason write a latency.
pub(super) fn fmt_ms(us: u64) -> String {
    format!("{:.3} ms", us as f64 / 1e3)
}

/// With one target `targets` would repeat the top-level fields, so it is left out.
fn single(t: &[TargetReport]) -> bool {
    t.len() <= 1
}

#[cfg(test)]
mod tests {
    use crate::loadtest::testing::{args, report, server};
    use serde_json::Value;
    use std::time::Duration;

    /// The object's keys, sorted.
    fn keys(v: &Value) -> Vec<&str> {
        let mut k: Vec<&str> = v.as_object().unwrap().keys().map(String::as_str).collect();
        k.sort_unstable();
        k
    }

    #[test]
    fn json_report_has_the_documented_fields() {
        fn b(_: u64) -> (u16, Duration, Option<&'static str>) {
            (200, Duration::ZERO, Some("model"))
        }
        let mut a = args(format!("http://{}/", server(b)));
        a.rate = 100.0;
        a.duration = Duration::from_millis(200);
        let v = serde_json::to_value(report(&a)).unwrap();
        assert_eq!(
            keys(&v),
            [
                "clock",
                "connections",
                "duration_s",
                "knee",
                "method",
                "p99_limit_us",
                "steps",
                "timeout_ms",
                "url",
                "warmup_s"
            ]
        );
        let s = &v["steps"][0];
        assert_eq!(
            keys(s),
            [
                "achieved_rate",
                "error_rate",
                "errors",
                "latency",
                "max_send_lag_us",
                "ok",
                "responses",
                "send_lag",
                "sent",
                "sources",
                "target_rate"
            ]
        );
        assert_eq!(
            keys(&s["latency"]),
            ["max_us", "mean_us", "p50_us", "p90_us", "p999_us", "p99_us"]
        );
        for k in ["p50_us", "p90_us", "p99_us", "p999_us", "max_us"] {
            assert!(s["latency"][k].as_u64().is_some(), "{k}");
        }
        let lag = |k: &str| s["send_lag"][k].as_u64().unwrap();
        assert!(lag("p50_us") <= lag("p99_us") && lag("p99_us") <= lag("max_us"));
        assert_eq!(s["max_send_lag_us"].as_u64(), Some(lag("max_us")));
        let clock = if cfg!(target_os = "linux") {
            "timerfd"
        } else {
            "thread"
        };
        assert_eq!(v["clock"], clock);
        assert_eq!(s["sources"]["model"], 20);
        assert_eq!(s["sent"], 20);
        assert!(s["achieved_rate"].as_f64().unwrap() > 0.0);
    }
}

//! `decider loadtest`: its flags, their parsers and checks, and the run. The load generator
//! itself is [`crate::loadtest`]; the checked flags are its plan.

use crate::loadtest::{
    execute, render_table, Clock, Plan, Target, MAX_DURATION, MAX_RATE, MAX_REQUESTS, MAX_STEPS,
    MAX_TARGETS,
};
use anyhow::{bail, Context as _};
use hyper::body::Bytes;
use hyper::{HeaderMap, Method};
use std::path::PathBuf;
use std::time::Duration;

const EXAMPLES: &str = "\
Examples:
  # 500 decisions/s for 10 s after a 2 s warmup, against `make dev`
  decider loadtest --url http://127.0.0.1:8787/v1/decide --body tests/fixtures/state.json --rate 500

  # ramp 200 → 2000/s in steps of 200, knee where p99 > 5 ms or any error, as JSON
  decider loadtest --url http://127.0.0.1:8787/v1/decide --body state.json \\
      --step 200:2000:200 --duration 5s --p99-limit 5ms --json

  # two Workers loaded in turn by one schedule, 200/s each: a stall of the machine falls on both
  decider loadtest --url http://127.0.0.1:8787/v1/decide --url http://127.0.0.1:8788/v1/decide \\
      --body state.json --rate 200 --duration 30s

Latency is measured from each request's scheduled send time (open loop), so queueing at a
saturated target is counted. A --body implies POST and, unless a content-type header is
given, `content-type: application/json`.";

// The `///` comments on the fields below are the `--help` text.
/// Flags of `decider loadtest`.
#[derive(Debug, Clone, clap::Args)]
#[command(
    about = "Load-test a running Worker: open-loop constant rate or step ramp; latency percentiles, errors by kind, decisions by x-decision-source",
    after_help = EXAMPLES
)]
pub struct Args {
    /// Target URL, http only (e.g. http://127.0.0.1:8787/v1/decide). Repeat it to load
    /// several targets in one interleaved schedule, each at --rate.
    #[arg(long, required = true, value_name = "URL")]
    pub url: Vec<String>,
    /// HTTP method [default: POST with --body, GET without].
    #[arg(long, short = 'X')]
    pub method: Option<String>,
    /// File whose bytes are sent as the request body.
    #[arg(long, value_name = "FILE")]
    pub body: Option<PathBuf>,
    /// Request header `NAME:VALUE`; repeatable.
    #[arg(long = "header", short = 'H', value_name = "K:V")]
    pub headers: Vec<String>,
    /// Constant arrival rate, requests per second (ignored with --step).
    #[arg(long, default_value_t = 100.0)]
    pub rate: f64,
    /// Measured time per rate (e.g. 10s, 500ms, 2m).
    #[arg(long, default_value = "10s", value_parser = parse_duration)]
    pub duration: Duration,
    /// Unmeasured time at the first rate before measuring, to open connections and warm caches.
    #[arg(long, default_value = "2s", value_parser = parse_duration)]
    pub warmup: Duration,
    /// Ramp the rate from START to END (inclusive) by STEP requests/s, one measurement each.
    #[arg(long, value_name = "START:END:STEP", value_parser = parse_step)]
    pub step: Option<StepSpec>,
    /// A step whose p99 is above this (or that has any error) is the knee.
    #[arg(long, default_value = "10ms", value_parser = parse_duration)]
    pub p99_limit: Duration,
    /// A knee needs this many consecutive steps over the limit (the knee is the first of
    /// them), so that one noisy step on a shared machine does not set it.
    #[arg(long, default_value_t = 1, value_name = "N")]
    pub knee_confirm: usize,
    /// Keep ramping after the knee instead of stopping there.
    #[arg(long)]
    pub no_stop_at_knee: bool,
    /// Most connections open at once (requests beyond it wait, and the wait is measured).
    #[arg(long, alias = "concurrency", short = 'c', default_value_t = 64)]
    pub connections: usize,
    /// A request not answered this long after its scheduled time counts as a timeout.
    #[arg(long, default_value = "5s", value_parser = parse_duration)]
    pub timeout: Duration,
    /// Print one JSON object instead of the table.
    #[arg(long)]
    pub json: bool,
    /// Also write every measured request to FILE as CSV: target (index in --url order),
    /// rate, scheduled send time (µs since the Unix epoch), latency (µs) and outcome (HTTP
    /// status, or the error kind). For lining requests up with a target's own logs; the
    /// warmup is not written. Holds about 50 bytes per request of a step in memory.
    #[arg(long, value_name = "FILE")]
    pub latency_log: Option<PathBuf>,
    /// The schedule's clock: a timerfd in the sending thread's event loop (Linux; `auto`
    /// picks it there) or a timer thread that hands each send time over. How late requests
    /// went out is reported as the send lag.
    #[arg(long, value_enum, default_value_t = Clock::Auto)]
    pub clock: Clock,
}

/// Runs the load test and prints the report (table, or JSON with `--json`).
///
/// # Errors
/// Invalid flags, an unreadable body file, an unresolvable host, or a runtime that cannot start.
/// Failed requests are not errors: they are counted in the report.
pub fn run(a: &Args) -> anyhow::Result<()> {
    let report = execute(&plan(a)?)?;
    if a.json {
        println!("{}", serde_json::to_string(&report)?);
    } else {
        print!("{}", render_table(&report));
    }
    Ok(())
}

/// Checks the flags, reads the body file and resolves every target.
///
/// # Errors
/// A flag out of range (the message names it), an unreadable body file, or a host that
/// does not resolve.
pub(crate) fn plan(a: &Args) -> anyhow::Result<Plan> {
    if a.url.is_empty() {
        bail!("--url is required");
    }
    if a.url.len() > MAX_TARGETS {
        bail!(
            "--url given {} times, at most {MAX_TARGETS} targets",
            a.url.len()
        );
    }
    let targets = a
        .url
        .iter()
        .map(|u| Target::parse(u))
        .collect::<anyhow::Result<Vec<_>>>()?;
    let method = match &a.method {
        Some(m) => Method::from_bytes(m.to_ascii_uppercase().as_bytes())
            .map_err(|_| anyhow::anyhow!("--method {m:?} is not an HTTP method"))?,
        None if a.body.is_some() => Method::POST,
        None => Method::GET,
    };
    let body = match &a.body {
        Some(p) => Bytes::from(
            std::fs::read(p).with_context(|| format!("cannot read --body {}", p.display()))?,
        ),
        None => Bytes::new(),
    };
    let mut headers = HeaderMap::new();
    for h in &a.headers {
        let Some((k, v)) = h.split_once(':') else {
            bail!("--header must be NAME:VALUE, got {h:?}");
        };
        let name = hyper::header::HeaderName::from_bytes(k.trim().as_bytes())
            .map_err(|_| anyhow::anyhow!("--header name {k:?} is not valid"))?;
        let value = hyper::header::HeaderValue::from_str(v.trim())
            .map_err(|_| anyhow::anyhow!("--header value {v:?} is not valid"))?;
        headers.append(name, value);
    }
    if a.body.is_some() && !headers.contains_key(hyper::header::CONTENT_TYPE) {
        headers.insert(
            hyper::header::CONTENT_TYPE,
            hyper::header::HeaderValue::from_static("application/json"),
        );
    }
    let rates = match a.step {
        Some(s) => s.rates(),
        None => vec![a.rate],
    };
    let per_target_max = MAX_RATE / targets.len() as f64;
    if let Some(r) = rates
        .iter()
        .find(|r| !(r.is_finite() && **r > 0.0 && **r <= per_target_max))
    {
        bail!(
            "rate must be in (0, {per_target_max}] requests/s per target ({} target(s)), got {r}",
            targets.len()
        );
    }
    if a.duration.is_zero() {
        bail!("--duration must be > 0");
    }
    if a.timeout.is_zero() {
        bail!("--timeout must be > 0");
    }
    if a.knee_confirm == 0 || a.knee_confirm > MAX_STEPS {
        bail!(
            "--knee-confirm must be 1..={MAX_STEPS}, got {}",
            a.knee_confirm
        );
    }
    if a.connections == 0 || a.connections > 10_000 {
        bail!("--connections must be 1..=10000, got {}", a.connections);
    }
    let total: f64 = rates
        .iter()
        .map(|r| r * a.duration.as_secs_f64())
        .sum::<f64>()
        + rates[0] * a.warmup.as_secs_f64();
    let total = total * targets.len() as f64;
    if total > MAX_REQUESTS as f64 {
        bail!("this run would send {total:.0} requests, more than the {MAX_REQUESTS} allowed");
    }
    Ok(Plan {
        targets,
        method,
        headers,
        body,
        rates,
        duration: a.duration,
        warmup: a.warmup,
        p99_limit: a.p99_limit,
        stop_at_knee: !a.no_stop_at_knee,
        knee_confirm: a.knee_confirm,
        connections: a.connections,
        timeout: a.timeout,
        latency_log: a.latency_log.clone(),
        clock: a.clock.resolve(),
    })
}

/// A `--step START:END:STEP` ramp.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct StepSpec {
    /// First rate.
    pub start: f64,
    /// Last rate (inclusive, when reached by whole steps).
    pub end: f64,
    /// Increment.
    pub step: f64,
}

impl StepSpec {
    /// The rates of the ramp, in order.
    pub fn rates(&self) -> Vec<f64> {
        // The epsilon keeps END when float division lands just below a whole number of steps.
        let n = ((self.end - self.start) / self.step + 1e-9).floor() as usize + 1;
        (0..n).map(|i| self.start + i as f64 * self.step).collect()
    }
}

/// Parses `START:END:STEP` (requests per second).
pub(crate) fn parse_step(s: &str) -> Result<StepSpec, String> {
    let parts: Vec<&str> = s.split(':').collect();
    let [a, b, c] = parts.as_slice() else {
        return Err(format!("expected START:END:STEP, got {s:?}"));
    };
    let num = |t: &str, what: &str| -> Result<f64, String> {
        let v: f64 = t
            .trim()
            .parse()
            .map_err(|_| format!("{what} must be a number, got {t:?}"))?;
        if !(v.is_finite() && v > 0.0) {
            return Err(format!("{what} must be > 0, got {t}"));
        }
        Ok(v)
    };
    let spec = StepSpec {
        start: num(a, "START")?,
        end: num(b, "END")?,
        step: num(c, "STEP")?,
    };
    if spec.end < spec.start {
        return Err(format!("END {} is below START {}", spec.end, spec.start));
    }
    if spec.rates().len() > MAX_STEPS {
        return Err(format!("more than {MAX_STEPS} steps"));
    }
    Ok(spec)
}

/// Parses `10s`, `500ms`, `250us`, `2m`, `1.5s`; a bare number is seconds.
fn parse_duration(s: &str) -> Result<Duration, String> {
    let t = s.trim();
    let split = t
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(t.len());
    let (num, unit) = t.split_at(split);
    let v: f64 = num
        .parse()
        .map_err(|_| format!("expected a duration like 10s or 500ms, got {s:?}"))?;
    let secs = match unit.trim() {
        "" | "s" => v,
        "ms" => v / 1e3,
        "us" | "µs" => v / 1e6,
        "m" | "min" => v * 60.0,
        other => return Err(format!("unknown duration unit {other:?} in {s:?}")),
    };
    if !secs.is_finite() || secs < 0.0 || secs > MAX_DURATION.as_secs_f64() {
        return Err(format!("duration must be between 0 and 1h, got {s:?}"));
    }
    Ok(Duration::from_secs_f64(secs))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::loadtest::testing::args;
    use clap::Parser;

    #[derive(Parser)]
    struct Cli {
        #[command(flatten)]
        args: Args,
    }

    fn parse(argv: &[&str]) -> Result<Args, String> {
        Cli::try_parse_from(std::iter::once("loadtest").chain(argv.iter().copied()))
            .map(|c| c.args)
            .map_err(|e| e.to_string())
    }

    #[test]
    fn durations_and_steps_parse() {
        assert_eq!(parse_duration("10s"), Ok(Duration::from_secs(10)));
        assert_eq!(parse_duration("500ms"), Ok(Duration::from_millis(500)));
        assert_eq!(parse_duration("1.5"), Ok(Duration::from_millis(1500)));
        assert_eq!(parse_duration("2m"), Ok(Duration::from_secs(120)));
        assert_eq!(parse_duration("250us"), Ok(Duration::from_micros(250)));
        assert!(parse_duration("10x").is_err());
        assert!(parse_duration("-1s").is_err());
        assert!(parse_duration("2h").is_err());
        let s = parse_step("100:1000:300").unwrap();
        assert_eq!(s.rates(), vec![100.0, 400.0, 700.0, 1000.0]);
        assert_eq!(
            parse_step("0.5:1:0.25").unwrap().rates(),
            vec![0.5, 0.75, 1.0]
        );
        assert!(parse_step("100:50:10").unwrap_err().contains("below"));
        assert!(parse_step("1:2").is_err());
        assert!(parse_step("1:2:0").is_err());
        assert!(parse_step("1:100000:1").unwrap_err().contains("steps"));
    }

    #[test]
    fn flags_have_their_documented_defaults_and_aliases() {
        let a = parse(&["--url", "http://127.0.0.1:9/"]).unwrap();
        assert_eq!(a.url, ["http://127.0.0.1:9/"]);
        assert_eq!((a.method, a.body, a.step), (None, None, None));
        assert_eq!(a.rate, 100.0);
        assert_eq!(a.duration, Duration::from_secs(10));
        assert_eq!(a.warmup, Duration::from_secs(2));
        assert_eq!(a.p99_limit, Duration::from_millis(10));
        assert_eq!((a.knee_confirm, a.connections), (1, 64));
        assert_eq!(a.timeout, Duration::from_secs(5));
        assert!(!a.no_stop_at_knee && !a.json && a.latency_log.is_none());
        assert_eq!(a.clock, Clock::Auto);

        let a = parse(&[
            "--url",
            "http://a/",
            "--url",
            "http://b/",
            "-X",
            "put",
            "-H",
            "a: 1",
            "-H",
            "b:2",
            "--concurrency",
            "3",
            "--step",
            "10:30:10",
            "--clock",
            "thread",
            "--timeout",
            "250ms",
        ])
        .unwrap();
        assert_eq!(a.url.len(), 2);
        assert_eq!(a.method.as_deref(), Some("put"));
        assert_eq!(a.headers, ["a: 1", "b:2"]);
        assert_eq!(a.connections, 3);
        assert_eq!(a.step.unwrap().rates(), [10.0, 20.0, 30.0]);
        assert_eq!(a.clock, Clock::Thread);
        assert_eq!(a.timeout, Duration::from_millis(250));
    }

    #[test]
    fn bad_flag_values_name_the_flag() {
        assert!(parse(&[]).unwrap_err().contains("--url"));
        for (argv, needle) in [
            (["--duration", "3x"], "unknown duration unit"),
            (["--warmup", "61m"], "between 0 and 1h"),
            (["--step", "1:2"], "START:END:STEP"),
            (["--clock", "sundial"], "sundial"),
        ] {
            let e = parse(&[&["--url", "http://a/"], &argv[..]].concat()).unwrap_err();
            assert!(e.contains(argv[0]) && e.contains(needle), "{argv:?}: {e}");
        }
    }

    #[test]
    fn bad_flags_are_refused_with_a_message() {
        let base = || args("http://127.0.0.1:9/".into());
        let cases: Vec<(Args, &str)> = vec![
            (args("https://127.0.0.1/".into()), "http://"),
            (args("http:///x".into()), "no host"),
            (
                Args {
                    url: vec!["http://127.0.0.1:9/".into(), "ftp://127.0.0.1/".into()],
                    ..base()
                },
                "\"ftp://127.0.0.1/\"",
            ),
            (
                Args {
                    url: vec!["http://127.0.0.1:9/".into(); 17],
                    ..base()
                },
                "at most 16 targets",
            ),
            (
                Args {
                    url: vec!["http://127.0.0.1:9/".into(); 2],
                    rate: 150_000.0,
                    ..base()
                },
                "per target (2 target(s))",
            ),
            (
                Args {
                    rate: 0.0,
                    ..base()
                },
                "rate",
            ),
            (
                Args {
                    connections: 0,
                    ..base()
                },
                "--connections",
            ),
            (
                Args {
                    knee_confirm: 0,
                    ..base()
                },
                "--knee-confirm",
            ),
            (
                Args {
                    duration: Duration::ZERO,
                    ..base()
                },
                "--duration",
            ),
            (
                Args {
                    timeout: Duration::ZERO,
                    ..base()
                },
                "--timeout",
            ),
            (
                Args {
                    headers: vec!["novalue".into()],
                    ..base()
                },
                "NAME:VALUE",
            ),
            (
                Args {
                    headers: vec!["bad name: 1".into()],
                    ..base()
                },
                "--header name",
            ),
            (
                Args {
                    body: Some("/nonexistent/body.json".into()),
                    ..base()
                },
                "--body",
            ),
            (
                Args {
                    rate: 100_000.0,
                    duration: Duration::from_secs(3600),
                    ..base()
                },
                "more than",
            ),
            (
                Args {
                    method: Some("GE T".into()),
                    ..base()
                },
                "--method",
            ),
        ];
        for (a, needle) in cases {
            let e = plan(&a).unwrap_err().to_string();
            assert!(e.contains(needle), "{needle}: {e}");
        }
    }

    #[test]
    fn a_ramp_is_one_rate_per_step_and_a_constant_rate_is_one_step() {
        let mut a = args("http://127.0.0.1:9/".into());
        a.rate = 42.0;
        assert_eq!(plan(&a).unwrap().rates, [42.0]);
        a.step = Some(parse_step("100:300:100").unwrap());
        assert_eq!(plan(&a).unwrap().rates, [100.0, 200.0, 300.0]);
        assert_eq!(Plan::count(300.0, Duration::from_millis(500)), 150);
    }
}

//! `decider loadtest`: an open-loop HTTP/1.1 load generator for the Worker.
//!
//! Requests are *scheduled* at a constant arrival rate (request `i` at `start + i / rate`)
//! by a precise clock ([`ticker`]: a timerfd in the runtime's event loop on Linux, else a
//! timer thread), independently of how fast the target answers, and each request's latency
//! is measured from its scheduled send time, not from when a connection became free. A
//! stalled target therefore shows up as the queueing delay its users would see instead of
//! being hidden by a generator that politely waits (coordinated omission). How late the
//! generator itself started each request is reported too (the send lag).
//!
//! Latencies go into an HdrHistogram (1 µs .. 1 h, 3 significant digits). Responses are
//! counted by status class and by the `x-decision-source` header; failures by kind
//! (`connect`, `timeout`, `io`, `status_4xx`, `status_5xx`). `--step START:END:STEP` runs one
//! measurement per rate and reports the knee: the first step whose p99 exceeds
//! `--p99-limit` or that saw any error.
//!
//! `--url` may be given several times to load several targets in one schedule: each gets
//! `--rate`, and their requests take turns (the order rotates every round, so no target is
//! always first). A stall of the machine then falls on every target alike, which makes their
//! latencies comparable even where the machine is too noisy for separate runs to be. Each
//! target has its own connections, histogram and knee.
//!
//! Everything is bounded: at most `rate × duration` requests per step (plus warmup), every
//! request ends by its scheduled time + `--timeout`, and at most `--connections` sockets
//! are open at once.

use anyhow::{bail, Context as _};
use hdrhistogram::Histogram;
use http_body_util::{BodyExt as _, Full};
use hyper::body::Bytes;
use hyper::client::conn::http1::{self, SendRequest};
use hyper::{HeaderMap, Method, Request};
use hyper_util::rt::TokioIo;
use indicatif::{ProgressBar, ProgressStyle};
use serde::Serialize;
use std::collections::BTreeMap;
use std::io::IsTerminal as _;
use std::io::Write;
use std::net::{SocketAddr, ToSocketAddrs as _};
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};
use ticker::{Clock, Schedule, Ticker};
use tokio::sync::Semaphore;

mod ticker;

/// Header whose values are counted per response (DESIGN §7).
pub const SOURCE_HEADER: &str = "x-decision-source";

/// Largest accepted arrival rate, requests per second.
const MAX_RATE: f64 = 200_000.0;
/// Longest accepted duration (each of `--duration`, `--warmup`, `--timeout`).
const MAX_DURATION: Duration = Duration::from_secs(3600);
/// Largest accepted number of requests in one run (all steps and warmup together).
const MAX_REQUESTS: u64 = 50_000_000;
/// Largest accepted number of steps.
const MAX_STEPS: usize = 1000;
/// Largest accepted number of `--url` targets.
const MAX_TARGETS: usize = 16;

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

/// Flags of `decider loadtest`.
#[derive(Debug, Clone, clap::Args)]
#[command(after_help = EXAMPLES)]
pub struct LoadtestArgs {
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
        let n = ((self.end - self.start) / self.step + 1e-9).floor() as usize + 1;
        (0..n).map(|i| self.start + i as f64 * self.step).collect()
    }
}

/// Parses `START:END:STEP` (requests per second).
fn parse_step(s: &str) -> Result<StepSpec, String> {
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

/// Where requests go: one `--url`, resolved.
#[derive(Debug, Clone)]
struct Target {
    url: String,
    addr: SocketAddr,
    authority: String,
    path: String,
}

impl Target {
    fn parse(url: &str) -> anyhow::Result<Target> {
        let Some(rest) = url.strip_prefix("http://") else {
            bail!("--url must start with http:// (got {url:?})");
        };
        let (authority, path) = match rest.find('/') {
            Some(i) => (&rest[..i], &rest[i..]),
            None => (rest, "/"),
        };
        if authority.is_empty() {
            bail!("--url has no host: {url:?}");
        }
        let with_port = if authority
            .rsplit_once(':')
            .is_some_and(|(_, p)| !p.is_empty() && p.chars().all(|c| c.is_ascii_digit()))
        {
            authority.to_string()
        } else {
            format!("{authority}:80")
        };
        let addr = with_port
            .to_socket_addrs()
            .with_context(|| format!("cannot resolve {authority:?}"))?
            .next()
            .with_context(|| format!("{authority:?} resolves to no address"))?;
        Ok(Target {
            url: url.to_string(),
            addr,
            authority: authority.to_string(),
            path: path.to_string(),
        })
    }
}

/// The validated request and schedule.
#[derive(Debug, Clone)]
struct Plan {
    targets: Vec<Target>,
    method: Method,
    headers: HeaderMap,
    body: Bytes,
    rates: Vec<f64>,
    duration: Duration,
    warmup: Duration,
    p99_limit: Duration,
    stop_at_knee: bool,
    knee_confirm: usize,
    connections: usize,
    timeout: Duration,
    latency_log: Option<PathBuf>,
    clock: Clock,
}

impl Plan {
    fn from_args(a: &LoadtestArgs) -> anyhow::Result<Plan> {
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

    fn count(rate: f64, d: Duration) -> u64 {
        (rate * d.as_secs_f64()).round() as u64
    }
}

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
    /// `send_lag.max_us` (0 when nothing was sent); kept for earlier readers of the JSON.
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

fn single(t: &[TargetReport]) -> bool {
    t.len() <= 1
}

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
fn knee_in(steps: &[StepReport], limit: Duration, confirm: usize, ramp_done: bool) -> Option<Knee> {
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

/// Runs the load test and prints the report (table, or JSON with `--json`).
///
/// # Errors
/// Invalid flags, an unreadable body file, an unresolvable host, or a runtime that cannot start.
/// Failed requests are not errors: they are counted in the report.
pub fn run(args: &LoadtestArgs) -> anyhow::Result<()> {
    let plan = Plan::from_args(args)?;
    let report = execute(&plan)?;
    if args.json {
        println!("{}", serde_json::to_string(&report)?);
    } else {
        print!("{}", render_table(&report));
    }
    Ok(())
}

/// Runs the plan on a single-threaded runtime (the target gets the other cores).
fn execute(plan: &Plan) -> anyhow::Result<Report> {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .context("cannot start the async runtime")?;
    let total: u64 = (Plan::count(plan.rates[0], plan.warmup)
        + plan
            .rates
            .iter()
            .map(|r| Plan::count(*r, plan.duration))
            .sum::<u64>())
        * plan.targets.len() as u64;
    let bar = if std::io::stderr().is_terminal() {
        let b = ProgressBar::new(total);
        b.set_style(
            ProgressStyle::with_template(
                "{spinner} [{elapsed_precise}] {bar:40} {pos}/{len} requests  {msg}",
            )
            .unwrap_or_else(|_| ProgressStyle::default_bar()),
        );
        b
    } else {
        ProgressBar::hidden()
    };
    let log_error = |p: &std::path::Path| format!("cannot write --latency-log {}", p.display());
    // Opened (and truncated) before any load, so a bad path fails the run at once.
    let mut log = match &plan.latency_log {
        Some(p) => {
            let f = std::fs::File::create(p).with_context(|| log_error(p))?;
            let mut w = std::io::BufWriter::new(f);
            writeln!(w, "{LATENCY_LOG_HEADER}").with_context(|| log_error(p))?;
            Some(w)
        }
        None => None,
    };
    let clients: Vec<Arc<Client>> = (0..plan.targets.len())
        .map(|t| Arc::new(Client::new(plan, t)))
        .collect();
    let mut steps: Vec<Vec<StepReport>> = vec![Vec::new(); clients.len()];
    rt.block_on(async {
        if !plan.warmup.is_zero() {
            bar.set_message(format!("warmup at {}/s", plan.rates[0]));
            run_step(&clients, plan.rates[0], plan.warmup, &bar, false).await;
        }
        for &rate in &plan.rates {
            bar.set_message(format!("{rate}/s"));
            let (reports, records) =
                run_step(&clients, rate, plan.duration, &bar, log.is_some()).await;
            if let Some(w) = log.as_mut() {
                write_records(w, rate, records)?;
            }
            for (mine, s) in steps.iter_mut().zip(reports) {
                mine.push(s);
            }
            // A ramp stops once every target has its knee.
            if plan.stop_at_knee
                && plan.rates.len() > 1
                && steps
                    .iter()
                    .all(|s| knee_in(s, plan.p99_limit, plan.knee_confirm, false).is_some())
            {
                break;
            }
        }
        anyhow::Ok(())
    })?;
    bar.finish_and_clear();
    if let (Some(mut w), Some(p)) = (log, &plan.latency_log) {
        w.flush().with_context(|| log_error(p))?;
    }
    let targets: Vec<TargetReport> = plan
        .targets
        .iter()
        .zip(steps)
        .map(|(t, steps)| TargetReport {
            url: t.url.clone(),
            knee: find_knee(&steps, plan.p99_limit, plan.knee_confirm),
            steps,
        })
        .collect();
    let first = targets[0].clone();
    Ok(Report {
        url: first.url,
        method: plan.method.to_string(),
        connections: plan.connections,
        warmup_s: plan.warmup.as_secs_f64(),
        duration_s: plan.duration.as_secs_f64(),
        timeout_ms: plan.timeout.as_secs_f64() * 1e3,
        clock: plan.clock,
        p99_limit_us: plan.p99_limit.as_micros() as u64,
        steps: first.steps,
        knee: first.knee,
        targets,
    })
}

/// What became of one request.
#[derive(Debug)]
enum Outcome {
    Response { status: u16, source: Option<String> },
    Failed(&'static str),
}

/// A small HTTP/1.1 connection pool for one target: idle connections are reused most-recent
/// first, new ones are opened on demand up to the cap, and a request waits for a permit
/// otherwise.
struct Client {
    plan: Plan,
    target: Target,
    permits: Semaphore,
    idle: Mutex<Vec<SendRequest<Full<Bytes>>>>,
}

impl Client {
    fn new(plan: &Plan, target: usize) -> Client {
        Client {
            plan: plan.clone(),
            target: plan.targets[target].clone(),
            permits: Semaphore::new(plan.connections),
            idle: Mutex::new(Vec::new()),
        }
    }

    fn take_idle(&self) -> Option<SendRequest<Full<Bytes>>> {
        let mut idle = self.idle.lock().unwrap_or_else(|e| e.into_inner());
        while let Some(c) = idle.pop() {
            if !c.is_closed() {
                return Some(c);
            }
        }
        None
    }

    fn put_idle(&self, c: SendRequest<Full<Bytes>>) {
        if !c.is_closed() {
            self.idle.lock().unwrap_or_else(|e| e.into_inner()).push(c);
        }
    }

    async fn connect(&self) -> Result<SendRequest<Full<Bytes>>, &'static str> {
        let stream = tokio::net::TcpStream::connect(self.target.addr)
            .await
            .map_err(|_| "connect")?;
        let _ = stream.set_nodelay(true);
        let (sender, conn) = http1::handshake(TokioIo::new(stream))
            .await
            .map_err(|_| "connect")?;
        tokio::spawn(async move {
            let _ = conn.await;
        });
        Ok(sender)
    }

    fn request(&self) -> Request<Full<Bytes>> {
        let mut req = Request::new(Full::new(self.plan.body.clone()));
        *req.method_mut() = self.plan.method.clone();
        *req.uri_mut() = self.target.path.parse().unwrap_or_default();
        let h = req.headers_mut();
        h.clone_from(&self.plan.headers);
        if !h.contains_key(hyper::header::HOST) {
            if let Ok(v) = hyper::header::HeaderValue::from_str(&self.target.authority) {
                h.insert(hyper::header::HOST, v);
            }
        }
        req
    }

    /// Sends one request and reads the whole response body.
    async fn send(&self) -> Outcome {
        let Ok(_permit) = self.permits.acquire().await else {
            return Outcome::Failed("io");
        };
        let mut reused = self.take_idle();
        loop {
            let was_reused = reused.is_some();
            let mut conn = match reused.take() {
                Some(c) => c,
                None => match self.connect().await {
                    Ok(c) => c,
                    Err(k) => return Outcome::Failed(k),
                },
            };
            let sent = match conn.ready().await {
                Ok(()) => conn.send_request(self.request()).await,
                Err(e) => Err(e),
            };
            let resp = match sent {
                Ok(r) => r,
                // A kept-alive connection the server closed or reset before answering (the
                // idle keep-alive race): send the request again on a fresh connection, once,
                // as HTTP clients do. Failures on a fresh connection count.
                Err(e) if was_reused && stale_connection(&e) => continue,
                Err(_) => return Outcome::Failed("io"),
            };
            let status = resp.status().as_u16();
            let source = resp
                .headers()
                .get(SOURCE_HEADER)
                .map(|v| String::from_utf8_lossy(v.as_bytes()).into_owned());
            if resp.into_body().collect().await.is_err() {
                return Outcome::Failed("io");
            }
            self.put_idle(conn);
            return Outcome::Response { status, source };
        }
    }
}

/// Whether a send error means the reused connection was already dead: closed, cancelled
/// before the request went out, or reset by the server before any answer.
fn stale_connection(e: &hyper::Error) -> bool {
    use std::error::Error as _;
    let reset = e
        .source()
        .and_then(|s| s.downcast_ref::<std::io::Error>())
        .is_some_and(|io| {
            matches!(
                io.kind(),
                std::io::ErrorKind::ConnectionReset | std::io::ErrorKind::BrokenPipe
            )
        });
    e.is_canceled() || e.is_closed() || e.is_incomplete_message() || reset
}

/// Results of one step, filled in by the request tasks.
struct Tally {
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

/// Runs `rate` requests/s to each target for `d`; returns each target's measurement, in
/// target order.
///
/// With `k` targets the schedule sends every `1 / (k × rate)`: round `c` sends one request to
/// each target, starting with target `c mod k`, so each target gets exactly `rate × d`
/// requests and no target is always first. With `record`, every request's [`Record`] is
/// returned too, in the order they finished.
async fn run_step(
    clients: &[Arc<Client>],
    rate: f64,
    d: Duration,
    bar: &ProgressBar,
    record: bool,
) -> (Vec<StepReport>, Vec<Record>) {
    let k = clients.len();
    let n = Plan::count(rate, d);
    let tallies: Arc<Vec<Mutex<Tally>>> = Arc::new(
        (0..k)
            .map(|_| {
                Mutex::new(Tally {
                    hist: micros_histogram(),
                    lag: micros_histogram(),
                    responses: 0,
                    ok: 0,
                    errors: BTreeMap::new(),
                    sources: BTreeMap::new(),
                    last_done: None,
                })
            })
            .collect(),
    );
    let interval = Duration::from_secs_f64(1.0 / (rate * k as f64));
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
            let mut t = tallies[target].lock().unwrap_or_else(|e| e.into_inner());
            t.lag.saturating_record(lag.as_micros() as u64);
            t.last_done = Some(t.last_done.map_or(done, |l| l.max(done)));
            match outcome {
                Outcome::Response { status, source } => {
                    t.responses += 1;
                    t.hist.saturating_record(us.max(1));
                    let src = source.unwrap_or_else(|| "(none)".to_string());
                    *t.sources.entry(src).or_default() += 1;
                    match status {
                        100..=399 => t.ok += 1,
                        400..=499 => *t.errors.entry("status_4xx".into()).or_default() += 1,
                        _ => *t.errors.entry("status_5xx".into()).or_default() += 1,
                    }
                }
                Outcome::Failed(kind) => *t.errors.entry(kind.into()).or_default() += 1,
            }
            bar.inc(1);
        });
        // Reap finished tasks as we go so the set stays as small as the backlog.
        while tasks.try_join_next().is_some() {}
    }
    while tasks.join_next().await.is_some() {}
    let reports = tallies
        .iter()
        .map(|t| {
            let t = t.lock().unwrap_or_else(|e| e.into_inner());
            step_report(&t, rate, n, d, start)
        })
        .collect();
    let records = records.map_or_else(Vec::new, |r| {
        std::mem::take(&mut *r.lock().unwrap_or_else(|e| e.into_inner()))
    });
    (reports, records)
}

/// The first line of a `--latency-log` file.
const LATENCY_LOG_HEADER: &str = "target,rate,scheduled_unix_us,latency_us,outcome";

/// One measured request, for `--latency-log`.
#[derive(Debug, Clone, Copy)]
struct Record {
    /// Index of its target, in `--url` order.
    target: usize,
    /// When it was scheduled to be sent, µs since the Unix epoch.
    scheduled_unix_us: u64,
    /// From its scheduled send time to the end of the response body (or the failure), µs.
    latency_us: u64,
    outcome: RecordOutcome,
}

/// How a logged request ended.
#[derive(Debug, Clone, Copy)]
enum RecordOutcome {
    Status(u16),
    Failed(&'static str),
}

impl std::fmt::Display for RecordOutcome {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            RecordOutcome::Status(s) => write!(f, "{s}"),
            RecordOutcome::Failed(kind) => f.write_str(kind),
        }
    }
}

/// Appends one step's records, in schedule order, as CSV rows.
fn write_records(w: &mut impl Write, rate: f64, mut records: Vec<Record>) -> anyhow::Result<()> {
    records.sort_by_key(|r| (r.scheduled_unix_us, r.target));
    for r in &records {
        writeln!(
            w,
            "{},{rate},{},{},{}",
            r.target, r.scheduled_unix_us, r.latency_us, r.outcome
        )
        .context("cannot write --latency-log")?;
    }
    Ok(())
}

/// One target's step measurement from its tally.
fn step_report(t: &Tally, rate: f64, n: u64, d: Duration, start: Instant) -> StepReport {
    let window = t
        .last_done
        .map_or(d, |l| l.saturating_duration_since(start))
        .max(d);
    let latency = (!t.hist.is_empty()).then(|| Latency {
        p50_us: t.hist.value_at_quantile(0.50),
        p90_us: t.hist.value_at_quantile(0.90),
        p99_us: t.hist.value_at_quantile(0.99),
        p999_us: t.hist.value_at_quantile(0.999),
        max_us: t.hist.max(),
        mean_us: t.hist.mean(),
    });
    let failed: u64 = t.errors.values().sum();
    StepReport {
        target_rate: rate,
        sent: n,
        responses: t.responses,
        ok: t.ok,
        achieved_rate: t.responses as f64 / window.as_secs_f64(),
        latency,
        errors: t.errors.clone(),
        error_rate: if n == 0 {
            0.0
        } else {
            failed as f64 / n as f64
        },
        sources: t.sources.clone(),
        send_lag: (!t.lag.is_empty()).then(|| SendLag {
            p50_us: t.lag.value_at_quantile(0.50),
            p99_us: t.lag.value_at_quantile(0.99),
            max_us: t.lag.max(),
        }),
        max_send_lag_us: t.lag.max(),
    }
}

fn fmt_ms(us: u64) -> String {
    format!("{:.3} ms", us as f64 / 1e3)
}

fn clock_name(c: Clock) -> &'static str {
    match c {
        Clock::Timerfd => "timerfd",
        Clock::Thread => "timer thread",
        Clock::Auto => "auto",
    }
}

/// The human-readable report.
pub fn render_table(r: &Report) -> String {
    use std::fmt::Write as _;
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
    use std::fmt::Write as _;
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
    //! These tests start loopback HTTP servers on 127.0.0.1 and send at most a few hundred
    //! requests each.
    use super::*;
    use std::sync::atomic::{AtomicU64, Ordering};
    use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};

    /// How the test server answers request number `n` (0-based, across connections).
    type Behaviour = fn(u64) -> (u16, Duration, Option<&'static str>);

    /// A keep-alive HTTP/1.1 server on 127.0.0.1 that answers per `behaviour`. It runs on
    /// its own thread and runtime for the life of the test process.
    fn server(behaviour: Behaviour) -> SocketAddr {
        server_with(behaviour, false)
    }

    /// As [`server`]; with `close`, the server answers one request per connection and closes
    /// it, unannounced (no `connection: close`), when the next request arrives on it.
    fn server_with(behaviour: Behaviour, close: bool) -> SocketAddr {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = listener.local_addr().unwrap();
        listener.set_nonblocking(true).unwrap();
        std::thread::spawn(move || {
            let rt = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .unwrap();
            rt.block_on(async move {
                let listener = tokio::net::TcpListener::from_std(listener).unwrap();
                let counter = Arc::new(AtomicU64::new(0));
                loop {
                    let Ok((mut sock, _)) = listener.accept().await else {
                        return;
                    };
                    let counter = Arc::clone(&counter);
                    tokio::spawn(async move {
                        let mut buf = Vec::new();
                        let mut served = 0u32;
                        loop {
                            // Read one request: headers, then content-length bytes.
                            let head_end = loop {
                                if let Some(i) = find(&buf, b"\r\n\r\n") {
                                    break i + 4;
                                }
                                let mut chunk = [0u8; 4096];
                                match sock.read(&mut chunk).await {
                                    Ok(0) | Err(_) => return,
                                    Ok(k) => buf.extend_from_slice(&chunk[..k]),
                                }
                            };
                            let head = String::from_utf8_lossy(&buf[..head_end]).to_lowercase();
                            let len: usize = head
                                .lines()
                                .find_map(|l| l.strip_prefix("content-length:"))
                                .map_or(0, |v| v.trim().parse().unwrap());
                            while buf.len() < head_end + len {
                                let mut chunk = [0u8; 4096];
                                match sock.read(&mut chunk).await {
                                    Ok(0) | Err(_) => return,
                                    Ok(k) => buf.extend_from_slice(&chunk[..k]),
                                }
                            }
                            buf.drain(..head_end + len);
                            if close && served > 0 {
                                // The idle keep-alive race: the next request arrives as the
                                // server gives up on the connection.
                                return;
                            }
                            let n = counter.fetch_add(1, Ordering::SeqCst);
                            let (status, delay, source) = behaviour(n);
                            tokio::time::sleep(delay).await;
                            let src = source
                                .map_or(String::new(), |s| format!("{SOURCE_HEADER}: {s}\r\n"));
                            let resp =
                                format!("HTTP/1.1 {status} X\r\ncontent-length: 2\r\n{src}\r\nok");
                            if sock.write_all(resp.as_bytes()).await.is_err() {
                                return;
                            }
                            served += 1;
                        }
                    });
                }
            });
        });
        addr
    }

    fn find(hay: &[u8], needle: &[u8]) -> Option<usize> {
        hay.windows(needle.len()).position(|w| w == needle)
    }

    fn args(url: String) -> LoadtestArgs {
        LoadtestArgs {
            url: vec![url],
            method: None,
            body: None,
            headers: vec![],
            rate: 200.0,
            duration: Duration::from_millis(500),
            warmup: Duration::ZERO,
            step: None,
            // Generous: tests that expect no knee must not trip over a loaded test machine.
            p99_limit: Duration::from_secs(1),
            no_stop_at_knee: false,
            knee_confirm: 1,
            connections: 16,
            timeout: Duration::from_secs(2),
            json: false,
            latency_log: None,
            clock: Clock::Auto,
        }
    }

    fn report(a: &LoadtestArgs) -> Report {
        execute(&Plan::from_args(a).unwrap()).unwrap()
    }

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
        // One target: no `targets` field, as before.
        let one = serde_json::to_value(report(&args(urls[0].clone()))).unwrap();
        assert!(one.get("targets").is_none());
    }

    #[test]
    fn the_latency_log_has_every_measured_request_on_its_schedule() {
        fn fast(_: u64) -> (u16, Duration, Option<&'static str>) {
            (200, Duration::ZERO, Some("model"))
        }
        fn slow_failing(_: u64) -> (u16, Duration, Option<&'static str>) {
            (503, Duration::from_millis(30), None)
        }
        let dir = std::env::temp_dir().join(format!("loadtest-log-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("latency.csv");
        let urls = [server(fast), server(slow_failing)].map(|a| format!("http://{a}/x"));
        let mut a = args(urls[0].clone());
        a.url = urls.to_vec();
        a.step = Some(StepSpec {
            start: 50.0,
            end: 100.0,
            step: 50.0,
        });
        a.duration = Duration::from_millis(400);
        a.warmup = Duration::from_millis(100);
        a.no_stop_at_knee = true;
        a.latency_log = Some(path.clone());
        let before = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .unwrap()
            .as_micros() as u64;
        let r = report(&a);
        let after = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .unwrap()
            .as_micros() as u64;
        let text = std::fs::read_to_string(&path).unwrap();
        let mut lines = text.lines();
        assert_eq!(lines.next(), Some(LATENCY_LOG_HEADER));
        let rows: Vec<Vec<&str>> = lines.map(|l| l.split(',').collect()).collect();
        // The warmup is not written: 20 + 40 requests per target, in the two steps.
        assert_eq!(rows.len(), 2 * (20 + 40), "{text}");
        for (target, rate, n, outcome) in [
            (0, 50, 20, "200"),
            (0, 100, 40, "200"),
            (1, 50, 20, "503"),
            (1, 100, 40, "503"),
        ] {
            let mine: Vec<&Vec<&str>> = rows
                .iter()
                .filter(|c| c[0] == target.to_string() && c[1] == rate.to_string())
                .collect();
            assert_eq!(mine.len(), n, "target {target} at {rate}/s");
            assert!(mine.iter().all(|c| c[4] == outcome), "{mine:?}");
            // Scheduled times are the schedule's, on the wall clock of the run: the turn order
            // rotates each round, so a target's requests come two per 2/rate.
            let at: Vec<u64> = mine.iter().map(|c| c[2].parse().unwrap()).collect();
            assert!(at.iter().all(|t| (before..=after).contains(t)), "{at:?}");
            let gap = 2_000_000 / rate as u64;
            assert!(
                at.windows(3)
                    .all(|w| w[2] - w[0] >= gap - 2 && w[2] - w[0] <= gap + 2),
                "{at:?}"
            );
            let lat: Vec<u64> = mine.iter().map(|c| c[3].parse().unwrap()).collect();
            if target == 1 {
                assert!(lat.iter().all(|l| *l >= 30_000), "{lat:?}");
            }
        }
        // The log agrees with the report: the same count and the same slowest request.
        let max0 = rows
            .iter()
            .filter(|c| c[0] == "0" && c[1] == "100")
            .map(|c| c[3].parse::<u64>().unwrap())
            .max()
            .unwrap();
        let step = &r.targets[0].steps[1];
        assert_eq!(step.responses, 40);
        let reported = step.latency.unwrap().max_us;
        assert!(
            max0.abs_diff(reported) <= reported / 500 + 1,
            "log {max0} vs histogram {reported}"
        );
        // Rows are in schedule order.
        let all: Vec<u64> = rows.iter().map(|c| c[2].parse().unwrap()).collect();
        assert!(all.windows(2).all(|w| w[0] <= w[1]));

        // A path that cannot be written fails the run before any load.
        let mut bad = args(urls[0].clone());
        bad.latency_log = Some(dir.join("no-such-dir").join("x.csv"));
        let err = execute(&Plan::from_args(&bad).unwrap()).unwrap_err();
        assert!(
            format!("{err:#}").contains("cannot write --latency-log"),
            "{err:#}"
        );
        std::fs::remove_dir_all(&dir).unwrap();
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

    #[test]
    fn errors_are_counted_by_kind() {
        fn five_hundred(n: u64) -> (u16, Duration, Option<&'static str>) {
            (
                if n.is_multiple_of(2) { 503 } else { 404 },
                Duration::ZERO,
                None,
            )
        }
        fn stall(_: u64) -> (u16, Duration, Option<&'static str>) {
            (200, Duration::from_secs(3), None)
        }
        let mut a = args(format!("http://{}/", server(five_hundred)));
        a.rate = 100.0;
        let s = report(&a).steps.remove(0);
        assert_eq!(s.sent, 50);
        assert_eq!(s.errors["status_5xx"] + s.errors["status_4xx"], 50);
        assert!(s.errors["status_5xx"] >= 20 && s.errors["status_4xx"] >= 20);
        assert_eq!(s.ok, 0);
        assert!((s.error_rate - 1.0).abs() < 1e-12);

        let mut a = args(format!("http://{}/", server(stall)));
        a.rate = 40.0;
        a.timeout = Duration::from_millis(100);
        let t0 = Instant::now();
        let s = report(&a).steps.remove(0);
        assert_eq!(s.errors.get("timeout"), Some(&20));
        assert_eq!(s.responses, 0);
        assert!(
            t0.elapsed() < Duration::from_secs(2),
            "timeouts must bound the run"
        );

        // Nothing listens on a port we just released.
        let port = {
            let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
            l.local_addr().unwrap().port()
        };
        let mut a = args(format!("http://127.0.0.1:{port}/"));
        a.rate = 40.0;
        let r = report(&a);
        assert_eq!(r.steps[0].errors.get("connect"), Some(&20));
        assert!(r.knee.unwrap().reason.contains("connect 20"));
    }

    #[test]
    fn connections_closed_by_the_server_are_replaced_not_counted_as_errors() {
        fn b(_: u64) -> (u16, Duration, Option<&'static str>) {
            (200, Duration::ZERO, Some("model"))
        }
        let mut a = args(format!("http://{}/", server_with(b, true)));
        a.connections = 2;
        let s = report(&a).steps.remove(0);
        assert_eq!(
            (s.sent, s.ok, s.error_count()),
            (100, 100, 0),
            "{:?}",
            s.errors
        );
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
    }

    #[test]
    fn body_method_and_headers_are_sent() {
        // A server that checks what it receives would need more plumbing than this test is
        // worth; instead check the request the client builds.
        let dir = std::env::temp_dir().join(format!("loadtest-body-{}", std::process::id()));
        std::fs::write(&dir, br#"{"state":{}}"#).unwrap();
        let mut a = args("http://127.0.0.1:9/v1/decide".into());
        a.body = Some(dir.clone());
        a.headers = vec!["x-test: 1".into(), "X-Test:2".into()];
        let plan = Plan::from_args(&a).unwrap();
        let req = Client::new(&plan, 0).request();
        assert_eq!(req.method(), Method::POST);
        assert_eq!(req.uri(), "/v1/decide");
        assert_eq!(req.headers()["content-type"], "application/json");
        assert_eq!(req.headers()["host"], "127.0.0.1:9");
        assert_eq!(req.headers().get_all("x-test").iter().count(), 2);
        assert_eq!(plan.body.as_ref(), br#"{"state":{}}"#);
        a.method = Some("put".into());
        a.headers.push("content-type: text/plain".into());
        let plan = Plan::from_args(&a).unwrap();
        let req = Client::new(&plan, 0).request();
        assert_eq!(req.method(), Method::PUT);
        assert_eq!(req.headers()["content-type"], "text/plain");
        std::fs::remove_file(dir).unwrap();
    }

    #[test]
    fn bad_flags_are_refused_with_a_message() {
        let base = || args("http://127.0.0.1:9/".into());
        let cases: Vec<(LoadtestArgs, &str)> = vec![
            (args("https://127.0.0.1/".into()), "http://"),
            (args("http:///x".into()), "no host"),
            (
                LoadtestArgs {
                    url: vec!["http://127.0.0.1:9/".into(), "ftp://127.0.0.1/".into()],
                    ..base()
                },
                "\"ftp://127.0.0.1/\"",
            ),
            (
                LoadtestArgs {
                    url: vec!["http://127.0.0.1:9/".into(); 17],
                    ..base()
                },
                "at most 16 targets",
            ),
            (
                LoadtestArgs {
                    url: vec!["http://127.0.0.1:9/".into(); 2],
                    rate: 150_000.0,
                    ..base()
                },
                "per target (2 target(s))",
            ),
            (
                LoadtestArgs {
                    rate: 0.0,
                    ..base()
                },
                "rate",
            ),
            (
                LoadtestArgs {
                    connections: 0,
                    ..base()
                },
                "--connections",
            ),
            (
                LoadtestArgs {
                    headers: vec!["novalue".into()],
                    ..base()
                },
                "NAME:VALUE",
            ),
            (
                LoadtestArgs {
                    body: Some("/nonexistent/body.json".into()),
                    ..base()
                },
                "--body",
            ),
            (
                LoadtestArgs {
                    rate: 100_000.0,
                    duration: Duration::from_secs(3600),
                    ..base()
                },
                "more than",
            ),
            (
                LoadtestArgs {
                    method: Some("GE T".into()),
                    ..base()
                },
                "--method",
            ),
        ];
        for (a, needle) in cases {
            let e = Plan::from_args(&a).unwrap_err().to_string();
            assert!(e.contains(needle), "{needle}: {e}");
        }
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
    fn knee_is_the_first_step_over_the_limit_or_with_errors() {
        let step = |rate: f64, p99: u64, errors: &[(&str, u64)]| StepReport {
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
        };
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
    fn json_report_has_the_documented_fields() {
        fn b(_: u64) -> (u16, Duration, Option<&'static str>) {
            (200, Duration::ZERO, Some("model"))
        }
        let mut a = args(format!("http://{}/", server(b)));
        a.rate = 100.0;
        a.duration = Duration::from_millis(200);
        let v = serde_json::to_value(report(&a)).unwrap();
        for k in [
            "url",
            "method",
            "connections",
            "steps",
            "knee",
            "p99_limit_us",
        ] {
            assert!(v.get(k).is_some(), "{k}");
        }
        let s = &v["steps"][0];
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

//! The checked form of the flags: resolved targets, the request to send, and the schedule.

use super::args::{LoadtestArgs, MAX_RATE, MAX_REQUESTS, MAX_STEPS, MAX_TARGETS};
use super::ticker::Clock;
use anyhow::{bail, Context as _};
use hyper::body::Bytes;
use hyper::{HeaderMap, Method};
use std::net::{SocketAddr, ToSocketAddrs as _};
use std::path::PathBuf;
use std::time::Duration;

/// Where requests go: one `--url`, resolved.
#[derive(Debug, Clone)]
pub(super) struct Target {
    pub(super) url: String,
    pub(super) addr: SocketAddr,
    pub(super) authority: String,
    pub(super) path: String,
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
        // Resolved once, up front: a name lookup per connection would be measured as latency.
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
pub(super) struct Plan {
    pub(super) targets: Vec<Target>,
    pub(super) method: Method,
    pub(super) headers: HeaderMap,
    pub(super) body: Bytes,
    pub(super) rates: Vec<f64>,
    pub(super) duration: Duration,
    pub(super) warmup: Duration,
    pub(super) p99_limit: Duration,
    pub(super) stop_at_knee: bool,
    pub(super) knee_confirm: usize,
    pub(super) connections: usize,
    pub(super) timeout: Duration,
    pub(super) latency_log: Option<PathBuf>,
    pub(super) clock: Clock,
}

impl Plan {
    /// Checks the flags, reads the body file and resolves every target.
    ///
    /// # Errors
    /// A flag out of range (the message names it), an unreadable body file, or a host that
    /// does not resolve.
    pub(super) fn from_args(a: &LoadtestArgs) -> anyhow::Result<Plan> {
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

    /// Requests one target gets at `rate` for `d`.
    pub(super) fn count(rate: f64, d: Duration) -> u64 {
        (rate * d.as_secs_f64()).round() as u64
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::loadtest::testing::args;

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
                    knee_confirm: 0,
                    ..base()
                },
                "--knee-confirm",
            ),
            (
                LoadtestArgs {
                    duration: Duration::ZERO,
                    ..base()
                },
                "--duration",
            ),
            (
                LoadtestArgs {
                    timeout: Duration::ZERO,
                    ..base()
                },
                "--timeout",
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
                    headers: vec!["bad name: 1".into()],
                    ..base()
                },
                "--header name",
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
    fn a_url_is_split_into_address_authority_and_path() {
        let t = Target::parse("http://127.0.0.1:8787/v1/decide?x=1").unwrap();
        assert_eq!(t.addr, "127.0.0.1:8787".parse().unwrap());
        assert_eq!(
            (t.authority.as_str(), t.path.as_str()),
            ("127.0.0.1:8787", "/v1/decide?x=1")
        );
        // No port: HTTP's 80. No path: the root.
        let t = Target::parse("http://127.0.0.1").unwrap();
        assert_eq!(t.addr, "127.0.0.1:80".parse().unwrap());
        assert_eq!((t.authority.as_str(), t.path.as_str()), ("127.0.0.1", "/"));
    }

    #[test]
    fn a_ramp_is_one_rate_per_step_and_a_constant_rate_is_one_step() {
        let mut a = args("http://127.0.0.1:9/".into());
        a.rate = 42.0;
        assert_eq!(Plan::from_args(&a).unwrap().rates, [42.0]);
        a.step = Some(crate::loadtest::args::parse_step("100:300:100").unwrap());
        assert_eq!(Plan::from_args(&a).unwrap().rates, [100.0, 200.0, 300.0]);
        assert_eq!(Plan::count(300.0, Duration::from_millis(500)), 150);
    }
}

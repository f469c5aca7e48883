//! What a run does, checked: resolved targets, the request to send, and the schedule; and the
//! limits that bound every run.

use super::ticker::Clock;
use anyhow::{bail, Context as _};
use hyper::body::Bytes;
use hyper::{HeaderMap, Method};
use std::net::{SocketAddr, ToSocketAddrs as _};
use std::path::PathBuf;
use std::time::Duration;

/// Largest accepted arrival rate, requests per second.
pub(crate) const MAX_RATE: f64 = 200_000.0;
/// Longest accepted duration (each of `--duration`, `--warmup`, `--timeout`).
pub(crate) const MAX_DURATION: Duration = Duration::from_secs(3600);
/// Largest accepted number of requests in one run (all steps and warmup together).
pub(crate) const MAX_REQUESTS: u64 = 50_000_000;
/// Largest accepted number of steps.
pub(crate) const MAX_STEPS: usize = 1000;
/// Largest accepted number of `--url` targets.
pub(crate) const MAX_TARGETS: usize = 16;

/// Where requests go: one `--url`, resolved.
#[derive(Debug, Clone)]
pub(crate) struct Target {
    pub(crate) url: String,
    pub(crate) addr: SocketAddr,
    pub(crate) authority: String,
    pub(crate) path: String,
}

impl Target {
    /// Parses an `http://` URL and resolves its host, once.
    ///
    /// # Errors
    /// Another scheme, no host, or a host that does not resolve.
    pub(crate) fn parse(url: &str) -> anyhow::Result<Target> {
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
pub(crate) struct Plan {
    pub(crate) targets: Vec<Target>,
    pub(crate) method: Method,
    pub(crate) headers: HeaderMap,
    pub(crate) body: Bytes,
    pub(crate) rates: Vec<f64>,
    pub(crate) duration: Duration,
    pub(crate) warmup: Duration,
    pub(crate) p99_limit: Duration,
    pub(crate) stop_at_knee: bool,
    pub(crate) knee_confirm: usize,
    pub(crate) connections: usize,
    pub(crate) timeout: Duration,
    pub(crate) latency_log: Option<PathBuf>,
    pub(crate) clock: Clock,
}

impl Plan {
    /// Requests one target gets at `rate` for `d`.
    pub(crate) fn count(rate: f64, d: Duration) -> u64 {
        (rate * d.as_secs_f64()).round() as u64
    }
}

#[cfg(test)]
mod tests {
    use super::*;

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
}

//! The HTTP/1.1 side: a small keep-alive connection pool per target that sends one request
//! and says what became of it.

use super::plan::{Plan, Target};
use super::report::SOURCE_HEADER;
use http_body_util::{BodyExt as _, Full};
use hyper::body::Bytes;
use hyper::client::conn::http1::{self, SendRequest};
use hyper::Request;
use hyper_util::rt::TokioIo;
use std::sync::Mutex;
use tokio::sync::Semaphore;

/// What became of one request.
#[derive(Debug)]
pub(super) enum Outcome {
    /// Answered with this status (any status) and `x-decision-source` value.
    Response { status: u16, source: Option<String> },
    /// Not answered: `connect`, `timeout` or `io`.
    Failed(&'static str),
}

/// A small HTTP/1.1 connection pool for one target: idle connections are reused most-recent
/// first, new ones are opened on demand up to the cap, and a request waits for a permit
/// otherwise.
pub(super) struct Client {
    pub(super) plan: Plan,
    target: Target,
    permits: Semaphore,
    idle: Mutex<Vec<SendRequest<Full<Bytes>>>>,
}

impl Client {
    /// A pool for `plan.targets[target]`.
    pub(super) fn new(plan: &Plan, target: usize) -> Client {
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

    /// The request to send: the plan's method, body and headers, and a `host` header unless
    /// one was given.
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
    pub(super) async fn send(&self) -> Outcome {
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::commands::loadtest::plan as checked;
    use crate::loadtest::testing::{args, report, server, server_with};
    use hyper::Method;
    use std::time::{Duration, Instant};

    #[test]
    fn body_method_and_headers_are_sent() {
        // A server that checks what it receives would need more plumbing than this test is
        // worth; instead check the request the client builds.
        let dir = std::env::temp_dir().join(format!("loadtest-body-{}", std::process::id()));
        std::fs::write(&dir, br#"{"state":{}}"#).unwrap();
        let mut a = args("http://127.0.0.1:9/v1/decide".into());
        a.body = Some(dir.clone());
        a.headers = vec!["x-test: 1".into(), "X-Test:2".into()];
        let plan = checked(&a).unwrap();
        let req = Client::new(&plan, 0).request();
        assert_eq!(req.method(), Method::POST);
        assert_eq!(req.uri(), "/v1/decide");
        assert_eq!(req.headers()["content-type"], "application/json");
        assert_eq!(req.headers()["host"], "127.0.0.1:9");
        assert_eq!(req.headers().get_all("x-test").iter().count(), 2);
        assert_eq!(plan.body.as_ref(), br#"{"state":{}}"#);
        a.method = Some("put".into());
        a.headers.push("content-type: text/plain".into());
        a.headers.push("host: example.test".into());
        let plan = checked(&a).unwrap();
        let req = Client::new(&plan, 0).request();
        assert_eq!(req.method(), Method::PUT);
        assert_eq!(req.headers()["content-type"], "text/plain");
        assert_eq!(req.headers()["host"], "example.test");
        std::fs::remove_file(dir).unwrap();
        // No body: GET, and no content-type is made up.
        let plan = checked(&args("http://127.0.0.1:9/".into())).unwrap();
        let req = Client::new(&plan, 0).request();
        assert_eq!(req.method(), Method::GET);
        assert!(req.headers().get("content-type").is_none());
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
}

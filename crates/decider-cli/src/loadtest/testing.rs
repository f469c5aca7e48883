//! Helpers for the tests of the load generator: loopback HTTP servers on 127.0.0.1 that
//! answer as a test says, and a run with small defaults. Each test sends at most a few
//! hundred requests.

use super::{execute, Clock, Report, SOURCE_HEADER};
use crate::commands::loadtest::{plan, Args};
use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;
use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};

/// How the test server answers request number `n` (0-based, across connections).
pub(super) type Behaviour = fn(u64) -> (u16, Duration, Option<&'static str>);

/// A keep-alive HTTP/1.1 server on 127.0.0.1 that answers per `behaviour`. It runs on
/// its own thread and runtime for the life of the test process.
pub(super) fn server(behaviour: Behaviour) -> SocketAddr {
    server_with(behaviour, false)
}

/// As [`server`]; with `close`, the server answers one request per connection and closes
/// it, unannounced (no `connection: close`), when the next request arrives on it.
pub(super) fn server_with(behaviour: Behaviour, close: bool) -> SocketAddr {
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
                        let src =
                            source.map_or(String::new(), |s| format!("{SOURCE_HEADER}: {s}\r\n"));
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

/// Flags for a short run against `url`: 200/s for 500 ms, no warmup.
pub(crate) fn args(url: String) -> Args {
    Args {
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

/// Runs `a` and returns the report.
pub(crate) fn report(a: &Args) -> Report {
    execute(&plan(a).unwrap()).unwrap()
}

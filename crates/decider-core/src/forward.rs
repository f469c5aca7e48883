//! What crosses from a client to an origin and back: which methods are routed at all, the
//! target URL, which headers are forwarded each way, which requests may carry a body or be
//! sent twice, and which statuses can be relayed. The Worker's proxy applies these rules;
//! nothing here does I/O.

/// Methods the edge answers 405 itself, before any decision or origin: `TRACE` has the
/// origin echo the request back, the client's cookies and authorization included (cross-site
/// tracing), and `CONNECT` asks for a tunnel, which a proxy to fixed origins never opens.
pub const REFUSED_METHODS: [&str; 2] = ["TRACE", "CONNECT"];

/// The `Allow` header of the 405 a refused method gets: the standard methods the edge routes
/// (an extension method such as `PURGE` is routed too).
pub const ROUTED_ALLOW: &str = "GET, HEAD, POST, PUT, DELETE, OPTIONS, PATCH";

/// Whether the edge refuses `method` ([`REFUSED_METHODS`], in any letter case).
pub fn is_refused_method(method: &str) -> bool {
    REFUSED_METHODS
        .iter()
        .any(|m| m.eq_ignore_ascii_case(method))
}

/// The methods a failover may send a second time: the idempotent methods of RFC 9110
/// §9.2.2 that the edge routes (`TRACE` is idempotent too, but refused). The one list: the
/// failover plan and the copy of the body kept for a retry both ask [`is_idempotent`].
pub const IDEMPOTENT_METHODS: [&str; 5] = ["GET", "HEAD", "OPTIONS", "PUT", "DELETE"];

/// Whether a method is in [`IDEMPOTENT_METHODS`] (any letter case): only these are retried
/// on failover.
pub fn is_idempotent(method: &str) -> bool {
    IDEMPOTENT_METHODS
        .iter()
        .any(|m| m.eq_ignore_ascii_case(method))
}

/// Whether a method is sent without a body: `GET` and `HEAD` (a body declared on one is
/// refused, [`get_or_head_declares_body`]).
pub fn is_bodyless(method: &str) -> bool {
    method.eq_ignore_ascii_case("GET") || method.eq_ignore_ascii_case("HEAD")
}

/// The upstream URL: the origin base followed by the request's path and query. The request
/// never picks the host: only configured origins are ever contacted.
pub fn target_url(origin: &str, path: &str, query: Option<&str>) -> String {
    let mut url = String::with_capacity(origin.len() + path.len() + 16);
    url.push_str(origin);
    if !path.starts_with('/') {
        url.push('/');
    }
    url.push_str(path);
    if let Some(q) = query.filter(|q| !q.is_empty()) {
        url.push('?');
        url.push_str(q);
    }
    url
}

/// The path and query (without `?`) of an absolute request URL as the runtime serialises it
/// (WHATWG: `scheme://authority/path?query#fragment`, already percent-encoded): the parts a
/// forwarded request keeps. A URL without a path has the path `/`; the fragment is dropped.
pub fn path_and_query(url: &str) -> (&str, Option<&str>) {
    let url = url.split_once('#').map_or(url, |(u, _)| u);
    let after_scheme = url.find("://").map_or(0, |i| i + 3);
    let rest = &url[after_scheme..];
    let rest = rest.find(['/', '?']).map_or("", |i| &rest[i..]);
    let (path, query) = match rest.split_once('?') {
        Some((p, q)) => (p, Some(q)),
        None => (rest, None),
    };
    (if path.is_empty() { "/" } else { path }, query)
}

/// Hop-by-hop headers (RFC 9110 §7.6.1): meaningful for one connection only, never forwarded.
pub const HOP_BY_HOP: [&str; 9] = [
    "connection",
    "keep-alive",
    "proxy-authenticate",
    "proxy-authorization",
    "proxy-connection",
    "te",
    "trailer",
    "transfer-encoding",
    "upgrade",
];

/// Whether a client request header may be forwarded upstream: not hop-by-hop, not named
/// by `Connection`, not `host` (the origin's is used), not `expect`, and not a client-sent
/// `x-decision-*` (only the Worker speaks for the decision).
///
/// `Expect` is between the client and the runtime, which reads the body for the Worker.
/// Forwarded, `Expect: 100-continue` makes the origin answer `100 Continue` first, and the
/// runtime's fetch takes that interim answer for the final one: on a HEAD it pools the
/// connection with the real answer unread, and the next request on it gets that answer.
pub fn forward_request_header(name: &str, connection: Option<&str>) -> bool {
    let n = name.to_ascii_lowercase();
    !(HOP_BY_HOP.contains(&n.as_str())
        || n == "host"
        || n == "expect"
        || n.starts_with("x-decision-")
        || named_by_connection(&n, connection))
}

/// Whether a GET or HEAD request declares a body: a `content-length` other than 0, or any
/// `transfer-encoding`. Such a request is answered 400: the runtime refuses to send a GET or
/// HEAD with a body.
pub fn get_or_head_declares_body(
    method: &str,
    content_length: Option<&str>,
    transfer_encoding: Option<&str>,
) -> bool {
    is_bodyless(method)
        && (transfer_encoding.is_some()
            || content_length.is_some_and(|l| l.trim().parse::<u64>() != Ok(0)))
}

/// Whether an upstream status can be relayed: a final status the runtime can build a
/// response with. Anything else (an interim 1xx the runtime took for the final answer, or
/// a number beyond 599) is a failed attempt.
pub fn relayable_status(status: u16) -> bool {
    (200..=599).contains(&status)
}

/// Whether an upstream response header may be passed to the client: not hop-by-hop and
/// not an `x-decision-*` (the Worker sets its own).
pub fn forward_response_header(name: &str, connection: Option<&str>) -> bool {
    let n = name.to_ascii_lowercase();
    !(HOP_BY_HOP.contains(&n.as_str())
        || n.starts_with("x-decision-")
        || named_by_connection(&n, connection))
}

fn named_by_connection(lower_name: &str, connection: Option<&str>) -> bool {
    connection.is_some_and(|c| {
        c.split(',')
            .any(|t| t.trim().eq_ignore_ascii_case(lower_name))
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paths_and_queries_of_request_urls() {
        for (url, path, query) in [
            ("https://h.example/a/b?x=1&y=%20", "/a/b", Some("x=1&y=%20")),
            ("https://h.example/a/b", "/a/b", None),
            ("https://h.example", "/", None),
            ("https://h.example?q", "/", Some("q")),
            ("https://h.example/?", "/", Some("")),
            (
                "http://u@h.example:8080/p%2Fq?a=b?c#frag",
                "/p%2Fq",
                Some("a=b?c"),
            ),
            ("https://h.example/x#f?not-a-query", "/x", None),
            ("https://[::1]:9/v?k", "/v", Some("k")),
        ] {
            assert_eq!(path_and_query(url), (path, query), "{url}");
        }
    }

    #[test]
    fn target_urls() {
        assert_eq!(
            target_url("http://127.0.0.1:9001", "/any/path", Some("q=1&r=2")),
            "http://127.0.0.1:9001/any/path?q=1&r=2"
        );
        assert_eq!(
            target_url("https://a.example/base", "/x", None),
            "https://a.example/base/x"
        );
        assert_eq!(target_url("http://h", "/x", Some("")), "http://h/x");
    }
    #[test]
    fn header_hygiene() {
        for h in [
            "Connection",
            "keep-alive",
            "TE",
            "transfer-encoding",
            "upgrade",
            "host",
            "X-Decision-Action",
            "x-decision-anything",
            "Expect",
            "expect",
        ] {
            assert!(!forward_request_header(h, None), "{h}");
        }
        for h in [
            "accept",
            "x-custom",
            "content-type",
            "cookie",
            "authorization",
            "cf-connecting-ip",
        ] {
            assert!(forward_request_header(h, None), "{h}");
        }
        assert!(!forward_request_header(
            "x-secret-hop",
            Some("keep-alive, X-Secret-Hop")
        ));
        assert!(!forward_response_header("x-decision-source", None));
        assert!(forward_response_header("set-cookie", None));
        assert!(!forward_response_header("transfer-encoding", None));
    }
    #[test]
    fn get_and_head_bodies() {
        assert!(get_or_head_declares_body("GET", Some("3"), None));
        assert!(get_or_head_declares_body("head", None, Some("chunked")));
        assert!(get_or_head_declares_body("GET", Some("0"), Some("chunked")));
        assert!(get_or_head_declares_body("GET", Some("x"), None));
        assert!(!get_or_head_declares_body("GET", Some("0"), None));
        assert!(!get_or_head_declares_body("HEAD", Some(" 0 "), None));
        assert!(!get_or_head_declares_body("GET", None, None));
        assert!(!get_or_head_declares_body("POST", Some("3"), None));
        assert!(!get_or_head_declares_body(
            "OPTIONS",
            Some("3"),
            Some("chunked")
        ));
    }
    #[test]
    fn relayable_statuses() {
        for s in [200, 204, 302, 404, 502, 599] {
            assert!(relayable_status(s), "{s}");
        }
        for s in [0, 100, 101, 103, 199, 600, 999] {
            assert!(!relayable_status(s), "{s}");
        }
    }
    #[test]
    fn idempotent_methods() {
        for m in ["GET", "head", "OPTIONS", "PUT", "DELETE"] {
            assert!(is_idempotent(m), "{m}");
        }
        // TRACE is idempotent by RFC 9110, but never routed, so never retried either.
        for m in ["POST", "PATCH", "CONNECT", "TRACE", "PURGE"] {
            assert!(!is_idempotent(m), "{m}");
        }
    }

    /// Regression: TRACE and CONNECT were proxied with the client's cookie and
    /// authorization, and TRACE was retried on failover as idempotent.
    #[test]
    fn regression_trace_and_connect_were_proxied() {
        for m in ["TRACE", "trace", "CONNECT", "Connect"] {
            assert!(is_refused_method(m), "{m}");
            assert!(!is_idempotent(m), "{m}");
        }
        for m in [
            "GET", "HEAD", "POST", "PUT", "DELETE", "OPTIONS", "PATCH", "PURGE",
        ] {
            assert!(!is_refused_method(m), "{m}");
        }
        // Allow names routed methods only.
        for m in ROUTED_ALLOW.split(", ") {
            assert!(!is_refused_method(m), "{m}");
        }
    }
}

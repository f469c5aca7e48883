//! Parsers of single variable values: URLs (integers and flags are `decider_core::vars`').

/// Parses an origin base URL: absolute `http`/`https` with a host, no credentials, query or
/// fragment. Returns it without a trailing slash, ready for a path to be appended.
///
/// # Errors
/// What is wrong with it.
pub fn parse_origin(s: &str) -> Result<String, String> {
    let rest = s
        .strip_prefix("http://")
        .or_else(|| s.strip_prefix("https://"))
        .ok_or("must be an http:// or https:// URL")?;
    let host = rest.split('/').next().unwrap_or_default();
    if host.is_empty() || host.contains('@') {
        return Err("must name a host (and no credentials)".into());
    }
    if s.contains('?') || s.contains('#') {
        return Err("must not have a query or fragment".into());
    }
    Ok(s.trim_end_matches('/').to_string())
}

/// Parses the metrics URL: absolute `http`/`https` with a host and no credentials (a query
/// is allowed).
pub(super) fn parse_url(s: &str) -> Result<String, String> {
    let rest = s
        .strip_prefix("http://")
        .or_else(|| s.strip_prefix("https://"))
        .ok_or("must be an http:// or https:// URL")?;
    let host = rest.split(['/', '?']).next().unwrap_or_default();
    if host.is_empty() || host.contains('@') {
        return Err("must name a host (and no credentials)".into());
    }
    Ok(s.to_string())
}

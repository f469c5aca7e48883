//! Parsers of single variable values: integers in a range, flags, URLs.

/// An integer in `lo..=hi`.
pub(super) fn int(s: &str, lo: u32, hi: u32) -> Result<u32, String> {
    s.parse::<u32>()
        .ok()
        .filter(|v| (lo..=hi).contains(v))
        .ok_or_else(|| format!("must be an integer {lo}..={hi}"))
}

/// `true/false`, `1/0`, `yes/no`, `on/off` (any case).
pub(super) fn flag(s: &str) -> Result<bool, String> {
    match s.to_ascii_lowercase().as_str() {
        "true" | "1" | "yes" | "on" => Ok(true),
        "false" | "0" | "no" | "off" => Ok(false),
        _ => Err("must be true or false".into()),
    }
}

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

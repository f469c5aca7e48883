//! Bearer tokens, for both Workers: the token of an `Authorization` header, and a comparison
//! of secrets whose time does not tell where they differ.

/// The token of an `Authorization: Bearer <token>` header (scheme case-insensitive).
pub fn bearer_token(header: Option<&str>) -> Option<&str> {
    let (scheme, token) = header?.trim().split_once(' ')?;
    let token = token.trim();
    (scheme.eq_ignore_ascii_case("bearer") && !token.is_empty()).then_some(token)
}

/// Compares two secrets in time that depends only on their lengths, not on where they
/// first differ.
pub fn constant_time_eq(a: &[u8], b: &[u8]) -> bool {
    let mut diff = a.len() ^ b.len();
    for i in 0..a.len().max(b.len()) {
        let x = a.get(i).copied().unwrap_or(0);
        let y = b.get(i).copied().unwrap_or(0);
        diff |= usize::from(x ^ y);
    }
    diff == 0
}

/// Whether `header` carries `token` (an unset token accepts nothing).
pub fn carries(header: Option<&str>, token: Option<&str>) -> bool {
    match (bearer_token(header), token) {
        (Some(given), Some(t)) => constant_time_eq(given.as_bytes(), t.as_bytes()),
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bearer_tokens() {
        assert_eq!(bearer_token(Some("Bearer abc")), Some("abc"));
        assert_eq!(bearer_token(Some("bearer  abc ")), Some("abc"));
        assert_eq!(bearer_token(Some("Basic abc")), None);
        assert_eq!(bearer_token(Some("Bearer")), None);
        assert_eq!(bearer_token(Some("Bearer ")), None);
        assert_eq!(bearer_token(None), None);
        assert!(carries(Some("Bearer s3cret"), Some("s3cret")));
        assert!(!carries(Some("Bearer s3cret"), Some("other")));
        assert!(!carries(Some("Bearer s3cret"), None));
        assert!(!carries(None, Some("s3cret")));
    }

    #[test]
    fn constant_time_comparison() {
        assert!(constant_time_eq(b"s3cret", b"s3cret"));
        assert!(!constant_time_eq(b"s3cret", b"s3creT"));
        assert!(!constant_time_eq(b"s3cret", b"s3cre"));
        assert!(!constant_time_eq(b"", b"x"));
        assert!(constant_time_eq(b"", b""));
    }
}

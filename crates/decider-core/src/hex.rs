//! Lower-case hexadecimal, written without `core::fmt` (module docs of [`crate::time`]): the
//! tags of decision ids, and the CLI's content hashes.

/// The digit of `d` (0..=15).
pub fn digit(d: u8) -> char {
    char::from(b"0123456789abcdef"[usize::from(d & 15)])
}

/// Appends two digits per byte to `s`.
pub fn push(s: &mut String, bytes: &[u8]) {
    s.reserve(2 * bytes.len());
    for b in bytes {
        s.push(digit(b >> 4));
        s.push(digit(b & 15));
    }
}

/// Two digits per byte.
pub fn encode(bytes: &[u8]) -> String {
    let mut s = String::new();
    push(&mut s, bytes);
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bytes_are_formats_lower_hex() {
        let bytes: Vec<u8> = (0..=255).collect();
        let want: String = bytes.iter().map(|b| format!("{b:02x}")).collect();
        assert_eq!(encode(&bytes), want);
        assert_eq!(encode(&[]), "");
    }
}

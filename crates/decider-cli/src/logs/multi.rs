//! Gathering a pretty-printed JSON value over several lines by bracket depth (strings and
//! escapes respected); for an array, each element is handed on as soon as it closes.

/// A JSON value being gathered over several lines.
pub(super) struct Multi {
    /// Depth at which units start: 0 for an object, 1 for the elements of an array.
    pub level: u32,
    pub depth: u32,
    in_str: bool,
    esc: bool,
    capturing: bool,
    overflow: bool,
    buf: Vec<u8>,
    pub start_line: u64,
    elem_line: u64,
}

impl Multi {
    pub fn new(level: u32, line: u64) -> Multi {
        Multi {
            level,
            depth: 0,
            in_str: false,
            esc: false,
            capturing: false,
            overflow: false,
            buf: Vec::new(),
            start_line: line,
            elem_line: line,
        }
    }

    /// Scans one line; hands each completed unit to `emit(bytes, overflowed, line)`.
    /// Returns true when the outermost value closed (the rest of the line is ignored).
    pub fn feed(
        &mut self,
        line: &[u8],
        lineno: u64,
        max: usize,
        emit: &mut dyn FnMut(&[u8], bool, u64),
    ) -> bool {
        for &c in line {
            if self.in_str {
                if self.esc {
                    self.esc = false;
                } else if c == b'\\' {
                    self.esc = true;
                } else if c == b'"' {
                    self.in_str = false;
                }
                self.push(c, max);
                continue;
            }
            match c {
                b'"' => {
                    self.in_str = true;
                    self.push(c, max);
                }
                b'{' | b'[' => {
                    if self.depth == self.level && !self.capturing {
                        self.capturing = true;
                        self.overflow = false;
                        self.buf.clear();
                        self.elem_line = lineno;
                    }
                    self.depth += 1;
                    self.push(c, max);
                }
                b'}' | b']' if self.depth > 0 => {
                    self.depth -= 1;
                    self.push(c, max);
                    if self.capturing && self.depth == self.level {
                        self.capturing = false;
                        emit(&self.buf, self.overflow, self.elem_line);
                    }
                    if self.depth == 0 {
                        return true;
                    }
                }
                _ => self.push(c, max),
            }
        }
        false
    }

    fn push(&mut self, c: u8, max: usize) {
        if self.capturing {
            if self.buf.len() < max {
                self.buf.push(c);
            } else {
                self.overflow = true;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::Multi;

    fn units(lines: &[&str], level: u32, max: usize) -> (Vec<(String, bool, u64)>, bool) {
        let mut m = Multi::new(level, 1);
        let mut out = Vec::new();
        let mut done = false;
        for (i, l) in lines.iter().enumerate() {
            done = m.feed(
                format!("{l}\n").as_bytes(),
                i as u64 + 1,
                max,
                &mut |b, over, at| {
                    out.push((String::from_utf8_lossy(b).into_owned(), over, at));
                },
            );
        }
        (out, done)
    }

    #[test]
    fn brackets_in_strings_and_escaped_quotes_do_not_count() {
        let (u, done) = units(
            &[
                "{",
                r#"  "a": "}]\"{[","#,
                r#"  "b": [1, {"c": "\\"}]"#,
                "}",
            ],
            0,
            1 << 20,
        );
        assert!(done);
        assert_eq!(u.len(), 1);
        assert!(
            u[0].0.ends_with('}') && u[0].0.contains(r#""}]\"{[""#),
            "{}",
            u[0].0
        );
    }

    #[test]
    fn array_elements_stream_one_by_one_with_their_first_line() {
        let (u, done) = units(
            &[
                "[",
                "  {",
                r#"    "a": 1"#,
                "  },",
                r#"  "text", 3,"#,
                r#"  {"b": [2]}"#,
                "]",
            ],
            1,
            1 << 20,
        );
        assert!(done);
        let got: Vec<(&str, u64)> = u.iter().map(|(t, _, at)| (t.as_str(), *at)).collect();
        assert_eq!(got[1], (r#"{"b": [2]}"#, 6));
        assert_eq!(got[0].1, 2);
        assert_eq!(u.len(), 2);
    }

    #[test]
    fn an_oversized_element_is_flagged_not_kept() {
        let long = format!(r#"  {{"pad": "{}"}},"#, "x".repeat(500));
        let (u, done) = units(&["[", &long, r#"  {"ok": 1}"#], 1, 100);
        assert!(!done, "the array never closed");
        assert_eq!(u.len(), 2);
        assert!(u[0].1 && u[0].0.len() <= 100);
        assert!(!u[1].1);
    }
}

//! Which HTTP statuses count as a success (`ROLLOUT_SUCCESS` in the Workers, `--success` in
//! `decider`): one parser, one set, read by the live counts and by every offline reader.
//!
//! A spec is a comma-separated list of terms. A term is a class (`2xx`), a range
//! (`200-399`), one status (`204`) or a bound (`status<500`, `status<=399`); a term with a
//! leading `!` takes its statuses out (`status<500,!404`). The set is the union of the
//! terms without `!` (every status when there are none) minus the union of those with one.
//! Statuses are 100..=599.

/// The lowest status a set holds.
const LO: u16 = 100;
/// The highest.
const HI: u16 = 599;
/// Words of the bit set (statuses 100..=599, one bit each).
const WORDS: usize = ((HI - LO + 1) as usize).div_ceil(64);

/// A set of HTTP statuses, 100..=599.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Statuses {
    bits: [u64; WORDS],
}

impl Default for Statuses {
    /// `status<500`: anything but a server error.
    fn default() -> Statuses {
        Statuses::BELOW_500
    }
}

impl Statuses {
    /// The spec of the default set.
    pub const DEFAULT_SPEC: &'static str = "status<500";
    /// The default set: `status<500`, anything but a server error.
    pub const BELOW_500: Statuses = Statuses::range(LO, 499);

    const fn empty() -> Statuses {
        Statuses { bits: [0; WORDS] }
    }

    const fn range(lo: u16, hi: u16) -> Statuses {
        let mut s = Statuses::empty();
        let mut status = if lo > LO { lo } else { LO };
        while status <= hi && status <= HI {
            let i = (status - LO) as usize;
            s.bits[i / 64] |= 1 << (i % 64);
            status += 1;
        }
        s
    }

    /// Whether `status` is in the set (a status outside 100..=599 never is).
    pub fn contains(&self, status: u16) -> bool {
        (LO..=HI).contains(&status) && {
            let i = usize::from(status - LO);
            self.bits[i / 64] & (1 << (i % 64)) != 0
        }
    }

    /// Parses a spec (see the module's documentation).
    ///
    /// # Errors
    /// The term that is wrong and why; a spec whose set is empty.
    pub fn parse(spec: &str) -> Result<Statuses, String> {
        let (mut take, mut drop, mut any_take) = (Statuses::empty(), Statuses::empty(), false);
        for raw in spec.split(',') {
            let term = raw.trim();
            let (negated, body) = match term.strip_prefix('!') {
                Some(rest) => (true, rest.trim()),
                None => (false, term),
            };
            let set = Statuses::term(body).map_err(|why| {
                if term.is_empty() {
                    "has an empty term".to_string()
                } else {
                    format!("term {term:?}: {why}")
                }
            })?;
            let into = if negated { &mut drop } else { &mut take };
            for (w, b) in into.bits.iter_mut().zip(set.bits) {
                *w |= b;
            }
            any_take |= !negated;
        }
        if !any_take {
            take = Statuses::range(LO, HI);
        }
        for (w, d) in take.bits.iter_mut().zip(drop.bits) {
            *w &= !d;
        }
        if take.bits.iter().all(|&w| w == 0) {
            return Err("holds no status: nothing could succeed".into());
        }
        Ok(take)
    }

    /// One term without its `!`.
    fn term(t: &str) -> Result<Statuses, String> {
        let status = |s: &str| -> Result<u16, String> {
            match s.trim().parse::<u16>() {
                Ok(v) if (LO..=HI).contains(&v) => Ok(v),
                _ => Err(format!("{:?} is not a status 100..=599", s.trim())),
            }
        };
        if let Some(bound) = t.strip_prefix("status") {
            let bound = bound.trim_start();
            return if let Some(v) = bound.strip_prefix("<=") {
                Ok(Statuses::range(LO, status(v)?))
            } else if let Some(v) = bound.strip_prefix('<') {
                let v = status(v)?;
                if v == LO {
                    return Err("status<100 holds nothing".into());
                }
                Ok(Statuses::range(LO, v - 1))
            } else {
                Err("a bound is status<N or status<=N".into())
            };
        }
        let b = t.as_bytes();
        if b.len() == 3 && b[1..].eq_ignore_ascii_case(b"xx") && (b'1'..=b'5').contains(&b[0]) {
            let lo = u16::from(b[0] - b'0') * 100;
            return Ok(Statuses::range(lo, lo + 99));
        }
        if let Some((lo, hi)) = t.split_once('-') {
            let (lo, hi) = (status(lo)?, status(hi)?);
            if lo > hi {
                return Err(format!("the range {lo}-{hi} is empty"));
            }
            return Ok(Statuses::range(lo, hi));
        }
        status(t)
            .map(|s| Statuses::range(s, s))
            .map_err(|_| "expected 2xx, 200-399, 204, status<500 or status<=399".into())
    }

    /// The set in words: `status < 500` for the default, else its statuses as ranges
    /// (`status in 200-299, 301`).
    pub fn describe(&self) -> String {
        if *self == Statuses::default() {
            return "status < 500".into();
        }
        let mut parts = Vec::new();
        let mut s = LO;
        while s <= HI {
            if !self.contains(s) {
                s += 1;
                continue;
            }
            let start = s;
            while s < HI && self.contains(s + 1) {
                s += 1;
            }
            parts.push(match (start, s) {
                (a, b) if a == b => a.to_string(),
                (a, b) if a % 100 == 0 && b == a + 99 => format!("{}xx", a / 100),
                (a, b) => format!("{a}-{b}"),
            });
            s += 1;
        }
        format!("status in {}", parts.join(", "))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn holds(spec: &str) -> Vec<u16> {
        let s = Statuses::parse(spec).unwrap();
        [
            100, 199, 200, 204, 299, 301, 399, 400, 404, 429, 499, 500, 503, 599,
        ]
        .into_iter()
        .filter(|&x| s.contains(x))
        .collect()
    }

    #[test]
    fn spec_table() {
        let all_but_5xx = vec![100, 199, 200, 204, 299, 301, 399, 400, 404, 429, 499];
        assert_eq!(holds("status<500"), all_but_5xx);
        assert_eq!(holds("status <= 499"), all_but_5xx);
        assert_eq!(holds("2xx"), vec![200, 204, 299]);
        assert_eq!(holds("2XX, 3xx"), vec![200, 204, 299, 301, 399]);
        assert_eq!(holds("200-399"), vec![200, 204, 299, 301, 399]);
        assert_eq!(holds("204"), vec![204]);
        assert_eq!(holds("status<500,!404"), {
            let mut v = all_but_5xx.clone();
            v.retain(|&x| x != 404);
            v
        });
        // Only exclusions: every status but those.
        assert_eq!(holds("!5xx,!429"), {
            let mut v = all_but_5xx.clone();
            v.retain(|&x| x != 429);
            v
        });
        assert_eq!(holds("2xx,!204"), vec![200, 299]);
        assert_eq!(
            Statuses::parse(Statuses::DEFAULT_SPEC).unwrap(),
            Statuses::default()
        );
        // Outside 100..=599 nothing is held, whatever the spec.
        let every = Statuses::parse("!600").err();
        assert!(every.is_some(), "600 is no status");
        let s = Statuses::parse("100-599").unwrap();
        assert!(!s.contains(0) && !s.contains(99) && !s.contains(600) && s.contains(599));
    }

    #[test]
    fn a_bad_spec_names_its_term() {
        for (spec, needle) in [
            ("", "empty term"),
            ("2xx,", "empty term"),
            ("6xx", "\"6xx\""),
            ("2yy", "\"2yy\""),
            ("abc", "\"abc\""),
            ("status>500", "status<N"),
            ("status<100", "holds nothing"),
            ("399-200", "empty"),
            ("200-999", "\"999\""),
            ("99", "\"99\""),
            ("!2xx,2xx", "holds no status"),
            ("5xx,!500-599", "holds no status"),
        ] {
            let e = Statuses::parse(spec).unwrap_err();
            assert!(e.contains(needle), "{spec:?}: {e}");
        }
    }

    #[test]
    fn description_in_ranges() {
        assert_eq!(Statuses::default().describe(), "status < 500");
        let d = |s: &str| Statuses::parse(s).unwrap().describe();
        assert_eq!(d("2xx,3xx"), "status in 200-399");
        assert_eq!(d("2xx,4xx"), "status in 2xx, 4xx");
        assert_eq!(d("2xx,!204"), "status in 200-203, 205-299");
        assert_eq!(d("301"), "status in 301");
        assert_eq!(d("status<500,!404"), "status in 100-403, 405-499");
    }
}

//! Time as the records write it: milliseconds since the Unix epoch ↔ ISO-8601 UTC
//! (`2026-12-02T10:00:00.123Z`, JavaScript's `toISOString` shape), and the UTC hour a state
//! defaults to.
//!
//! Hand-written rather than a date crate: the records carry one fixed shape, the Worker
//! writes one per decision and the CLI parses one per log line.

/// The UTC hour of a time in milliseconds since the epoch.
pub fn hour_from_ms(ms: f64) -> u8 {
    let ms = if ms.is_finite() { ms.floor() as i64 } else { 0 };
    (ms.div_euclid(3_600_000).rem_euclid(24)) as u8
}

/// `YYYY-MM-DDTHH:MM:SS.sssZ` for a time in milliseconds since the epoch, as JS's
/// `toISOString` writes it for the years 0 to 9999 (a non-finite time reads as the epoch;
/// later years are written with more digits rather than JS's extended `+YYYYYY` form).
pub fn iso_from_ms(ms: f64) -> String {
    let ms = if ms.is_finite() { ms.floor() as i64 } else { 0 };
    let days = ms.div_euclid(86_400_000);
    let in_day = ms.rem_euclid(86_400_000);
    let (y, m, d) = civil_from_days(days);
    let (h, min, s, milli) = (
        in_day / 3_600_000,
        in_day / 60_000 % 60,
        in_day / 1000 % 60,
        in_day % 1000,
    );
    let mut out = String::with_capacity(24);
    for (v, width, after) in [
        (y, 4, '-'),
        (m, 2, '-'),
        (d, 2, 'T'),
        (h, 2, ':'),
        (min, 2, ':'),
        (s, 2, '.'),
        (milli, 3, 'Z'),
    ] {
        push_padded(&mut out, v, width);
        out.push(after);
    }
    out
}

/// `v` in decimal, zero-padded to `width` characters sign included (`format!`'s `{v:0width$}`),
/// written without `core::fmt`: the Worker writes a time with every decision, and its first
/// request compiles every function it calls.
fn push_padded(out: &mut String, v: i64, width: usize) {
    let mut digits = [0u8; 20];
    let (mut n, mut len) = (v.unsigned_abs(), 0);
    loop {
        digits[len] = b'0' + (n % 10) as u8;
        n /= 10;
        len += 1;
        if n == 0 {
            break;
        }
    }
    if v < 0 {
        out.push('-');
    }
    for _ in len + usize::from(v < 0)..width {
        out.push('0');
    }
    out.extend(digits[..len].iter().rev().map(|&b| char::from(b)));
}

/// Parses `YYYY-MM-DDTHH:MM:SS[.fraction](Z|±HH:MM)` into milliseconds since the epoch.
/// A space may stand for the `T`; fractions beyond milliseconds are truncated.
///
/// # Errors
/// A short description of what was wrong (the caller names the field).
pub fn parse_iso_ms(s: &str) -> Result<i64, &'static str> {
    let b = s.as_bytes();
    if b.len() < 20 {
        return Err("expected an ISO-8601 UTC time like 2026-12-02T10:00:00.123Z");
    }
    let num = |from: usize, len: usize| -> Result<i64, &'static str> {
        let mut v = 0i64;
        for &c in &b[from..from + len] {
            if !c.is_ascii_digit() {
                return Err("expected an ISO-8601 UTC time like 2026-12-02T10:00:00.123Z");
            }
            v = v * 10 + i64::from(c - b'0');
        }
        Ok(v)
    };
    let seps = [(4, b'-'), (7, b'-'), (13, b':'), (16, b':')];
    if seps.iter().any(|&(i, c)| b[i] != c) || !matches!(b[10], b'T' | b't' | b' ') {
        return Err("expected an ISO-8601 UTC time like 2026-12-02T10:00:00.123Z");
    }
    let (year, month, day) = (num(0, 4)?, num(5, 2)?, num(8, 2)?);
    let (hour, minute, second) = (num(11, 2)?, num(14, 2)?, num(17, 2)?);
    if !(1..=12).contains(&month) || day < 1 || day > days_in_month(year, month) {
        return Err("not a calendar date");
    }
    // 60 admits a leap second; it folds into the next minute like most parsers do.
    if hour > 23 || minute > 59 || second > 60 {
        return Err("time of day out of range");
    }
    let mut i = 19;
    let mut millis = 0i64;
    if b[i] == b'.' {
        i += 1;
        let start = i;
        while i < b.len() && b[i].is_ascii_digit() {
            if i - start < 3 {
                millis = millis * 10 + i64::from(b[i] - b'0');
            }
            i += 1;
        }
        if i == start {
            return Err("empty fraction of a second");
        }
        for _ in (i - start)..3 {
            millis *= 10;
        }
    }
    let offset_min = match &b[i..] {
        [b'Z' | b'z'] => 0,
        [sign @ (b'+' | b'-'), h1, h2, b':', m1, m2] => {
            let digits = [*h1, *h2, *m1, *m2];
            if !digits.iter().all(u8::is_ascii_digit) {
                return Err("malformed UTC offset");
            }
            let v = i64::from(digits[0] - b'0') * 600
                + i64::from(digits[1] - b'0') * 60
                + i64::from(digits[2] - b'0') * 10
                + i64::from(digits[3] - b'0');
            if *sign == b'-' {
                -v
            } else {
                v
            }
        }
        _ => return Err("expected Z or a ±HH:MM offset after the time"),
    };
    let days = days_from_civil(year, month, day);
    let secs = days * 86_400 + hour * 3600 + minute * 60 + second - offset_min * 60;
    Ok(secs * 1000 + millis)
}

/// Formats milliseconds since the epoch as `YYYY-MM-DDTHH:MM:SSZ` (whole seconds).
pub fn format_iso_s(ms: i64) -> String {
    let secs = ms.div_euclid(1000);
    let (days, rem) = (secs.div_euclid(86_400), secs.rem_euclid(86_400));
    let (y, m, d) = civil_from_days(days);
    format!(
        "{y:04}-{m:02}-{d:02}T{:02}:{:02}:{:02}Z",
        rem / 3600,
        rem % 3600 / 60,
        rem % 60
    )
}

/// Year, month (1–12) and day (1–31) of a day count since 1970-01-01 in the proleptic
/// Gregorian calendar (Howard Hinnant's `civil_from_days`).
fn civil_from_days(z: i64) -> (i64, i64, i64) {
    let z = z + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    let y = yoe + era * 400 + i64::from(m <= 2);
    (y, m, d)
}

fn is_leap(y: i64) -> bool {
    (y % 4 == 0 && y % 100 != 0) || y % 400 == 0
}

fn days_in_month(y: i64, m: i64) -> i64 {
    match m {
        2 if is_leap(y) => 29,
        2 => 28,
        4 | 6 | 9 | 11 => 30,
        _ => 31,
    }
}

// Howard Hinnant's days-from-civil and its inverse (proleptic Gregorian calendar).
fn days_from_civil(y: i64, m: i64, d: i64) -> i64 {
    let y = if m <= 2 { y - 1 } else { y };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let mp = (m + 9) % 12;
    let doy = (153 * mp + 2) / 5 + d - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn iso_matches_js_to_iso_string() {
        // Expected values are what `new Date(ms).toISOString()` prints in node.
        let cases = [
            (0.0, "1970-01-01T00:00:00.000Z"),
            (-1.0, "1969-12-31T23:59:59.999Z"),
            (951_782_400_000.0, "2000-02-29T00:00:00.000Z"),
            (951_868_799_999.0, "2000-02-29T23:59:59.999Z"),
            (4_107_456_000_000.0, "2100-02-28T00:00:00.000Z"),
            (4_107_542_400_000.0, "2100-03-01T00:00:00.000Z"),
            (1_796_040_000_123.0, "2026-11-30T12:00:00.123Z"),
            (1_796_039_999_999.5, "2026-11-30T11:59:59.999Z"),
            (253_402_300_799_999.0, "9999-12-31T23:59:59.999Z"),
            (-62_167_219_200_000.0, "0000-01-01T00:00:00.000Z"),
            (f64::NAN, "1970-01-01T00:00:00.000Z"),
        ];
        for (ms, want) in cases {
            assert_eq!(iso_from_ms(ms), want, "{ms}");
        }
    }

    #[test]
    fn padded_digits_are_formats_zero_padding() {
        for v in [
            0,
            7,
            -7,
            42,
            -42,
            999,
            1000,
            -1000,
            12_345,
            i64::MAX,
            i64::MIN,
        ] {
            for width in 0..6 {
                let mut out = String::new();
                push_padded(&mut out, v, width);
                assert_eq!(out, format!("{v:0width$}"), "{v} width {width}");
            }
        }
    }

    #[test]
    fn hour_is_the_utc_hour() {
        assert_eq!(hour_from_ms(0.0), 0);
        assert_eq!(hour_from_ms(1_796_040_000_123.0), 12);
        assert_eq!(hour_from_ms(1_796_039_999_999.0), 11);
        assert_eq!(hour_from_ms(-1.0), 23);
        assert_eq!(hour_from_ms(f64::INFINITY), 0);
    }

    #[test]
    fn every_day_from_1600_to_2400() {
        // Walk the calendar day by day with the leap-year rule written out, from 1600-01-01
        // (day -135140, as `Date.UTC(1600, 0, 1) / 86400000` gives).
        let leap = |y: i64| y % 4 == 0 && (y % 100 != 0 || y % 400 == 0);
        let mut z = -135_140;
        for y in 1600..2400 {
            for m in 1..=12 {
                let len = match m {
                    2 if leap(y) => 29,
                    2 => 28,
                    4 | 6 | 9 | 11 => 30,
                    _ => 31,
                };
                for d in 1..=len {
                    assert_eq!(civil_from_days(z), (y, m, d), "day {z}");
                    z += 1;
                }
            }
        }
    }

    #[test]
    fn parses_the_record_shape_and_offsets() {
        assert_eq!(parse_iso_ms("1970-01-01T00:00:00.000Z"), Ok(0));
        assert_eq!(parse_iso_ms("1970-01-01T00:00:01.5Z"), Ok(1500));
        // 2026-12-02T10:00:00.123Z, checked with `date -u -d ... +%s`.
        assert_eq!(
            parse_iso_ms("2026-12-02T10:00:00.123Z"),
            Ok(1_796_205_600_123)
        );
        assert_eq!(
            parse_iso_ms("2026-12-02T11:00:00.123456+01:00"),
            Ok(1_796_205_600_123)
        );
        assert_eq!(parse_iso_ms("2024-02-29 23:59:59Z"), Ok(1_709_251_199_000));
    }

    #[test]
    fn refuses_malformed_times() {
        for bad in [
            "",
            "yesterday",
            "2026-13-01T00:00:00Z",
            "2026-02-30T00:00:00Z",
            "2026-12-02T24:00:00Z",
            "2026-12-02T10:00:00",
            "2026-12-02T10:00:00.Z",
            "2026-12-02T10:00:00+1:00",
            "2026-12-02T10:00:00Zjunk",
            "२०२६-12-02T10:00:00Z",
        ] {
            assert!(parse_iso_ms(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn formats_back() {
        assert_eq!(format_iso_s(1_796_205_600_123), "2026-12-02T10:00:00Z");
        assert_eq!(format_iso_s(0), "1970-01-01T00:00:00Z");
        assert_eq!(format_iso_s(-1), "1969-12-31T23:59:59Z");
        for ms in [0, 951_782_400_000, 1_709_251_199_000, 4_102_444_800_000] {
            assert_eq!(parse_iso_ms(&format_iso_s(ms)), Ok(ms));
        }
    }
}

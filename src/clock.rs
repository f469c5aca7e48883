//! Wall-clock access through the JS `Date` (the only clock a Worker has).
//!
//! Workers freeze the clock during pure computation and advance it across I/O, so
//! `decision_us` is 0 for an embedded-model decision and measures the awaited I/O
//! (a Workers AI call) otherwise.
//!
//! The hour and the ISO timestamp are computed here from one `Date.now()` reading rather
//! than through a JS `Date` object: one call across the wasm boundary instead of several.

/// Milliseconds since the epoch.
pub fn now_ms() -> f64 {
    js_sys::Date::now()
}

/// Microseconds since `started_ms`, never negative.
pub fn elapsed_us(started_ms: f64) -> u64 {
    let us = (now_ms() - started_ms) * 1000.0;
    if us.is_finite() && us > 0.0 {
        us.round() as u64
    } else {
        0
    }
}

/// The current time as an ISO-8601 UTC string (`Date.prototype.toISOString`'s format).
pub fn iso_now() -> String {
    iso_from_ms(now_ms())
}

/// The current UTC hour, 0..=23.
pub fn utc_hour() -> u8 {
    hour_from_ms(now_ms())
}

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
    format!("{y:04}-{m:02}-{d:02}T{h:02}:{min:02}:{s:02}.{milli:03}Z")
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
}

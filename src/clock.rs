//! Wall-clock access through the JS `Date` (the only clock a Worker has).
//!
//! Workers freeze the clock during pure computation and advance it across I/O, so
//! `decision_us` is 0 for an embedded-model decision and measures the awaited I/O
//! (a Workers AI call) otherwise.

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

/// The current time as an ISO-8601 UTC string.
pub fn iso_now() -> String {
    js_sys::Date::new_0().to_iso_string().into()
}

/// The current UTC hour, 0..=23.
pub fn utc_hour() -> u8 {
    (js_sys::Date::new_0().get_utc_hours() % 24) as u8
}

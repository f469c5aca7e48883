//! Wall-clock access through the JS `Date` (the only clock a Worker has).
//!
//! Workers freeze the clock during pure computation and advance it across I/O, so
//! `decision_us` is 0 for an embedded-model decision and measures the awaited I/O
//! (a Workers AI call) otherwise. The hour and the ISO timestamp are decider-core's
//! ([`decider_core::time`]) of one `Date.now()` reading: one call across the wasm boundary
//! instead of several through a JS `Date` object.

use decider_core::time::{hour_from_ms, iso_from_ms};

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

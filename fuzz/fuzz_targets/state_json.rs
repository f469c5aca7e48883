//! State JSON → validation. Valid states must be in range, encode to in-range features,
//! and round-trip through JSON; rejections must carry a code, and a field when they are
//! about one. Signals are validated from the same value.
#![no_main]

use decider_core::{encode, Signals, State, FieldError};
use decider_fuzz::{check_features, check_state};
use libfuzzer_sys::fuzz_target;

fn check_error(e: &FieldError) {
    assert!(!e.to_string().is_empty());
    match e.code() {
        "missing_field" | "unknown_field" | "duplicate_field" | "out_of_range" => {
            assert!(e.field().is_some(), "{e:?}")
        }
        // Malformed text names a field only when the trouble is one number's value.
        "invalid_json" => {}
        "invalid_type" => {}
        other => panic!("undocumented code {other}"),
    }
}

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    // The default hour is normally the clock's; derive it from the input so both the
    // present and the absent `hour` paths see every value, out-of-range ones included.
    let default_hour = data.first().copied().unwrap_or(0);
    match State::parse_json(text, default_hour) {
        Ok(s) => {
            check_state(&s);
            check_features(&encode(&s));
            let again = State::parse_json(&s.to_value().to_string(), 0).expect("round-trip");
            assert_eq!(again, s);
        }
        Err(e) => check_error(&e),
    }
    if let Ok(v) = serde_json::from_str::<serde_json::Value>(text) {
        match Signals::from_value(&v) {
            Ok(sig) => {
                let s = State::from_parts(0, 0, 0, sig);
                check_state(&s);
                check_features(&encode(&s));
            }
            Err(e) => check_error(&e),
        }
    }
});

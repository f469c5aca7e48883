//! `decider decide`: JSONL states on stdin through the serving policy, JSONL decisions on
//! stdout. A state is read by decider-core's own validation ([`State::from_value`], and
//! [`State::parse_json`] for a line that is not JSON), so a line gets the error the Worker
//! would give it.

use crate::serving::{load_decider, ModelArgs};
use anyhow::{bail, Context, Result};
use decider_core::{FieldError, Gates, State};
use serde_json::{json, Value};
use std::io::{BufRead, Write};
use std::time::Instant;

/// Flags of `decider decide`.
#[derive(clap::Args)]
#[command(
    about = "Decide for JSONL states on stdin (bare states or {\"state\": …}); JSONL decisions on stdout",
    after_help = "Examples:\n  echo '{\"state\":{\"request_type\":1,\"region_id\":3,\"current_load\":0.4,\"recent_success_rate\":0.97,\"queue_depth\":12,\"hour\":14}}' \\\n    | decider decide --model model/decision-model.json\n\nA line that is not a valid state yields {\"line\": N, \"error\": {…}} on stdout; the exit code is then 1."
)]
pub struct Args {
    /// The policy to decide with.
    #[command(flatten)]
    pub model: ModelArgs,
}

/// Runs `decider decide`: one decision or one error object per non-empty input line.
///
/// # Errors
/// An unreadable model or rule table, stdin or stdout failing, or any line that is not a
/// valid state (after every line is answered).
pub fn run(a: &Args) -> Result<()> {
    let (_, d) = load_decider(&a.model)?;
    let stdin = std::io::stdin();
    let mut out = std::io::BufWriter::new(std::io::stdout().lock());
    let mut bad = 0usize;
    for (i, line) in stdin.lock().lines().enumerate() {
        let line = line.with_context(|| format!("stdin:{}", i + 1))?;
        if line.trim().is_empty() {
            continue;
        }
        let t0 = Instant::now();
        match parse_line(&line, utc_hour()) {
            Ok(s) => {
                let mut dec = d.decide(&s, Gates::default());
                dec.decision_us = t0.elapsed().as_micros() as u64;
                writeln!(out, "{}", serde_json::to_string(&dec)?)?;
            }
            Err(e) => {
                bad += 1;
                writeln!(
                    out,
                    "{}",
                    json!({"line": i + 1, "error": {"code": e.code(), "message": e.to_string(), "field": e.field()}})
                )?;
            }
        }
    }
    out.flush()?;
    if bad > 0 {
        bail!("{bad} input line(s) were not valid states (see the error lines on stdout)");
    }
    Ok(())
}

/// A bare state, or `{"state": {…}}` (an object whose one key is `state`; errors then name
/// `state.<field>`).
fn parse_line(line: &str, hour: u8) -> Result<State, FieldError> {
    match serde_json::from_str::<Value>(line) {
        Ok(v) => match v.get("state") {
            Some(s) if v.as_object().is_some_and(|o| o.len() == 1) => {
                State::from_value(s, hour).map_err(|e| e.within("state"))
            }
            _ => State::from_value(&v, hour),
        },
        // Not JSON: core's parser says where, and names the field of a bad number.
        Err(_) => State::parse_json(line, hour),
    }
}

fn utc_hour() -> u8 {
    let secs = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs());
    ((secs / 3600) % 24) as u8
}

#[cfg(test)]
mod tests {
    use super::*;

    const STATE: &str = concat!(
        r#"{"request_type":1,"region_id":3,"current_load":0.4,"#,
        r#""recent_success_rate":0.97,"queue_depth":12,"hour":14}"#
    );

    #[test]
    fn a_line_is_a_bare_state_or_one_in_an_envelope() {
        let bare = parse_line(STATE, 0).unwrap();
        assert_eq!(parse_line(&format!(r#"{{"state":{STATE}}}"#), 0), Ok(bare));
        assert_eq!((bare.region_id, bare.hour), (3, 14));
        // An absent hour is the caller's.
        let no_hour = STATE.replace(r#","hour":14"#, "");
        assert_eq!(parse_line(&no_hour, 7).unwrap().hour, 7);
    }

    #[test]
    fn a_bad_line_gets_cores_error_naming_the_field() {
        let e = parse_line(
            &format!(
                r#"{{"state":{}}}"#,
                STATE.replace("\"region_id\":3", "\"region_id\":12")
            ),
            0,
        )
        .unwrap_err();
        assert_eq!(
            (e.code(), e.field()),
            ("out_of_range", Some("state.region_id"))
        );
        // A second key beside `state` makes it a bare state with unknown fields.
        let e = parse_line(&format!(r#"{{"state":{STATE},"x":1}}"#), 0).unwrap_err();
        assert_eq!((e.code(), e.field()), ("unknown_field", Some("state")));
        // Not JSON: the same error as the Worker's parser, with the number's field.
        let text = STATE.replace("0.4", "1e999");
        assert_eq!(
            parse_line(&text, 0).unwrap_err(),
            State::parse_json(&text, 0).unwrap_err()
        );
        let e = parse_line(&text, 0).unwrap_err();
        assert_eq!(
            (e.code(), e.field()),
            ("invalid_json", Some("current_load"))
        );
        assert_eq!(parse_line("{", 0).unwrap_err().code(), "invalid_json");
    }
}

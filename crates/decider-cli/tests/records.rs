//! The record table (`tests/fixtures/record_cases.json`) through `decider`'s log reader:
//! each case written as a log file, as `wrangler dev` would print it between other output,
//! and read; every line gets the verdict the table gives (decider-core and the Worker are
//! held to the same table by their own tests).

use decider_cli::logs::{LogReader, ReadOptions, Record, SkipReason};
use serde_json::Value;

#[test]
fn the_log_reader_gives_every_record_case_its_verdict() {
    let text = include_str!("../../../tests/fixtures/record_cases.json");
    let table: Value = serde_json::from_str(text).unwrap();
    let cases = table["cases"].as_array().unwrap();
    assert!(cases.len() >= 20);
    for case in cases {
        let name = case["name"].as_str().unwrap();
        // Each line after a request line of the dev server, as `wrangler dev` prints them.
        let mut log = String::new();
        for line in case["lines"].as_array().unwrap() {
            log.push_str("[wrangler:info] POST /v1/decide 200 OK (3ms)\n");
            // A string is the line's text as it is (a key given twice).
            match line {
                Value::String(text) => log.push_str(text),
                other => log.push_str(&other.to_string()),
            }
            log.push('\n');
        }
        let mut reader = LogReader::new(ReadOptions {
            samples_per_reason: 10,
            ..ReadOptions::default()
        });
        let mut got: Vec<Record> = Vec::new();
        reader
            .read_stream(name, log.as_bytes(), &mut |r| got.push(r))
            .unwrap();
        let s = reader.into_stats();
        let expect = case["expect"].as_array().unwrap();
        let ok = expect.iter().filter(|e| e["ok"] == true).count();
        let duplicates = expect.iter().filter(|e| e["skip"].is_string()).count();
        let bad: Vec<&Value> = expect.iter().filter(|e| e["code"].is_string()).collect();
        assert_eq!(got.len(), ok, "{name}: {:?}", s.samples);
        assert_eq!(
            s.skipped.get(SkipReason::DuplicateOutcome) as usize,
            duplicates,
            "{name}"
        );
        assert_eq!(
            s.skipped.get(SkipReason::BadRecord) as usize,
            bad.len(),
            "{name}"
        );
        // The dev server's request lines are not records.
        assert_eq!(
            s.skipped.get(SkipReason::NotJson) as usize,
            expect.len(),
            "{name}"
        );
        // A refusal's sample names its code and its field.
        for want in bad {
            let code = format!("bad_record: {}: ", want["code"].as_str().unwrap());
            let field = want["field"].as_str().unwrap();
            assert!(
                s.samples
                    .iter()
                    .any(|m| m.contains(&code) && m.contains(field)),
                "{name}: no sample with {code:?} and {field:?} in {:?}",
                s.samples
            );
        }
    }
}

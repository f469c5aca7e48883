//! The record table (`tests/fixtures/record_cases.json`): every case, line by line, gets the
//! verdict the table gives from decider-core's reader. The CLI's log reader and the Worker's
//! endpoints are held to the same table by their own tests.

use decider_core::record::{Reader, Record, SkipReason};
use serde_json::Value;

fn table() -> Value {
    let text = include_str!("../../../tests/fixtures/record_cases.json");
    serde_json::from_str(text).expect("the table is JSON")
}

fn cases() -> Vec<Value> {
    table()["cases"].as_array().expect("cases").clone()
}

/// A line's text: an object written as JSON, a string as it is (a key given twice).
fn line_text(line: &Value) -> String {
    match line {
        Value::String(text) => text.clone(),
        other => other.to_string(),
    }
}

#[test]
fn every_record_case_gets_its_verdict() {
    let cases = cases();
    assert!(cases.len() >= 20, "{} cases", cases.len());
    for case in &cases {
        let name = case["name"].as_str().expect("a name");
        let lines = case["lines"].as_array().expect("lines");
        let expect = case["expect"].as_array().expect("expect");
        assert_eq!(lines.len(), expect.len(), "{name}");
        let mut reader = Reader::new(10);
        for (i, (line, want)) in lines.iter().zip(expect).enumerate() {
            let text = line_text(line);
            let mut got = Vec::new();
            let found = reader.read_unit(text.as_bytes(), name, &mut |r| got.push(r));
            if want["ok"] == true {
                assert_eq!((found.records, &found.bad), (1, &vec![]), "{name} line {i}");
                // What was read is what the line says: written again, it reads the same.
                let back = Record::from_line(&got[0].to_line()).expect("re-reads");
                assert_eq!(back, got[0], "{name} line {i}");
            } else if let Some(skip) = want["skip"].as_str() {
                assert_eq!(skip, SkipReason::DuplicateOutcome.name(), "{name}");
                assert_eq!((found.records, found.duplicates), (0, 1), "{name} line {i}");
            } else {
                assert_eq!(found.records, 0, "{name} line {i}");
                let e = found
                    .bad
                    .first()
                    .unwrap_or_else(|| panic!("{name}: refused"));
                assert_eq!(
                    (e.code(), e.field()),
                    (want["code"].as_str().unwrap(), want["field"].as_str()),
                    "{name} line {i}: {e}"
                );
            }
        }
    }
}

/// The outcome cases the Worker validates (`worker: outcome`) give the same verdict as a
/// `POST /v1/outcome` body, read strictly by [`decider_core::record::OutcomeRecord::from_body`].
#[test]
fn outcome_bodies_get_the_verdict_of_their_lines() {
    let head = table()["format"]["outcome_head"]
        .as_str()
        .unwrap()
        .to_owned();
    for case in cases().iter().filter(|c| c["worker"] == "outcome") {
        let name = case["name"].as_str().unwrap();
        let body = match &case["lines"][0] {
            Value::String(text) => {
                let rest = text.strip_prefix(&head).expect("starts with outcome_head");
                format!("{{{rest}")
            }
            line => {
                let mut body = line.clone();
                for k in ["event", "log_version", "ts"] {
                    body.as_object_mut().unwrap().remove(k);
                }
                body.to_string()
            }
        };
        let got = decider_core::record::OutcomeRecord::from_body(
            body.as_bytes(),
            "2026-12-02T10:00:00.000Z".into(),
        );
        let want = &case["expect"][0];
        match got {
            Ok(o) => {
                assert!(want["ok"] == true, "{name}: accepted {o:?}");
                assert_eq!(
                    Record::from_line(&o.to_line()),
                    Ok(Record::Outcome(o)),
                    "{name}"
                );
            }
            Err(e) => assert_eq!(
                (e.code(), e.field()),
                (want["code"].as_str().unwrap(), want["field"].as_str()),
                "{name}: {e}"
            ),
        }
    }
}

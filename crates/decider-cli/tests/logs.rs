//! The log reader on every source format, gzip, and hostile input.

use decider_cli::logs::{LogReader, ReadOptions, ReadStats, Record, SkipReason};
use flate2::write::GzEncoder;
use flate2::Compression;
use std::io::Write;
use std::path::{Path, PathBuf};

/// What a read produced: (kind, decision_id, detail) per record, and the counters.
fn read_with(opts: ReadOptions, bytes: &[u8]) -> (Vec<(String, String, String)>, ReadStats) {
    let mut reader = LogReader::new(opts);
    let mut got = Vec::new();
    reader
        .read_stream("input", bytes, &mut |r: Record| {
            got.push(match r {
                Record::Decision(d) => (
                    "decision".to_owned(),
                    d.decision_id,
                    format!(
                        "{} {} {}",
                        d.endpoint.name(),
                        d.arm.name(),
                        d.outcome
                            .map_or("-".to_owned(), |o| format!("{:?}", o.status))
                    ),
                ),
                Record::Outcome(o) => (
                    "outcome".to_owned(),
                    o.decision_id,
                    format!("{:?} {:?} {:?}", o.reward, o.status, o.latency_ms),
                ),
                Record::Rollout(r) => (
                    "rollout".to_owned(),
                    String::new(),
                    format!("{} -> {} {}", r.from, r.to, r.why.name()),
                ),
                Record::RolloutJudged(j) => (
                    "rollout_judged".to_owned(),
                    String::new(),
                    format!("{} {}", j.phase.name(), j.setting),
                ),
                Record::RolloutAlarm(a) | Record::RolloutAlarmCleared(a) => (
                    "rollout_alarm".to_owned(),
                    String::new(),
                    a.kind.name().to_owned(),
                ),
            })
        })
        .unwrap();
    (got, reader.into_stats())
}

fn read(bytes: &[u8]) -> (Vec<(String, String, String)>, ReadStats) {
    read_with(ReadOptions::default(), bytes)
}

fn fixture(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/logs")
        .join(name)
}

/// The records the reader takes from `text`.
fn read_records(text: &str) -> Vec<Record> {
    let mut got = Vec::new();
    let mut reader = LogReader::new(ReadOptions::default());
    reader
        .read_stream("input", text.as_bytes(), &mut |r: Record| got.push(r))
        .unwrap();
    got
}

fn ids(got: &[(String, String, String)]) -> Vec<String> {
    got.iter().map(|(k, id, _)| format!("{k}:{id}")).collect()
}

fn skipped(s: &ReadStats) -> [u64; 6] {
    SkipReason::ALL.map(|r| s.skipped.get(r))
}

#[test]
fn raw_wrangler_dev_output() {
    let (got, s) = read(&std::fs::read(fixture("wrangler-dev.txt")).unwrap());
    assert_eq!(ids(&got), ["decision:d1", "decision:d2", "outcome:d1"]);
    // The second decision sat behind a timestamp and ANSI colour codes.
    assert_eq!(got[1].2, "route champion Some(200)");
    assert_eq!(got[2].2, "Some(1.0) None None");
    assert_eq!(s.lines, 12);
    // not_json: banner, rule, start-up and three [wrangler:info] lines; not_a_record: an
    // unrelated JSON log line; bad_record: state.hour 31.
    assert_eq!(skipped(&s), [6, 1, 1, 0, 0, 0]);
    assert!(
        s.samples.iter().any(|m| m
            == "input:11: bad_record: out_of_range: state.hour must be an integer 0..=23, got 31"),
        "{:?}",
        s.samples
    );
}

#[test]
fn wrangler_tail_json_pretty_printed_events() {
    let (got, s) = read(&std::fs::read(fixture("tail.json")).unwrap());
    // A record as a message string, one as an object after unrelated console arguments,
    // an outcome; the fourth event logs nothing of ours.
    assert_eq!(ids(&got), ["decision:d1", "decision:d2", "outcome:d1"]);
    assert_eq!(got[1].2, "route champion Some(200)");
    assert_eq!(got[2].2, "None Some(200) Some(12.5)");
    assert_eq!(skipped(&s), [0, 1, 0, 0, 0, 0]);
    assert!(s.lines > 50, "pretty-printed over many lines: {}", s.lines);
}

#[test]
fn logpush_workers_trace_events() {
    let (got, s) = read(&std::fs::read(fixture("logpush.ndjson")).unwrap());
    assert_eq!(ids(&got), ["decision:d1", "decision:d2"]);
    assert_eq!(got[1].2, "route holdout Some(200)");
    assert_eq!((s.lines, skipped(&s)), (3, [0, 1, 0, 0, 0, 0]));
}

#[test]
fn workers_logs_export_array() {
    let (got, s) = read(&std::fs::read(fixture("workers-logs.json")).unwrap());
    // Parsed `source` (not counted twice with $metadata.message), `source` as raw text,
    // and an outcome only in $metadata.message.
    assert_eq!(ids(&got), ["decision:d1", "decision:d2", "outcome:d1"]);
    assert_eq!(got[2].2, "Some(0.25) None None");
    assert_eq!(skipped(&s), [0, 1, 0, 0, 0, 0]);
}

#[test]
fn workers_logs_query_api_response() {
    let (got, s) = read(&std::fs::read(fixture("workers-logs-query.json")).unwrap());
    assert_eq!(ids(&got), ["decision:d1", "outcome:d1"]);
    assert_eq!(got[0].2, "decide challenger -");
    assert_eq!(got[1].2, "None Some(503) Some(80.0)");
    assert_eq!(skipped(&s).iter().sum::<u64>(), 0);
}

fn gzip(bytes: &[u8]) -> Vec<u8> {
    let mut e = GzEncoder::new(Vec::new(), Compression::default());
    e.write_all(bytes).unwrap();
    e.finish().unwrap()
}

#[test]
fn gzip_is_detected_by_magic_bytes_and_members_concatenate() {
    for name in [
        "wrangler-dev.txt",
        "tail.json",
        "logpush.ndjson",
        "workers-logs.json",
    ] {
        let plain = std::fs::read(fixture(name)).unwrap();
        let (want, ws) = read(&plain);
        let (got, gs) = read(&gzip(&plain));
        assert_eq!(got, want, "{name}");
        assert_eq!((gs.lines, skipped(&gs)), (ws.lines, skipped(&ws)), "{name}");
        assert!(
            gs.bytes < ws.bytes || plain.len() < 1000,
            "{name}: compressed bytes counted"
        );
    }
    // Logpush files are often several gzip members back to back.
    let a = std::fs::read(fixture("logpush.ndjson")).unwrap();
    let mut two = gzip(&a);
    two.extend(gzip(&a));
    let (got, _) = read(&two);
    assert_eq!(got.len(), 4);
}

#[test]
fn files_by_path_with_a_gz_name_or_not() {
    let dir = std::env::temp_dir().join(format!("decider-logs-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let gz = dir.join("logpush-no-suffix");
    std::fs::write(
        &gz,
        gzip(&std::fs::read(fixture("logpush.ndjson")).unwrap()),
    )
    .unwrap();
    let mut reader = LogReader::new(ReadOptions::default());
    let mut n = 0;
    reader
        .read_paths(&[gz.clone(), fixture("tail.json")], &mut |_| n += 1)
        .unwrap();
    assert_eq!(n, 5);
    assert_eq!(reader.stats().files, 2);
    let err = reader
        .read_paths(&[dir.join("missing.log")], &mut |_| {})
        .unwrap_err();
    assert!(err.to_string().contains("missing.log"), "{err}");
}

#[test]
fn bad_records_name_their_field() {
    let good = r#"{"log_version":1,"event":"decision","ts":"2026-12-02T10:00:00.000Z","decision_id":"x","endpoint":"route","state":{"request_type":1,"region_id":3,"current_load":0.4,"recent_success_rate":0.97,"queue_depth":12,"hour":10},"action":"route_a","source":"model","propensity":1,"arm":"champion"}"#;
    assert_eq!(read(good.as_bytes()).0.len(), 1);
    let cases = [
        (
            r#""ts":"2026-12-02T10:00:00.000Z""#,
            r#""ts":"yesterday""#,
            "out_of_range: ts must be an ISO-8601 UTC time",
        ),
        (
            r#""decision_id":"x""#,
            r#""decision_id":7"#,
            "invalid_type: decision_id must be a string, got number 7",
        ),
        (
            r#""endpoint":"route""#,
            r#""endpoint":"edge""#,
            "out_of_range: endpoint must be one of decide, route",
        ),
        (
            r#""hour":10"#,
            r#""hour":10.5"#,
            "invalid_type: state.hour must be an integer, got number 10.5",
        ),
        (
            r#""current_load":0.4"#,
            r#""current_load":"high""#,
            "invalid_type: state.current_load must be a number, got string",
        ),
        (
            r#""action":"route_a""#,
            r#""action":"route_z""#,
            "out_of_range: action must be one of route_a",
        ),
        (
            r#""source":"model""#,
            r#""source":{"x":1}"#,
            "invalid_type: source must be a string, got object",
        ),
        (
            r#""propensity":1"#,
            r#""propensity":0"#,
            "out_of_range: propensity must be a number in (0, 1]",
        ),
        (
            r#""arm":"champion""#,
            r#""arm":null"#,
            "missing_field: arm is required",
        ),
        (
            r#""log_version":1"#,
            r#""log_version":2"#,
            "out_of_range: log_version must be 1 (the version this reader knows), got 2",
        ),
        (
            r#","arm":"champion""#,
            r#","arm":"champion","outcome":{"status":"200"}"#,
            "invalid_type: outcome.status must be an integer, got string",
        ),
        (
            r#","arm":"champion""#,
            r#","arm":"champion","confidence":1.5"#,
            "out_of_range: confidence must be a number 0..=1",
        ),
    ];
    for (from, to, want) in cases {
        let line = good.replace(from, to);
        assert_ne!(line, good, "{from}");
        let (got, s) = read(line.as_bytes());
        assert!(got.is_empty(), "{line}");
        assert_eq!(skipped(&s), [0, 0, 1, 0, 0, 0], "{line}");
        assert!(s.samples[0].contains(want), "{want} not in {:?}", s.samples);
    }
    // Workers Logs holds a bad record twice (parsed `source`, raw `$metadata.message`): once.
    let line = good.replace(r#""hour":10"#, r#""hour":24"#);
    let event = format!(
        r#"{{"source":{line},"$metadata":{{"message":{}}}}}"#,
        serde_json::to_string(&line).unwrap()
    );
    let (_, s) = read(event.as_bytes());
    assert_eq!(skipped(&s), [0, 0, 1, 0, 0, 0], "{:?}", s.samples);
    let outcome = r#"{"log_version":1,"event":"outcome","ts":"2026-12-02T10:00:00.000Z","decision_id":"x","reward":null}"#;
    let (_, s) = read(outcome.as_bytes());
    assert!(
        s.samples[0].contains("missing_field: one of reward, status is required"),
        "{:?}",
        s.samples
    );
    let (_, s) = read(outcome.replace("null", "1.5").as_bytes());
    assert!(
        s.samples[0].contains("out_of_range: reward must be a number 0..=1"),
        "{:?}",
        s.samples
    );
}

#[test]
fn hostile_input_never_panics_and_is_counted() {
    let record = std::fs::read_to_string(fixture("wrangler-dev.txt")).unwrap();
    let decision = record.lines().nth(5).unwrap().to_owned();
    let mut input: Vec<u8> = Vec::new();
    let mut push = |b: &[u8]| {
        input.extend_from_slice(b);
        input.push(b'\n');
    };
    push(&decision.as_bytes()[..decision.len() / 2]); // truncated record: not_json
    push(b"\xff\xfe{\"log_version\":1,\"event\":\"decision\xff\"}"); // invalid UTF-8: not_json
    push(
        format!(
            "{{\"logs\":{}{}}}",
            "[".repeat(100_000),
            "]".repeat(100_000)
        )
        .as_bytes(),
    ); // nesting: not_json
    push(format!("{}{}", "{\"source\":".repeat(50_000), "}".repeat(50_000)).as_bytes()); // nesting: not_json
    push(b"{\"ts\":1,\"ts\":2}"); // duplicate key, the last one read: not_a_record
    push(b"[1,2,3]"); // not_a_record
    push(b"{\"source\":\"{\\\"source\\\":\\\"{}\\\"}\"}"); // strings in strings, nothing inside: not_a_record
    push(&[0u8, 1, 2, 3, 0x1f, 0x8b, 0x08, 0, 0]); // binary: not_json
    push(decision.as_bytes()); // still read after all that
    let mut big = String::from("{\"pad\":\"");
    big.push_str(&"x".repeat(3 << 20));
    big.push_str("\"}");
    push(big.as_bytes()); // too_long with a 1 MiB limit
    push(b"{"); // a pretty-printed value that never closes: not_json at the end
    push(b"  \"a\": [");
    let opts = ReadOptions {
        max_value_bytes: 1 << 20,
        ..ReadOptions::default()
    };
    let (got, s) = read_with(opts, &input);
    assert_eq!(got.len(), 1, "{:?}", s.samples);
    assert_eq!(skipped(&s), [6, 3, 0, 0, 1, 0], "{:?}", s.samples);
    assert_eq!(s.lines, 12);

    // Pseudo-random bytes and mangled records: nothing panics, every line is accounted for.
    let mut x = 0x9e37_79b9_7f4a_7c15u64;
    let mut next = || {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        x
    };
    let mut fuzz = Vec::new();
    for i in 0..3000 {
        let mut line: Vec<u8> = decision.as_bytes().to_vec();
        match i % 3 {
            0 => {
                let k = (next() % line.len() as u64) as usize;
                line[k] = (next() % 256) as u8;
            }
            1 => line.truncate((next() % line.len() as u64) as usize),
            _ => line = (0..(next() % 300)).map(|_| (next() % 256) as u8).collect(),
        }
        fuzz.extend(line.iter().filter(|&&b| b != b'\n'));
        fuzz.push(b'\n');
    }
    let (got, s) = read(&fuzz);
    assert_eq!(s.lines, 3000);
    assert!(got.len() as u64 + s.skipped.total() <= s.lines);
    // Corrupt gzip after a valid header: the rest of the file is a read error, counted once.
    let mut bad_gz = gzip(decision.as_bytes());
    let n = bad_gz.len();
    bad_gz.truncate(n / 2);
    bad_gz.extend_from_slice(&[0xde, 0xad, 0xbe, 0xef]);
    let (_, s) = read(&bad_gz);
    assert_eq!(s.skipped.get(SkipReason::ReadError), 1, "{:?}", s.samples);
}

#[test]
fn a_truncated_pretty_value_does_not_swallow_the_next() {
    let tail = std::fs::read_to_string(fixture("tail.json")).unwrap();
    let events: Vec<&str> = tail.split("\n{\n").collect();
    // Cut the first event in half, then the remaining events.
    let cut = &events[0][..events[0].len() / 2];
    let text = format!("{cut}\n{{\n{}", events[1..].join("\n{\n"));
    let (got, s) = read(text.as_bytes());
    assert_eq!(ids(&got), ["decision:d2", "outcome:d1"]);
    assert_eq!(skipped(&s), [1, 1, 0, 0, 0, 0], "{:?}", s.samples);
    let (got, s) =
        read(b"[\n  {\"a\": 1},\n  \"text\",\n  {\"logs\": [{\"message\": [\"x\"]}]}\n]\n");
    assert!(got.is_empty());
    assert_eq!(skipped(&s), [0, 2, 0, 0, 0, 0]);
}

#[test]
fn records_are_read_into_decider_cores_types_field_for_field() {
    // Every field the Worker can write, nested objects included, comes through the reader.
    let line = serde_json::json!({
        "event": "decision", "log_version": 1, "ts": "2026-12-02T10:00:00.123Z",
        "decision_id": "0b0e6a8c", "request_id": "8f00e2e-LHR", "endpoint": "route",
        "state": {"request_type": 1, "region_id": 3, "current_load": 0.4,
                  "recent_success_rate": 0.97, "queue_depth": 12, "hour": 14},
        "action": "route_b", "source": "model", "fallback_reason": null, "rule": "r2",
        "confidence": 0.97,
        "probabilities": {"route_a": 0.01, "route_b": 0.97, "route_c": 0.01, "reject": 0.01},
        "propensity": 0.9, "explored": true, "model_version": "gbdt-1", "rules_version": "r-1",
        "encoder_version": 1, "backend": "embedded", "arm": "challenger", "decision_us": 12,
        "outcome": {"origin": "route_c", "status": 200, "latency_ms": 12.5, "failover": "route_c",
                    "origin_down": "route_b",
                    "error": null, "attempts": [
                        {"origin": "route_b", "status": 503, "error": "upstream_status", "latency_ms": 3.0},
                        {"origin": "route_c", "status": 200, "error": null, "latency_ms": 9.5}]},
        "request": {"method": "GET", "country": "GB", "continent": "EU", "signals_age_s": 4.5,
                    "signals_detail": null},
        "shadow": {"model_action": "route_a", "agree": false},
        "detail": "model answered late"
    })
    .to_string();
    let got = read_records(&line);
    let [Record::Decision(d)] = &got[..] else {
        panic!("one decision: {got:?}");
    };
    let o = d.outcome.as_ref().unwrap();
    assert_eq!(
        (
            o.origin_down.map(|a| a.name()),
            o.attempts[0].status,
            o.attempts[1].latency_ms
        ),
        (Some("route_b"), Some(503), Some(9.5))
    );
    assert_eq!(d.request.as_ref().unwrap().signals_age_s, Some(4.5));
    assert_eq!(d.shadow.map(|s| s.agree), Some(false));
    assert_eq!((d.propensity, d.explored, d.decision_us), (0.9, true, 12));
    // Written again, it reads back the same.
    assert_eq!(read_records(&d.to_line()), got);
    // An unknown error kind is a bad record naming the attempt's field.
    let bad = line.replace("\"upstream_status\"", "\"gremlins\"");
    let (got, s) = read(bad.as_bytes());
    assert!(got.is_empty());
    assert!(
        s.samples[0].contains("out_of_range: outcome.attempts[0].error must be one of timeout"),
        "{:?}",
        s.samples
    );
}

#[test]
fn a_line_written_compact_reads_back_whole() {
    // A record over 1 KB is written without its null fields and probabilities, keys in
    // another order: the reader takes absent fields as null.
    let full = serde_json::json!({
        "event": "decision", "log_version": 1, "ts": "2026-12-02T10:00:00.123Z",
        "decision_id": "0b0e6a8c-8a5e-4a49-9f6e-6c0e7f1d2a3b", "request_id": "R".repeat(128),
        "endpoint": "route",
        "state": {"request_type": 1, "region_id": 3, "current_load": 0.4,
                  "recent_success_rate": 0.97, "queue_depth": 12, "hour": 14},
        "action": "route_b", "source": "model", "fallback_reason": null, "rule": null,
        "confidence": 0.9712345678901234,
        "probabilities": {"route_a": 0.0112345678901234, "route_b": 0.9712345678901234,
                          "route_c": 0.0112345678901234, "reject": 0.0062962963296298},
        "propensity": 1, "explored": false, "model_version": "gbdt-fe6ed1b269ed",
        "rules_version": "default-2026-11-30", "encoder_version": 1, "backend": "embedded",
        "arm": "champion", "decision_us": 0,
        "outcome": {"origin": "route_c", "status": 200, "latency_ms": 12.0, "failover": "route_c",
                    "error": null, "attempts": [
                        {"origin": "route_b", "status": 503, "error": "upstream_status", "latency_ms": 3.0},
                        {"origin": "route_c", "status": 200, "error": null, "latency_ms": 9.0}]},
        "request": {"method": "GET", "country": "GB", "continent": "EU", "signals_age_s": 4.5,
                    "signals_detail": null},
        "detail": "route_b answered 503"
    });
    let Ok(Record::Decision(d)) = Record::from_value(&full) else {
        panic!("not a decision");
    };
    let line = d.to_line();
    assert!(line.len() <= 1024, "{} bytes", line.len());
    assert!(
        !line.contains("null") && !line.contains("probabilities"),
        "{line}"
    );
    let got = read_records(&line);
    let Record::Decision(back) = &got[0] else {
        panic!("not a decision");
    };
    assert_eq!(
        (back.state, back.action, back.propensity),
        (d.state, d.action, d.propensity)
    );
    assert_eq!(back.outcome, d.outcome);
    assert_eq!(back.request_id, d.request_id, "it fits once compact");
}

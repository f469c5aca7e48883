//! Synthetic logs (`decider_cli::synth_logs`) read back: by the log reader in every format,
//! byte for byte by the record codec, and by `decider report` for each scenario's shape.

use decider_cli::logs::{LogReader, ReadOptions, ReadStats, Record, SkipReason};
use decider_cli::synth_logs::{self, Format, Options, Scenario, Written};
use serde_json::Value;
use std::fs::File;
use std::io::{self, BufWriter, Write};

mod common;

fn generate(opts: &Options) -> (Vec<u8>, Written) {
    let mut out = Vec::new();
    let written = synth_logs::write(opts, &mut out).unwrap();
    (out, written)
}

fn read(bytes: &[u8]) -> (Vec<Record>, ReadStats) {
    let mut reader = LogReader::new(ReadOptions::default());
    let mut records = Vec::new();
    reader
        .read_stream("synthetic", bytes, &mut |r| records.push(r))
        .unwrap();
    (records, reader.into_stats())
}

/// More noise than the default, so that every kind of line shows up many times.
fn noisy(format: Format) -> Options {
    Options {
        lines: 20_000,
        seed: 11,
        format,
        noise: 0.25,
        ..Options::default()
    }
}

#[test]
fn every_format_reads_back_with_the_counts_written() {
    let (dev, w) = generate(&noisy(Format::Dev));
    assert_eq!(w.lines, 20_000);
    assert_eq!(
        w.decisions
            + w.outcomes
            + w.request_lines
            + w.banners
            + w.blank_lines
            + w.truncated
            + w.bad_records,
        w.lines,
        "{w:?}"
    );
    for (kind, n) in [
        ("decisions", w.decisions),
        ("duplicate outcomes", w.duplicate_outcomes),
        ("orphan outcomes", w.orphan_outcomes),
        ("late outcomes", w.outcomes - w.orphan_outcomes),
        ("request lines", w.request_lines),
        ("banners", w.banners),
        ("blank lines", w.blank_lines),
        ("truncated lines", w.truncated),
        ("bad records", w.bad_records),
    ] {
        assert!(n > 10, "{kind}: {n} in {w:?}");
    }
    let (want, stats) = read(&dev);
    for format in Format::ALL {
        let (bytes, written) = generate(&noisy(format));
        assert_eq!(written, w, "{format:?}: the same lines in every envelope");
        let (records, stats) = if format == Format::Dev {
            (want.clone(), stats.clone())
        } else {
            read(&bytes)
        };
        let skipped = |r| stats.skipped.get(r);
        // The first outcome of a decision counts; its retries are skipped.
        assert_eq!(
            (
                stats.decisions,
                stats.outcomes,
                skipped(SkipReason::DuplicateOutcome)
            ),
            (
                w.decisions,
                w.outcomes - w.duplicate_outcomes,
                w.duplicate_outcomes
            ),
            "{format:?}"
        );
        assert_eq!(skipped(SkipReason::BadRecord), w.bad_records, "{format:?}");
        // Text outside an envelope is not JSON; inside one, it is an event without a record.
        // A blank line is no unit at all in raw logs.
        let (not_json, not_a_record) = match format {
            Format::Dev => (w.request_lines + w.banners + w.truncated, 0),
            _ => (0, w.request_lines + w.banners + w.truncated + w.blank_lines),
        };
        assert_eq!(
            (
                skipped(SkipReason::NotJson),
                skipped(SkipReason::NotARecord),
                skipped(SkipReason::TooLong),
                skipped(SkipReason::ReadError),
            ),
            (not_json, not_a_record, 0, 0),
            "{format:?}: {:?}",
            stats.samples
        );
        if format == Format::Dev {
            assert_eq!(stats.lines, w.lines);
        }
        assert!(records == want, "{format:?}: other records than dev's");
    }
}

#[test]
fn record_lines_are_the_codec_bytes() {
    let (dev, w) = generate(&noisy(Format::Dev));
    let mut records = 0;
    for line in std::str::from_utf8(&dev).unwrap().lines() {
        let Ok(record) = Record::from_line(line) else {
            continue;
        };
        assert_eq!(record.to_line(), line);
        records += 1;
    }
    // Bad records (an hour of 24, a reward of 1.5) are refused by the reader's range checks.
    assert_eq!(records, w.decisions + w.outcomes);
}

#[test]
fn gzip_output_reads_back_as_the_plain_one() {
    let opts = Options {
        lines: 5_000,
        ..Options::default()
    };
    let (plain, w) = generate(&opts);
    let mut gz = Vec::new();
    assert_eq!(synth_logs::write_gzip(&opts, &mut gz).unwrap(), w);
    assert!(gz.starts_with(&[0x1f, 0x8b]));
    assert!(
        gz.len() * 4 < plain.len(),
        "{} of {}",
        gz.len(),
        plain.len()
    );
    let mut again = Vec::new();
    synth_logs::write_gzip(&opts, &mut again).unwrap();
    assert!(gz == again, "gzip bytes differ between runs");
    let ((a, sa), (b, sb)) = (read(&plain), read(&gz));
    assert!(a == b);
    assert_eq!(
        (sa.decisions, sa.outcomes, sa.lines, sa.skipped),
        (sb.decisions, sb.outcomes, sb.lines, sb.skipped)
    );
}

#[test]
fn the_same_options_give_the_same_bytes() {
    for format in Format::ALL {
        for scenario in Scenario::ALL {
            let opts = Options {
                lines: 3_000,
                seed: 3,
                scenario,
                format,
                ..Options::default()
            };
            let (a, _) = generate(&opts);
            let (b, _) = generate(&opts);
            assert!(a == b, "{format:?} {scenario:?}");
            let (c, _) = generate(&Options { seed: 4, ..opts });
            assert!(a != c, "{format:?} {scenario:?}: the seed changes nothing");
        }
    }
}

/// `decider report --json` on 100,000 lines of `scenario` (always seed 5: only the scenario
/// changes between runs), checked against what was written.
fn report(scenario: Scenario) -> Value {
    let path = common::tmp("synth", &format!("{}.log", scenario.name()));
    let opts = Options {
        lines: 100_000,
        seed: 5,
        scenario,
        ..Options::default()
    };
    let file = BufWriter::new(File::create(&path).unwrap());
    let w = synth_logs::write(&opts, file).unwrap();
    let o = common::decider(&["report", "--logs", path.to_str().unwrap(), "--json"]);
    std::fs::remove_file(&path).unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let r: Value = serde_json::from_slice(&o.stdout).unwrap();
    let count = |k: &str| r[k].as_u64();
    assert_eq!(
        (
            count("decisions"),
            count("duplicate_decisions"),
            count("outcomes"),
            count("orphan_outcomes"),
            r["skipped"]["duplicate_outcome"].as_u64(),
            r["skipped"]["bad_record"].as_u64(),
        ),
        (
            Some(w.decisions),
            Some(0),
            Some(w.outcomes - w.duplicate_outcomes),
            Some(w.orphan_outcomes),
            Some(w.duplicate_outcomes),
            Some(w.bad_records),
        ),
        "{scenario:?}"
    );
    r
}

/// The actions of the report's three verdicts: model vs rules, champion vs challenger,
/// fallback alarm.
fn actions(r: &Value) -> [String; 3] {
    ["model_vs_rules", "champion_vs_challenger", "fallback_alarm"].map(|kind| {
        let v = r["verdicts"]
            .as_array()
            .unwrap()
            .iter()
            .find(|v| v["kind"] == kind)
            .unwrap_or_else(|| panic!("no {kind} verdict in {}", r["verdicts"]));
        v["action"].as_str().unwrap().to_owned()
    })
}

#[test]
fn steady_logs_give_nothing_to_act_on() {
    let r = report(Scenario::Steady);
    assert_eq!(
        actions(&r),
        ["keep collecting", "keep collecting", "steady"],
        "{}",
        r["verdicts"]
    );
}

#[test]
fn rules_better_logs_say_retrain() {
    let r = report(Scenario::RulesBetter);
    assert_eq!(
        actions(&r),
        ["retrain", "keep collecting", "steady"],
        "{}",
        r["verdicts"]
    );
    let rate = |arm: &str| r["by_arm"][arm]["success_rate"].as_f64().unwrap();
    assert!(rate("holdout") > rate("champion"));
}

#[test]
fn challenger_worse_logs_say_roll_back() {
    let r = report(Scenario::ChallengerWorse);
    assert_eq!(
        actions(&r),
        ["keep collecting", "roll the challenger back", "steady"],
        "{}",
        r["verdicts"]
    );
}

#[test]
fn ood_spike_logs_raise_the_fallback_alarm() {
    let r = report(Scenario::OodSpike);
    assert_eq!(
        actions(&r),
        ["keep collecting", "keep collecting", "alarm"],
        "{}",
        r["verdicts"]
    );
    // The spike is in the last tenth of the run, and out-of-distribution is what rose.
    let buckets = r["fallback"]["over_time"].as_array().unwrap();
    let ood = |b: &Value| b["ood_rate"].as_f64().unwrap();
    let last = ood(buckets.last().unwrap());
    assert!(buckets.len() >= 10, "{} buckets", buckets.len());
    assert!(
        buckets[..buckets.len() / 2]
            .iter()
            .all(|b| ood(b) * 4.0 < last),
        "{last} vs {:?}",
        buckets.iter().map(ood).collect::<Vec<_>>()
    );
}

/// Counts bytes and throws them away.
struct Sink(u64);

impl Write for Sink {
    fn write(&mut self, b: &[u8]) -> io::Result<usize> {
        self.0 += b.len() as u64;
        Ok(b.len())
    }
    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

/// 200,000 lines (the report benchmark times a million), with the outcomes per decision the
/// steady scenario gives.
#[test]
fn outcomes_per_decision_follow_the_scenario() {
    let opts = Options {
        lines: 200_000,
        ..Options::default()
    };
    let mut sink = Sink(0);
    let w = synth_logs::write(&opts, &mut sink).unwrap();
    assert_eq!(w.lines, 200_000);
    assert!(sink.0 > 100_000_000, "{} bytes", sink.0);
    // 30% of decisions are /v1/decide ones, 80% of those get an outcome, 1% of outcomes
    // twice: 0.2424 per decision, but for the few still pending when the run ends.
    let per_decision = (w.outcomes - w.orphan_outcomes) as f64 / w.decisions as f64;
    assert!(
        (per_decision - 0.2424).abs() < 0.006,
        "{per_decision}: {w:?}"
    );
}

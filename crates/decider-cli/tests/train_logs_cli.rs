//! `decider train --logs` on the command line: logs from a known ε-greedy logger and a known
//! reward function in, an artifact out whose serving policy is worth more than the logger's,
//! and whose record and card say it was learned from logs.

use common::{bandit_lines, decider, decision};
use decider_cli::ope::synthetic::{reward_probability, simulate_logs, true_value, Logging};
use decider_cli::serving::{load_decider, ModelArgs};
use decider_core::Gates;
use serde_json::Value;
use std::path::PathBuf;

mod common;

fn tmp(name: &str) -> PathBuf {
    common::tmp("train-logs", name)
}

#[test]
fn a_policy_learned_from_logs_beats_the_logger() {
    let logger = Logging::EpsilonGreedy(0.2);
    let samples = simulate_logs(20_000, 81, logger);
    let mut lines = bandit_lines(&samples, "t");
    lines.push("not a record".into());
    lines.push(decision(
        "h",
        9,
        "route",
        "holdout",
        Some("holdout"),
        "route_a",
        "m-1",
        Some((Some(200), Some(5.0))),
    ));
    let logs = tmp("older.log");
    std::fs::write(&logs, lines.join("\n")).unwrap();
    let out = tmp("from-logs.json");
    let o = decider(&[
        "train",
        "--logs",
        logs.to_str().unwrap(),
        "--out",
        out.to_str().unwrap(),
        "--max-rounds",
        "150",
        "--quiet",
    ]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let stdout = String::from_utf8(o.stdout).unwrap();
    assert!(
        stdout.contains("from logs: 20000 labelled row(s) of 20001 decision(s)"),
        "{stdout}"
    );

    // Worth more than the logger on states it never saw, by the known reward function.
    let (_, d) = load_decider(&ModelArgs {
        model: out.clone(),
        rules: None,
        threshold: None,
        no_ood: false,
    })
    .unwrap();
    let fresh = simulate_logs(20_000, 82, logger);
    let learned = fresh
        .iter()
        .map(|s| reward_probability(&s.state, d.decide(&s.state, Gates::default()).action))
        .sum::<f64>()
        / fresh.len() as f64;
    let logging = true_value(&fresh, &logger);
    assert!(
        learned > logging + 0.02,
        "learned {learned} vs logger {logging}"
    );

    let art: Value = serde_json::from_str(&std::fs::read_to_string(&out).unwrap()).unwrap();
    let t = &art["training"];
    assert_eq!(t["source"], "logs");
    // The trainer's default base, as with --data.
    assert_eq!(t["params"]["base"], "network");
    assert!(art["model"]["hidden"]["weights"].is_array());
    assert_eq!(t["rows"], 20_000);
    assert_eq!(t["logs"]["rows"], 20_000);
    assert_eq!(t["logs"]["decisions"], 20_001);
    assert_eq!(t["logs"]["left_out"]["holdout"], 1);
    assert_eq!(t["logs"]["files"], serde_json::json!(["older.log"]));
    assert_eq!(t["logs"]["from"], "2026-12-02T10:00:00Z");
    assert_eq!(t["logs"]["to"], common::ts(19_999).replace(".000Z", "Z"));
    assert_eq!(t["logs"]["reward"]["reject_reward"], 0.0);
    assert!(
        t["logs"]["labels"]["relabelled"].as_u64().unwrap() > 1000,
        "{t}"
    );
    let card = std::fs::read_to_string(tmp("from-logs.md")).unwrap();
    assert!(
        card.contains("| data source | decision logs: 20000 rows used of 20001 decisions, logged 2026-12-02T10:00:00Z to "),
        "{card}"
    );
    assert!(
        card.contains("| reward | an outcome line's reward"),
        "{card}"
    );
    assert!(
        card.contains("| labels | argmax of a boosted-tree reward model"),
        "{card}"
    );

    // Same logs, same seed: the same artifact.
    let again = tmp("again.json");
    let o = decider(&[
        "train",
        "--logs",
        logs.to_str().unwrap(),
        "--out",
        again.to_str().unwrap(),
        "--max-rounds",
        "150",
        "--quiet",
    ]);
    assert!(o.status.success());
    assert_eq!(std::fs::read(&out).unwrap(), std::fs::read(&again).unwrap());
}

#[test]
fn train_takes_exactly_one_source() {
    let logs = tmp("one.log");
    std::fs::write(&logs, "").unwrap();
    let l = logs.to_str().unwrap();
    for args in [
        vec!["train", "--out", "x.json"],
        vec!["train", "--data", l, "--logs", l, "--out", "x.json"],
        vec!["train", "--data", l, "--slo-ms", "100", "--out", "x.json"],
        vec!["train", "--logs", l, "--valid", l, "--out", "x.json"],
        vec!["train", "--logs", l, "--slo-ms", "-3", "--out", "x.json"],
    ] {
        let o = decider(&args);
        assert_eq!(
            o.status.code(),
            Some(2),
            "{args:?}: {}",
            String::from_utf8_lossy(&o.stderr)
        );
    }
    // Logs with nothing to learn from: one line, exit 1, and no artifact.
    let out = tmp("nothing.json");
    let o = decider(&["train", "--logs", l, "--out", out.to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(1));
    let err = String::from_utf8(o.stderr).unwrap();
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(err.contains("cannot learn from these logs"), "{err}");
    assert!(!out.exists());
    let o = decider(&[
        "train",
        "--logs",
        tmp("missing.log").to_str().unwrap(),
        "--out",
        out.to_str().unwrap(),
    ]);
    assert_eq!(o.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&o.stderr).contains("missing.log"));
}

//! `decider ope` on the command line, on logs written from a known logging policy and a
//! known reward function: the intervals cover the candidate's true value, the warnings
//! appear when they should, bad input is counted or refused, never a crash.

use common::{bandit_lines, decider, decision, outcome};
use decider_cli::ope::synthetic::{reward_probability, simulate_logs, Logging};
use decider_cli::ope::Sample;
use decider_cli::serving::{load_decider, ModelArgs};
use decider_core::Gates;
use serde_json::Value;
use std::path::{Path, PathBuf};

mod common;

fn tmp(name: &str) -> PathBuf {
    common::tmp("ope", name)
}

/// The shipped model: the candidate.
fn shipped() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../model/decision-model.json")
}

fn write(name: &str, lines: &[String]) -> PathBuf {
    let p = tmp(name);
    std::fs::write(&p, lines.join("\n") + "\n").unwrap();
    p
}

fn ope_json(args: &[&str]) -> Value {
    let mut all = vec!["ope"];
    all.extend_from_slice(args);
    all.push("--json");
    let o = decider(&all);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let text = String::from_utf8(o.stdout).unwrap();
    assert_eq!(text.trim_end().lines().count(), 1, "{text}");
    serde_json::from_str(&text).unwrap()
}

/// The candidate's true value on these states: the known reward probability of the action
/// the whole serving policy (model, threshold, rules) takes.
fn true_value(samples: &[Sample], model: &Path) -> f64 {
    let (_, d) = load_decider(&ModelArgs {
        model: model.to_path_buf(),
        rules: None,
        threshold: None,
        no_ood: false,
    })
    .unwrap();
    samples
        .iter()
        .map(|s| reward_probability(&s.state, d.decide(&s.state, Gates::default()).action))
        .sum::<f64>()
        / samples.len() as f64
}

fn interval(v: &Value) -> (f64, f64) {
    (
        v["ci95"][0].as_f64().unwrap(),
        v["ci95"][1].as_f64().unwrap(),
    )
}

#[test]
fn intervals_cover_the_candidates_true_value_on_explored_logs() {
    let samples = simulate_logs(12_000, 71, Logging::EpsilonGreedy(0.2));
    let mut lines = bandit_lines(&samples, "d");
    // Holdout decisions are left out: the rules decide them whatever model serves.
    lines.push(decision(
        "h1",
        5,
        "route",
        "holdout",
        Some("holdout"),
        "route_a",
        "m-1",
        Some((Some(200), Some(10.0))),
    ));
    let path = write("explored.log", &lines);
    let truth = true_value(&samples, &shipped());
    let r = ope_json(&[
        "--logs",
        path.to_str().unwrap(),
        "--model",
        shipped().to_str().unwrap(),
        "--quiet",
    ]);
    assert_eq!(r["n"], 12_000);
    assert_eq!(r["left_out"]["holdout"], 1);
    for key in ["logged_value", "ips", "snips", "dr"] {
        assert!(r[key]["value"].is_f64(), "{key}: {r}");
    }
    for key in ["dr", "ips"] {
        let (lo, hi) = interval(&r[key]);
        assert!(
            lo <= truth && truth <= hi,
            "{key} [{lo}, {hi}] misses {truth}"
        );
        assert!(
            hi - lo < 0.06,
            "{key} interval too wide to mean anything: {lo} {hi}"
        );
    }
    // The logged value is the ε-greedy logger's, which the candidate beats by far more than
    // the intervals' width: the estimate tells them apart.
    let logged = r["logged_value"]["value"].as_f64().unwrap();
    assert!(truth - logged > 0.05, "truth {truth} logged {logged}");
    assert!(r["ess"].as_f64().unwrap() > 1000.0, "{}", r["ess"]);
    assert_eq!(r["from"], "2026-12-02T10:00:00Z");
    let warnings = r["warnings"].as_array().unwrap();
    assert!(
        warnings
            .iter()
            .all(|w| !w.as_str().unwrap().contains("no exploration")),
        "{warnings:?}"
    );
}

#[test]
fn deterministic_logs_warn_about_missing_support() {
    let samples = simulate_logs(3_000, 72, Logging::Greedy);
    let path = write("greedy.log", &bandit_lines(&samples, "g"));
    let r = ope_json(&[
        "--logs",
        path.to_str().unwrap(),
        "--model",
        shipped().to_str().unwrap(),
    ]);
    let warnings: Vec<&str> = r["warnings"]
        .as_array()
        .unwrap()
        .iter()
        .map(|w| w.as_str().unwrap())
        .collect();
    assert!(
        warnings
            .iter()
            .any(|w| w.contains("no exploration: every propensity is 1")),
        "{warnings:?}"
    );
    // The text output says it too, and does not crash on the same input.
    let o = decider(&[
        "ope",
        "--logs",
        path.to_str().unwrap(),
        "--model",
        shipped().to_str().unwrap(),
    ]);
    let text = String::from_utf8(o.stdout).unwrap();
    assert!(o.status.success());
    for needle in ["IPS", "SNIPS", "DR", "ESS", "warnings:", "no exploration"] {
        assert!(text.contains(needle), "{needle}: {text}");
    }
}

#[test]
fn malformed_lines_are_skipped_and_counted() {
    let samples = simulate_logs(400, 73, Logging::UniformRoutes);
    let mut lines = bandit_lines(&samples, "m");
    lines.insert(
        3,
        "{\"log_version\":1,\"event\":\"decision\",\"ts\":\"x\"".into(),
    );
    lines.insert(7, "\u{0}\u{1}binary noise".into());
    // A record whose propensity is out of range: a bad record, named by its field.
    let bad = decision("b1", 1, "decide", "champion", None, "route_a", "m-1", None)
        .replace("\"propensity\":1", "\"propensity\":0");
    lines.insert(9, bad);
    // A decision whose outcome never arrives.
    lines.push(decision(
        "lonely", 2, "decide", "champion", None, "route_b", "m-1", None,
    ));
    lines.push(outcome("orphan", 3, Some(1.0), None, None));
    let path = write("malformed.log", &lines);
    let r = ope_json(&[
        "--logs",
        path.to_str().unwrap(),
        "--model",
        shipped().to_str().unwrap(),
    ]);
    assert_eq!(r["n"], 400);
    assert_eq!(r["read"]["skipped"]["bad_record"], 1, "{}", r["read"]);
    assert_eq!(r["read"]["skipped"]["not_json"], 2, "{}", r["read"]);
    assert_eq!(r["left_out"]["no_outcome"], 1);
    let warnings = r["warnings"].to_string();
    assert!(
        warnings.contains("1 malformed or unreadable record(s) skipped")
            && warnings.contains("propensity"),
        "{warnings}"
    );
    assert!(
        warnings.contains("1 of 401 decision(s) have no outcome"),
        "{warnings}"
    );
}

#[test]
fn bad_input_is_a_one_line_error_with_the_right_exit_code() {
    let model = shipped();
    let missing = tmp("no-such.log");
    let o = decider(&[
        "ope",
        "--logs",
        missing.to_str().unwrap(),
        "--model",
        model.to_str().unwrap(),
    ]);
    assert_eq!(o.status.code(), Some(1));
    let err = String::from_utf8(o.stderr).unwrap();
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(
        err.starts_with("decider: error: ") && err.contains("no-such.log"),
        "{err}"
    );

    let samples = simulate_logs(50, 74, Logging::UniformRoutes);
    let path = write("small.log", &bandit_lines(&samples, "s"));
    let p = path.to_str().unwrap();
    let o = decider(&["ope", "--logs", p, "--model", missing.to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&o.stderr).contains("no-such.log"));
    for bad in [
        vec!["--slo-ms", "0"],
        vec!["--reject-reward", "2"],
        vec!["--threshold", "1.5"],
        vec!["--folds", "1"],
        vec!["--folds", "x"],
    ] {
        let mut args = vec!["ope", "--logs", p, "--model", model.to_str().unwrap()];
        args.extend(&bad);
        let o = decider(&args);
        assert_eq!(
            o.status.code(),
            Some(2),
            "{bad:?}: {}",
            String::from_utf8_lossy(&o.stderr)
        );
        let err = String::from_utf8(o.stderr).unwrap();
        assert!(err.contains(bad[0]), "{bad:?}: {err}");
    }
    assert_eq!(decider(&["ope", "--logs", p]).status.code(), Some(2));
    // Decisions but no outcome at all: nothing to estimate, said in one line.
    let lonely = write(
        "lonely.log",
        &[decision(
            "x", 0, "decide", "champion", None, "route_a", "m-1", None,
        )],
    );
    let o = decider(&[
        "ope",
        "--logs",
        lonely.to_str().unwrap(),
        "--model",
        model.to_str().unwrap(),
    ]);
    assert_eq!(o.status.code(), Some(1));
    let err = String::from_utf8(o.stderr).unwrap();
    assert!(
        err.contains("need at least 2 usable samples")
            && err.contains("1 left out without an outcome"),
        "{err}"
    );
    // A model file that is not an artifact names the file.
    let o = decider(&["ope", "--logs", p, "--model", p]);
    assert_eq!(o.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&o.stderr).contains("small.log"));
}

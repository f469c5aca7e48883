//! `decider report` on the command line: the JSON keys, the tables, the charts, exit codes.

use common::{arm_lines, decider};
use serde_json::Value;
use std::path::PathBuf;

mod common;

fn tmp(name: &str) -> PathBuf {
    common::tmp("report", name)
}

#[test]
fn json_output_is_one_object_with_the_documented_keys() {
    let mut lines = arm_lines("c", "champion", 50, 45);
    lines.extend(arm_lines("h", "holdout", 20, 19));
    lines.push("[wrangler:info] GET / 200 OK".into());
    let path = tmp("keys.log");
    std::fs::write(&path, lines.join("\n")).unwrap();
    let o = decider(&[
        "report",
        "--logs",
        path.to_str().unwrap(),
        "--json",
        "--slo-ms",
        "100",
    ]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let text = String::from_utf8(o.stdout).unwrap();
    assert_eq!(text.trim_end().lines().count(), 1);
    let r: Value = serde_json::from_str(&text).unwrap();
    for key in [
        "lines",
        "skipped",
        "decisions",
        "outcomes",
        "orphan_outcomes",
        "by_source",
        "by_model_version",
        "by_origin",
        "by_arm",
        "by_endpoint",
        "fallback",
        "verdict",
        "verdicts",
    ] {
        assert!(r.get(key).is_some(), "missing {key}");
    }
    assert_eq!(
        (
            r["lines"].as_u64(),
            r["skipped"]["not_json"].as_u64(),
            r["skipped"]["total"].as_u64()
        ),
        (Some(71), Some(1), Some(1))
    );
    let g = &r["by_arm"]["champion"];
    for key in [
        "n",
        "with_outcome",
        "successes",
        "success_rate",
        "ci95",
        "latency_ms",
    ] {
        assert!(g.get(key).is_some(), "by_arm.champion.{key}");
    }
    assert_eq!(
        (g["n"].as_u64(), g["success_rate"].as_f64()),
        (Some(50), Some(0.9))
    );
    assert_eq!(g["ci95"].as_array().unwrap().len(), 2);
    // HdrHistogram reports a value at most 0.1% above the true one.
    let p50 = g["latency_ms"]["p50"].as_f64().unwrap();
    assert!((40.0..=40.04).contains(&p50), "{p50}");
    for key in ["rate", "by_reason", "over_time"] {
        assert!(r["fallback"].get(key).is_some(), "fallback.{key}");
    }
    assert!(r["verdict"].is_string());
    for v in r["verdicts"].as_array().unwrap() {
        assert!(
            v["kind"].is_string() && v["text"].is_string() && v["evidence"].is_object(),
            "{v}"
        );
    }
}

#[test]
fn text_tables_charts_and_exit_codes() {
    let mut lines = arm_lines("c", "champion", 50, 45);
    lines.extend(arm_lines("n", "challenger", 20, 19));
    lines.extend(arm_lines("h", "holdout", 20, 19));
    let path = tmp("cli.log");
    std::fs::write(&path, lines.join("\n")).unwrap();
    let svg_dir = tmp("charts");
    let o = decider(&[
        "report",
        "--logs",
        path.to_str().unwrap(),
        "--svg-dir",
        svg_dir.to_str().unwrap(),
        "--quiet",
    ]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let text = String::from_utf8(o.stdout).unwrap();
    for want in [
        "BY ARM",
        "BY SOURCE",
        "confounded",
        "FALLBACK OVER TIME",
        "VERDICTS",
        "model vs rules",
    ] {
        assert!(text.contains(want), "{want} not in\n{text}");
    }
    for name in [
        "fallback-over-time.svg",
        "success-by-source.svg",
        "success-by-model-version.svg",
        "success-by-arm.svg",
    ] {
        let svg = std::fs::read_to_string(svg_dir.join(name)).unwrap();
        assert!(
            svg.starts_with("<svg") && svg.ends_with("</svg>\n"),
            "{name}"
        );
    }
    let arms = std::fs::read_to_string(svg_dir.join("success-by-arm.svg")).unwrap();
    assert_eq!(arms.matches("<circle").count(), 3, "one error bar per arm");
    assert!(arms.contains(">challenger</text>"));

    let missing = tmp("no-such-file.log");
    let o = decider(&["report", "--logs", missing.to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(1));
    let err = String::from_utf8(o.stderr).unwrap();
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(
        err.starts_with("decider: error: ") && err.contains("no-such-file.log"),
        "{err}"
    );
    assert_eq!(
        err.matches("no-such-file.log").count(),
        1,
        "said once: {err}"
    );
    let o = decider(&["report", "--logs", path.to_str().unwrap(), "--slo-ms", "0"]);
    assert_eq!(o.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&o.stderr).contains("--slo-ms"));
    assert_eq!(
        decider(&["report", "--logs", path.to_str().unwrap(), "--bucket", "5x"])
            .status
            .code(),
        Some(2)
    );
    assert_eq!(decider(&["report"]).status.code(), Some(2));
    let help = String::from_utf8(decider(&["report", "--help"]).stdout).unwrap();
    assert!(
        help.contains("Examples:") && help.contains("--logs") && help.contains("--svg-dir"),
        "{help}"
    );
}

//! End-to-end tests of the `decider` binary: exit codes, messages, determinism, JSON shapes.

use serde_json::Value;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};

fn decider(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_decider"))
        .args(args)
        .output()
        .expect("run decider")
}

fn tmp(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("decider-cli-test-{}", std::process::id()));
    std::fs::create_dir_all(&d).unwrap();
    d.join(name)
}

fn s(p: &Path) -> &str {
    p.to_str().unwrap()
}

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).to_string()
}

/// A small trained model shared by several tests (trained once per test binary run).
fn small_model() -> PathBuf {
    static ONCE: std::sync::OnceLock<PathBuf> = std::sync::OnceLock::new();
    ONCE.get_or_init(|| {
        let data = tmp("small.jsonl");
        let model = tmp("small-model.json");
        assert!(decider(&[
            "simulate",
            "--rows",
            "3000",
            "--seed",
            "5",
            "--out",
            s(&data)
        ])
        .status
        .success());
        let o = decider(&[
            "train",
            "--data",
            s(&data),
            "--out",
            s(&model),
            "--max-rounds",
            "40",
            "--quiet",
        ]);
        assert!(o.status.success(), "{}", stderr(&o));
        model
    })
    .clone()
}

#[test]
fn simulate_is_deterministic_per_seed() {
    let (a, b, c) = (tmp("a.jsonl"), tmp("b.jsonl"), tmp("c.jsonl"));
    for (p, seed) in [(&a, "3"), (&b, "3"), (&c, "4")] {
        assert!(
            decider(&["simulate", "--rows", "200", "--seed", seed, "--out", s(p)])
                .status
                .success()
        );
    }
    let read = |p: &Path| std::fs::read(p).unwrap();
    assert_eq!(read(&a), read(&b));
    assert_ne!(read(&a), read(&c));
    assert_eq!(String::from_utf8(read(&a)).unwrap().lines().count(), 200);
}

/// Regression: after the served model moved to f32 leaves, calibrating on its margins made
/// `make model` write a different temperature and model version than the shipped file.
#[test]
fn make_model_trains_the_shipped_artifact_byte_for_byte() {
    // The commands of model/regenerate.sh.
    let data = tmp("shipped-train.jsonl");
    let o = decider(&[
        "simulate",
        "--rows",
        "40000",
        "--seed",
        "20261130",
        "--out",
        s(&data),
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    let out = tmp("shipped.json");
    let o = decider(&[
        "train",
        "--data",
        s(&data),
        "--seed",
        "42",
        "--learning-rate",
        "0.5",
        "--max-leaves",
        "127",
        "--max-rounds",
        "16",
        "--out",
        s(&out),
        "--quiet",
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    let shipped = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../model/decision-model.json");
    assert!(
        std::fs::read(&out).unwrap() == std::fs::read(shipped).unwrap(),
        "model/regenerate.sh no longer writes model/decision-model.json"
    );
}

#[test]
fn train_twice_gives_byte_identical_artifacts_card_and_curve() {
    let data = tmp("det.jsonl");
    assert!(decider(&[
        "simulate",
        "--rows",
        "2000",
        "--seed",
        "8",
        "--out",
        s(&data)
    ])
    .status
    .success());
    let (m1, m2) = (tmp("det1.json"), tmp("det2.json"));
    for m in [&m1, &m2] {
        let o = decider(&[
            "train",
            "--data",
            s(&data),
            "--out",
            s(m),
            "--seed",
            "3",
            "--max-rounds",
            "30",
            "--quiet",
        ]);
        assert!(o.status.success(), "{}", stderr(&o));
    }
    assert_eq!(std::fs::read(&m1).unwrap(), std::fs::read(&m2).unwrap());
    let card = std::fs::read_to_string(tmp("det1.md")).unwrap();
    assert!(card.contains("training data sha256"), "{card}");
    assert!(card.contains(" on a network base "), "{card}");
    let svg = std::fs::read_to_string(tmp("det1.curve.svg")).unwrap();
    assert!(svg.starts_with("<svg") && svg.contains("polyline"));
}

/// The default base is the network; `--base priors` trains the trees alone, and its artifact
/// names no base (an artifact without one was boosted from the priors).
#[test]
fn train_boosts_from_a_network_unless_told_priors() {
    let data = tmp("base.jsonl");
    assert!(decider(&[
        "simulate",
        "--rows",
        "1500",
        "--seed",
        "12",
        "--out",
        s(&data)
    ])
    .status
    .success());
    let art = |extra: &[&str]| -> Value {
        let out = tmp(&format!("base{}.json", extra.len()));
        let mut args = vec![
            "train",
            "--data",
            s(&data),
            "--out",
            s(&out),
            "--max-rounds",
            "10",
            "--quiet",
        ];
        args.extend_from_slice(extra);
        let o = decider(&args);
        assert!(o.status.success(), "{}", stderr(&o));
        serde_json::from_str(&std::fs::read_to_string(&out).unwrap()).unwrap()
    };
    let default = art(&[]);
    assert_eq!(default["training"]["params"]["base"], "network");
    assert_eq!(
        default["model"]["linear"].as_array().map(Vec::len),
        Some(16)
    );
    assert!(
        default["model"]["hidden"]["weights"].is_array(),
        "{}",
        default["model"]
    );
    let priors = art(&["--base", "priors"]);
    assert!(priors["training"]["params"].get("base").is_none());
    assert!(priors["model"].get("linear").is_none() && priors["model"].get("hidden").is_none());
    let help = String::from_utf8(decider(&["train", "--help"]).stdout).unwrap();
    assert!(help.contains("[default: network]"), "{help}");
}

#[test]
fn eval_json_has_the_contract_keys() {
    let model = small_model();
    let data = tmp("eval.jsonl");
    assert!(decider(&[
        "simulate",
        "--rows",
        "500",
        "--seed",
        "77",
        "--out",
        s(&data)
    ])
    .status
    .success());
    let o = decider(&["eval", "--model", s(&model), "--data", s(&data), "--json"]);
    assert!(o.status.success(), "{}", stderr(&o));
    let v: Value = serde_json::from_slice(&o.stdout).unwrap();
    for k in [
        "n",
        "accuracy",
        "threshold",
        "coverage",
        "accuracy_at_threshold",
        "system_accuracy",
        "fallback_rate",
        "per_action",
        "confusion",
        "ece",
    ] {
        assert!(v.get(k).is_some(), "missing {k}");
    }
    assert_eq!(v["n"], 500);
    assert!(v["accuracy"].as_f64().unwrap() > 0.9);
    let confusion: Vec<Vec<u64>> = serde_json::from_value(v["confusion"].clone()).unwrap();
    assert_eq!(confusion.iter().flatten().sum::<u64>(), 500);
    assert_eq!(
        v["per_action"]["reject"]["support"].as_u64().unwrap(),
        confusion[3].iter().sum::<u64>()
    );
    // Threshold override is honoured and bounded.
    let o = decider(&[
        "eval",
        "--model",
        s(&model),
        "--data",
        s(&data),
        "--json",
        "--threshold",
        "1.0",
    ]);
    let v: Value = serde_json::from_slice(&o.stdout).unwrap();
    assert!(v["coverage"].as_f64().unwrap() < 0.5);
    let o = decider(&[
        "eval",
        "--model",
        s(&model),
        "--data",
        s(&data),
        "--threshold",
        "2",
    ]);
    assert!(!o.status.success());
    assert!(stderr(&o).contains("threshold"), "{}", stderr(&o));
}

fn edited_model(name: &str, f: impl FnOnce(&mut Value)) -> PathBuf {
    let mut v: Value =
        serde_json::from_str(&std::fs::read_to_string(small_model()).unwrap()).unwrap();
    f(&mut v);
    let p = tmp(name);
    std::fs::write(&p, v.to_string()).unwrap();
    p
}

#[test]
fn eval_refuses_swapped_actions_and_other_encoder() {
    let data = tmp("refuse.jsonl");
    assert!(
        decider(&["simulate", "--rows", "50", "--seed", "1", "--out", s(&data)])
            .status
            .success()
    );
    let swapped = edited_model("swapped.json", |v| {
        v["actions"] = serde_json::json!(["route_b", "route_a", "route_c", "reject"])
    });
    let o = decider(&["eval", "--model", s(&swapped), "--data", s(&data)]);
    assert!(!o.status.success());
    let e = stderr(&o);
    assert!(e.contains("action list") && e.lines().count() == 1, "{e}");
    let enc = edited_model("encoder.json", |v| v["encoder_version"] = 2.into());
    let o = decider(&["eval", "--model", s(&enc), "--data", s(&data)]);
    assert!(!o.status.success());
    assert!(
        stderr(&o).contains("encoder_version is 2"),
        "{}",
        stderr(&o)
    );
}

#[test]
fn dataset_errors_name_file_and_line() {
    let data = tmp("broken.jsonl");
    let good = r#"{"state":{"request_type":1,"region_id":3,"current_load":0.4,"recent_success_rate":0.97,"queue_depth":12,"hour":14},"action":"route_b"}"#;
    std::fs::write(
        &data,
        format!(
            "{good}\n{good}\n{}\n",
            good.replace("\"region_id\":3", "\"region_id\":12")
        ),
    )
    .unwrap();
    let o = decider(&["train", "--data", s(&data), "--out", s(&tmp("never.json"))]);
    assert!(!o.status.success());
    let e = stderr(&o);
    assert!(
        e.contains("broken.jsonl:3: state.region_id must be an integer 0..=9, got 12"),
        "{e}"
    );
    assert!(!tmp("never.json").exists(), "no artifact on failure");
}

#[test]
fn decide_streams_decisions_and_flags_bad_lines() {
    let model = small_model();
    let mut child = Command::new(env!("CARGO_BIN_EXE_decider"))
        .args(["decide", "--model", s(&model)])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let input = concat!(
        r#"{"state":{"request_type":1,"region_id":3,"current_load":0.4,"recent_success_rate":0.97,"queue_depth":12,"hour":14}}"#,
        "\n",
        r#"{"request_type":5,"region_id":9,"current_load":1.0,"recent_success_rate":0.2,"queue_depth":900,"hour":3}"#,
        "\n",
        r#"{"state":{"request_type":1,"region_id":3,"current_load":0.4,"recent_success_rate":0.97,"queue_dept":12}}"#,
        "\n",
    );
    child
        .stdin
        .take()
        .unwrap()
        .write_all(input.as_bytes())
        .unwrap();
    let o = child.wait_with_output().unwrap();
    assert!(
        !o.status.success(),
        "a bad line makes the exit code non-zero"
    );
    let lines: Vec<Value> = String::from_utf8(o.stdout)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(lines.len(), 3);
    assert_eq!(lines[0]["encoder_version"], 1);
    assert!(["model", "rules"].contains(&lines[0]["source"].as_str().unwrap()));
    // Queue 900 is outside the training range: out of distribution → the rules reject.
    assert_eq!(lines[1]["action"], "reject");
    assert_eq!(lines[1]["fallback_reason"], "out_of_distribution");
    assert_eq!(lines[2]["line"], 3);
    assert_eq!(lines[2]["error"]["field"], "state.queue_dept");
}

#[test]
fn help_has_examples_and_bad_flags_fail() {
    for cmd in ["simulate", "train", "eval", "decide"] {
        let o = decider(&[cmd, "--help"]);
        assert!(o.status.success());
        assert!(
            String::from_utf8_lossy(&o.stdout).contains("Examples:"),
            "{cmd}"
        );
    }
    assert!(
        !decider(&["simulate", "--rows", "0", "--out", s(&tmp("z.jsonl"))])
            .status
            .success()
    );
    assert!(!decider(&[
        "train",
        "--data",
        "/nonexistent.jsonl",
        "--out",
        s(&tmp("z.json"))
    ])
    .status
    .success());
}

#[test]
fn rollout_plan_says_how_long_each_step_takes_and_how_often_it_errs() {
    let plan = |extra: &[&str]| -> Value {
        let mut args = vec![
            "rollout",
            "plan",
            "--runs",
            "40",
            "--min-step-s",
            "0",
            "--bake-percent",
            "0",
            "--quiet",
            "--json",
        ];
        args.extend_from_slice(extra);
        let out = decider(&args);
        assert!(out.status.success(), "{}", stderr(&out));
        serde_json::from_slice(&out.stdout).unwrap()
    };
    // A clearly better challenger: every step decided, promoted in (nearly) every run.
    let better = plan(&["--challenger", "0.97", "--champion", "0.85"]);
    assert_eq!(better["runs"], 40);
    assert_eq!(better["judge"], "two-sample");
    let steps = better["steps"].as_array().unwrap();
    let settings: Vec<u64> = steps
        .iter()
        .map(|s| s["setting"].as_u64().unwrap())
        .collect();
    assert_eq!(settings, vec![5, 20, 50]);
    for s in steps {
        assert!(s["decided_share"].as_f64().unwrap() > 0.9, "{s}");
        let (m, p90) = (
            s["median_outcomes"].as_u64().unwrap(),
            s["p90_outcomes"].as_u64().unwrap(),
        );
        assert!(m > 0 && m <= p90, "{s}");
    }
    assert!(better["promoted"].as_f64().unwrap() > 0.9, "{better}");
    assert!(
        better["false_decision_rate"].as_f64().unwrap() < 0.1,
        "{better}"
    );
    // A worse one is rolled back at the first step; the old judge needs more outcomes.
    let worse = plan(&["--challenger", "0.85", "--champion", "0.97"]);
    assert!(worse["rolled_back"].as_f64().unwrap() > 0.9, "{worse}");
    let union = plan(&[
        "--challenger",
        "0.85",
        "--champion",
        "0.97",
        "--judge",
        "union",
    ]);
    assert_eq!(union["judge"], "union");
    let to_end = |p: &Value| p["to_end"]["median_outcomes"].as_u64().unwrap();
    assert!(to_end(&worse) < to_end(&union), "{worse} vs {union}");
    // The same seed gives the same plan.
    assert_eq!(plan(&["--challenger", "0.85", "--champion", "0.97"]), worse);
    // Bad input names the flag.
    let out = decider(&[
        "rollout",
        "plan",
        "--challenger",
        "1.5",
        "--champion",
        "0.9",
    ]);
    assert!(!out.status.success());
    assert!(stderr(&out).contains("--challenger"), "{}", stderr(&out));
}

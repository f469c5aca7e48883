//! Decision and outcome lines for the report tests.
// Each test binary uses a different subset of these helpers.
#![allow(dead_code)]

use serde_json::{json, Value};
use std::path::PathBuf;
use std::process::{Command, Output};

/// Runs the built `decider` with `args`.
pub fn decider(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_decider"))
        .args(args)
        .output()
        .unwrap()
}

/// A path for `name` in this test binary's own temporary directory (`tag` tells them apart).
pub fn tmp(tag: &str, name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("decider-{tag}-test-{}", std::process::id()));
    std::fs::create_dir_all(&d).unwrap();
    d.join(name)
}

pub const T0: i64 = 1_796_205_600; // 2026-12-02T10:00:00Z

pub fn ts(s: i64) -> String {
    decider_cli::logs::format_iso_s((T0 + s) * 1000).replace('Z', ".000Z")
}

/// One decision line. `outcome` is (status, latency) for routed requests.
#[allow(clippy::too_many_arguments)]
pub fn decision(
    id: &str,
    t: i64,
    endpoint: &str,
    arm: &str,
    reason: Option<&str>,
    action: &str,
    mv: &str,
    outcome: Option<(Option<u16>, Option<f64>)>,
) -> String {
    let mut v = json!({
        "log_version": 1, "event": "decision", "ts": ts(t), "decision_id": id,
        "request_id": null, "endpoint": endpoint,
        "state": {"request_type": 1, "region_id": 3, "current_load": 0.4, "recent_success_rate": 0.97, "queue_depth": 12, "hour": 10},
        "action": action, "source": if reason.is_some() { "rules" } else { "model" },
        "fallback_reason": reason, "rule": null, "confidence": 0.9, "probabilities": null,
        "propensity": 1, "explored": false, "model_version": mv, "rules_version": "r1",
        "encoder_version": 1, "backend": "embedded", "arm": arm, "decision_us": 5,
    });
    if let Some((status, latency)) = outcome {
        let error = if status.is_none() {
            json!("timeout")
        } else {
            Value::Null
        };
        v["outcome"] = json!({"origin": action, "status": status, "latency_ms": latency, "failover": null, "error": error});
    }
    v.to_string()
}

pub fn outcome(
    id: &str,
    t: i64,
    reward: Option<f64>,
    status: Option<u16>,
    latency: Option<f64>,
) -> String {
    json!({"log_version": 1, "event": "outcome", "ts": ts(t), "decision_id": id, "reward": reward, "status": status, "latency_ms": latency}).to_string()
}

pub fn routed(id: &str, t: i64, arm: &str, ok: bool) -> String {
    let status = if ok { 200 } else { 502 };
    decision(
        id,
        t,
        "route",
        arm,
        (arm == "holdout").then_some("holdout"),
        "route_a",
        if arm == "challenger" { "m-2" } else { "m-1" },
        Some((Some(status), Some(40.0))),
    )
}

/// Route decisions on `arm`: `n` of them, the first `ok` successes.
pub fn arm_lines(prefix: &str, arm: &str, n: usize, ok: usize) -> Vec<String> {
    (0..n)
        .map(|i| routed(&format!("{prefix}{i}"), (i % 3000) as i64, arm, i < ok))
        .collect()
}

/// Decision and outcome lines for logged bandit samples (a known logging policy with exact
/// propensities): sample `i` is decided at `T0 + i` s; even ones through `/v1/decide` with an
/// outcome line carrying the reward, odd ones routed with the outcome embedded (status 200
/// for reward 1, 502 for 0, 503 for a reject).
pub fn bandit_lines(samples: &[decider_cli::ope::Sample], prefix: &str) -> Vec<String> {
    let mut out = Vec::with_capacity(samples.len() * 2);
    for (i, s) in samples.iter().enumerate() {
        let id = format!("{prefix}{i}");
        let routed = i % 2 == 1;
        let mut v = json!({
            "log_version": 1, "event": "decision", "ts": ts(i as i64), "decision_id": id,
            "request_id": null, "endpoint": if routed { "route" } else { "decide" },
            "state": s.state.to_value(), "action": s.action.name(), "source": "model",
            "fallback_reason": null, "rule": null, "confidence": 0.9, "probabilities": null,
            "propensity": s.propensity, "explored": s.propensity < 1.0,
            "model_version": "logger-1", "rules_version": "r1", "encoder_version": 1,
            "backend": "embedded", "arm": "champion", "decision_us": 5,
        });
        if routed {
            let status = match (s.action.name(), s.reward > 0.5) {
                ("reject", _) => 503,
                (_, true) => 200,
                (_, false) => 502,
            };
            v["outcome"] = json!({"origin": s.action.name(), "status": status, "latency_ms": 20.0, "failover": null, "error": null});
            out.push(v.to_string());
        } else {
            out.push(v.to_string());
            out.push(outcome(&id, i as i64 + 1, Some(s.reward), None, None));
        }
    }
    out
}

//! `decider report`: the join, the success definition, verdicts on data whose answer is
//! known, and the same report from every log format.

use common::{arm_lines, decision, outcome};
use decider_cli::logs::{LogReader, ReadOptions, Record};
use decider_cli::report::join::{Join, SuccessRule};
use decider_cli::report::{Judging, Report};
use decider_core::rollout::Statuses;
use serde_json::{json, Value};

mod common;

fn report_with(lines: &[String], rule: SuccessRule, bucket_ms: Option<i64>) -> Report {
    let text = lines.join("\n");
    let mut reader = LogReader::new(ReadOptions::default());
    let mut join = Join::new(bucket_ms);
    reader
        .read_stream("test", text.as_bytes(), &mut |r: Record| {
            join.add(&r);
        })
        .unwrap();
    Report::from_join(reader.into_stats(), join, rule, Judging::default())
}

const NO_SLO: SuccessRule = SuccessRule {
    statuses: Statuses::BELOW_500,
    slo_ms: None,
    reject_reward: 0.0,
};

fn report(lines: &[String]) -> Value {
    report_with(lines, NO_SLO, None).to_json()
}

#[test]
fn join_counts_orphans_duplicates_and_the_first_outcome_counts() {
    let lines = vec![
        decision("d1", 0, "decide", "champion", None, "route_a", "m-1", None),
        outcome("d1", 1, Some(0.0), None, None),
        outcome("d1", 2, Some(1.0), None, None), // skipped: the first outcome counts
        outcome("ghost", 3, Some(1.0), None, None), // orphan
        outcome("d2", 4, Some(0.0), None, None), // before its decision
        decision("d2", 5, "decide", "champion", None, "route_b", "m-1", None),
        decision(
            "d3",
            6,
            "route",
            "champion",
            None,
            "route_a",
            "m-1",
            Some((Some(200), Some(30.0))),
        ),
        outcome("d3", 7, None, Some(502), Some(900.0)), // an outcome line overrides the Worker's
        outcome("d4", 8, Some(1.0), None, None), // read before d4, still newer than its outcome
        decision(
            "d4",
            9,
            "route",
            "champion",
            None,
            "route_a",
            "m-1",
            Some((Some(503), Some(30.0))),
        ),
        decision("d1", 10, "decide", "champion", None, "route_a", "m-1", None), // duplicate
        decision("d5", 11, "decide", "champion", None, "route_c", "m-1", None), // no outcome
    ];
    let r = report(&lines);
    assert_eq!(r["decisions"], 5);
    assert_eq!(r["duplicate_decisions"], 1);
    assert_eq!(r["outcomes"], 5);
    assert_eq!(r["orphan_outcomes"], 1);
    assert_eq!(r["skipped"]["duplicate_outcome"], 1);
    let decide = &r["by_endpoint"]["decide"];
    assert_eq!(
        (decide["n"].as_u64(), decide["with_outcome"].as_u64()),
        (Some(3), Some(2))
    );
    assert_eq!(
        decide["successes"], 0.0,
        "d1 failed by its first outcome, d2 by its own"
    );
    let route = &r["by_endpoint"]["route"];
    assert_eq!(
        (route["n"].as_u64(), route["with_outcome"].as_u64()),
        (Some(2), Some(2))
    );
    assert_eq!(
        route["successes"], 1.0,
        "d3 failed by its outcome line, d4 succeeded by its"
    );
}

#[test]
fn success_is_status_below_500_within_the_slo_or_the_reward() {
    let route = |id: &str, action: &str, status: Option<u16>, latency: Option<f64>| {
        decision(
            id,
            0,
            "route",
            "champion",
            None,
            action,
            "m-1",
            Some((status, latency)),
        )
    };
    let lines = vec![
        route("a", "route_a", Some(200), Some(100.0)),
        route("b", "route_a", Some(200), Some(300.0)), // too slow with --slo-ms 250
        route("c", "route_b", Some(404), Some(50.0)),  // a client error is a served request
        route("d", "route_b", Some(502), Some(40.0)),
        route("e", "route_c", None, None), // timeout: no response
        route("f", "reject", Some(503), Some(0.0)), // rejected: --reject-reward
        route("g", "route_c", Some(200), None), // latency unknown: status decides
    ];
    let rate = |rule: SuccessRule| {
        let r = report_with(&lines, rule, None).to_json();
        let g = r["by_arm"]["champion"].clone();
        (
            g["successes"].as_f64().unwrap(),
            g["with_outcome"].as_u64().unwrap(),
            g,
        )
    };
    let (s, n, g) = rate(NO_SLO);
    assert_eq!((s, n), (4.0, 7));
    assert_eq!(g["rejected"], 1);
    assert_eq!(g["interval"], "wilson");
    // Latency percentiles leave out the rejection (0 ms) and unknown latencies.
    assert_eq!(g["latency_ms"]["n"], 4);
    assert!(
        (g["latency_ms"]["p50"].as_f64().unwrap() - 50.0).abs() < 0.1,
        "{g}"
    );
    assert!(
        (g["latency_ms"]["p99"].as_f64().unwrap() - 300.0).abs() < 0.3,
        "{g}"
    );
    assert_eq!(
        rate(SuccessRule {
            statuses: Statuses::BELOW_500,
            slo_ms: Some(250.0),
            reject_reward: 0.0
        })
        .0,
        3.0
    );
    assert_eq!(
        rate(SuccessRule {
            statuses: Statuses::BELOW_500,
            slo_ms: None,
            reject_reward: 1.0
        })
        .0,
        5.0
    );
    let half = rate(SuccessRule {
        statuses: Statuses::BELOW_500,
        slo_ms: Some(250.0),
        reject_reward: 0.5,
    })
    .2;
    assert_eq!(half["successes"], 3.5);
    assert_eq!(half["interval"], "normal");

    // A caller's fractional reward makes the group's interval the normal one on the mean.
    let lines = vec![
        decision("x", 0, "decide", "champion", None, "route_a", "m-1", None),
        outcome("x", 1, Some(0.4), None, None),
        decision("y", 2, "decide", "champion", None, "route_a", "m-1", None),
        outcome("y", 3, None, Some(200), Some(20.0)),
    ];
    let r = report(&lines);
    let g = &r["by_endpoint"]["decide"];
    assert_eq!(
        (g["successes"].as_f64(), g["interval"].as_str()),
        (Some(1.4), Some("normal"))
    );
    let ci = g["ci95"].as_array().unwrap();
    assert!(ci[0].as_f64().unwrap() >= 0.0 && ci[1].as_f64().unwrap() <= 1.0);
}

fn verdict(lines: &[String], kind: &str) -> (String, String) {
    let r = report(lines);
    let v = r["verdicts"]
        .as_array()
        .unwrap()
        .iter()
        .find(|v| v["kind"] == kind)
        .unwrap()
        .clone();
    (
        v["action"].as_str().unwrap().to_owned(),
        v["text"].as_str().unwrap().to_owned(),
    )
}

#[test]
fn rules_clearly_better_on_the_holdout_arm_means_retrain() {
    let mut lines = arm_lines("c", "champion", 4000, 3600);
    lines.extend(arm_lines("h", "holdout", 2000, 1960));
    let (action, text) = verdict(&lines, "model_vs_rules");
    assert_eq!(action, "retrain");
    assert!(
        text.starts_with("rules beat the model on the holdout arm: model 90.0% vs 98.0%, -8.0 points (confidence sequence"),
        "{text}"
    );
    assert!(text.ends_with(": retrain"), "{text}");
    // The other way round the model stays.
    let mut lines = arm_lines("c", "champion", 4000, 3960);
    lines.extend(arm_lines("h", "holdout", 2000, 1800));
    assert_eq!(verdict(&lines, "model_vs_rules").0, "keep the model");
}

#[test]
fn the_holdout_comparison_uses_only_endpoints_both_arms_served() {
    // Champion decisions on /v1/decide all fail; they must not drag the champion down
    // against a holdout that only exists on routed traffic.
    let mut lines = arm_lines("c", "champion", 2000, 1960);
    lines.extend(arm_lines("h", "holdout", 2000, 1960));
    for i in 0..2000 {
        lines.push(decision(
            &format!("x{i}"),
            1,
            "decide",
            "champion",
            None,
            "route_a",
            "m-1",
            None,
        ));
        lines.push(outcome(&format!("x{i}"), 2, Some(0.0), None, None));
    }
    let (action, text) = verdict(&lines, "model_vs_rules");
    assert_eq!(action, "keep collecting", "{text}");
    assert!(text.contains("no difference observed yet"), "{text}");
}

#[test]
fn challenger_verdicts_roll_back_promote_or_keep_collecting() {
    let mut lines = arm_lines("c", "champion", 3000, 2910);
    lines.extend(arm_lines("n", "challenger", 3000, 2700));
    let (action, text) = verdict(&lines, "champion_vs_challenger");
    assert_eq!(action, "roll the challenger back");
    assert!(
        text.starts_with("challenger m-2 vs champion m-1: 90.0% vs 97.0%, -7.0 points"),
        "{text}"
    );
    assert!(text.ends_with(": roll the challenger back"), "{text}");
    let mut lines = arm_lines("c", "champion", 3000, 2700);
    lines.extend(arm_lines("n", "challenger", 3000, 2910));
    assert_eq!(
        verdict(&lines, "champion_vs_challenger").0,
        "promote the challenger"
    );
    // Ten each: 9/10 against 7/10 is not decided.
    let mut lines = arm_lines("c", "champion", 10, 9);
    lines.extend(arm_lines("n", "challenger", 10, 7));
    lines.extend(arm_lines("h", "holdout", 10, 7));
    let (action, text) = verdict(&lines, "champion_vs_challenger");
    assert_eq!(action, "keep collecting");
    assert!(
        text.contains("roughly") && text.contains("more decisions"),
        "{text}"
    );
    let (action, text) = verdict(&lines, "model_vs_rules");
    assert_eq!(action, "keep collecting");
    assert!(
        text.starts_with("model vs rules: not yet decided"),
        "{text}"
    );
    // No holdout, no challenger: said so.
    let lines = arm_lines("c", "champion", 10, 9);
    assert_eq!(verdict(&lines, "model_vs_rules").0, "no data");
    assert_eq!(verdict(&lines, "champion_vs_challenger").0, "no challenger");
}

/// 40 minutes of decisions, 50 a minute, 5% low_confidence fallbacks, and from minute
/// `spike_from` on 40% out_of_distribution fallbacks.
fn fallback_run(spike_from: i64) -> Vec<String> {
    let mut lines = Vec::new();
    for m in 0..40i64 {
        for i in 0..50i64 {
            let id = format!("m{m}-{i}");
            let reason = if m >= spike_from && i < 20 {
                Some("out_of_distribution")
            } else if i % 20 == 0 {
                Some("low_confidence")
            } else {
                None
            };
            lines.push(decision(
                &id,
                m * 60 + i,
                "decide",
                "champion",
                reason,
                "route_a",
                "m-1",
                None,
            ));
        }
    }
    lines
}

#[test]
fn fallback_alarm_fires_when_the_last_buckets_jump() {
    let (action, text) = verdict(&fallback_run(34), "fallback_alarm");
    assert_eq!(action, "alarm", "{text}");
    assert!(text.contains("out_of_distribution 40.0% vs 0.0%"), "{text}");
    assert!(text.contains("states the model never saw"), "{text}");
    let (action, text) = verdict(&fallback_run(1000), "fallback_alarm");
    assert_eq!(action, "steady", "{text}");
    let r = report(&fallback_run(34));
    assert_eq!(r["fallback"]["bucket_seconds"], 60.0);
    assert_eq!(r["fallback"]["over_time"].as_array().unwrap().len(), 40);
    assert_eq!(r["fallback"]["over_time"][39]["ood_rate"], 0.4);
    assert_eq!(
        r["fallback"]["by_reason"]["low_confidence"]["count"],
        34 * 3 + 6 * 2
    );
    let five = report_with(&fallback_run(34), NO_SLO, Some(300_000)).to_json();
    assert_eq!(five["fallback"]["over_time"].as_array().unwrap().len(), 8);
    assert_eq!(five["fallback"]["over_time"][0]["n"], 250);
}

#[test]
fn every_source_format_gives_the_same_report() {
    let mut lines = arm_lines("c", "champion", 60, 55);
    lines.extend(arm_lines("n", "challenger", 30, 26));
    lines.extend(arm_lines("h", "holdout", 30, 29));
    let base = report(&lines);
    let tail: Vec<String> = lines
        .iter()
        .map(|l| serde_json::to_string_pretty(&json!({"outcome": "ok", "logs": [{"message": [l], "level": "log", "timestamp": 1}], "eventTimestamp": 1, "event": {"request": {}}})).unwrap())
        .collect();
    let logpush: Vec<String> = lines
        .iter()
        .map(|l| json!({"Logs": [{"Level": "log", "Message": [l], "TimestampMs": 1}], "Outcome": "ok", "EventTimestampMs": 1}).to_string())
        .collect();
    let events: Vec<Value> = lines
        .iter()
        .map(|l| json!({"source": serde_json::from_str::<Value>(l).unwrap(), "dataset": "cloudflare-workers", "$metadata": {"message": l}, "$workers": {}}))
        .collect();
    let export = vec![serde_json::to_string_pretty(&events).unwrap()];
    for (name, other) in [
        ("tail", tail),
        ("logpush", logpush),
        ("workers logs", export),
    ] {
        let r = report(&other);
        for key in [
            "decisions",
            "by_arm",
            "by_source",
            "by_model_version",
            "by_origin",
            "fallback",
            "verdicts",
        ] {
            assert_eq!(r[key], base[key], "{name}: {key}");
        }
    }
}

/// A `rollout` line as the judge writes it: a change at `at` s of the step begun at `since`.
fn rollout_line(at: i64, since: i64, from: &str, to: &str, why: &str) -> String {
    format!(
        r#"{{"event":"rollout","log_version":1,"ts":"{}","challenger_version":"gbdt-new","from":{from},"to":{to},"why":"{why}","text":"judged","step_since":"{}"}}"#,
        common::ts(at),
        common::ts(since)
    )
}

/// A step's routed decisions from `from` s: `n` per arm, the challenger's first `chal_ok`
/// and the champion's first `champ_ok` successes.
fn step_lines(prefix: &str, from: i64, n: usize, chal_ok: usize, champ_ok: usize) -> Vec<String> {
    let mut out = Vec::new();
    for i in 0..n {
        let t = from + i as i64 / 10;
        out.push(common::routed(
            &format!("{prefix}c{i}"),
            t,
            "challenger",
            i < chal_ok,
        ));
        out.push(common::routed(
            &format!("{prefix}p{i}"),
            t,
            "champion",
            i < champ_ok,
        ));
    }
    out
}

#[test]
fn the_rollout_verdict_judges_the_logs_own_counts_of_each_step() {
    let lines = arm_lines("c", "champion", 20, 18);
    assert_eq!(verdict(&lines, "rollout").0, "no rollout records");

    // Three steps, each clearly better on the log's own counts; read out of order.
    let mut lines = step_lines("a", 0, 1000, 990, 900);
    lines.extend(step_lines("b", 200, 1000, 990, 900));
    lines.extend(step_lines("d", 400, 1000, 990, 900));
    lines.push(rollout_line(500, 400, "50", "100", "better"));
    lines.push(rollout_line(100, 0, "5", "20", "better"));
    lines.push(rollout_line(300, 200, "20", "50", "better"));
    let (action, text) = verdict(&lines, "rollout");
    assert_eq!(action, "ship the challenger", "{text}");
    assert!(
        text.contains("gbdt-new") && text.contains("effective champion"),
        "{text}"
    );
    assert!(text.contains("support each of its 3 changes"), "{text}");
    let r = report(&lines);
    let e = &r["verdicts"][3]["evidence"];
    assert_eq!(e["agrees_with_records"], true);
    let steps = e["steps"].as_array().unwrap();
    assert_eq!(steps.len(), 3);
    for s in steps {
        assert_eq!(s["comparison"]["verdict"], "better", "{s}");
        // Only the step's own decisions: 1000 per arm.
        assert_eq!(s["comparison"]["treatment"]["n"], 1000, "{s}");
        assert_eq!(s["supported"], true);
    }
    // The k-th step at α·2^−(k+1).
    assert_eq!(steps[0]["comparison"]["alpha"], 0.025);
    assert_eq!(steps[2]["comparison"]["alpha"], 0.00625);
    assert!(r["verdict"]
        .as_str()
        .unwrap()
        .ends_with("rollout: ship the challenger"));

    // A change the counts do not support is said, never repeated.
    let mut lines = step_lines("a", 0, 1000, 900, 900);
    lines.push(rollout_line(100, 0, "5", "20", "better"));
    let (action, text) = verdict(&lines, "rollout");
    assert_eq!(action, "records not supported", "{text}");
    assert!(
        text.contains("5% → 20% (better)") && text.contains("say undecided"),
        "{text}"
    );

    // A rollback the counts support; then a switch to rules they support too.
    let mut back = step_lines("a", 0, 1000, 800, 970);
    back.push(rollout_line(100, 0, "5", "0", "worse"));
    assert_eq!(verdict(&back, "rollout").0, "rolled back");
    let mut rules = Vec::new();
    for i in 0..1000 {
        rules.push(common::routed(
            &format!("m{i}"),
            i as i64 / 10,
            "champion",
            i < 800,
        ));
        rules.push(common::routed(
            &format!("h{i}"),
            i as i64 / 10,
            "holdout",
            i < 990,
        ));
    }
    rules.push(rollout_line(100, 0, "5", "\"rules\"", "rules_beat_model"));
    let (action, text) = verdict(&rules, "rollout");
    assert_eq!(action, "switched to rules", "{text}");

    // Ramping: the step in force is judged on the decisions since the last change.
    let mut ramp = step_lines("a", 0, 1000, 990, 900);
    ramp.push(rollout_line(100, 0, "5", "20", "better"));
    ramp.extend(step_lines("b", 200, 300, 290, 270));
    let (action, text) = verdict(&ramp, "rollout");
    assert_eq!(action, "ramping");
    assert!(
        text.contains("at 20%") && text.contains("on the step in force"),
        "{text}"
    );
    let e = &report(&ramp)["verdicts"][3]["evidence"];
    assert_eq!(e["current"]["treatment"]["n"], 300);
    assert_eq!(e["current"]["alpha"], 0.0125);
}

/// A routed request whose origin answered 200 but whose body stalled and was cut
/// (`outcome.error: body_idle`) is a failure, as the Worker's live counts score it; the same
/// line without the error is a success.
#[test]
fn a_body_cut_short_is_a_failure_whatever_the_status() {
    let line = |id: &str, error: Option<&str>| {
        let mut v: Value = serde_json::from_str(&decision(
            id,
            0,
            "route",
            "champion",
            None,
            "route_a",
            "m-1",
            Some((Some(200), Some(30.0))),
        ))
        .unwrap();
        v["outcome"]["error"] = json!(error);
        v.to_string()
    };
    let r = report(&[line("ok", None), line("cut", Some("body_idle"))]);
    let route = &r["by_endpoint"]["route"];
    assert_eq!(
        (route["n"].as_u64(), route["with_outcome"].as_u64()),
        (Some(2), Some(2))
    );
    assert_eq!(route["successes"], 1.0, "{route}");
    assert_eq!(r["skipped"]["bad_record"], 0);
}

/// A routed decision is scored by its decided origin's first attempt: route_b failed with a
/// 503 and route_c rescued the request, so the client got a 200 and the decision a 0.
#[test]
fn failover_rescues_the_client_not_the_decision() {
    let attempt = |origin: &str, status: u16, error: Value, latency: f64| json!({"origin": origin, "status": status, "error": error, "latency_ms": latency});
    let rescued = |id: &str| {
        let mut v: Value = serde_json::from_str(&decision(
            id, 0, "route", "champion", None, "route_b", "m-1", None,
        ))
        .unwrap();
        v["outcome"] = json!({
            "origin": "route_c", "status": 200, "latency_ms": 15.0, "failover": "route_c",
            "error": null,
            "attempts": [attempt("route_b", 503, json!("upstream_status"), 3.0),
                         attempt("route_c", 200, Value::Null, 12.0)],
        });
        v.to_string()
    };
    let served = |id: &str, status: u16| {
        let mut v: Value = serde_json::from_str(&decision(
            id, 0, "route", "champion", None, "route_b", "m-1", None,
        ))
        .unwrap();
        v["outcome"] = json!({
            "origin": "route_b", "status": status, "latency_ms": 4.0, "failover": null,
            "error": null, "attempts": [attempt("route_b", status, Value::Null, 4.0)],
        });
        v.to_string()
    };
    let lines = vec![
        rescued("r1"),
        rescued("r2"),
        served("s1", 200),
        served("s2", 404),
    ];
    let r = report_with(&lines, NO_SLO, None).to_json();
    let b = &r["by_origin"]["route_b"];
    assert_eq!(
        (b["successes"].as_f64(), b["with_outcome"].as_u64()),
        (Some(2.0), Some(4))
    );
    assert!(
        r["by_origin"].get("route_c").is_none(),
        "grouped by the decided origin: {r}"
    );
    assert_eq!(r["rescued_by_failover"], 2);
    // What success is: with 2xx only, the 404 fails too.
    let two = NO_SLO.with_statuses(Statuses::parse("2xx").unwrap());
    let r = report_with(&lines, two, None).to_json();
    assert_eq!(r["by_origin"]["route_b"]["successes"].as_f64(), Some(1.0));
    assert_eq!(r["success"]["statuses"], "status in 2xx");
}

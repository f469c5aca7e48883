//! Human-facing outputs of training: the model card (markdown) and the accuracy–coverage
//! curve (SVG, dependency-free so it renders anywhere a browser or GitHub does).

use crate::metrics::CurvePoint;
use crate::ope::gate::ValueGate;
use crate::svg::Svg;
use decider_core::Artifact;
use std::fmt::Write;

/// Renders the accuracy–coverage curve with the chosen threshold marked.
pub fn curve_svg(points: &[CurvePoint], threshold: f64, title: &str) -> String {
    let (w, h, pad) = (640.0, 400.0, 56.0);
    let min_acc = points
        .iter()
        .map(|p| p.accuracy)
        .fold(1.0f64, f64::min)
        .min(0.95);
    let lo = (min_acc * 100.0).floor() / 100.0;
    let x = |c: f64| pad + c * (w - 2.0 * pad);
    let y = |a: f64| h - pad - (a - lo) / (1.0 - lo) * (h - 2.0 * pad);
    let mut s = Svg::new(w, h, title);
    for i in 0..=10 {
        let c = f64::from(i) / 10.0;
        s.vgrid(x(c), y(lo), y(1.0), &format!("{:.0}%", c * 100.0));
    }
    let steps = ((1.0 - lo) / 0.01).round() as i32;
    let every = (steps / 10).max(1);
    for i in (0..=steps).step_by(every as usize) {
        let a = lo + f64::from(i) * 0.01;
        s.hgrid(x(0.0), x(1.0), y(a), &format!("{:.0}%", a * 100.0));
    }
    let path: Vec<(f64, f64)> = points
        .iter()
        .map(|p| (x(p.coverage), y(p.accuracy)))
        .collect();
    s.polyline(&path, "#1f77b4", 2.0, None);
    if let Some(p) = points.iter().rev().find(|p| p.threshold >= threshold) {
        s.raw(&format!(
            r##"<circle cx="{:.1}" cy="{:.1}" r="5" fill="#d62728"/><text x="{:.1}" y="{:.1}" fill="#d62728">threshold {:.3}: coverage {:.1}%, accuracy {:.2}%</text>
"##,
            x(p.coverage),
            y(p.accuracy),
            x(p.coverage.min(0.55)),
            y(p.accuracy) + 22.0,
            threshold,
            p.coverage * 100.0,
            p.accuracy * 100.0
        ));
    }
    s.x_title(w / 2.0, h - 12.0, COVERAGE_TITLE);
    s.y_title(14.0, h / 2.0, "accuracy of model-decided share");
    s.finish()
}

/// Both curves' x-axis title.
const COVERAGE_TITLE: &str = "coverage (share decided by the model)";

/// Renders the value–coverage curve of a value gate: the whole served policy's held-out value
/// at each coverage, the rules' value (coverage 0) as a dashed line, the chosen threshold and
/// the best point marked.
pub fn value_svg(g: &ValueGate, title: &str) -> String {
    let (w, h, pad) = (640.0, 400.0, 56.0);
    let vals = g.curve.iter().map(|p| p.value).chain([g.rules_value.value]);
    let lo = (vals.clone().fold(f64::INFINITY, f64::min) * 100.0).floor() / 100.0;
    let hi = ((vals.fold(f64::NEG_INFINITY, f64::max) * 100.0).ceil() / 100.0).max(lo + 0.01);
    let x = |c: f64| pad + c * (w - 2.0 * pad);
    let y = |v: f64| h - pad - (v - lo) / (hi - lo) * (h - 2.0 * pad);
    let mut s = Svg::new(w, h, title);
    for i in 0..=10 {
        let c = f64::from(i) / 10.0;
        s.vgrid(x(c), y(lo), y(hi), &format!("{:.0}%", c * 100.0));
    }
    let steps = ((hi - lo) / 0.01).round().max(1.0) as i32;
    let every = (steps / 10).max(1);
    for i in (0..=steps).step_by(every as usize) {
        let v = lo + f64::from(i) * 0.01;
        s.hgrid(x(0.0), x(1.0), y(v), &format!("{v:.2}"));
    }
    let path: Vec<(f64, f64)> = g
        .curve
        .iter()
        .map(|p| (x(p.coverage), y(p.value)))
        .collect();
    s.polyline(&path, "#1f77b4", 2.0, None);
    let rules = y(g.rules_value.value);
    s.polyline(
        &[(x(0.0), rules), (x(1.0), rules)],
        "#7f7f7f",
        1.5,
        Some("6 4"),
    );
    s.text(x(1.0), rules - 6.0, "end", "#7f7f7f", "rules alone");
    s.raw(&format!(
        r##"<circle cx="{:.1}" cy="{:.1}" r="4" fill="#2ca02c"/>
"##,
        x(g.best.coverage),
        y(g.best.value)
    ));
    s.raw(&format!(
        r##"<circle cx="{:.1}" cy="{:.1}" r="5" fill="#d62728"/>
"##,
        x(g.coverage),
        y(g.value.value)
    ));
    s.text(
        x(g.coverage.min(0.5)),
        y(g.value.value) + 22.0,
        "start",
        "#d62728",
        &format!(
            "threshold {:.3}: coverage {:.1}%, value {:.4} (best {:.4} at {:.1}%)",
            g.threshold,
            g.coverage * 100.0,
            g.value.value,
            g.best.value,
            g.best.coverage * 100.0
        ),
    );
    s.x_title(w / 2.0, h - 12.0, COVERAGE_TITLE);
    s.y_title(14.0, h / 2.0, "held-out value of the served policy (DR)");
    s.finish()
}

/// The card's Gate section: which gate the artifact uses and why, with the figures.
fn gate_section(s: &mut String, g: &serde_json::Value, value_file: Option<&str>) {
    let f = |v: &serde_json::Value| v.as_f64().unwrap_or(f64::NAN);
    let _ = writeln!(
        s,
        "\n## Gate\n\nThis artifact is gated by **value**, not by label accuracy: {}.\n",
        g["why"].as_str().unwrap_or("")
    );
    let _ = writeln!(s, "| | held-out value (DR) |\n|---|---|");
    let _ = writeln!(
        s,
        "| served policy at threshold {:.4} (coverage {:.1}%) | {:.4} ± {:.4} |",
        f(&g["threshold"]),
        100.0 * f(&g["coverage"]),
        f(&g["value"]["value"]),
        f(&g["value"]["se"])
    );
    let _ = writeln!(
        s,
        "| best point on the curve (coverage {:.1}%; paired se to it {:.4}) | {:.4} |",
        100.0 * f(&g["best"]["coverage"]),
        f(&g["paired_se"]),
        f(&g["best"]["value"])
    );
    let _ = writeln!(
        s,
        "| model alone (coverage 100%) | {:.4} ± {:.4} |",
        f(&g["model_value"]["value"]),
        f(&g["model_value"]["se"])
    );
    let _ = writeln!(
        s,
        "| rules alone (coverage 0%) | {:.4} ± {:.4} |",
        f(&g["rules_value"]["value"]),
        f(&g["rules_value"]["se"])
    );
    let _ = writeln!(
        s,
        "\n{} held-out samples; on {} of them the model takes an action the logger could not \
         take there (scored 0). The accuracy gate would have chosen threshold {:.4}.\n",
        g["held_out"],
        g["unsupported"],
        f(&g["accuracy_threshold"])
    );
    if let Some(file) = value_file {
        let _ = writeln!(s, "![value–coverage]({file})\n");
    }
    let _ = writeln!(
        s,
        "Out-of-distribution bounds from evidence: a bound opens to the field's domain where, on \
         the outer 5% of held-out samples on that side, the served policy is not estimated to pay \
         less than the rules.\n\n| field | side | data | bound | samples | gain vs rules |\n|---|---|---|---|---|---|"
    );
    for b in g["ood_bounds"].as_array().into_iter().flatten() {
        let bound = f(&b["bound"]);
        let shown = if bound >= f64::MAX {
            "open".to_string()
        } else {
            format!("{bound}")
        };
        let _ = writeln!(
            s,
            "| {} | {} | {} | {shown} | {} | {:+.4} |",
            b["field"].as_str().unwrap_or("?"),
            b["side"].as_str().unwrap_or("?"),
            f(&b["data"]),
            b["samples"],
            f(&b["gain"])
        );
    }
}

fn pct(v: &serde_json::Value) -> String {
    v.as_f64()
        .map_or("n/a".into(), |f| format!("{:.2}%", f * 100.0))
}

/// The rows that say a model was trained from decision logs (`decider train --logs`).
fn logs_rows(s: &mut String, l: &serde_json::Value) {
    let text = |v: &serde_json::Value| v.as_str().unwrap_or("?").to_owned();
    let files: Vec<String> = l["files"]
        .as_array()
        .map_or(Vec::new(), |f| f.iter().map(text).collect());
    let _ = writeln!(
        s,
        "| data source | decision logs: {} rows used of {} decisions, logged {} to {} ({}) |",
        l["rows"],
        l["decisions"],
        text(&l["from"]),
        text(&l["to"]),
        files.join(", ")
    );
    let lo = &l["left_out"];
    let _ = writeln!(
        s,
        "| left out | {} holdout, {} stale signals, {} without outcome |",
        lo["holdout"], lo["stale_signals"], lo["no_outcome"]
    );
    let _ = writeln!(s, "| reward | {} |", text(&l["reward"]["definition"]));
    let _ = writeln!(
        s,
        "| labels | {}; {} of {} rows relabelled from the logged action |",
        text(&l["labels"]["method"]),
        l["labels"]["relabelled"],
        l["rows"]
    );
}

/// Renders the model card for an artifact. `extra` is appended verbatim (e.g. peer comparison).
/// `value_file` names the value–coverage picture of a value-gated artifact.
pub fn model_card(a: &Artifact, curve_file: &str, value_file: Option<&str>, extra: &str) -> String {
    let t = &a.training;
    let m = &t["metrics"];
    let mut s = String::new();
    let _ = writeln!(s, "# Model card: `{}`\n", a.model_version);
    let regenerate = if t["source"] == "logs" {
        "`decider train --logs` on the same logs and seed"
    } else {
        "`make model`"
    };
    let _ = writeln!(
        s,
        "Generated by `decider train`; regenerate with {regenerate}. Do not edit by hand.\n"
    );
    let _ = writeln!(s, "| | |\n|---|---|");
    let refit = match t["refit_rounds"].as_u64() {
        Some(r) => format!(
            ", then refit on all {} rows for {r} rounds",
            t["refit_rows"]
        ),
        None => String::new(),
    };
    // Training ends at the round cap only while validation log-loss is still improving
    // (a round without improvement is never kept as the best): say which ended it.
    let stopped = if t["rounds"].is_u64() && t["rounds"] == t["params"]["max_rounds"] {
        format!(
            "boosted for {} rounds (the max_rounds cap; validation log-loss still improving)",
            t["rounds"]
        )
    } else {
        format!("early-stopped at {} rounds", t["rounds"])
    };
    let base = match t["params"]["base"].as_str() {
        Some("linear") => " on a linear base (a softmax regression on the 16 features)",
        Some("network") => " on a network base (a softmax regression and 16 tanh units)",
        _ => "",
    };
    let _ = writeln!(
        s,
        "| model family | multi-output gradient-boosted trees (softmax){base}; {stopped}{refit}; {} trees shipped |",
        t["trees"]
    );
    let _ = writeln!(
        s,
        "| encoder | v{} ({} features) |",
        a.encoder_version, a.feature_dim
    );
    let _ = writeln!(s, "| actions | {} |", a.actions.join(", "));
    let _ = writeln!(
        s,
        "| training data sha256 | `{}` |",
        t["data_sha256"].as_str().unwrap_or("?")
    );
    if t["source"] == "logs" {
        logs_rows(&mut s, &t["logs"]);
    }
    let _ = writeln!(
        s,
        "| rows | {} (train {}, validation {} from {}) |",
        t["rows"],
        t["train_rows"],
        t["valid_rows"],
        t["valid_source"].as_str().unwrap_or("?")
    );
    let _ = writeln!(s, "| seed | {} |", t["seed"]);
    let _ = writeln!(
        s,
        "| calibration | temperature {:.4} |",
        a.calibration.temperature
    );
    if t["gate"]["kind"] == "value" {
        let _ = writeln!(
            s,
            "| threshold | {:.4} (value gate: see Gate) |",
            a.threshold
        );
    } else {
        let _ = writeln!(
            s,
            "| threshold | {:.4} (lowest confidence keeping validation accuracy ≥ {}) |",
            a.threshold, t["target_accuracy"]
        );
    }
    let _ = writeln!(s, "\n## Validation metrics\n\nMeasured on the held-out rows with the model fitted on the training split (before any refit).\n\n| metric | value |\n|---|---|");
    let _ = writeln!(
        s,
        "| accuracy (argmax, all rows) | {} |",
        pct(&m["valid_accuracy"])
    );
    let _ = writeln!(
        s,
        "| coverage at threshold | {} |",
        pct(&m["valid_coverage_at_threshold"])
    );
    let _ = writeln!(
        s,
        "| accuracy at threshold | {} |",
        pct(&m["valid_accuracy_at_threshold"])
    );
    let _ = writeln!(
        s,
        "| system accuracy (model ≥ threshold, rules below) | {} |",
        pct(&m["valid_system_accuracy"])
    );
    let _ = writeln!(
        s,
        "| rule table alone | {} |",
        pct(&m["valid_rules_accuracy"])
    );
    let _ = writeln!(
        s,
        "| log-loss raw → calibrated | {:.4} → {:.4} |",
        m["valid_logloss_raw"].as_f64().unwrap_or(f64::NAN),
        m["valid_logloss_calibrated"].as_f64().unwrap_or(f64::NAN)
    );
    let _ = writeln!(
        s,
        "| ECE raw → calibrated | {:.4} → {:.4} |",
        m["valid_ece_raw"].as_f64().unwrap_or(f64::NAN),
        m["valid_ece_calibrated"].as_f64().unwrap_or(f64::NAN)
    );
    let _ = writeln!(
        s,
        "\n## Accuracy–coverage curve (validation)\n\n![accuracy–coverage]({curve_file})\n"
    );
    if t["gate"]["kind"] == "value" {
        gate_section(&mut s, &t["gate"], value_file);
    }
    let _ = writeln!(
        s,
        "## Training ranges (out-of-distribution check)\n\n| field | min | max |\n|---|---|---|"
    );
    let r = &a.feature_ranges;
    for (name, [lo, hi]) in [
        ("request_type", r.request_type),
        ("region_id", r.region_id),
        ("current_load", r.current_load),
        ("recent_success_rate", r.recent_success_rate),
        ("queue_depth", r.queue_depth),
        ("hour", r.hour),
    ] {
        let hi = if hi >= f64::MAX {
            "any".to_string()
        } else {
            hi.to_string()
        };
        let _ = writeln!(s, "| {name} | {lo} | {hi} |");
    }
    s.push_str(extra);
    s
}

#[cfg(test)]
mod tests {
    use super::model_card;
    use decider_core::model::{tests_support::TINY_ARTIFACT, Artifact};
    use serde_json::json;

    fn card_with(rounds: u64, max_rounds: u64) -> String {
        let mut a: Artifact = serde_json::from_str(TINY_ARTIFACT).unwrap();
        a.training = json!({
            "rounds": rounds, "trees": rounds, "params": {"max_rounds": max_rounds}, "metrics": {},
        });
        model_card(&a, "curve.svg", None, "")
    }

    #[test]
    fn card_says_whether_early_stopping_or_the_round_cap_ended_training() {
        let early = card_with(52, 400);
        assert!(
            early.contains("early-stopped at 52 rounds; 52 trees shipped"),
            "{early}"
        );
        assert!(!early.contains("cap"), "{early}");
        let capped = card_with(16, 16);
        assert!(
            capped.contains(
                "boosted for 16 rounds (the max_rounds cap; validation log-loss still improving)"
            ),
            "{capped}"
        );
        assert!(!capped.contains("early-stopped at"), "{capped}");
    }
}

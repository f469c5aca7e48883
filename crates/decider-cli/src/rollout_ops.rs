//! The rollout's status and an operator's verbs over HTTP(S): one call to a Worker's
//! `/v1/admin/rollout`, and the status as text for people.

use serde_json::{json, Value};
use thiserror::Error;

/// What to ask.
#[derive(Debug, Clone, PartialEq)]
pub enum Operation {
    /// `GET`: the status.
    Status,
    /// `POST`: a verb with its reason.
    Verb {
        /// `pause`, `resume`, `abort`, `promote`, `restart`.
        verb: &'static str,
        /// The operator's reason.
        reason: String,
        /// Promote without the bake.
        skip_bake: bool,
    },
}

impl Operation {
    /// A verb.
    pub fn verb(verb: &'static str, reason: &str, skip_bake: bool) -> Operation {
        Operation::Verb {
            verb,
            reason: reason.to_owned(),
            skip_bake,
        }
    }
}

/// Why a call failed.
#[derive(Debug, Error)]
pub enum OpsError {
    /// The URL is not one the CLI can call.
    #[error("--url must be an http:// or https:// URL, got {0:?}")]
    Url(String),
    /// The Worker (or the control plane through it) refused, with its message.
    #[error("{status} {code}: {message}")]
    Refused {
        /// The HTTP status.
        status: u16,
        /// The error's code.
        code: String,
        /// The error's message.
        message: String,
    },
    /// No answer, or one that is not JSON.
    #[error("{0}")]
    Transport(String),
}

/// Calls `base_url`'s `/v1/admin/rollout` with the bearer `token`; the status it answers.
///
/// # Errors
/// [`OpsError`] for a bad URL, a refusal (its status, code and message) or a failed call.
pub fn call(base_url: &str, token: &str, op: &Operation) -> Result<Value, OpsError> {
    let base = base_url.trim_end_matches('/');
    if !(base.starts_with("http://") || base.starts_with("https://")) {
        return Err(OpsError::Url(base_url.to_owned()));
    }
    let url = format!("{base}/v1/admin/rollout");
    let agent: ureq::Agent = ureq::Agent::config_builder()
        .http_status_as_error(false)
        .timeout_global(Some(std::time::Duration::from_secs(30)))
        .build()
        .into();
    let auth = format!("Bearer {token}");
    let answered = match op {
        Operation::Status => agent.get(&url).header("authorization", &auth).call(),
        Operation::Verb {
            verb,
            reason,
            skip_bake,
        } => {
            let mut body = json!({"verb": verb, "reason": reason});
            if *skip_bake {
                body["skip_bake"] = json!(true);
            }
            agent
                .post(&url)
                .header("authorization", &auth)
                .header("content-type", "application/json")
                .send(body.to_string())
        }
    };
    let mut resp = answered.map_err(|e| OpsError::Transport(format!("{url}: {e}")))?;
    let status = resp.status().as_u16();
    let text = resp
        .body_mut()
        .read_to_string()
        .map_err(|e| OpsError::Transport(format!("{url}: {e}")))?;
    let v: Value = serde_json::from_str(&text).map_err(|_| {
        OpsError::Transport(format!(
            "{url} answered {status} with non-JSON: {}",
            text.chars().take(200).collect::<String>()
        ))
    })?;
    if !(200..300).contains(&status) {
        let e = &v["error"];
        return Err(OpsError::Refused {
            status,
            code: e["code"].as_str().unwrap_or("error").to_owned(),
            message: e["message"].as_str().unwrap_or(&text).to_owned(),
        });
    }
    Ok(v)
}

fn pct(x: &Value) -> String {
    x.as_f64()
        .map_or("–".into(), |x| format!("{:.1}%", x * 100.0))
}

/// The status as text: what the rollout is doing, each arm, the last look, the changes.
pub fn render(s: &Value) -> String {
    let mut out = String::new();
    let challenger = s["challenger_version"].as_str().unwrap_or("(none)");
    let paused = if s["paused"] == true { ", PAUSED" } else { "" };
    out.push_str(&format!(
        "rollout of {challenger}: {} at {}{paused}\n",
        s["phase"].as_str().unwrap_or("?"),
        match &s["setting"] {
            Value::String(r) => r.clone(),
            v => format!("{v}%"),
        }
    ));
    let steps: Vec<String> = s["steps"]
        .as_array()
        .map(|a| a.iter().map(|x| format!("{x}%")).collect())
        .unwrap_or_default();
    out.push_str(&format!(
        "  steps {} (step {}), since {} ({} s; at least {} s)\n",
        steps.join(" → "),
        s["step"]
            .as_u64()
            .map_or("?".into(), |i| (i + 1).to_string()),
        s["step_since"].as_str().unwrap_or("?"),
        s["step_lasted_s"],
        s["min_step_s"]
    ));
    if let Some(ends) = s["bake"]["ends_at"].as_str() {
        out.push_str(&format!(
            "  baking: the previous champion keeps {}% until {ends}\n",
            s["bake"]["percent"]
        ));
    }
    out.push_str("  arm         decisions  outcomes  mean     interval\n");
    for arm in ["challenger", "champion", "holdout"] {
        let a = &s["arms"][arm];
        out.push_str(&format!(
            "  {arm:<10}  {:>9}  {:>8}  {:>7}  [{}, {}]\n",
            a["decisions"].to_string(),
            a["outcomes"].to_string(),
            pct(&a["mean"]),
            pct(&a["lo"]),
            pct(&a["hi"])
        ));
    }
    let c = &s["comparison"];
    out.push_str(&format!(
        "  challenger − champion: {} points, sequence [{}, {}] at α {}: {}\n",
        c["delta"]
            .as_f64()
            .map_or("–".into(), |d| format!("{:+.1}", d * 100.0)),
        c["lo"]
            .as_f64()
            .map_or("–".into(), |d| format!("{:+.1}", d * 100.0)),
        c["hi"]
            .as_f64()
            .map_or("–".into(), |d| format!("{:+.1}", d * 100.0)),
        s["alpha"],
        c["verdict"].as_str().unwrap_or("?")
    ));
    match s["last_look"]["at"].as_str() {
        Some(at) => out.push_str(&format!(
            "  last look {at}{}; next look {}\n",
            s["last_look"]["waiting"]
                .as_str()
                .map_or(String::new(), |w| format!(" ({w})")),
            s["next_look"]
                .as_str()
                .unwrap_or("at the next Cron Trigger")
        )),
        None => out.push_str("  no look yet: the next Cron Trigger\n"),
    }
    for a in s["alarms"].as_array().into_iter().flatten() {
        out.push_str(&format!(
            "  ALARM {}: {}\n",
            a["kind"].as_str().unwrap_or("?"),
            a["text"].as_str().unwrap_or("")
        ));
    }
    for h in s["history"].as_array().into_iter().flatten() {
        out.push_str(&format!(
            "  {}  {}\n",
            h["at"].as_str().unwrap_or("?"),
            h["text"].as_str().unwrap_or("")
        ));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_status_reads_as_text() {
        let s = json!({
            "challenger_version": "m-2", "phase": "baking", "setting": 95, "paused": true,
            "steps": [5, 20, 50, 100], "step": 3, "step_since": "2026-12-04T10:00:00.000Z",
            "step_lasted_s": 120, "min_step_s": 300,
            "bake": {"percent": 5, "seconds": 3600, "ends_at": "2026-12-04T11:00:00.000Z"},
            "alpha": 0.003125,
            "arms": {
                "challenger": {"decisions": 950, "outcomes": 940, "mean": 0.97, "lo": 0.95, "hi": 0.98},
                "champion": {"decisions": 50, "outcomes": 49, "mean": 0.9, "lo": 0.7, "hi": 0.97},
                "holdout": {"decisions": 0, "outcomes": 0, "mean": null, "lo": 0.0, "hi": 1.0},
            },
            "comparison": {"delta": 0.07, "lo": -0.02, "hi": 0.28, "verdict": "undecided"},
            "last_look": {"at": "2026-12-04T10:02:00.000Z", "waiting": null, "proposals": []},
            "next_look": "2026-12-04T10:03:00.000Z",
            "alarms": [{"kind": "fallback", "text": "fallback alarm: …"}],
            "history": [{"at": "2026-12-04T10:00:00.000Z", "text": "50% → 95% (bakes): …"}],
        });
        let t = render(&s);
        assert!(
            t.starts_with("rollout of m-2: baking at 95%, PAUSED\n"),
            "{t}"
        );
        assert!(t.contains("steps 5% → 20% → 50% → 100% (step 4)"), "{t}");
        assert!(
            t.contains("baking: the previous champion keeps 5% until 2026-12-04T11:00:00.000Z"),
            "{t}"
        );
        assert!(
            t.contains("  challenger        950       940    97.0%  [95.0%, 98.0%]"),
            "{t}"
        );
        assert!(
            t.contains("+7.0 points, sequence [-2.0, +28.0] at α 0.003125: undecided"),
            "{t}"
        );
        assert!(t.contains("next look 2026-12-04T10:03:00.000Z"), "{t}");
        assert!(t.contains("ALARM fallback"), "{t}");
        assert!(t.contains("50% → 95% (bakes)"), "{t}");
    }

    #[test]
    fn bad_urls_and_unreachable_workers_are_errors() {
        let e = call("ftp://x", "t", &Operation::Status).unwrap_err();
        assert_eq!(
            e.to_string(),
            "--url must be an http:// or https:// URL, got \"ftp://x\""
        );
        // A closed port: a transport error naming the URL.
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        let e = call(&format!("http://127.0.0.1:{port}"), "t", &Operation::Status).unwrap_err();
        assert!(matches!(e, OpsError::Transport(_)), "{e}");
        assert!(e.to_string().contains("/v1/admin/rollout"), "{e}");
    }
}

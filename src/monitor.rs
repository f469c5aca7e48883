//! The scheduled origin monitor: on every Cron Trigger it probes each configured origin's
//! `HEALTH_PATH` and/or reads the `SIGNALS_URL` metrics document, then stores the signals
//! snapshot as the admin push does ([`signals::store`]) and its own state — probe
//! histories, the origins it marks down, the run's report — under [`kv::MONITOR_KEY`].
//!
//! The decisions (hysteresis, estimates, precedence, where a down origin's traffic goes)
//! are decider-core's [`decider_core::monitor`]; this module does the I/O. A run never
//! fails: whatever goes wrong is recorded in its report, shown on `/v1/health`.

use crate::clock;
use crate::config::Config;
use crate::js::{self, Fetched};
use crate::kv;
use crate::log;
use crate::signals;
use decider_core::failover::OriginSet;
use decider_core::monitor::{self as core, Sample, Stored};
use decider_core::signals::{is_current, Snapshot, SnapshotSource};
use decider_core::{Action, Signals};
use futures_util::future::join_all;
use serde_json::{json, Value};
use web_sys::{RequestInit, RequestRedirect, Response as WsResponse};
use worker::Env;

/// The largest metrics document read, bytes.
const METRICS_MAX_BYTES: usize = 64 * 1024;

/// The monitor's stored state, or why it could not be read.
///
/// # Errors
/// The binding, KV or the stored value.
pub async fn read_state(env: &Env) -> Result<Option<Stored>, String> {
    kv::get(env, kv::MONITOR_KEY)
        .await?
        .map(|t| {
            serde_json::from_slice(t.as_bytes())
                .map_err(|e| format!("stored state is invalid: {e}"))
        })
        .transpose()
}

/// Whether a monitor is configured (a metrics document or a health path).
pub fn enabled(cfg: &Config) -> bool {
    cfg.signals_url.is_some() || cfg.health_path.is_some()
}

/// One probe's result, for the history and the report.
struct Probe {
    sample: Sample,
    status: Option<u16>,
    error: Option<String>,
}

/// A GET within `timeout_ms` (to the response headers): the response and the time it took.
async fn get(url: &str, timeout_ms: u32) -> Result<(WsResponse, f64), String> {
    let init = RequestInit::new();
    init.set_method("GET");
    init.set_redirect(RequestRedirect::Manual);
    let started = clock::now_ms();
    match js::fetch(url, &init, js::delay(timeout_ms)).await {
        Fetched::Answer { response, .. } => Ok((response, clock::now_ms() - started)),
        Fetched::Failed(e) => Err(format!("failed: {e}")),
        Fetched::Late(()) => Err(format!("timed out after {timeout_ms} ms")),
    }
}

/// Probes one origin: passes when it answers `HEALTH_EXPECT_STATUS` within
/// `MONITOR_TIMEOUT_MS`. The body is not read.
async fn probe(origin: &str, path: &str, cfg: &Config) -> Probe {
    let url = decider_core::forward::target_url(origin, path, None);
    match get(&url, cfg.monitor_timeout_ms).await {
        Ok((r, ms)) => {
            if let Some(b) = r.body() {
                js::quietly(b.cancel());
            }
            let ok = r.status() == cfg.health_expect_status;
            Probe {
                sample: Sample { ok, ms: Some(ms) },
                status: Some(r.status()),
                error: (!ok).then(|| {
                    format!(
                        "answered {}, expected {}",
                        r.status(),
                        cfg.health_expect_status
                    )
                }),
            }
        }
        Err(e) => Probe {
            sample: Sample {
                ok: false,
                ms: None,
            },
            status: None,
            error: Some(e),
        },
    }
}

/// Reads the metrics document: a 200 with a valid document within `MONITOR_TIMEOUT_MS`.
async fn metrics(url: &str, timeout_ms: u32) -> Result<core::Metrics, String> {
    let started = clock::now_ms();
    let (r, _) = get(url, timeout_ms).await?;
    if r.status() != 200 {
        if let Some(b) = r.body() {
            js::quietly(b.cancel());
        }
        return Err(format!("answered {}, expected 200", r.status()));
    }
    // The body shares the budget: a document that trickles in is as late as one that never
    // starts.
    let left = (f64::from(timeout_ms) - (clock::now_ms() - started)).max(1.0);
    let text = r.text().map_err(|e| js::error_text(&e))?;
    let text = match js::within(js::settle(text), left as u32).await {
        Some(Ok(v)) => v.as_string().unwrap_or_default(),
        Some(Err(e)) => return Err(format!("body failed: {e}")),
        None => return Err(format!("body timed out after {timeout_ms} ms")),
    };
    if text.len() > METRICS_MAX_BYTES {
        return Err(format!(
            "document is {} bytes, at most {METRICS_MAX_BYTES}",
            text.len()
        ));
    }
    core::parse_metrics(&text).map_err(|e| format!("bad document: {}", log::clip(&e)))
}

fn signals_value(s: &Signals) -> Value {
    json!({
        "current_load": s.current_load,
        "recent_success_rate": s.recent_success_rate,
        "queue_depth": s.queue_depth,
    })
}

/// One monitor run at `now_ms`: probes, metrics, the snapshot (unless an admin push is the
/// override, or nothing was measured), the state. Never fails: its report says what
/// happened, and is logged (`monitor_run`) and kept for `/v1/health`.
pub async fn run(env: &Env, cfg: &Config, scheduled_ms: f64) {
    if !enabled(cfg) {
        log::event(
            "monitor_run",
            json!({"skipped": "neither SIGNALS_URL nor HEALTH_PATH is set"}),
        );
        return;
    }
    let started = clock::now_ms();
    let mut errors = Vec::new();
    let mut state = match read_state(env).await {
        Ok(s) => s.unwrap_or_default(),
        Err(e) => {
            // A lost history is rebuilt by the next runs; the run goes on.
            errors.push(format!("monitor state: {e}"));
            Stored::default()
        }
    };

    let mut origins_report = serde_json::Map::new();
    let mut passed_now = OriginSet::EMPTY;
    let probed: Vec<(Action, &String)> = match &cfg.health_path {
        Some(_) => cfg.origins.iter().map(|(a, o)| (*a, o)).collect(),
        None => Vec::new(),
    };
    state
        .origins
        .retain(|a, _| probed.iter().any(|(p, _)| p == a));
    if let Some(path) = &cfg.health_path {
        let probes = join_all(probed.iter().map(|(_, o)| probe(o, path, cfg))).await;
        for ((action, _), p) in probed.iter().zip(probes) {
            let h = state.origins.entry(*action).or_default();
            h.record(p.sample, &cfg.monitor);
            if p.sample.ok {
                passed_now = passed_now.with(*action);
            }
            origins_report.insert(
                action.name().to_string(),
                json!({
                    "ok": p.sample.ok,
                    "status": p.status,
                    "latency_ms": p.sample.ms,
                    "error": p.error,
                    "down": h.down,
                    "success_rate": h.success_rate(),
                    "load": h.load(&cfg.monitor),
                    "probes": h.history.len(),
                }),
            );
        }
    }
    let down = core::down_set(&state.origins);

    let (reading, from, per_route) = match &cfg.signals_url {
        Some(url) => match metrics(url, cfg.monitor_timeout_ms).await {
            Ok(m) => {
                let per: serde_json::Map<String, Value> = m
                    .per_route
                    .iter()
                    .map(|(a, s)| (a.name().to_string(), signals_value(s)))
                    .collect();
                (Ok(m.signals), "signals_url", Some(per))
            }
            Err(e) => (Err(format!("SIGNALS_URL {e}")), "signals_url", None),
        },
        None => (
            core::probe_signals(&state.origins, passed_now, &cfg.monitor)
                .map_err(|e| format!("probes: {e}")),
            "probes",
            None,
        ),
    };

    let now = clock::now_ms();
    let stored = signals::read(env).await;
    // An unreadable stored value is no admin push to respect: a valid reading replaces it.
    let stored = stored.ok().flatten();
    let written = match &reading {
        Err(e) => Err(e.clone()),
        Ok(signals) => match core::may_replace(stored.as_ref(), now, cfg.signals_max_age_s) {
            Ok(()) => {
                let snapshot = Snapshot {
                    signals: *signals,
                    updated_at_ms: now,
                    source: SnapshotSource::Monitor,
                };
                signals::store(env, snapshot)
                    .await
                    .map_err(|e| format!("store failed: {e}"))
            }
            Err(e) => Err(e),
        },
    };

    state.at = clock::now_ms();
    state.down = down.iter().collect();
    state.last_run = json!({
        "at": state.at,
        "scheduled_at": scheduled_ms,
        "duration_ms": state.at - started,
        "signals_from": from,
        "signals": reading.as_ref().ok().map(signals_value),
        "per_route": per_route,
        "written": written.is_ok(),
        "not_written": written.as_ref().err(),
        "origins": origins_report,
        "down": down.names(),
        "errors": errors,
    });
    let saved = match serde_json::to_string(&state) {
        Ok(text) => kv::put(env, kv::MONITOR_KEY, text).await,
        Err(e) => Err(e.to_string()),
    };
    if let Err(e) = saved {
        log::event(
            "monitor_store_failed",
            json!({"error": log::clip(&e.to_string())}),
        );
    }
    // This isolate's next request reads the new marks and snapshot.
    signals::forget();
    log::event("monitor_run", state.last_run.clone());
}

/// The monitor's part of the admin `/v1/health` document: whether it is configured, its
/// last run (when, per-origin results, what it wrote or why not) and the origins marked
/// down now.
pub fn report(cfg: &Config, state: &Result<Option<Stored>, String>, now_ms: f64) -> Value {
    match state {
        Err(e) => json!({"enabled": enabled(cfg), "error": e}),
        Ok(None) => json!({
            "enabled": enabled(cfg),
            "last_run": null,
            "down": [],
            "detail": if enabled(cfg) { "no monitor run yet (is a [triggers] crons line set?)" } else { "SIGNALS_URL and HEALTH_PATH are unset" },
        }),
        Ok(Some(s)) => {
            let current = is_current(s.at, now_ms, cfg.signals_max_age_s);
            json!({
                "enabled": enabled(cfg),
                "last_run_age_s": ((now_ms - s.at) / 1000.0).max(0.0),
                "last_run": s.last_run,
                // Marks older than SIGNALS_MAX_AGE_S are ignored by routing.
                "down": if current { s.down.iter().map(|a| a.name()).collect::<Vec<_>>() } else { Vec::new() },
                "marks_current": current,
            })
        }
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    fn cfg(pairs: &[(&str, &str)]) -> Config {
        Config::from_pairs(pairs)
    }

    #[test]
    fn report_before_any_run_says_why() {
        let off = report(&cfg(&[]), &Ok(None), 0.0);
        assert_eq!(off["enabled"], false);
        assert_eq!(off["last_run"], Value::Null);
        assert!(off["detail"].as_str().unwrap().contains("unset"), "{off}");
        let on = report(&cfg(&[("HEALTH_PATH", "/healthz")]), &Ok(None), 0.0);
        assert_eq!(on["enabled"], true);
        assert!(on["detail"].as_str().unwrap().contains("crons"), "{on}");
        let broken = report(&cfg(&[]), &Err("stored state is invalid: x".into()), 0.0);
        assert_eq!(broken["error"], "stored state is invalid: x");
    }

    #[test]
    fn marks_older_than_the_signals_window_are_not_in_force() {
        let c = cfg(&[("HEALTH_PATH", "/healthz"), ("SIGNALS_MAX_AGE_S", "60")]);
        let state = Stored {
            at: 1_000_000.0,
            down: vec![Action::RouteB],
            last_run: json!({"written": true}),
            ..Stored::default()
        };
        let s = Ok(Some(state));
        let now = report(&c, &s, 1_030_000.0);
        assert_eq!(now["down"], json!(["route_b"]));
        assert_eq!(now["marks_current"], true);
        assert_eq!(now["last_run_age_s"], 30.0);
        assert_eq!(now["last_run"]["written"], true);
        let later = report(&c, &s, 1_060_001.0);
        assert_eq!(later["down"], json!([]));
        assert_eq!(later["marks_current"], false);
    }
}

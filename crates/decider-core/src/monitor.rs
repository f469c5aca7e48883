//! The origin monitor's pure logic: probe histories with hysteresis (when an origin counts
//! as down, and when it is up again), the signals a monitor run estimates from its probes or
//! reads from a metrics document, where a request goes when its origin is down, and whether
//! a run may replace the stored snapshot.
//!
//! The Worker's scheduled handler does the I/O (the probes, the metrics fetch, KV) and hands
//! the results here; nothing in this module reads a clock.

use crate::actions::Action;
use crate::failover::OriginSet;
use crate::json::{parse_text, FieldError};
use crate::signals::{Signals, Snapshot, SnapshotSource};
use serde::{Deserialize, Serialize};
use serde_json::Value;
use std::collections::BTreeMap;

/// How many of an origin's most recent passing probes its load estimate averages.
pub const LOAD_PROBES: usize = 3;

/// Queued requests the load estimate stands for at full load (`current_load` 1.0): the
/// relation between load and queue depth of the simulator the model was trained on
/// (`queue ≈ 35 × min(load, 1.2)`), without its noise. Probes cannot see a queue; a metrics
/// document (`SIGNALS_URL`) gives the real one.
pub const QUEUE_AT_FULL_LOAD: f64 = 35.0;

/// The monitor's parameters, checked by the Worker's configuration.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Params {
    /// Probes kept per origin (the success rate's window), >= 1.
    pub window: u32,
    /// Consecutive failed probes that mark an up origin down, >= 1.
    pub down_after: u32,
    /// Consecutive passed probes that mark a down origin up again, >= 1.
    pub up_after: u32,
    /// Probe latency of an origin at full load (`current_load` 1.0), ms, > 0.
    pub load_baseline_ms: f64,
}

impl Default for Params {
    fn default() -> Params {
        Params {
            window: 10,
            down_after: 2,
            up_after: 2,
            load_baseline_ms: 500.0,
        }
    }
}

/// One probe, as the history keeps it.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Sample {
    /// Whether the probe passed (the expected status within the timeout).
    pub ok: bool,
    /// Time to the response headers, ms, when there was an answer.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ms: Option<f64>,
}

/// One origin's probe history and up/down state, persisted between runs.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct OriginHealth {
    /// The most recent probes, oldest first, at most `window`.
    #[serde(default)]
    pub history: Vec<Sample>,
    /// Whether the origin is marked down.
    #[serde(default)]
    pub down: bool,
    /// Consecutive probes against the current mark (failures while up, passes while down).
    #[serde(default)]
    pub streak: u32,
}

impl OriginHealth {
    /// Records one probe and applies the hysteresis: `down_after` consecutive failures mark
    /// an up origin down, `up_after` consecutive passes mark a down origin up.
    pub fn record(&mut self, sample: Sample, p: &Params) {
        self.history.push(sample);
        let keep = p.window.max(1) as usize;
        if self.history.len() > keep {
            self.history.drain(..self.history.len() - keep);
        }
        let against = sample.ok == self.down;
        self.streak = if against { self.streak + 1 } else { 0 };
        let needed = if self.down { p.up_after } else { p.down_after };
        if self.streak >= needed.max(1) {
            self.down = !self.down;
            self.streak = 0;
        }
    }

    /// Passed probes over probes kept, when there are any.
    pub fn success_rate(&self) -> Option<f64> {
        let n = self.history.len();
        (n > 0).then(|| self.history.iter().filter(|s| s.ok).count() as f64 / n as f64)
    }

    /// Mean latency of the last [`LOAD_PROBES`] passing probes relative to
    /// `load_baseline_ms`, when there is a passing probe.
    pub fn load(&self, p: &Params) -> Option<f64> {
        let recent: Vec<f64> = self
            .history
            .iter()
            .rev()
            .filter(|s| s.ok)
            .filter_map(|s| s.ms)
            .filter(|ms| ms.is_finite() && *ms >= 0.0)
            .take(LOAD_PROBES)
            .collect();
        if recent.is_empty() || p.load_baseline_ms.is_nan() || p.load_baseline_ms <= 0.0 {
            return None;
        }
        let mean = recent.iter().sum::<f64>() / recent.len() as f64;
        Some(mean / p.load_baseline_ms)
    }
}

/// What the monitor keeps between runs (in KV), as stored.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Stored {
    /// When the last run ended, ms since the epoch.
    #[serde(default)]
    pub at: f64,
    /// The origins marked down at that run.
    #[serde(default)]
    pub down: Vec<Action>,
    /// Each probed origin's history and mark.
    #[serde(default)]
    pub origins: BTreeMap<Action, OriginHealth>,
    /// The last run's report, as `/v1/health` shows it.
    #[serde(default)]
    pub last_run: Value,
}

/// Only what routing needs of the stored state: cheap to parse on a request's cache miss.
#[derive(Deserialize)]
struct Marks {
    at: f64,
    #[serde(default)]
    down: Vec<Action>,
}

/// The origins a stored state marks down and when it marked them (ms), or `None` when the
/// text is not a readable state.
pub fn marks_from_json(text: &str) -> Option<(OriginSet, f64)> {
    let m: Marks = serde_json::from_slice(text.as_bytes()).ok()?;
    let set = m.down.into_iter().fold(OriginSet::EMPTY, OriginSet::with);
    m.at.is_finite().then_some((set, m.at))
}

/// The origins marked down.
pub fn down_set(origins: &BTreeMap<Action, OriginHealth>) -> OriginSet {
    origins
        .iter()
        .filter(|(_, h)| h.down)
        .fold(OriginSet::EMPTY, |s, (a, _)| s.with(*a))
}

/// The signals of the probed origins as a whole, or why there are none. Each origin counts
/// once: `recent_success_rate` is the mean of every probed origin's success rate (a down
/// origin's capacity is lost to the system), `current_load` the mean load of the up
/// origins that passed a recent probe, `queue_depth` that load × [`QUEUE_AT_FULL_LOAD`].
/// `passed_now` are the origins whose probe passed in this run: a run where none passed
/// measures nothing and gives no signals.
///
/// # Errors
/// Why the run gives no signals.
pub fn probe_signals(
    origins: &BTreeMap<Action, OriginHealth>,
    passed_now: OriginSet,
    p: &Params,
) -> Result<Signals, String> {
    if passed_now.is_empty() {
        return Err("no origin passed its probe in this run".into());
    }
    let rates: Vec<f64> = origins
        .values()
        .filter_map(OriginHealth::success_rate)
        .collect();
    let loads: Vec<f64> = origins
        .values()
        .filter(|h| !h.down)
        .filter_map(|h| h.load(p))
        .collect();
    if loads.is_empty() {
        return Err("no up origin has a passing probe to estimate load from".into());
    }
    let mean = |v: &[f64]| v.iter().sum::<f64>() / v.len() as f64;
    let load = mean(&loads);
    Ok(Signals {
        current_load: load,
        recent_success_rate: mean(&rates).clamp(0.0, 1.0),
        queue_depth: (load.min(1.2) * QUEUE_AT_FULL_LOAD).round(),
    })
}

/// A metrics document (`SIGNALS_URL`) read: the signals for the snapshot and, when it gave
/// them per route, each route's.
#[derive(Debug, Clone, PartialEq)]
pub struct Metrics {
    /// The signals of the backend as a whole.
    pub signals: Signals,
    /// The per-route readings, when the document gave them per route.
    pub per_route: BTreeMap<Action, Signals>,
}

/// Parses a metrics document: either the three signal fields of the backend as a whole
/// (the body `PUT /v1/admin/signals` takes), or an object of routes, each with the three
/// fields (`{"route_a": {…}, "route_b": {…}}`), whose mean over the routes given is the
/// backend's (each route counts once).
///
/// # Errors
/// What is wrong with the document, naming the route and field.
pub fn parse_metrics(text: &str) -> Result<Metrics, String> {
    let v = parse_text(text.as_bytes()).map_err(|e| match e {
        FieldError::Json { .. } => format!("not json: {e}"),
        other => other.to_string(),
    })?;
    let obj = v
        .as_object()
        .ok_or_else(|| "must be a json object".to_string())?;
    let per_route_doc = obj.keys().any(|k| Action::parse_name(k).is_some());
    if !per_route_doc {
        let signals = Signals::from_value(&v).map_err(|e| e.to_string())?;
        return Ok(Metrics {
            signals,
            per_route: BTreeMap::new(),
        });
    }
    let mut per_route = BTreeMap::new();
    for (k, route) in obj {
        let a = Action::parse_name(k)
            .filter(|a| *a != Action::Reject)
            .ok_or_else(|| {
                format!("{k:?} is not a route (route_a, route_b, route_c) in a per-route document")
            })?;
        let s = Signals::from_value(route).map_err(|e| format!("{k}: {e}"))?;
        per_route.insert(a, s);
    }
    let n = per_route.len() as f64;
    let sum = |f: fn(&Signals) -> f64| per_route.values().map(f).sum::<f64>() / n;
    let signals = Signals {
        current_load: sum(|s| s.current_load),
        recent_success_rate: sum(|s| s.recent_success_rate),
        queue_depth: sum(|s| s.queue_depth),
    };
    Ok(Metrics { signals, per_route })
}

/// Whether a monitor run at `now_ms` may replace the stored snapshot. An admin push is the
/// override: it stands until it is older than `max_age_s`, whatever the monitor measures.
/// A monitor snapshot or none at all may be replaced.
///
/// # Errors
/// Why not, for the run's report.
pub fn may_replace(stored: Option<&Snapshot>, now_ms: f64, max_age_s: u32) -> Result<(), String> {
    match stored {
        Some(s) if s.source == SnapshotSource::Admin && s.is_fresh(now_ms, max_age_s) => {
            Err(format!(
                "an admin push {:.0} s old is the override until it is {max_age_s} s old",
                s.age_s(now_ms)
            ))
        }
        _ => Ok(()),
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use Action::{RouteA as A, RouteB as B, RouteC as C};

    fn sample(ok: bool, ms: f64) -> Sample {
        Sample { ok, ms: Some(ms) }
    }

    #[test]
    fn hysteresis_needs_consecutive_probes_both_ways() {
        let p = Params::default();
        let mut h = OriginHealth::default();
        h.record(sample(false, 1.0), &p);
        assert!(!h.down, "one failure is not down");
        h.record(sample(true, 1.0), &p);
        h.record(sample(false, 1.0), &p);
        assert!(!h.down, "failures must be consecutive");
        h.record(sample(false, 1.0), &p);
        assert!(h.down, "two consecutive failures: down");
        h.record(sample(true, 1.0), &p);
        assert!(h.down, "one pass is not up");
        h.record(sample(false, 1.0), &p);
        h.record(sample(true, 1.0), &p);
        assert!(h.down, "passes must be consecutive");
        h.record(sample(true, 1.0), &p);
        assert!(!h.down, "two consecutive passes: up");
        let strict = Params { down_after: 1, ..p };
        let mut h = OriginHealth::default();
        h.record(sample(false, 1.0), &strict);
        assert!(h.down);
    }

    #[test]
    fn history_is_a_window_and_gives_success_and_load() {
        let p = Params {
            window: 4,
            load_baseline_ms: 100.0,
            ..Params::default()
        };
        let mut h = OriginHealth::default();
        assert_eq!(h.success_rate(), None);
        assert_eq!(h.load(&p), None);
        for (ok, ms) in [
            (true, 900.0),
            (false, 5.0),
            (true, 10.0),
            (true, 20.0),
            (true, 60.0),
        ] {
            h.record(sample(ok, ms), &p);
        }
        assert_eq!(h.history.len(), 4, "the oldest probe left the window");
        assert_eq!(h.success_rate(), Some(0.75));
        // The last three passing probes: 10, 20, 60 → 30 ms → 0.3 of the baseline.
        assert!((h.load(&p).unwrap() - 0.3).abs() < 1e-12);
    }

    #[test]
    fn probe_signals_average_the_origins() {
        let p = Params {
            load_baseline_ms: 100.0,
            ..Params::default()
        };
        let mut origins = BTreeMap::new();
        let mut a = OriginHealth::default();
        a.record(sample(true, 50.0), &p);
        a.record(sample(true, 50.0), &p);
        let mut b = OriginHealth::default();
        b.record(sample(true, 100.0), &p);
        b.record(sample(false, 5.0), &p);
        let mut c = OriginHealth::default();
        for _ in 0..2 {
            c.record(sample(false, 1.0), &p);
        }
        assert!(c.down);
        origins.insert(A, a);
        origins.insert(B, b);
        origins.insert(C, c);
        assert_eq!(down_set(&origins), OriginSet::EMPTY.with(C));
        let s = probe_signals(&origins, OriginSet::EMPTY.with(A), &p).unwrap();
        // Success: (1 + 0.5 + 0) / 3; load: (0.5 + 1.0) / 2 over the up origins.
        assert!((s.recent_success_rate - 0.5).abs() < 1e-12, "{s:?}");
        assert!((s.current_load - 0.75).abs() < 1e-12, "{s:?}");
        assert_eq!(s.queue_depth, (0.75 * QUEUE_AT_FULL_LOAD).round());
        let e = probe_signals(&origins, OriginSet::EMPTY, &p).unwrap_err();
        assert!(e.contains("no origin passed"), "{e}");
    }

    #[test]
    fn metrics_documents() {
        let m =
            parse_metrics(r#"{"current_load": 0.4, "recent_success_rate": 0.9, "queue_depth": 7}"#)
                .unwrap();
        assert_eq!(m.signals.current_load, 0.4);
        assert!(m.per_route.is_empty());
        let m = parse_metrics(
            r#"{"route_a": {"current_load": 0.2, "recent_success_rate": 1, "queue_depth": 2},
                "route_c": {"current_load": 0.6, "recent_success_rate": 0.8, "queue_depth": 10}}"#,
        )
        .unwrap();
        assert!((m.signals.current_load - 0.4).abs() < 1e-12);
        assert!((m.signals.recent_success_rate - 0.9).abs() < 1e-12);
        assert_eq!(m.signals.queue_depth, 6.0);
        assert_eq!(m.per_route.len(), 2);
        for (bad, needle) in [
            ("<html>oops", "not json"),
            ("[1]", "must be a json object"),
            (r#"{"current_load": 0.4}"#, "recent_success_rate"),
            (
                r#"{"route_a": {"current_load": 0.2, "recent_success_rate": 2, "queue_depth": 2}}"#,
                "route_a: ",
            ),
            (r#"{"route_a": {}, "reject": {}}"#, "not a route"),
            (
                r#"{"route_a": {"current_load": 0.2, "current_load": 0.9}}"#,
                "route_a.current_load is given more than once",
            ),
        ] {
            let e = parse_metrics(bad).unwrap_err();
            assert!(e.contains(needle), "{bad}: {e}");
        }
    }

    #[test]
    fn a_fresh_admin_push_is_the_override() {
        let signals = Signals {
            current_load: 0.1,
            recent_success_rate: 1.0,
            queue_depth: 0.0,
        };
        let admin = Snapshot {
            signals,
            updated_at_ms: 100_000.0,
            source: SnapshotSource::Admin,
        };
        let e = may_replace(Some(&admin), 130_000.0, 60).unwrap_err();
        assert!(e.contains("30 s old"), "{e}");
        assert!(may_replace(Some(&admin), 160_001.0, 60).is_ok());
        let monitor = Snapshot {
            source: SnapshotSource::Monitor,
            ..admin
        };
        assert!(may_replace(Some(&monitor), 100_001.0, 60).is_ok());
        assert!(may_replace(None, 0.0, 60).is_ok());
    }

    #[test]
    fn the_stored_state_round_trips_and_routing_reads_its_marks() {
        let mut state = Stored {
            at: 5.0,
            down: vec![A, C],
            ..Stored::default()
        };
        state.origins.insert(A, OriginHealth::default());
        let text = serde_json::to_string(&state).unwrap();
        let back: Stored = serde_json::from_str(&text).unwrap();
        assert_eq!(back, state);
        assert_eq!(
            marks_from_json(&text),
            Some((OriginSet::EMPTY.with(A).with(C), 5.0))
        );
        assert_eq!(marks_from_json("{}"), None);
        assert_eq!(marks_from_json("not json"), None);
    }
}

//! Live backend signals: Workers KV (binding `SIGNALS`), an in-isolate cache, and the
//! admin endpoint that writes them (`PUT /v1/admin/signals`).
//!
//! One snapshot, one KV key, written by the admin push or the scheduled monitor, each
//! through [`store`]. The Worker stamps `updated_at` and `source`
//! when it stores a snapshot; routing treats a missing snapshot, or one older than
//! `SIGNALS_MAX_AGE_S`, as stale. With `HEALTH_PATH` set, the origins the monitor marks
//! down are read beside it (the monitor's own key) and cached with it.

use crate::clock;
use crate::config::Config;
use crate::error::ApiError;
use crate::http;
use crate::isolate::Isolate;
use crate::kv;
use crate::log;
use decider_core::failover::OriginSet;
use decider_core::monitor::marks_from_json;
use decider_core::signals::{is_current, Snapshot, SnapshotSource};
use decider_core::Signals;
use serde_json::json;
use std::cell::RefCell;
use worker::{Env, Method, Request, Response};

/// One read of KV, kept for `SIGNALS_CACHE_S`.
#[derive(Debug, Clone)]
struct Cached {
    /// When it was read, ms since the epoch.
    at_ms: f64,
    /// What was read.
    snapshot: Option<Snapshot>,
    /// Why nothing usable was read.
    detail: Option<String>,
    /// The origins the monitor marks down, with when it marked them (ms).
    down: Option<(OriginSet, f64)>,
}

thread_local! {
    static CACHE: RefCell<Option<Cached>> = const { RefCell::new(None) };
}

/// The signals a routing decision sees.
#[derive(Debug, Clone)]
pub struct Current {
    /// The snapshot, if one could be read.
    pub snapshot: Option<Snapshot>,
    /// Whether it exists and is at most `SIGNALS_MAX_AGE_S` old.
    pub fresh: bool,
    /// Why there is none (binding missing, KV error, bad stored value), for the log.
    pub detail: Option<String>,
    /// The origins the monitor marks down; empty when its marks are older than
    /// `SIGNALS_MAX_AGE_S` (a monitor that stopped running marks nothing down).
    pub down: OriginSet,
}

impl Current {
    /// The signals to put in the state: the snapshot's, or zeros when there is none (the
    /// decision is then `stale_signals`, and rules ignore signal fields).
    pub fn signals(&self) -> Signals {
        self.snapshot.map_or(Signals::NONE, |s| s.signals)
    }
}

/// Reads the snapshot from KV.
///
/// # Errors
/// Why it could not be read (binding, KV, stored value), fit for /v1/health.
pub async fn read(env: &Env) -> Result<Option<Snapshot>, String> {
    match kv::get(env, kv::SIGNALS_KEY).await? {
        None => Ok(None),
        Some(t) => Snapshot::from_json(&t)
            .map(Some)
            .map_err(|e| format!("stored signals are invalid: {e}")),
    }
}

/// The current signals, through the in-isolate cache (`SIGNALS_CACHE_S`).
pub async fn current(env: &Env, cfg: &Config) -> Current {
    let now = clock::now_ms();
    let ttl_ms = f64::from(cfg.signals_cache_s) * 1000.0;
    let cached = CACHE.with(|c| {
        c.borrow()
            .as_ref()
            .filter(|e| ttl_ms > 0.0 && now - e.at_ms < ttl_ms)
            .map(|e| (e.snapshot, e.detail.clone(), e.down))
    });
    let (snapshot, detail, down) = match cached {
        Some(hit) => hit,
        None => {
            // The down marks are read only where a monitor probes; both reads at once.
            let marks = async {
                match &cfg.health_path {
                    Some(_) => kv::get(env, kv::MONITOR_KEY)
                        .await
                        .ok()
                        .flatten()
                        .and_then(|t| marks_from_json(&t)),
                    None => None,
                }
            };
            let (read, down) = futures_util::future::join(read(env), marks).await;
            let (snapshot, detail) = match read {
                Ok(s) => (s, None),
                Err(e) => (None, Some(e)),
            };
            CACHE.with(|c| {
                *c.borrow_mut() = Some(Cached {
                    at_ms: now,
                    snapshot,
                    detail: detail.clone(),
                    down,
                })
            });
            (snapshot, detail, down)
        }
    };
    let detail = detail.or_else(|| snapshot.is_none().then(|| "no signals stored".to_string()));
    let now = clock::now_ms();
    Current {
        fresh: snapshot.is_some_and(|s| s.is_fresh(now, cfg.signals_max_age_s)),
        snapshot,
        detail,
        down: down
            .filter(|(_, at)| is_current(*at, now, cfg.signals_max_age_s))
            .map_or(OriginSet::EMPTY, |(d, _)| d),
    }
}

/// Stores a snapshot in KV and in this isolate's cache: the one write path of the admin
/// push and the monitor.
///
/// # Errors
/// Why it could not be stored (binding, KV).
pub async fn store(env: &Env, snapshot: Snapshot) -> Result<(), String> {
    kv::put(env, kv::SIGNALS_KEY, snapshot.to_value().to_string()).await?;
    // This isolate sees its own write at once; others within SIGNALS_CACHE_S (plus KV's
    // own propagation). The down marks are the monitor's: kept as they were.
    CACHE.with(|c| {
        let mut c = c.borrow_mut();
        let down = c.as_ref().and_then(|e| e.down);
        *c = Some(Cached {
            at_ms: clock::now_ms(),
            snapshot: Some(snapshot),
            detail: None,
            down,
        })
    });
    Ok(())
}

/// Forgets this isolate's cached read, so that the next request reads KV (after the
/// monitor wrote new down marks).
pub fn forget() {
    CACHE.with(|c| *c.borrow_mut() = None);
}

/// `PUT /v1/admin/signals` stores a snapshot (body: the three signal fields, validated
/// like the state's; `updated_at` is stamped by the Worker). `GET` shows the stored one.
///
/// Bearer `ADMIN_TOKEN`, compared in constant time; without a configured token every
/// request is refused.
pub async fn admin(req: &mut Request, env: &Env, iso: &Isolate) -> Result<Response, ApiError> {
    let authorization = req.headers().get("authorization").ok().flatten();
    if !iso.is_admin(authorization.as_deref()) {
        return Err(ApiError::unauthorized());
    }
    let cfg = &iso.cfg;
    let internal = |e: worker::Error| {
        log::event(
            "internal_error",
            json!({"error": log::clip(&e.to_string())}),
        );
        ApiError::internal()
    };
    let unavailable = |why: String| {
        log::event("signals_store_error", json!({"error": log::clip(&why)}));
        ApiError::new(503, "store_unavailable", "the signals store is unavailable")
    };
    match req.method() {
        Method::Put => {
            let bytes = http::read_json_body(req).await?;
            let signals = Signals::from_json(&bytes)?;
            let snapshot = Snapshot {
                signals,
                updated_at_ms: clock::now_ms(),
                source: SnapshotSource::Admin,
            };
            store(env, snapshot).await.map_err(unavailable)?;
            log::event("signals_stored", json!({"signals": snapshot.to_value()}));
            http::json(
                200,
                &json!({"stored": snapshot.to_value(), "max_age_s": cfg.signals_max_age_s}),
            )
            .map_err(internal)
        }
        Method::Get => {
            let snapshot = read(env).await.map_err(unavailable)?;
            let now = clock::now_ms();
            http::json(
                200,
                &json!({
                    "signals": snapshot.map(|s| s.to_value()),
                    "age_s": snapshot.map(|s| s.age_s(now)),
                    "source": snapshot.map(|s| s.source.name()),
                    "fresh": snapshot.is_some_and(|s| s.is_fresh(now, cfg.signals_max_age_s)),
                    "max_age_s": cfg.signals_max_age_s,
                }),
            )
            .map_err(internal)
        }
        m => Err(ApiError::method_not_allowed(m.as_ref(), "GET, PUT")),
    }
}

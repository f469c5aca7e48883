//! Live backend signals: Workers KV (binding `SIGNALS`), an in-isolate cache, and the
//! admin endpoint that writes them (`PUT /v1/admin/signals`).
//!
//! One snapshot, one KV key. The Worker stamps `updated_at` when it stores a snapshot;
//! routing treats a missing snapshot, or one older than `SIGNALS_MAX_AGE_S`, as stale.

use crate::body;
use crate::clock;
use crate::config::Config;
use crate::edge::{bearer_token, constant_time_eq, Snapshot};
use crate::error::ApiError;
use crate::http;
use decider_core::Signals;
use serde_json::json;
use std::cell::RefCell;
use worker::{Env, Method, Request, Response};

/// The KV binding name.
pub const BINDING: &str = "SIGNALS";
/// The KV key of the snapshot.
pub const KEY: &str = "signals";

/// One read of KV, kept for `SIGNALS_CACHE_S`.
#[derive(Debug, Clone)]
struct Cached {
    /// When it was read, ms since the epoch.
    at_ms: f64,
    /// What was read.
    snapshot: Option<Snapshot>,
    /// Why nothing usable was read.
    detail: Option<String>,
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
}

impl Current {
    /// The signals to put in the state: the snapshot's, or zeros when there is none (the
    /// decision is then `stale_signals`, and rules ignore signal fields).
    pub fn signals(&self) -> Signals {
        self.snapshot.map_or(
            Signals {
                current_load: 0.0,
                recent_success_rate: 0.0,
                queue_depth: 0.0,
            },
            |s| s.signals,
        )
    }
}

/// Reads the snapshot from KV.
async fn read(env: &Env) -> Result<Option<Snapshot>, String> {
    let kv = env
        .kv(BINDING)
        .map_err(|e| format!("no {BINDING} KV binding: {e}"))?;
    let text = kv.get(KEY).text().await.map_err(|e| {
        // The whole error (stack included) goes to the log only; /v1/health is public.
        let full = e.to_string();
        worker::console_error!(
            "{}",
            serde_json::json!({"event": "signals_read_failed", "error": full})
        );
        let first = full.lines().next().unwrap_or_default().to_string();
        format!(
            "KV read failed: {}",
            crate::engine::clip(first, crate::engine::MAX_DETAIL_BYTES)
        )
    })?;
    match text {
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
            .map(|e| (e.snapshot, e.detail.clone()))
    });
    let (snapshot, detail) = match cached {
        Some(hit) => hit,
        None => {
            let (snapshot, detail) = match read(env).await {
                Ok(s) => (s, None),
                Err(e) => (None, Some(e)),
            };
            CACHE.with(|c| {
                *c.borrow_mut() = Some(Cached {
                    at_ms: now,
                    snapshot,
                    detail: detail.clone(),
                })
            });
            (snapshot, detail)
        }
    };
    let detail = detail.or_else(|| snapshot.is_none().then(|| "no signals stored".to_string()));
    Current {
        fresh: snapshot.is_some_and(|s| s.is_fresh(clock::now_ms(), cfg.signals_max_age_s)),
        snapshot,
        detail,
    }
}

/// Checks `Authorization: Bearer <ADMIN_TOKEN>` in constant time. Without a configured
/// token the admin endpoints are disabled: every request is refused.
fn authorize(req: &Request, cfg: &Config) -> Result<(), ApiError> {
    let header = req.headers().get("authorization").ok().flatten();
    let given = bearer_token(header.as_deref()).unwrap_or_default();
    match &cfg.admin_token {
        Some(t) if !given.is_empty() && constant_time_eq(given.as_bytes(), t.0.as_bytes()) => {
            Ok(())
        }
        _ => Err(ApiError::unauthorized()),
    }
}

/// `PUT /v1/admin/signals` stores a snapshot (body: the three signal fields, validated
/// like the state's; `updated_at` is stamped by the Worker). `GET` shows the stored one.
pub async fn admin(req: &mut Request, env: &Env, cfg: &Config) -> Result<Response, ApiError> {
    authorize(req, cfg)?;
    let internal = |e: worker::Error| {
        crate::log::emit(
            &json!({"ts": clock::iso_now(), "event": "internal_error", "error": e.to_string()}),
        );
        ApiError::internal()
    };
    let unavailable = |why: String| {
        crate::log::emit(
            &json!({"ts": clock::iso_now(), "event": "signals_store_error", "error": why}),
        );
        ApiError::new(503, "store_unavailable", "the signals store is unavailable")
    };
    match req.method() {
        Method::Put => {
            let ct = req.headers().get("content-type").ok().flatten();
            body::check_json_content_type(ct.as_deref())?;
            let bytes = http::read_body(req).await?;
            let value = body::parse_json(&bytes)?;
            let signals = Signals::from_value(&value)?;
            let snapshot = Snapshot {
                signals,
                updated_at_ms: clock::now_ms(),
            };
            let kv = env
                .kv(BINDING)
                .map_err(|e| unavailable(format!("no {BINDING} KV binding: {e}")))?;
            kv.put(KEY, snapshot.to_value().to_string())
                .map_err(|e| unavailable(e.to_string()))?
                .execute()
                .await
                .map_err(|e| unavailable(e.to_string()))?;
            // This isolate sees its own write at once; others within SIGNALS_CACHE_S
            // (plus KV's own propagation).
            CACHE.with(|c| {
                *c.borrow_mut() = Some(Cached {
                    at_ms: clock::now_ms(),
                    snapshot: Some(snapshot),
                    detail: None,
                })
            });
            crate::log::emit(
                &json!({"ts": clock::iso_now(), "event": "signals_stored", "signals": snapshot.to_value()}),
            );
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
                    "fresh": snapshot.is_some_and(|s| s.is_fresh(now, cfg.signals_max_age_s)),
                    "max_age_s": cfg.signals_max_age_s,
                }),
            )
            .map_err(internal)
        }
        m => Err(ApiError::method_not_allowed(m.as_ref(), "GET, PUT")),
    }
}

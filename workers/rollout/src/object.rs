//! The `Rollout` Durable Object: the one place where every serving isolate's counts meet. A
//! shell over [`decider_rollout`]: it reads and writes storage and the log, and hands the
//! rest to the pure code.
//!
//! Its routes, all JSON, reached only through the serving Worker's `ROLLOUT` binding (and
//! this Worker's cron):
//! - `POST /flush` — one isolate's batch ([`Batch`]): counted in the window of its arrival,
//!   each caller outcome once ([`outcomes::receive`]); a malformed batch is refused with 400
//!   naming its field. Answers the setting in force, as `GET /setting` does.
//! - `GET /setting?challenger=V` — the setting in force ([`SettingAnswer`]) for an isolate
//!   serving challenger `V` (absent: none); a challenger not seen before starts a new rollout
//!   ([`RolloutState::for_challenger`]).
//! - `POST /judge` — one look of the judge ([`decider_rollout::step`]) at the object's clock;
//!   the object logs what it did ([`events::lines`]) and forgets counted ids beyond the
//!   horizon.
//! - `GET /state` — the state and the windows' totals, for the serving Worker's admin health.
//! - `GET /status`, `POST /control` — the operator's (bearer `ADMIN_TOKEN`, this Worker's own
//!   secret; the serving Worker passes `/v1/admin/rollout` through): where the rollout stands
//!   ([`status::status`]), and a verb ([`control::control`]: pause, resume, abort, promote,
//!   restart) with the operator's reason.
//!
//! Every change and alarm also goes to `ROLLOUT_WEBHOOK_URL` when set: into an outbox in
//! storage, delivered on the object's alarm with retries ([`notify`]), so that neither a
//! request nor a look of the judge waits on the receiver.
//!
//! Storage: the state and the windows as two values; the counted caller outcomes' decision
//! ids in a SQLite table, kept for `OUTCOME_HORIZON_S` (at most [`MAX_COUNTED`]; when full,
//! the oldest are forgotten early and outcomes of decisions that old are no longer counted).

use crate::config::Config;
use decider_core::json::{FieldError, Fields, Nulls};
use decider_core::rollout::SettingAnswer;
use decider_rollout::control::{self, Verb};
use decider_rollout::notify::{self, Notification};
use decider_rollout::outcomes::{self, Floor};
use decider_rollout::state::RolloutState;
use decider_rollout::status;
use decider_rollout::tally::windows::{Folded, Windows, DEFAULT_MAX_WINDOWS};
use decider_rollout::tally::{Batch, Tally};
use decider_rollout::{events, step};
use serde_json::json;
use worker::{
    durable_object, js_sys, DurableObject, Env, ListOptions, Method, Request, Response,
    SqlStorageValue, State,
};

/// Storage key of the rollout's state.
const STATE_KEY: &str = "state";
/// Storage key prefix of the count windows, one key each (`w:` and the start, zero-padded, so
/// that keys sort as starts): a flush rewrites its own window only.
const WINDOW_PREFIX: &str = "w:";
/// Storage key of the windows folded for lack of room.
const FOLDED_KEY: &str = "windows.folded";
/// Storage key of the windows' width (a change of `ROLLOUT_WINDOW_S` starts them afresh).
const WIDTH_KEY: &str = "windows.width";
/// Storage key of the newest decision time whose ids were forgotten early (a full table).
const EVICTED_KEY: &str = "evicted_ms";
/// Storage key of the webhook's outbox.
const OUTBOX_KEY: &str = "outbox";
/// Budget of one webhook delivery, ms.
const WEBHOOK_MS: u64 = 5_000;
/// Most decision ids remembered at once (about 100 bytes each in SQLite).
pub const MAX_COUNTED: u64 = 2_000_000;

/// The Durable Object class bound as `ROLLOUT`.
#[durable_object]
pub struct Rollout {
    state: State,
    cfg: Config,
    /// The rollout's state as last read or written: the object is its only writer, so a
    /// flush need not parse it again (storage stays the truth after an eviction).
    cached: std::cell::RefCell<Option<RolloutState>>,
}

/// An error answered to the caller (the serving Worker logs it).
struct Failure {
    status: u16,
    code: &'static str,
    message: String,
    field: Option<String>,
}

impl Failure {
    fn new(status: u16, code: &'static str, message: impl Into<String>) -> Failure {
        Failure {
            status,
            code,
            message: message.into(),
            field: None,
        }
    }

    fn storage(e: &worker::Error) -> Failure {
        Failure::new(500, "storage_failed", e.to_string())
    }

    fn response(&self) -> worker::Result<Response> {
        let body =
            json!({"error": {"code": self.code, "message": self.message, "field": self.field}});
        Ok(Response::from_json(&body)?.with_status(self.status))
    }
}

impl DurableObject for Rollout {
    fn new(state: State, env: Env) -> Self {
        let cfg = Config::from_vars(|name| crate::var(&env, name));
        let sql = state.storage().sql();
        // Idempotent; a failure shows on the first flush that needs the table.
        let _ = sql.exec(
            "CREATE TABLE IF NOT EXISTS counted (id TEXT PRIMARY KEY, decided_ms INTEGER NOT NULL) WITHOUT ROWID",
            None,
        );
        let _ = sql.exec(
            "CREATE INDEX IF NOT EXISTS counted_by_time ON counted (decided_ms)",
            None,
        );
        Rollout {
            state,
            cfg,
            cached: std::cell::RefCell::new(None),
        }
    }

    async fn alarm(&self) -> worker::Result<Response> {
        if let Err(f) = self.deliver().await {
            crate::log(&json!({"event": "rollout_webhook_failed", "error": f.message}).to_string());
        }
        Response::ok("")
    }

    async fn fetch(&self, mut req: Request) -> worker::Result<Response> {
        let url = req.url()?;
        let challenger = url
            .query_pairs()
            .find(|(k, _)| k == "challenger")
            .map(|(_, v)| v.into_owned());
        let result = match (req.method(), url.path()) {
            (Method::Post, "/flush") => self.flush(&mut req).await,
            (Method::Get, "/setting") => self.setting(challenger.as_deref()).await,
            (Method::Post, "/judge") => self.judge().await,
            (Method::Get, "/state") => self.report().await,
            (Method::Get, "/status") => match self.operator(&req) {
                Ok(()) => self.status().await,
                Err(e) => Err(e),
            },
            (Method::Post, "/control") => match self.operator(&req) {
                Ok(()) => self.control(&mut req).await,
                Err(e) => Err(e),
            },
            (_, path) => Err(Failure::new(
                404,
                "not_found",
                format!("no route for {path}"),
            )),
        };
        result.or_else(|f| f.response())
    }
}

/// The storage key of the window starting at `start`.
fn window_key(start: i64) -> String {
    format!("{WINDOW_PREFIX}{start:016}")
}

fn now_ms() -> i64 {
    worker::Date::now().as_millis() as i64
}

fn answer(s: &RolloutState, auto: bool) -> worker::Result<Response> {
    let a = SettingAnswer {
        setting: s.setting(),
        phase: s.phase,
        automatic: auto,
    };
    let mut resp = Response::ok(a.to_json())?;
    resp.headers_mut().set("content-type", "application/json")?;
    Ok(resp)
}

impl Rollout {
    async fn read<T: serde::de::DeserializeOwned>(&self, key: &str) -> Result<Option<T>, Failure> {
        let text: Option<String> = self
            .state
            .storage()
            .get(key)
            .await
            .map_err(|e| Failure::storage(&e))?;
        // A value this code cannot read (an older layout) starts afresh rather than wedging
        // the rollout.
        Ok(text.and_then(|t| serde_json::from_str(&t).ok()))
    }

    async fn write<T: serde::Serialize>(&self, key: &str, value: &T) -> Result<(), Failure> {
        let text = serde_json::to_string(value)
            .map_err(|e| Failure::new(500, "internal", e.to_string()))?;
        self.state
            .storage()
            .put(key, text)
            .await
            .map_err(|e| Failure::storage(&e))
    }

    fn width_ms(&self) -> i64 {
        i64::from(self.cfg.window_s) * 1_000
    }

    /// The window-reset rule ([`Windows::for_width`]) in storage: windows of another width
    /// than `ROLLOUT_WINDOW_S` (a changed variable) are dropped, and counting starts afresh.
    async fn ensure_width(&self) -> Result<(), Failure> {
        let width_ms = self.width_ms();
        if self.read::<i64>(WIDTH_KEY).await? == Some(width_ms) {
            return Ok(());
        }
        let storage = self.state.storage();
        let listed = storage
            .list_with_options(ListOptions::new().prefix(WINDOW_PREFIX))
            .await
            .map_err(|e| Failure::storage(&e))?;
        let mut gone: Vec<String> = listed
            .keys()
            .into_iter()
            .filter_map(|k| k.ok()?.as_string())
            .collect();
        gone.push(FOLDED_KEY.to_owned());
        storage
            .delete_multiple(gone)
            .await
            .map_err(|e| Failure::storage(&e))?;
        self.write(WIDTH_KEY, &width_ms).await
    }

    /// The windows kept, folding those beyond [`DEFAULT_MAX_WINDOWS`] (their keys go).
    async fn windows(&self) -> Result<Windows, Failure> {
        self.ensure_width().await?;
        let storage = self.state.storage();
        let listed = storage
            .list_with_options(ListOptions::new().prefix(WINDOW_PREFIX))
            .await
            .map_err(|e| Failure::storage(&e))?;
        let mut parts = std::collections::BTreeMap::new();
        for entry in listed.entries() {
            let Ok(pair) = entry.map(|e| js_sys::Array::from(&e)) else {
                continue;
            };
            let key = pair.get(0).as_string().unwrap_or_default();
            let start = key.trim_start_matches(WINDOW_PREFIX).parse::<i64>().ok();
            let tally = pair
                .get(1)
                .as_string()
                .and_then(|t| serde_json::from_str::<Tally>(&t).ok());
            if let (Some(start), Some(tally)) = (start, tally) {
                parts.insert(start, tally);
            }
        }
        let folded: Option<Folded> = self.read(FOLDED_KEY).await?;
        let (windows, gone) =
            Windows::from_parts(self.width_ms(), DEFAULT_MAX_WINDOWS, parts, folded);
        if !gone.is_empty() {
            self.write(FOLDED_KEY, &windows.folded()).await?;
            let keys: Vec<String> = gone.into_iter().map(window_key).collect();
            storage
                .delete_multiple(keys)
                .await
                .map_err(|e| Failure::storage(&e))?;
        }
        Ok(windows)
    }

    /// The rollout's state for an isolate serving `challenger` (the kept one, or a new
    /// rollout), written back when it changed.
    async fn rollout_for(
        &self,
        challenger: Option<&str>,
        now: i64,
    ) -> Result<RolloutState, Failure> {
        let kept = self.state_kept().await?;
        let before = kept.clone();
        let s = RolloutState::for_challenger(kept, challenger, &self.cfg.policy, now);
        if before.as_ref() != Some(&s) {
            self.save(&s).await?;
        }
        Ok(s)
    }

    /// The state kept, from memory when this object read or wrote it last.
    async fn state_kept(&self) -> Result<Option<RolloutState>, Failure> {
        if let Some(s) = self.cached.borrow().clone() {
            return Ok(Some(s));
        }
        let kept = self.read::<RolloutState>(STATE_KEY).await?;
        self.cached.borrow_mut().clone_from(&kept);
        Ok(kept)
    }

    /// Writes the state (and keeps it in memory).
    async fn save(&self, s: &RolloutState) -> Result<(), Failure> {
        self.write(STATE_KEY, s).await?;
        *self.cached.borrow_mut() = Some(s.clone());
        Ok(())
    }

    /// The state kept, or a rollout without challenger from now.
    async fn kept(&self, now: i64) -> Result<RolloutState, Failure> {
        Ok(self
            .state_kept()
            .await?
            .unwrap_or_else(|| RolloutState::start(None, &self.cfg.policy, now)))
    }

    async fn flush(&self, req: &mut Request) -> Result<Response, Failure> {
        let bytes = req
            .bytes()
            .await
            .map_err(|e| Failure::new(400, "invalid_body", e.to_string()))?;
        let batch = Batch::from_bytes(&bytes).map_err(|e| Failure {
            field: Some(e.field.clone()),
            ..Failure::new(400, "invalid_batch", e.to_string())
        })?;
        let now = now_ms();
        let mut state = self.rollout_for(batch.challenger.as_deref(), now).await?;
        let state_before = state.clone();
        let evicted: Option<i64> = self.read(EVICTED_KEY).await?;
        let floor = Floor::new(now, i64::from(self.cfg.horizon_s) * 1_000, evicted);
        let sql = self.state.storage().sql();
        let mut failed = None;
        let mut first = |id: &str, decided_ms: i64| -> bool {
            let inserted = sql
                .exec(
                    "INSERT INTO counted (id, decided_ms) VALUES (?, ?) ON CONFLICT DO NOTHING RETURNING 1",
                    vec![
                        SqlStorageValue::String(id.to_owned()),
                        SqlStorageValue::Integer(decided_ms),
                    ],
                )
                .map(|c| c.raw().next().is_some());
            // A storage failure counts nothing rather than maybe twice.
            inserted.unwrap_or_else(|e| {
                failed = Some(e.to_string());
                false
            })
        };
        let counted = outcomes::receive(&mut state, &batch, floor, &mut first);
        state.hear_canary(batch.canary, now);
        if let Some(e) = failed {
            return Err(Failure::new(500, "storage_failed", e));
        }
        // Only this flush's window is read and written (a batch for a time already folded is
        // folded in at the next look).
        self.ensure_width().await?;
        let key = window_key(Windows::new(self.width_ms(), 1).start_of(now));
        let mut window: Tally = self.read(&key).await?.unwrap_or_default();
        window.merge(&counted);
        self.write(&key, &window).await?;
        // Most flushes change nothing of the state (no late or repeated outcome).
        if state_before != state {
            self.save(&state).await?;
        }
        answer(&state, self.cfg.policy.auto)
            .map_err(|e| Failure::new(500, "internal", e.to_string()))
    }

    async fn setting(&self, challenger: Option<&str>) -> Result<Response, Failure> {
        let s = self.rollout_for(challenger, now_ms()).await?;
        answer(&s, self.cfg.policy.auto).map_err(|e| Failure::new(500, "internal", e.to_string()))
    }

    async fn judge(&self) -> Result<Response, Failure> {
        let now = now_ms();
        let before = self.kept(now).await?;
        let windows = self.windows().await?;
        let (after, events) = step(&before, &self.cfg.policy, &windows, now);
        self.save(&after).await?;
        let lines = events::lines(&after, &events, now);
        self.publish(&lines, now).await?;
        self.forget(now).await?;
        answer(&after, self.cfg.policy.auto)
            .map_err(|e| Failure::new(500, "internal", e.to_string()))
    }

    /// Logs a look's or a verb's record lines and, with a webhook, puts its changes and alarms
    /// in the outbox and wakes the object to deliver them.
    async fn publish(&self, lines: &[String], now: i64) -> Result<(), Failure> {
        for line in lines {
            crate::log(line);
        }
        if self.cfg.webhook_url.is_none() {
            return Ok(());
        }
        let fresh = notify::of_lines(lines, now);
        if fresh.is_empty() {
            return Ok(());
        }
        let mut outbox: Vec<Notification> = self.read(OUTBOX_KEY).await?.unwrap_or_default();
        outbox.extend(fresh);
        if outbox.len() > notify::MAX_OUTBOX {
            let dropped = outbox.len() - notify::MAX_OUTBOX;
            outbox.drain(..dropped);
            crate::log(
                &json!({"event": "rollout_webhook_dropped", "dropped": dropped}).to_string(),
            );
        }
        self.write(OUTBOX_KEY, &outbox).await?;
        self.state
            .storage()
            .set_alarm(0)
            .await
            .map_err(|e| Failure::storage(&e))
    }

    /// The alarm's work: delivers the notifications that are due, keeps the failed ones for
    /// their next attempt, and sets the alarm for the next due one.
    async fn deliver(&self) -> Result<(), Failure> {
        let Some(url) = self.cfg.webhook_url.as_deref() else {
            return Ok(());
        };
        let outbox: Vec<Notification> = self.read(OUTBOX_KEY).await?.unwrap_or_default();
        let mut kept = Vec::new();
        for n in outbox {
            let now = now_ms();
            if n.due_ms > now {
                kept.push(n);
                continue;
            }
            let delivered = post(url, &n.body).await;
            if let Err(e) = &delivered {
                crate::log(&json!({"event": "rollout_webhook_failed", "id": n.id, "attempt": n.attempts + 1, "error": e}).to_string());
            }
            let id = n.id.clone();
            match notify::after_attempt(n, delivered.is_ok(), now_ms()) {
                Some(n) => kept.push(n),
                None if delivered.is_err() => {
                    crate::log(&json!({"event": "rollout_webhook_gave_up", "id": id}).to_string())
                }
                None => {}
            }
        }
        self.write(OUTBOX_KEY, &kept).await?;
        if let Some(next) = kept.iter().map(|n| n.due_ms).min() {
            self.state
                .storage()
                .set_alarm((next - now_ms()).max(0))
                .await
                .map_err(|e| Failure::storage(&e))?;
        }
        Ok(())
    }

    /// The operator's token, or 401.
    fn operator(&self, req: &Request) -> Result<(), Failure> {
        let auth = req.headers().get("authorization").ok().flatten();
        if decider_core::auth::carries(auth.as_deref(), self.cfg.admin_token.as_deref()) {
            Ok(())
        } else {
            Err(Failure::new(
                401,
                "unauthorized",
                "a valid Authorization: Bearer token (the control plane's ADMIN_TOKEN) is required",
            ))
        }
    }

    async fn status(&self) -> Result<Response, Failure> {
        let now = now_ms();
        let s = self.kept(now).await?;
        Response::from_json(&status::status(&s, &self.cfg.policy, now))
            .map_err(|e| Failure::new(500, "internal", e.to_string()))
    }

    /// `{"verb": "pause", "reason": "…", "skip_bake": false}`: the verb applied, its record
    /// logged (and notified), the new status answered.
    async fn control(&self, req: &mut Request) -> Result<Response, Failure> {
        let bytes = req
            .bytes()
            .await
            .map_err(|e| Failure::new(400, "invalid_body", e.to_string()))?;
        let (verb, reason) = parse_control(&bytes).map_err(|e| Failure {
            field: e.field().map(str::to_owned),
            ..Failure::new(400, e.code(), e.to_string())
        })?;
        let now = now_ms();
        let before = self.kept(now).await?;
        let (after, events) = control::control(&before, verb, &reason, &self.cfg.policy, now)
            .map_err(|e| Failure::new(409, "conflict", e.to_string()))?;
        self.save(&after).await?;
        self.publish(&events::event_lines(&after, &events, now), now)
            .await?;
        Response::from_json(&status::status(&after, &self.cfg.policy, now))
            .map_err(|e| Failure::new(500, "internal", e.to_string()))
    }

    /// Forgets counted ids beyond the horizon, and the oldest beyond [`MAX_COUNTED`]
    /// (remembering how far back that reached).
    async fn forget(&self, now: i64) -> Result<(), Failure> {
        let sql = self.state.storage().sql();
        let horizon = now - i64::from(self.cfg.horizon_s) * 1_000;
        sql.exec(
            "DELETE FROM counted WHERE decided_ms < ?",
            vec![SqlStorageValue::Integer(horizon)],
        )
        .map_err(|e| Failure::storage(&e))?;
        let cut = sql
            .exec(
                "SELECT decided_ms FROM counted ORDER BY decided_ms DESC LIMIT 1 OFFSET ?",
                vec![SqlStorageValue::Integer(MAX_COUNTED as i64)],
            )
            .map_err(|e| Failure::storage(&e))?
            .raw()
            .next()
            .and_then(|row| row.ok())
            .and_then(|row| match row.first() {
                Some(SqlStorageValue::Integer(t)) => Some(*t),
                Some(SqlStorageValue::Float(t)) => Some(*t as i64),
                _ => None,
            });
        if let Some(cut) = cut {
            sql.exec(
                "DELETE FROM counted WHERE decided_ms <= ?",
                vec![SqlStorageValue::Integer(cut)],
            )
            .map_err(|e| Failure::storage(&e))?;
            let evicted: Option<i64> = self.read(EVICTED_KEY).await?;
            self.write(EVICTED_KEY, &evicted.map_or(cut, |e| e.max(cut)))
                .await?;
        }
        Ok(())
    }

    async fn report(&self) -> Result<Response, Failure> {
        let s = self.kept(now_ms()).await?;
        let windows = self.windows().await?;
        let total = windows.total().total();
        let body = json!({
            "state": s,
            "config": decider_core::vars::values(crate::config::VARS, &self.cfg, true),
            "config_errors": self.cfg.errors.iter().map(|e| json!({"var": e.var, "message": e.message})).collect::<Vec<_>>(),
            "automatic": self.cfg.policy.auto,
            "windows": {
                "width_s": windows.width_ms() / 1_000,
                "kept": windows.windows().count(),
                "decisions": total.decisions,
                "outcomes": total.outcomes,
            },
        });
        Response::from_json(&body).map_err(|e| Failure::new(500, "internal", e.to_string()))
    }
}

/// A `/control` body: `verb` (one of [`control::VERBS`]), `reason` (text, at most 256
/// bytes), `skip_bake` (promote only).
fn parse_control(bytes: &[u8]) -> Result<(Verb, String), FieldError> {
    let v = decider_core::json::parse_text(bytes)?;
    let f = Fields::of(&v, "body", Nulls::Strict)?;
    f.only(&["verb", "reason", "skip_bake"])?;
    let skip_bake = f.bool("skip_bake")?.unwrap_or(false);
    let verb = f.name(
        "verb",
        "one of pause, resume, abort, promote, restart",
        |n| Verb::parse(n, skip_bake),
    )?;
    let verb = f.require(verb, "verb")?;
    let reason = f.str("reason")?.unwrap_or_default();
    Ok((
        verb,
        decider_core::record::clip_to(reason, decider_core::record::TEXT_BYTES),
    ))
}

/// POSTs a notification within [`WEBHOOK_MS`]; Ok when the receiver answered 2xx.
async fn post(url: &str, body: &serde_json::Value) -> Result<(), String> {
    use futures_util::future::{select, Either};
    let headers = worker::Headers::new();
    headers
        .set("content-type", "application/json")
        .map_err(|e| e.to_string())?;
    let controller = worker::AbortController::default();
    let mut init = worker::RequestInit::new();
    init.with_method(Method::Post)
        .with_headers(headers)
        .with_body(Some(wasm_bindgen::JsValue::from_str(&body.to_string())));
    let req = Request::new_with_init(url, &init).map_err(|e| e.to_string())?;
    let fetch = worker::Fetch::Request(req);
    let signal = controller.signal();
    let sent = fetch.send_with_signal(&signal);
    let deadline = worker::Delay::from(std::time::Duration::from_millis(WEBHOOK_MS));
    futures_util::pin_mut!(sent);
    match select(sent, deadline).await {
        Either::Left((Ok(resp), _)) if (200..300).contains(&resp.status_code()) => Ok(()),
        Either::Left((Ok(resp), _)) => Err(format!("answered {}", resp.status_code())),
        Either::Left((Err(e), _)) => Err(e.to_string()),
        Either::Right(_) => {
            controller.abort();
            Err(format!("no answer within {WEBHOOK_MS} ms"))
        }
    }
}

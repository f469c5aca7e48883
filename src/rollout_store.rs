//! The `ROLLOUT` Durable Object: one per Worker, it keeps the isolates' counts in time
//! windows and the rollout's state, and runs the judge when the Cron Trigger asks.
//!
//! The isolates never wait on it (see [`crate::rollout`]); it is the one place where the
//! counts of every isolate meet. Its routes, all JSON:
//! - `POST /flush` — a batch of counts ([`Tally::to_batch`]) counted in the window of the
//!   time it arrives; a malformed batch is refused with 400 naming its field.
//! - `GET /setting` — the challenger's share in force (or `"rules"`).
//! - `POST /judge` — one step of [`decider_core::rollout::judge`] at the object's clock:
//!   the new state and the changes made.
//! - `GET /state` — the state and the windows' totals, for `/v1/health`.
//!
//! The object reads the same variables as the Worker (its own [`Config`]), so the policy
//! and the challenger it judges are the deployed ones; a new challenger (another model
//! version) starts a new rollout.

use crate::clock;
use crate::config::Config;
use crate::error::ApiError;
use crate::http;
use crate::isolate;
use decider_core::rollout::tally::{Windows, DEFAULT_MAX_WINDOWS, MAX_BATCH_BYTES};
use decider_core::rollout::{judge, RolloutState, Tally};
use serde_json::json;
use worker::{durable_object, DurableObject, Env, Method, Request, Response, State};

/// Storage key of the rollout's state.
const STATE_KEY: &str = "state";
/// Storage key of the count windows.
const WINDOWS_KEY: &str = "windows";

/// The Durable Object class bound as `ROLLOUT` (wrangler.toml).
#[durable_object]
pub struct Rollout {
    state: State,
    cfg: Config,
    challenger_version: Option<String>,
}

impl DurableObject for Rollout {
    fn new(state: State, env: Env) -> Self {
        let cfg = Config::from_vars(|name| isolate::raw_var(&env, name));
        let challenger_version = isolate::challenger_version(&cfg);
        Rollout {
            state,
            cfg,
            challenger_version,
        }
    }

    async fn fetch(&self, mut req: Request) -> worker::Result<Response> {
        let result = match (req.method(), req.path().as_str()) {
            (Method::Post, "/flush") => self.flush(&mut req).await,
            (Method::Get, "/setting") => self.setting().await,
            (Method::Post, "/judge") => self.judge().await,
            (Method::Get, "/state") => self.report().await,
            (_, path) => Err(ApiError::not_found(path)),
        };
        match result {
            Ok(resp) => Ok(resp),
            Err(e) => http::error(&e),
        }
    }
}

/// A storage failure: 500, its text for the caller's log.
fn storage_error(e: &worker::Error) -> ApiError {
    ApiError::new(500, "storage_failed", crate::log::clip(&e.to_string()))
}

impl Rollout {
    async fn read<T: serde::de::DeserializeOwned>(&self, key: &str) -> Result<Option<T>, ApiError> {
        let text: Option<String> = self
            .state
            .storage()
            .get(key)
            .await
            .map_err(|e| storage_error(&e))?;
        // A value this code cannot read (an older layout) starts afresh rather than wedging
        // the rollout.
        Ok(text.and_then(|t| serde_json::from_str(&t).ok()))
    }

    async fn write<T: serde::Serialize>(&self, key: &str, value: &T) -> Result<(), ApiError> {
        let text = serde_json::to_string(value).map_err(|_| ApiError::internal())?;
        self.state
            .storage()
            .put(key, text)
            .await
            .map_err(|e| storage_error(&e))
    }

    /// The windows, or empty ones of the configured width.
    async fn windows(&self) -> Result<Windows, ApiError> {
        let width_ms = i64::from(self.cfg.rollout.window_s) * 1_000;
        Ok(self
            .read::<Windows>(WINDOWS_KEY)
            .await?
            .filter(|w| w.width_ms() == width_ms)
            .unwrap_or_else(|| Windows::new(width_ms, DEFAULT_MAX_WINDOWS)))
    }

    /// The rollout's state; a rollout begins now when there is none or it is about another
    /// challenger.
    async fn rollout_state(&self, now_ms: i64) -> Result<RolloutState, ApiError> {
        let kept = self.read::<RolloutState>(STATE_KEY).await?;
        match kept {
            Some(s) if s.challenger_version == self.challenger_version => Ok(s),
            _ => {
                let s = RolloutState::start(
                    self.challenger_version.clone(),
                    &self.cfg.rollout.policy,
                    now_ms,
                );
                self.write(STATE_KEY, &s).await?;
                Ok(s)
            }
        }
    }

    async fn flush(&self, req: &mut Request) -> Result<Response, ApiError> {
        let bytes = http::read_json_body_up_to(req, MAX_BATCH_BYTES).await?;
        let batch = Tally::from_batch(&bytes).map_err(|e| ApiError {
            field: Some(e.field.clone()),
            ..ApiError::new(400, "invalid_batch", e.to_string())
        })?;
        let now = clock::now_ms() as i64;
        // The rollout begins with the first counts if nothing asked for it before (with
        // ROLLOUT_AUTO=false no isolate reads the share).
        self.rollout_state(now).await?;
        let mut windows = self.windows().await?;
        windows.add(&batch, now);
        self.write(WINDOWS_KEY, &windows).await?;
        http::json(202, &json!({"accepted": true})).map_err(|_| ApiError::internal())
    }

    async fn setting(&self) -> Result<Response, ApiError> {
        let s = self.rollout_state(clock::now_ms() as i64).await?;
        let body = json!({
            "setting": s.setting(),
            "phase": s.phase,
            "challenger_version": s.challenger_version,
        });
        http::json(200, &body).map_err(|_| ApiError::internal())
    }

    async fn judge(&self) -> Result<Response, ApiError> {
        let now = clock::now_ms() as i64;
        let before = self.rollout_state(now).await?;
        let windows = self.windows().await?;
        let (after, changes) = judge(&before, &self.cfg.rollout.policy, &windows, now);
        self.write(STATE_KEY, &after).await?;
        let body = json!({"state": after, "changes": changes, "before": {"alarms": before.alarms}});
        http::json(200, &body).map_err(|_| ApiError::internal())
    }

    async fn report(&self) -> Result<Response, ApiError> {
        let s = self.rollout_state(clock::now_ms() as i64).await?;
        let windows = self.windows().await?;
        let total = windows.total();
        let body = json!({
            "state": s,
            "windows": {
                "width_s": windows.width_ms() / 1_000,
                "kept": windows.windows().count(),
                "decisions": total.total().decisions,
                "outcomes": total.total().outcomes,
            },
        });
        http::json(200, &body).map_err(|_| ApiError::internal())
    }
}

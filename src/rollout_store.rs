//! The `ROLLOUT` Durable Object: one per Worker, it keeps the isolates' counts in time
//! windows and the rollout's state, and runs the judge when the Cron Trigger asks.
//!
//! The isolates never wait on it (see [`crate::rollout`]); it is the one place where the
//! counts of every isolate meet. Its routes, all JSON:
//! - `POST /flush` — a batch of counts ([`Tally::to_batch`]) counted in the window of the
//!   time it arrives; a malformed batch is refused with 400 naming its field.
//! - `GET /setting` — the challenger's share in force (or `"rules"`).
//! - `POST /judge` — one step of [`decider_core::rollout::judge`] at the object's clock; the
//!   object logs what it did (a `rollout` record per change, `rollout_alarm`,
//!   `rollout_alarm_cleared`, `rollout_judged`) and answers the setting in force.
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
use crate::log;
use decider_core::record::RolloutRecord;
use decider_core::rollout::tally::{Windows, DEFAULT_MAX_WINDOWS, MAX_BATCH_BYTES};
use decider_core::rollout::{judge, Alarm, AlarmKind, Phase, RolloutState, Setting, Tally};
use serde::Serialize;
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
        http::json_text(202, r#"{"accepted":true}"#.into()).map_err(|_| ApiError::internal())
    }

    async fn setting(&self) -> Result<Response, ApiError> {
        let s = self.rollout_state(clock::now_ms() as i64).await?;
        http::json(200, &SettingAnswer::of(&s)).map_err(|_| ApiError::internal())
    }

    async fn judge(&self) -> Result<Response, ApiError> {
        let now = clock::now_ms() as i64;
        let before = self.rollout_state(now).await?;
        let windows = self.windows().await?;
        let (after, changes) = judge(&before, &self.cfg.rollout.policy, &windows, now);
        self.write(STATE_KEY, &after).await?;
        let version = after.challenger_version.as_deref();
        for c in &changes {
            log::write(&RolloutRecord::of_change(c, version).to_line());
        }
        let raised = |a: &Alarm, among: &[Alarm]| !among.iter().any(|b| b.kind == a.kind);
        for a in after.alarms.iter().filter(|a| raised(a, &before.alarms)) {
            event(&AlarmEvent {
                ts: clock::iso_now(),
                event: "rollout_alarm",
                alarm: a,
            });
        }
        for b in before.alarms.iter().filter(|b| raised(b, &after.alarms)) {
            event(&AlarmCleared {
                ts: clock::iso_now(),
                event: "rollout_alarm_cleared",
                kind: b.kind,
            });
        }
        event(&Judged {
            ts: clock::iso_now(),
            event: "rollout_judged",
            challenger_version: version,
            phase: after.phase,
            setting: after.setting(),
            judgement: after.last.as_ref(),
        });
        http::json(200, &SettingAnswer::of(&after)).map_err(|_| ApiError::internal())
    }

    async fn report(&self) -> Result<Response, ApiError> {
        let s = self.rollout_state(clock::now_ms() as i64).await?;
        let windows = self.windows().await?;
        let total = windows.total().total();
        let body = StateAnswer {
            state: &s,
            windows: WindowsSummary {
                width_s: windows.width_ms() / 1_000,
                kept: windows.windows().count(),
                decisions: total.decisions,
                outcomes: total.outcomes,
            },
        };
        http::json(200, &body).map_err(|_| ApiError::internal())
    }
}

// The answers and events are structs serialised to text, as the state is stored: one
// serialiser of the state's types in the wasm, not a second one through `serde_json::Value`.

/// What `GET /setting` and `POST /judge` answer.
#[derive(Serialize)]
struct SettingAnswer<'a> {
    setting: Setting,
    phase: Phase,
    challenger_version: Option<&'a str>,
}

impl SettingAnswer<'_> {
    fn of(s: &RolloutState) -> SettingAnswer<'_> {
        SettingAnswer {
            setting: s.setting(),
            phase: s.phase,
            challenger_version: s.challenger_version.as_deref(),
        }
    }
}

#[derive(Serialize)]
struct StateAnswer<'a> {
    state: &'a RolloutState,
    windows: WindowsSummary,
}

#[derive(Serialize)]
struct WindowsSummary {
    width_s: i64,
    kept: usize,
    decisions: u64,
    outcomes: u64,
}

#[derive(Serialize)]
struct AlarmEvent<'a> {
    ts: String,
    event: &'static str,
    alarm: &'a Alarm,
}

#[derive(Serialize)]
struct AlarmCleared {
    ts: String,
    event: &'static str,
    kind: AlarmKind,
}

#[derive(Serialize)]
struct Judged<'a> {
    ts: String,
    event: &'static str,
    challenger_version: Option<&'a str>,
    phase: Phase,
    setting: Setting,
    judgement: Option<&'a decider_core::rollout::state::Judgement>,
}

/// Writes an event line.
fn event(e: &impl Serialize) {
    if let Ok(line) = serde_json::to_string(e) {
        log::write(&line);
    }
}

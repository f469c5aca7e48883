//! Notifications: every change and alarm of the rollout POSTed to `ROLLOUT_WEBHOOK_URL` as
//! JSON with a Slack-compatible `text`, retried with backoff. The control plane keeps them in
//! an outbox and delivers them on its object's alarm, so no request and no look of the judge
//! ever waits on the receiver; each has an id, so a receiver can tell a retry from a new one.

use serde::{Deserialize, Serialize};
use serde_json::{json, Value};

/// Attempts before a notification is given up (and said so in the log).
pub const MAX_ATTEMPTS: u32 = 8;

/// Most notifications waiting; beyond, the oldest are dropped (and said so in the log).
pub const MAX_OUTBOX: usize = 200;

/// The first retry's wait; each next one doubles it, up to [`MAX_BACKOFF_MS`].
pub const FIRST_BACKOFF_MS: i64 = 5_000;

/// The longest wait between two attempts.
pub const MAX_BACKOFF_MS: i64 = 600_000;

/// One notification, waiting in the outbox.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Notification {
    /// Unique: `<ms>-<index>` of the look or verb that made it.
    pub id: String,
    /// What is POSTed.
    pub body: Value,
    /// Attempts so far.
    pub attempts: u32,
    /// When the next attempt is due, ms since the epoch.
    pub due_ms: i64,
}

/// The wait after `attempts` failed attempts.
pub fn backoff_ms(attempts: u32) -> i64 {
    let doublings = attempts.saturating_sub(1).min(20);
    (FIRST_BACKOFF_MS << doublings).min(MAX_BACKOFF_MS)
}

/// The notifications of one look's (or verb's) record lines at `now_ms`: every change and
/// alarm, not the look itself (`rollout_judged`).
pub fn of_lines(lines: &[String], now_ms: i64) -> Vec<Notification> {
    lines
        .iter()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .filter(|r| r["event"] != "rollout_judged")
        .enumerate()
        .map(|(i, record)| {
            let who = record["challenger_version"]
                .as_str()
                .map_or_else(String::new, |v| format!(" ({v})"));
            let what = match record["event"].as_str() {
                Some("rollout_alarm_cleared") => {
                    format!("alarm {} cleared", record["kind"].as_str().unwrap_or("?"))
                }
                Some("rollout_alarm") => format!(
                    "alarm {}: {}",
                    record["kind"].as_str().unwrap_or("?"),
                    record["text"].as_str().unwrap_or_default()
                ),
                _ => record["text"].as_str().unwrap_or_default().to_owned(),
            };
            let id = format!("{now_ms}-{i}");
            Notification {
                body: json!({
                    "id": id,
                    "text": format!("edge-decider rollout{who}: {what}"),
                    "record": record,
                }),
                id,
                attempts: 0,
                due_ms: now_ms,
            }
        })
        .collect()
}

/// What became of one attempt: delivered, or failed (retried later, or given up).
pub fn after_attempt(mut n: Notification, delivered: bool, now_ms: i64) -> Option<Notification> {
    if delivered {
        return None;
    }
    n.attempts += 1;
    if n.attempts >= MAX_ATTEMPTS {
        return None;
    }
    n.due_ms = now_ms + backoff_ms(n.attempts);
    Some(n)
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn changes_and_alarms_become_notifications_with_a_slack_text() {
        let lines = vec![
            r#"{"event":"rollout","challenger_version":"m-2","text":"5% → 20% (next step): …"}"#
                .to_owned(),
            r#"{"event":"rollout_alarm","kind":"holdout","text":"rules beat the model"}"#
                .to_owned(),
            r#"{"event":"rollout_alarm_cleared","kind":"fallback","text":""}"#.to_owned(),
            r#"{"event":"rollout_judged","phase":"ramping"}"#.to_owned(),
        ];
        let n = of_lines(&lines, 7);
        assert_eq!(n.len(), 3);
        assert_eq!(
            n[0].body["text"],
            "edge-decider rollout (m-2): 5% → 20% (next step): …"
        );
        assert_eq!(
            n[1].body["text"],
            "edge-decider rollout: alarm holdout: rules beat the model"
        );
        assert_eq!(
            n[2].body["text"],
            "edge-decider rollout: alarm fallback cleared"
        );
        assert_eq!((n[0].id.as_str(), n[2].id.as_str()), ("7-0", "7-2"));
        assert_eq!(n[0].body["id"], "7-0");
        assert_eq!(n[0].body["record"]["event"], "rollout");
    }

    #[test]
    fn failures_back_off_then_give_up() {
        assert_eq!(backoff_ms(1), 5_000);
        assert_eq!(backoff_ms(2), 10_000);
        assert_eq!(backoff_ms(10), MAX_BACKOFF_MS);
        let n = of_lines(&[r#"{"event":"rollout","text":"x"}"#.to_owned()], 0).remove(0);
        assert_eq!(after_attempt(n.clone(), true, 1), None);
        let mut n = Some(n);
        let mut t = 0;
        for a in 1..MAX_ATTEMPTS {
            let next = after_attempt(n.take().unwrap(), false, t).unwrap();
            assert_eq!((next.attempts, next.due_ms), (a, t + backoff_ms(a)));
            t = next.due_ms;
            n = Some(next);
        }
        assert_eq!(after_attempt(n.unwrap(), false, t), None);
    }
}

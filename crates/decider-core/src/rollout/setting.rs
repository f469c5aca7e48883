//! What the control plane tells the serving Worker: the challenger's share of routing keys
//! in force (or every decision on rules) and where the rollout stands, and its answer's form.

use serde::de::Error as _;
use serde::{Deserialize, Deserializer, Serialize, Serializer};
use serde_json::Value;

/// What the Worker applies: the challenger's share of routing keys, or every decision on
/// rules. On the wire, a percent or `"rules"`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Setting {
    /// The challenger serves this percent of routing keys (within the canary share).
    Share(u8),
    /// Every decision on rules (`ROLLOUT_RULES_SWITCH`).
    Rules,
}

impl Setting {
    /// The setting of a JSON value: a percent `0..=100` or `"rules"`.
    pub fn from_value(v: &Value) -> Option<Setting> {
        match v {
            Value::String(s) if s == "rules" => Some(Setting::Rules),
            v => v
                .as_u64()
                .filter(|p| *p <= 100)
                .map(|p| Setting::Share(p as u8)),
        }
    }
}

impl Serialize for Setting {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        match self {
            Setting::Share(p) => s.serialize_u8(*p),
            Setting::Rules => s.serialize_str("rules"),
        }
    }
}

impl<'de> Deserialize<'de> for Setting {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Setting, D::Error> {
        let v = Value::deserialize(d)?;
        Setting::from_value(&v)
            .ok_or_else(|| D::Error::custom(format!("a percent 0..=100 or \"rules\", got {v}")))
    }
}

impl std::fmt::Display for Setting {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Setting::Share(p) => write!(f, "{p}%"),
            Setting::Rules => f.write_str("rules"),
        }
    }
}

/// Where the rollout stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Phase {
    /// No challenger: only the holdout and fallback alarms run.
    NoChallenger,
    /// The challenger serves the current step's share and is judged.
    Ramping,
    /// The challenger passed the last step and bakes: the previous champion keeps a small
    /// share, and the judge can still roll it back.
    Baking,
    /// The challenger reached 100%: it is the effective champion.
    Promoted,
    /// The challenger was rolled back to 0 (or aborted).
    RolledBack,
}

impl Phase {
    /// Every phase, in wire order.
    pub const ALL: [Phase; 5] = [
        Phase::NoChallenger,
        Phase::Ramping,
        Phase::Baking,
        Phase::Promoted,
        Phase::RolledBack,
    ];

    /// Wire name.
    pub fn name(self) -> &'static str {
        match self {
            Phase::NoChallenger => "no_challenger",
            Phase::Ramping => "ramping",
            Phase::Baking => "baking",
            Phase::Promoted => "promoted",
            Phase::RolledBack => "rolled_back",
        }
    }

    /// The phase of a wire name.
    pub fn parse_name(s: &str) -> Option<Phase> {
        Phase::ALL.into_iter().find(|p| p.name() == s)
    }
}

/// The control plane's answer to a serving isolate's read (and to each flush): the
/// setting in force, the phase, and whether the judge sets the share at all
/// (`ROLLOUT_AUTO`); without it the isolate applies `CHALLENGER_PERCENT`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SettingAnswer {
    /// The setting in force.
    pub setting: Setting,
    /// Where the rollout stands.
    pub phase: Phase,
    /// Whether the judge sets the share (`ROLLOUT_AUTO`).
    pub automatic: bool,
}

impl SettingAnswer {
    /// The answer as JSON text: `{"setting":20,"phase":"ramping","automatic":true}`.
    pub fn to_json(&self) -> String {
        serde_json::json!({
            "setting": self.setting,
            "phase": self.phase.name(),
            "automatic": self.automatic,
        })
        .to_string()
    }

    /// Reads an answer; None for anything else (the isolate then keeps what it had).
    pub fn from_json(text: &str) -> Option<SettingAnswer> {
        let v: Value = serde_json::from_slice(text.as_bytes()).ok()?;
        Some(SettingAnswer {
            setting: Setting::from_value(v.get("setting")?)?,
            phase: Phase::parse_name(v.get("phase")?.as_str()?)?,
            automatic: v.get("automatic")?.as_bool()?,
        })
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn settings_read_as_percent_or_rules() {
        assert_eq!(serde_json::to_string(&Setting::Share(20)).unwrap(), "20");
        assert_eq!(
            serde_json::to_string(&Setting::Rules).unwrap(),
            r#""rules""#
        );
        assert_eq!(
            serde_json::from_str::<Setting>("0").unwrap(),
            Setting::Share(0)
        );
        assert!(serde_json::from_str::<Setting>("101").is_err());
        assert!(serde_json::from_str::<Setting>(r#""all""#).is_err());
        assert_eq!(Setting::Share(5).to_string(), "5%");
    }

    #[test]
    fn phases_and_answers_round_trip() {
        for p in Phase::ALL {
            assert_eq!(
                serde_json::to_value(p).unwrap(),
                Value::String(p.name().into())
            );
            assert_eq!(Phase::parse_name(p.name()), Some(p));
        }
        let a = SettingAnswer {
            setting: Setting::Rules,
            phase: Phase::Ramping,
            automatic: true,
        };
        assert_eq!(
            a.to_json(),
            r#"{"automatic":true,"phase":"ramping","setting":"rules"}"#
        );
        assert_eq!(SettingAnswer::from_json(&a.to_json()), Some(a));
        for bad in [
            "",
            "[]",
            r#"{"setting":5,"phase":"ramping"}"#,
            r#"{"setting":500,"phase":"ramping","automatic":true}"#,
            r#"{"setting":5,"phase":"ramped","automatic":true}"#,
        ] {
            assert_eq!(SettingAnswer::from_json(bad), None, "{bad}");
        }
    }
}

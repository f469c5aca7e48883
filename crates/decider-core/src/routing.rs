//! Pure routing inputs: the request-type table, the region map, sticky canary buckets,
//! the failover graph and the freshness of live backend signals.
//!
//! Everything here is a function of its arguments (no clock, no I/O): the Worker reads the
//! request, the environment and KV, and asks this module what they mean for the decision.

use crate::actions::Action;
use crate::record::Arm;
use crate::state::{Signals, MAX_REQUEST_TYPE, NUM_REGIONS as REGIONS};
use serde::{Deserialize, Serialize};
use serde_json::{json, Value};
use std::collections::BTreeMap;

/// The number of regions (`region_id` is `0..NUM_REGIONS`).
const NUM_REGIONS: u8 = REGIONS as u8;

/// One entry of the request-type table: a path prefix, optionally restricted to methods.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TypeRoute {
    /// Methods this entry applies to (upper case); absent: every method.
    #[serde(default)]
    pub methods: Option<Vec<String>>,
    /// Path prefix, starting with `/`.
    pub prefix: String,
    /// The request type, `0..=5`.
    #[serde(rename = "type")]
    pub request_type: u8,
}

/// The (method, path prefix) → request type table (`REQUEST_TYPES`), first hit wins.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RequestTypes {
    /// Type of a request no entry matches.
    pub default: u8,
    /// Entries in evaluation order.
    #[serde(default)]
    pub routes: Vec<TypeRoute>,
}

/// The shipped request-type table. Types follow the simulator the model was trained on:
/// 0–2 light interactive, 3 batch, 4–5 heavy (compute-bound).
pub const DEFAULT_REQUEST_TYPES: &str = r#"{"default": 0, "routes": [
  {"prefix": "/batch/", "type": 3},
  {"prefix": "/export/", "type": 4},
  {"prefix": "/render/", "type": 5},
  {"prefix": "/search", "type": 2},
  {"methods": ["POST", "PUT", "PATCH", "DELETE"], "prefix": "/", "type": 1}
]}"#;

impl RequestTypes {
    /// Parses and checks a table.
    ///
    /// # Errors
    /// A message naming the bad entry.
    pub fn from_json(text: &str) -> Result<RequestTypes, String> {
        let t: RequestTypes = serde_json::from_str(text).map_err(|e| e.to_string())?;
        if t.default > MAX_REQUEST_TYPE {
            return Err(format!(
                "default must be 0..={MAX_REQUEST_TYPE}, got {}",
                t.default
            ));
        }
        for (i, r) in t.routes.iter().enumerate() {
            if r.request_type > MAX_REQUEST_TYPE {
                return Err(format!(
                    "routes[{i}].type must be 0..={MAX_REQUEST_TYPE}, got {}",
                    r.request_type
                ));
            }
            if !r.prefix.starts_with('/') {
                return Err(format!(
                    "routes[{i}].prefix must start with /, got {:?}",
                    r.prefix
                ));
            }
        }
        Ok(t)
    }

    /// The shipped table.
    pub fn shipped() -> RequestTypes {
        RequestTypes::from_json(DEFAULT_REQUEST_TYPES).unwrap_or(RequestTypes {
            default: 0,
            routes: Vec::new(),
        })
    }

    /// The request type of a method and path.
    pub fn classify(&self, method: &str, path: &str) -> u8 {
        self.routes
            .iter()
            .find(|r| {
                path.starts_with(&r.prefix)
                    && r.methods
                        .as_ref()
                        .is_none_or(|ms| ms.iter().any(|m| m.eq_ignore_ascii_case(method)))
            })
            .map_or(self.default, |r| r.request_type)
    }
}

/// Country / continent → region map (`REGIONS`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Regions {
    /// Region of requests without location data (local dev) or with an unmapped one.
    pub default: u8,
    /// ISO 3166-1 alpha-2 country code → region; checked first.
    #[serde(default)]
    pub countries: BTreeMap<String, u8>,
    /// Continent code (`NA`, `SA`, `EU`, `AF`, `AS`, `OC`, `AN`) → region.
    #[serde(default)]
    pub continents: BTreeMap<String, u8>,
}

/// The shipped region map: regions 0–3 are the Americas (home cluster A), 4–6 Europe,
/// Africa and the Middle East (B), 7–9 Asia-Pacific (C), as in the training simulator.
pub const DEFAULT_REGIONS: &str = r#"{"default": 0,
  "countries": {"US": 0, "CA": 1, "MX": 2, "BR": 3, "AR": 3, "CL": 3, "CO": 3,
                "GB": 4, "IE": 4, "FR": 4, "ES": 4, "PT": 4, "DE": 5, "NL": 5, "PL": 5, "SE": 5,
                "AE": 6, "SA": 6, "IL": 6, "TR": 6,
                "JP": 7, "KR": 7, "CN": 8, "IN": 8, "SG": 8, "AU": 9, "NZ": 9},
  "continents": {"NA": 0, "SA": 3, "EU": 5, "AF": 6, "AS": 8, "OC": 9, "AN": 9}}"#;

impl Regions {
    /// Parses and checks a map.
    ///
    /// # Errors
    /// A message naming the bad entry.
    pub fn from_json(text: &str) -> Result<Regions, String> {
        let r: Regions = serde_json::from_str(text).map_err(|e| e.to_string())?;
        let bad = |what: String, v: u8| {
            format!("{what} must be a region 0..={}, got {v}", NUM_REGIONS - 1)
        };
        if r.default >= NUM_REGIONS {
            return Err(bad("default".into(), r.default));
        }
        for (k, &v) in r.countries.iter() {
            if v >= NUM_REGIONS {
                return Err(bad(format!("countries.{k}"), v));
            }
        }
        for (k, &v) in r.continents.iter() {
            if v >= NUM_REGIONS {
                return Err(bad(format!("continents.{k}"), v));
            }
        }
        Ok(r)
    }

    /// The shipped map.
    pub fn shipped() -> Regions {
        Regions::from_json(DEFAULT_REGIONS).unwrap_or(Regions {
            default: 0,
            countries: BTreeMap::new(),
            continents: BTreeMap::new(),
        })
    }

    /// The region of a request's location: country first, then continent, then the default.
    pub fn lookup(&self, country: Option<&str>, continent: Option<&str>) -> u8 {
        let upper = |s: &str| s.trim().to_ascii_uppercase();
        country
            .and_then(|c| self.countries.get(&upper(c)))
            .or_else(|| continent.and_then(|c| self.continents.get(&upper(c))))
            .copied()
            .unwrap_or(self.default)
    }
}

/// What the canary bucket is computed from (`CANARY_KEY`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CanaryKey {
    /// The client IP (`cf-connecting-ip`).
    ClientIp,
    /// A named request header (`header:<name>`), e.g. a user id.
    Header(String),
}

impl CanaryKey {
    /// Parses `ip` or `header:<name>`.
    ///
    /// # Errors
    /// A message for anything else.
    pub fn parse(s: &str) -> Result<CanaryKey, String> {
        let s = s.trim();
        if s.eq_ignore_ascii_case("ip") {
            return Ok(CanaryKey::ClientIp);
        }
        match s.split_once(':') {
            Some((h, name)) if h.eq_ignore_ascii_case("header") && !name.trim().is_empty() => {
                Ok(CanaryKey::Header(name.trim().to_ascii_lowercase()))
            }
            _ => Err(format!("must be ip or header:<name>, got {s:?}")),
        }
    }

    /// The header the key is read from.
    pub fn header(&self) -> &str {
        match self {
            CanaryKey::ClientIp => "cf-connecting-ip",
            CanaryKey::Header(h) => h,
        }
    }
}

/// The sticky bucket `0..100` of a canary key: FNV-1a (64-bit) of the key, mod 100.
/// Stable across isolates, deployments and platforms.
pub fn canary_bucket(key: &str) -> u8 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for b in key.as_bytes() {
        h ^= u64::from(*b);
        h = h.wrapping_mul(0x0000_0100_0000_01b3);
    }
    (h % 100) as u8
}

/// Whether a key falls in the canary share (`percent` of keys, 0..=100): the model may
/// decide for it. The rest is held out on rules.
pub fn in_canary(key: &str, percent: u8) -> bool {
    canary_bucket(key) < percent.min(100)
}

/// The rollout arm of a routing key, by its sticky bucket: buckets below
/// `challenger_percent` (and within the canary share) are served by the challenger, the rest
/// of the canary share by the champion, and buckets at or above `canary_percent` are held
/// out on rules. Raising either share only moves keys into its arm, never back out.
pub fn arm(key: &str, canary_percent: u8, challenger_percent: u8) -> Arm {
    let b = canary_bucket(key);
    if b >= canary_percent.min(100) {
        Arm::Holdout
    } else if b < challenger_percent.min(100) {
        Arm::Challenger
    } else {
        Arm::Champion
    }
}

/// Where each routed action goes when its origin fails (`FAILOVER`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Failover(pub BTreeMap<Action, Action>);

/// The shipped failover order: each cluster spills to the next one, as the simulator's
/// operators do (a → b → c → a).
pub const DEFAULT_FAILOVER: &str =
    r#"{"route_a": "route_b", "route_b": "route_c", "route_c": "route_a"}"#;

impl Failover {
    /// Parses `{"route_a": "route_b", …}`; routed actions only, no self-loops. An action
    /// without an entry has no failover.
    ///
    /// # Errors
    /// A message naming the bad entry.
    pub fn from_json(text: &str) -> Result<Failover, String> {
        let raw: BTreeMap<String, String> =
            serde_json::from_str(text).map_err(|e| e.to_string())?;
        let mut out = BTreeMap::new();
        for (from, to) in raw {
            let parse = |name: &str| {
                Action::parse_name(name)
                    .filter(|a| *a != Action::Reject)
                    .ok_or_else(|| {
                        format!("{name:?} is not a routed action (route_a, route_b, route_c)")
                    })
            };
            let (f, t) = (parse(&from)?, parse(&to)?);
            if f == t {
                return Err(format!("{from} cannot fail over to itself"));
            }
            out.insert(f, t);
        }
        Ok(Failover(out))
    }

    /// The shipped order.
    pub fn shipped() -> Failover {
        Failover::from_json(DEFAULT_FAILOVER).unwrap_or(Failover(BTreeMap::new()))
    }

    /// The failover target of an action, if any.
    pub fn of(&self, a: Action) -> Option<Action> {
        self.0.get(&a).copied()
    }
}

/// Who wrote a signals snapshot.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SnapshotSource {
    /// `PUT /v1/admin/signals` (also a stored snapshot that names no source: every snapshot
    /// before the monitor existed was pushed).
    Admin,
    /// The scheduled monitor.
    Monitor,
}

impl SnapshotSource {
    /// The stored and shown name.
    pub fn name(self) -> &'static str {
        match self {
            SnapshotSource::Admin => "admin",
            SnapshotSource::Monitor => "monitor",
        }
    }
}

/// A signals snapshot as stored in KV: the three live fields, when the Worker stored them
/// (`updated_at`, milliseconds since the epoch) and who wrote them (`source`).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Snapshot {
    /// The live backend signals.
    pub signals: Signals,
    /// When the Worker stored them, ms since the epoch.
    pub updated_at_ms: f64,
    /// Who wrote them.
    pub source: SnapshotSource,
}

impl Snapshot {
    /// Parses a stored snapshot.
    ///
    /// # Errors
    /// A message when the stored value is not a valid snapshot.
    pub fn from_json(text: &str) -> Result<Snapshot, String> {
        let mut v: Value = serde_json::from_str(text).map_err(|e| e.to_string())?;
        let source = match v.as_object_mut().and_then(|o| o.remove("source")) {
            None => SnapshotSource::Admin,
            Some(s) if s == "admin" => SnapshotSource::Admin,
            Some(s) if s == "monitor" => SnapshotSource::Monitor,
            Some(s) => return Err(format!("source must be admin or monitor, got {s}")),
        };
        let signals = Signals::from_value(&v).map_err(|e| e.to_string())?;
        let updated_at_ms = v
            .get("updated_at")
            .and_then(Value::as_f64)
            .filter(|t| t.is_finite())
            .ok_or("updated_at (ms since the epoch) is missing")?;
        Ok(Snapshot {
            signals,
            updated_at_ms,
            source,
        })
    }

    /// The stored form.
    pub fn to_value(&self) -> Value {
        json!({
            "current_load": self.signals.current_load,
            "recent_success_rate": self.signals.recent_success_rate,
            "queue_depth": self.signals.queue_depth,
            "updated_at": self.updated_at_ms,
            "source": self.source.name(),
        })
    }

    /// Age in seconds at `now_ms` (negative clock skew counts as fresh).
    pub fn age_s(&self, now_ms: f64) -> f64 {
        ((now_ms - self.updated_at_ms) / 1000.0).max(0.0)
    }

    /// Whether the snapshot is at most `max_age_s` old. A stamp more than `max_age_s` in the
    /// future is not fresh either: a mis-clocked or corrupt snapshot must go stale, not stay
    /// fresh forever (small clock skew is tolerated).
    pub fn is_fresh(&self, now_ms: f64, max_age_s: u32) -> bool {
        let window_ms = f64::from(max_age_s) * 1000.0;
        now_ms - self.updated_at_ms <= window_ms && self.updated_at_ms - now_ms <= window_ms
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn shipped_tables_parse() {
        assert!(RequestTypes::from_json(DEFAULT_REQUEST_TYPES).is_ok());
        assert!(Regions::from_json(DEFAULT_REGIONS).is_ok());
        assert!(Failover::from_json(DEFAULT_FAILOVER).is_ok());
    }

    #[test]
    fn request_types_first_hit() {
        let t = RequestTypes::shipped();
        assert_eq!(t.classify("GET", "/"), 0);
        assert_eq!(t.classify("GET", "/batch/nightly"), 3);
        assert_eq!(t.classify("POST", "/batch/nightly"), 3);
        assert_eq!(t.classify("GET", "/export/x.csv"), 4);
        assert_eq!(t.classify("GET", "/render/1"), 5);
        assert_eq!(t.classify("GET", "/search?q=1"), 2);
        assert_eq!(t.classify("post", "/any/path"), 1);
        assert_eq!(t.classify("HEAD", "/any/path"), 0);
    }

    #[test]
    fn request_types_are_checked() {
        for (bad, needle) in [
            (r#"{"default": 6}"#, "default"),
            (
                r#"{"default": 0, "routes": [{"prefix": "/a", "type": 9}]}"#,
                "routes[0].type",
            ),
            (
                r#"{"default": 0, "routes": [{"prefix": "a", "type": 1}]}"#,
                "prefix",
            ),
            (
                r#"{"default": 0, "routes": [{"prefix": "/a", "type": 1, "x": 1}]}"#,
                "unknown field",
            ),
            ("[]", "expected struct RequestTypes"),
        ] {
            let e = RequestTypes::from_json(bad).unwrap_err();
            assert!(e.contains(needle), "{bad}: {e}");
        }
    }

    #[test]
    fn regions_country_then_continent_then_default() {
        let r = Regions::shipped();
        assert_eq!(r.lookup(Some("DE"), Some("EU")), 5);
        assert_eq!(r.lookup(Some("jp"), None), 7);
        assert_eq!(r.lookup(Some("XX"), Some("OC")), 9);
        assert_eq!(r.lookup(None, None), 0);
        assert_eq!(r.lookup(Some("XX"), Some("??")), 0);
        let e = Regions::from_json(r#"{"default": 0, "countries": {"US": 10}}"#).unwrap_err();
        assert!(e.contains("countries.US"), "{e}");
    }

    #[test]
    fn canary_is_sticky_and_proportional() {
        assert_eq!(canary_bucket("203.0.113.7"), canary_bucket("203.0.113.7"));
        assert!(!in_canary("anything", 0));
        assert!(in_canary("anything", 100));
        let inside = (0..10_000)
            .filter(|i| in_canary(&format!("user-{i}"), 30))
            .count();
        assert!((2700..3300).contains(&inside), "{inside}");
        // Growing the share only adds keys: nobody in the canary at 30% leaves it at 50%.
        assert!((0..1000).all(|i| {
            let k = format!("u{i}");
            !in_canary(&k, 30) || in_canary(&k, 50)
        }));
    }

    #[test]
    fn arms_split_the_buckets() {
        let n = 20_000;
        let mut counts = std::collections::BTreeMap::new();
        for i in 0..n {
            let key = format!("user-{i}");
            let a = arm(&key, 90, 20);
            *counts.entry(a).or_insert(0) += 1;
            // Sticky, and consistent with the canary share.
            assert_eq!(a, arm(&key, 90, 20));
            assert_eq!(a == Arm::Holdout, !in_canary(&key, 90));
            // Growing the challenger's share only adds keys to it.
            if a == Arm::Challenger {
                assert_eq!(arm(&key, 90, 30), Arm::Challenger);
            }
        }
        let share = |a: Arm| f64::from(counts[&a]) / f64::from(n);
        assert!((share(Arm::Challenger) - 0.2).abs() < 0.015, "{counts:?}");
        assert!((share(Arm::Champion) - 0.7).abs() < 0.015, "{counts:?}");
        assert!((share(Arm::Holdout) - 0.1).abs() < 0.015, "{counts:?}");
        assert_eq!(arm("k", 100, 0), Arm::Champion);
        assert_eq!(arm("k", 0, 50), Arm::Holdout);
    }

    #[test]
    fn canary_keys() {
        assert_eq!(CanaryKey::parse("ip").unwrap(), CanaryKey::ClientIp);
        assert_eq!(
            CanaryKey::parse("header:X-User-Id").unwrap(),
            CanaryKey::Header("x-user-id".into())
        );
        assert!(CanaryKey::parse("cookie:x").is_err());
        assert!(CanaryKey::parse("header:").is_err());
    }

    #[test]
    fn failover_order() {
        let f = Failover::shipped();
        assert_eq!(f.of(Action::RouteA), Some(Action::RouteB));
        assert_eq!(f.of(Action::RouteC), Some(Action::RouteA));
        assert_eq!(f.of(Action::Reject), None);
        let f = Failover::from_json(r#"{"route_a": "route_c"}"#).unwrap();
        assert_eq!(f.of(Action::RouteA), Some(Action::RouteC));
        assert_eq!(f.of(Action::RouteB), None);
        assert!(Failover::from_json(r#"{"route_a": "route_a"}"#).is_err());
        assert!(Failover::from_json(r#"{"route_a": "reject"}"#).is_err());
        assert!(Failover::from_json(r#"{"route_x": "route_a"}"#).is_err());
    }

    #[test]
    fn snapshots() {
        let s = Snapshot::from_json(
            r#"{"current_load": 0.4, "recent_success_rate": 0.99, "queue_depth": 3, "updated_at": 1000000}"#,
        )
        .unwrap();
        assert_eq!(s.updated_at_ms, 1_000_000.0);
        assert_eq!(s.source, SnapshotSource::Admin, "no source: an admin push");
        assert!(s.is_fresh(1_000_000.0 + 60_000.0, 60));
        assert!(!s.is_fresh(1_000_000.0 + 60_001.0, 60));
        assert!(
            s.is_fresh(1_000_000.0 - 60_000.0, 60),
            "small skew behind the stamp is fresh"
        );
        assert!(
            !s.is_fresh(0.0, 60),
            "a stamp far in the future is not fresh"
        );
        assert_eq!(Snapshot::from_json(&s.to_value().to_string()).unwrap(), s);
        let m = Snapshot {
            source: SnapshotSource::Monitor,
            ..s
        };
        assert_eq!(Snapshot::from_json(&m.to_value().to_string()).unwrap(), m);
        let e = Snapshot::from_json(r#"{"current_load": 0.4, "recent_success_rate": 0.99, "queue_depth": 3, "updated_at": 1, "source": "cron"}"#).unwrap_err();
        assert!(e.contains("source must be admin or monitor"), "{e}");
        assert!(Snapshot::from_json(
            r#"{"current_load": 0.4, "recent_success_rate": 0.99, "queue_depth": 3}"#
        )
        .is_err());
        assert!(Snapshot::from_json(r#"{"current_load": -1, "recent_success_rate": 0.99, "queue_depth": 3, "updated_at": 1}"#).is_err());
    }
}

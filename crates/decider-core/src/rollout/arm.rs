//! Who serves a request: sticky buckets of a routing key split traffic into the champion,
//! challenger and holdout arms (`CANARY_PERCENT`, `CHALLENGER_PERCENT`, `CANARY_KEY`).

use serde::{Deserialize, Serialize};

/// The rollout arm a decision belongs to.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Arm {
    /// Decided by the champion model's policy.
    Champion,
    /// Decided by the challenger model's policy.
    Challenger,
    /// Held out on rules (outside the canary share): the baseline the model is compared to.
    Holdout,
}

impl Arm {
    /// All arms, in wire order.
    pub const ALL: [Arm; 3] = [Arm::Champion, Arm::Challenger, Arm::Holdout];

    /// Position in [`Arm::ALL`] (wire order): the index of per-arm counters.
    pub fn index(self) -> usize {
        match self {
            Arm::Champion => 0,
            Arm::Challenger => 1,
            Arm::Holdout => 2,
        }
    }

    /// Wire name.
    pub fn name(self) -> &'static str {
        match self {
            Arm::Champion => "champion",
            Arm::Challenger => "challenger",
            Arm::Holdout => "holdout",
        }
    }

    /// The arm of a wire name.
    pub fn parse_name(s: &str) -> Option<Arm> {
        Arm::ALL.into_iter().find(|a| a.name() == s)
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

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn wire_names_are_the_serde_names() {
        for a in Arm::ALL {
            let v = serde_json::to_value(a).unwrap();
            assert_eq!(v.as_str(), Some(a.name()));
            assert_eq!(Arm::parse_name(a.name()), Some(a));
        }
        assert_eq!(Arm::parse_name("canary"), None);
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
}

//! Where a request comes from: the country / continent → `region_id` map (`REGIONS`).

use crate::state::NUM_REGIONS as REGIONS;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// The number of regions (`region_id` is `0..NUM_REGIONS`).
const NUM_REGIONS: u8 = REGIONS as u8;

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

/// The shipped region map's countries: regions 0–3 are the Americas (home cluster A), 4–6
/// Europe, Africa and the Middle East (B), 7–9 Asia-Pacific (C), as in the training simulator.
/// Data in code, not JSON: an isolate builds it without compiling a reader.
#[rustfmt::skip]
const SHIPPED_COUNTRIES: &[(&str, u8)] = &[
    ("US", 0), ("CA", 1), ("MX", 2), ("BR", 3), ("AR", 3), ("CL", 3), ("CO", 3),
    ("GB", 4), ("IE", 4), ("FR", 4), ("ES", 4), ("PT", 4), ("DE", 5), ("NL", 5), ("PL", 5),
    ("SE", 5), ("AE", 6), ("SA", 6), ("IL", 6), ("TR", 6),
    ("JP", 7), ("KR", 7), ("CN", 8), ("IN", 8), ("SG", 8), ("AU", 9), ("NZ", 9),
];
/// The shipped map's continents.
const SHIPPED_CONTINENTS: &[(&str, u8)] = &[
    ("NA", 0),
    ("SA", 3),
    ("EU", 5),
    ("AF", 6),
    ("AS", 8),
    ("OC", 9),
    ("AN", 9),
];

impl Regions {
    /// Parses and checks a map.
    ///
    /// # Errors
    /// A message naming the bad entry.
    pub fn from_json(text: &str) -> Result<Regions, String> {
        let r: Regions = serde_json::from_slice(text.as_bytes()).map_err(|e| e.to_string())?;
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

    /// The shipped map (a test holds it to [`Regions::from_json`]'s checks).
    pub fn shipped() -> Regions {
        // Inserted one by one: collecting would sort, and compile a sort, for a table that is
        // already in order enough.
        let map = |pairs: &[(&str, u8)]| {
            let mut m = BTreeMap::new();
            for &(k, v) in pairs {
                m.insert(k.to_owned(), v);
            }
            m
        };
        Regions {
            default: 0,
            countries: map(SHIPPED_COUNTRIES),
            continents: map(SHIPPED_CONTINENTS),
        }
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

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn shipped_map_passes_the_checks_of_a_configured_one() {
        let shipped = Regions::shipped();
        let text = serde_json::to_string(&shipped).unwrap();
        assert_eq!(Regions::from_json(&text).unwrap(), shipped);
        assert_eq!(
            shipped.countries.len(),
            SHIPPED_COUNTRIES.len(),
            "a country given twice"
        );
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
}

//! The rule engine: a first-hit decision table, data not code.
//!
//! ```json
//! {"version": "default-1", "rules": [
//!   {"name": "severe-overload", "when": {"current_load": {"gte": 0.95},
//!                                        "recent_success_rate": {"lt": 0.5}}, "action": "reject"},
//!   {"name": "catch-all", "when": {}, "action": "route_a"}
//! ]}
//! ```
//!
//! A rule matches when every condition in `when` holds; the first matching rule decides.
//! Conditions are numeric ranges (`gt`, `gte`, `lt`, `lte`, combinable) on any state field,
//! or integer sets (`in`) on `request_type`, `region_id` and `hour`. The last rule must be a
//! catch-all (empty `when`), so a valid table always decides. Tables are checked once at
//! load ([`RuleTable::from_json`]) and every problem names the rule.

use crate::actions::Action;
use crate::state::State;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::sync::OnceLock;
use thiserror::Error;

/// Fields a rule may test, with whether they are integers (allowing `in`).
const FIELDS: [(&str, bool); 6] = [
    ("request_type", true),
    ("region_id", true),
    ("current_load", false),
    ("recent_success_rate", false),
    ("queue_depth", false),
    ("hour", true),
];

/// Why a rule table was refused.
#[derive(Debug, Clone, PartialEq, Error)]
pub enum RuleError {
    /// Not parseable as a rule table.
    #[error("rule table is not valid json: {0}")]
    Json(String),
    /// A problem with one rule.
    #[error("rule #{index} ({name}): {message}")]
    Rule {
        /// 0-based position in the table.
        index: usize,
        /// The rule's name.
        name: String,
        /// What is wrong.
        message: String,
    },
    /// A problem with the table as a whole.
    #[error("rule table: {0}")]
    Table(String),
}

/// Serialised condition on one field.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Condition {
    /// Value must be > this.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub gt: Option<f64>,
    /// Value must be >= this.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub gte: Option<f64>,
    /// Value must be < this.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub lt: Option<f64>,
    /// Value must be <= this.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub lte: Option<f64>,
    /// Value must be one of these (integer fields only).
    #[serde(default, rename = "in", skip_serializing_if = "Option::is_none")]
    pub one_of: Option<Vec<i64>>,
}

/// Serialised rule.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Rule {
    /// Name, used in errors and logs.
    pub name: String,
    /// Conditions by field name; empty means "always".
    #[serde(default)]
    pub when: BTreeMap<String, Condition>,
    /// Action when the rule matches.
    pub action: String,
}

/// Serialised rule table.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RuleTableSpec {
    /// Version string reported by /v1/health.
    pub version: String,
    /// Rules in evaluation order.
    pub rules: Vec<Rule>,
}

#[derive(Debug, Clone)]
struct CheckedCondition {
    field: &'static str,
    lo: f64,
    lo_incl: bool,
    hi: f64,
    hi_incl: bool,
    set: Option<Vec<i64>>,
}

impl CheckedCondition {
    fn holds(&self, v: f64) -> bool {
        let above = if self.lo_incl {
            v >= self.lo
        } else {
            v > self.lo
        };
        let below = if self.hi_incl {
            v <= self.hi
        } else {
            v < self.hi
        };
        above
            && below
            && self
                .set
                .as_ref()
                .is_none_or(|s| s.iter().any(|&i| i as f64 == v))
    }
}

#[derive(Debug, Clone)]
struct CheckedRule {
    name: String,
    conditions: Vec<CheckedCondition>,
    action: Action,
}

/// A validated rule table.
#[derive(Debug, Clone)]
pub struct RuleTable {
    version: String,
    rules: Vec<CheckedRule>,
}

/// The outcome of evaluating the table.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct RuleHit<'a> {
    /// The decided action.
    pub action: Action,
    /// Name of the rule that decided.
    pub rule: &'a str,
}

impl RuleTable {
    /// Parses and validates a rule table.
    ///
    /// # Errors
    /// [`RuleError`] naming the rule (index and name) and what is wrong with it.
    pub fn from_json(text: &str) -> Result<RuleTable, RuleError> {
        let spec: RuleTableSpec =
            serde_json::from_slice(text.as_bytes()).map_err(|e| RuleError::Json(e.to_string()))?;
        RuleTable::from_spec(spec)
    }

    /// Validates a parsed rule table.
    ///
    /// # Errors
    /// As [`RuleTable::from_json`].
    pub fn from_spec(spec: RuleTableSpec) -> Result<RuleTable, RuleError> {
        if spec.version.trim().is_empty() {
            return Err(RuleError::Table("version must not be empty".into()));
        }
        if spec.rules.is_empty() {
            return Err(RuleError::Table(
                "has no rules; the last rule must be a catch-all".into(),
            ));
        }
        let last = spec.rules.len() - 1;
        let mut rules = Vec::with_capacity(spec.rules.len());
        for (index, r) in spec.rules.into_iter().enumerate() {
            let err = |message: String| RuleError::Rule {
                index,
                name: r.name.clone(),
                message,
            };
            if r.name.trim().is_empty() {
                return Err(err("name must not be empty".into()));
            }
            let action = Action::parse_name(&r.action).ok_or_else(|| {
                err(format!(
                    "unknown action {:?}, expected one of {:?}",
                    r.action,
                    crate::ACTIONS
                ))
            })?;
            if r.when.is_empty() && index != last {
                return Err(err(format!(
                    "catch-all (empty when) makes the {} rule(s) after it unreachable",
                    last - index
                )));
            }
            if index == last && !r.when.is_empty() {
                return Err(err("the last rule must be a catch-all (empty when)".into()));
            }
            let mut conditions = Vec::new();
            for (field, c) in &r.when {
                conditions.push(check_condition(field, c).map_err(&err)?);
            }
            rules.push(CheckedRule {
                name: r.name,
                conditions,
                action,
            });
        }
        Ok(RuleTable {
            version: spec.version,
            rules,
        })
    }

    /// The table's version string.
    pub fn version(&self) -> &str {
        &self.version
    }

    /// Number of rules.
    pub fn len(&self) -> usize {
        self.rules.len()
    }

    /// Whether the table has no rules (never true for a validated table).
    pub fn is_empty(&self) -> bool {
        self.rules.is_empty()
    }

    /// First-hit evaluation over a full state.
    pub fn evaluate(&self, s: &State) -> Option<RuleHit<'_>> {
        self.evaluate_with(|f| s.field(f))
    }

    /// First-hit evaluation where some fields may be unknown (`lookup` returns `None`),
    /// e.g. the live signals when they are stale. A condition on an unknown field does not
    /// hold, so the rule is skipped; the catch-all still decides.
    pub fn evaluate_with(&self, lookup: impl Fn(&str) -> Option<f64>) -> Option<RuleHit<'_>> {
        self.rules
            .iter()
            .find(|r| {
                r.conditions
                    .iter()
                    .all(|c| lookup(c.field).is_some_and(|v| c.holds(v)))
            })
            .map(|r| RuleHit {
                action: r.action,
                rule: &r.name,
            })
    }
}

/// The shipped table's `version` (`rules/default.json`; a test holds the two equal), known
/// without reading the table: every decision record names it.
pub const SHIPPED_RULES_VERSION: &str = "default-2026-11-30";

impl RuleTable {
    /// The shipped table (`rules/default.json`), read on its first use and kept for the
    /// process. `None` only if it were refused, which a test rules out.
    pub fn shipped() -> Option<&'static RuleTable> {
        static SHIPPED: OnceLock<Option<RuleTable>> = OnceLock::new();
        SHIPPED
            .get_or_init(|| RuleTable::from_json(crate::DEFAULT_RULES_JSON).ok())
            .as_ref()
    }
}

/// A decider's rule table: the shipped one, read when a decision first consults it, or one
/// given by configuration (`RULES`), read and checked where it was given. Most decisions
/// never consult rules, so a Worker isolate whose first requests the model decides neither
/// reads the shipped table nor compiles its reader.
#[derive(Debug, Clone)]
pub enum Rules {
    /// The shipped table ([`RuleTable::shipped`]).
    Shipped,
    /// A table of the configuration's.
    Table(RuleTable),
}

impl Rules {
    /// The table.
    pub fn table(&self) -> Option<&RuleTable> {
        match self {
            Rules::Shipped => RuleTable::shipped(),
            Rules::Table(t) => Some(t),
        }
    }

    /// The table's version, without reading the shipped table.
    pub fn version(&self) -> &str {
        match self {
            Rules::Shipped => SHIPPED_RULES_VERSION,
            Rules::Table(t) => t.version(),
        }
    }
}

impl From<RuleTable> for Rules {
    fn from(t: RuleTable) -> Rules {
        Rules::Table(t)
    }
}

fn check_condition(field: &str, c: &Condition) -> Result<CheckedCondition, String> {
    let Some(&(name, integer)) = FIELDS.iter().find(|(n, _)| *n == field) else {
        let known: Vec<&str> = FIELDS.iter().map(|(n, _)| *n).collect();
        return Err(format!(
            "unknown field {field:?} in when, expected one of {known:?}"
        ));
    };
    for (op, v) in [("gt", c.gt), ("gte", c.gte), ("lt", c.lt), ("lte", c.lte)] {
        if v.is_some_and(|v| !v.is_finite()) {
            return Err(format!("{field}.{op} must be finite"));
        }
    }
    if c.gt.is_some() && c.gte.is_some() {
        return Err(format!("{field} has both gt and gte"));
    }
    if c.lt.is_some() && c.lte.is_some() {
        return Err(format!("{field} has both lt and lte"));
    }
    let (lo, lo_incl) = match (c.gt, c.gte) {
        (Some(v), _) => (v, false),
        (_, Some(v)) => (v, true),
        _ => (f64::NEG_INFINITY, true),
    };
    let (hi, hi_incl) = match (c.lt, c.lte) {
        (Some(v), _) => (v, false),
        (_, Some(v)) => (v, true),
        _ => (f64::INFINITY, true),
    };
    if lo > hi || (lo == hi && !(lo_incl && hi_incl)) {
        return Err(format!(
            "{field} range is empty (lower bound {lo} above upper bound {hi})"
        ));
    }
    if let Some(set) = &c.one_of {
        if !integer {
            return Err(format!(
                "{field} is not an integer field; use gt/gte/lt/lte, not in"
            ));
        }
        if set.is_empty() {
            return Err(format!("{field}.in is empty, the rule could never match"));
        }
    }
    let has_any = c.gt.is_some()
        || c.gte.is_some()
        || c.lt.is_some()
        || c.lte.is_some()
        || c.one_of.is_some();
    if !has_any {
        return Err(format!(
            "{field} has no condition (use gt, gte, lt, lte or in)"
        ));
    }
    Ok(CheckedCondition {
        field: name,
        lo,
        lo_incl,
        hi,
        hi_incl,
        set: c.one_of.clone(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn s(load: f64, success: f64, region: u8) -> State {
        State {
            request_type: 0,
            region_id: region,
            current_load: load,
            recent_success_rate: success,
            queue_depth: 5.0,
            hour: 12,
        }
    }

    const TABLE: &str = r#"{"version": "t1", "rules": [
      {"name": "overload", "when": {"current_load": {"gte": 0.95}, "recent_success_rate": {"lt": 0.5}}, "action": "reject"},
      {"name": "east", "when": {"region_id": {"in": [3, 4]}}, "action": "route_b"},
      {"name": "any", "when": {}, "action": "route_a"}]}"#;

    #[test]
    fn first_hit_wins() {
        let t = RuleTable::from_json(TABLE).unwrap();
        // Overload matches before the region rule even in region 3.
        assert_eq!(t.evaluate(&s(0.97, 0.3, 3)).unwrap().rule, "overload");
        assert_eq!(t.evaluate(&s(0.97, 0.6, 3)).unwrap().action, Action::RouteB);
        assert_eq!(t.evaluate(&s(0.2, 0.9, 0)).unwrap().action, Action::RouteA);
        // Boundaries: gte inclusive, lt exclusive.
        assert_eq!(t.evaluate(&s(0.95, 0.49, 0)).unwrap().rule, "overload");
        assert_eq!(t.evaluate(&s(0.95, 0.5, 0)).unwrap().rule, "any");
    }

    #[test]
    fn unknown_fields_skip_rules() {
        let t = RuleTable::from_json(TABLE).unwrap();
        let hit = t
            .evaluate_with(|f| (f == "region_id").then_some(3.0))
            .unwrap();
        assert_eq!(hit.rule, "east");
    }

    #[test]
    fn invalid_tables_name_the_rule() {
        let cases = [
            (
                r#"{"version":"v","rules":[{"name":"a","when":{"regoin_id":{"in":[1]}},"action":"route_a"},{"name":"z","action":"route_a"}]}"#,
                "rule #0 (a)",
            ),
            (
                r#"{"version":"v","rules":[{"name":"a","when":{"region_id":{"in":[1]}},"action":"route_d"},{"name":"z","action":"route_a"}]}"#,
                "unknown action",
            ),
            (
                r#"{"version":"v","rules":[{"name":"a","when":{"current_load":{"gte":0.9,"lt":0.5}},"action":"reject"},{"name":"z","action":"route_a"}]}"#,
                "range is empty",
            ),
            (
                r#"{"version":"v","rules":[{"name":"a","when":{"current_load":{"in":[1]}},"action":"reject"},{"name":"z","action":"route_a"}]}"#,
                "not an integer field",
            ),
            (
                r#"{"version":"v","rules":[{"name":"a","action":"reject"},{"name":"z","action":"route_a"}]}"#,
                "unreachable",
            ),
            (
                r#"{"version":"v","rules":[{"name":"a","when":{"hour":{"in":[1]}},"action":"reject"}]}"#,
                "must be a catch-all",
            ),
            (r#"{"version":"v","rules":[]}"#, "no rules"),
            (
                r#"{"version":"v","rules":[{"name":"a","when":{"hour":{}},"action":"reject"},{"name":"z","action":"route_a"}]}"#,
                "no condition",
            ),
            (
                r#"{"version":"v","rules":[{"name":"a","when":{"hour":{"in":[]}},"action":"reject"},{"name":"z","action":"route_a"}]}"#,
                "is empty",
            ),
            (
                r#"{"version":"v","rules":[{"name":"a","when":{"hour":{"between":[1,2]}},"action":"reject"},{"name":"z","action":"route_a"}]}"#,
                "between",
            ),
        ];
        for (text, needle) in cases {
            let e = RuleTable::from_json(text).unwrap_err().to_string();
            assert!(e.contains(needle), "{needle}: {e}");
        }
    }

    #[test]
    fn shipped_default_table_is_valid() {
        let t = RuleTable::shipped().expect("the shipped table loads");
        assert!(t.len() > 3);
        assert_eq!(
            t.version(),
            SHIPPED_RULES_VERSION,
            "rules/default.json's version"
        );
        assert_eq!(Rules::Shipped.version(), t.version());
        assert!(
            std::ptr::eq(Rules::Shipped.table().unwrap(), t),
            "read once, then kept"
        );
        let severe = State {
            request_type: 2,
            region_id: 1,
            current_load: 1.0,
            recent_success_rate: 0.2,
            queue_depth: 900.0,
            hour: 10,
        };
        assert_eq!(t.evaluate(&severe).unwrap().action, Action::Reject);
    }
}

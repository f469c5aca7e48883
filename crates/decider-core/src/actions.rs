//! The action space: one constant, in one order, shared by training and serving.
//!
//! A silently reordered action space is the worst bug this system can have (the model
//! keeps answering, with the wrong meaning), so the order lives here and nowhere else,
//! and every artifact records it and is refused when it differs.

use serde::{Deserialize, Serialize};
use std::fmt;

/// Number of actions the model chooses from.
pub const NUM_ACTIONS: usize = 4;

/// The action names, in model output order. Index `i` of every probability vector
/// and every model output row means `ACTIONS[i]`.
pub const ACTIONS: [&str; NUM_ACTIONS] = ["route_a", "route_b", "route_c", "reject"];

/// One action of the fixed action space.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Action {
    /// Route to backend A.
    RouteA,
    /// Route to backend B.
    RouteB,
    /// Route to backend C.
    RouteC,
    /// Reject the request (503 with `Retry-After` at the edge).
    Reject,
}

impl Action {
    /// All actions in [`ACTIONS`] order.
    pub const ALL: [Action; NUM_ACTIONS] = [
        Action::RouteA,
        Action::RouteB,
        Action::RouteC,
        Action::Reject,
    ];

    /// The routed actions, the ones with an origin (every action but `reject`).
    pub const ROUTED: [Action; 3] = [Action::RouteA, Action::RouteB, Action::RouteC];

    /// Position of this action in [`ACTIONS`].
    pub fn index(self) -> usize {
        self as usize
    }

    /// The action at position `i` of [`ACTIONS`], if any.
    pub fn from_index(i: usize) -> Option<Action> {
        Action::ALL.get(i).copied()
    }

    /// Parses an action name exactly as in [`ACTIONS`].
    pub fn parse_name(name: &str) -> Option<Action> {
        ACTIONS
            .iter()
            .position(|a| *a == name)
            .and_then(Action::from_index)
    }

    /// The action's wire name.
    pub fn name(self) -> &'static str {
        ACTIONS[self.index()]
    }
}

impl fmt::Display for Action {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn enum_order_matches_constant() {
        for (i, name) in ACTIONS.iter().enumerate() {
            let a = Action::from_index(i).unwrap();
            assert_eq!(a.name(), *name);
            assert_eq!(Action::parse_name(name), Some(a));
            assert_eq!(serde_json::to_string(&a).unwrap(), format!("\"{name}\""));
        }
        assert_eq!(Action::from_index(NUM_ACTIONS), None);
        assert_eq!(Action::parse_name("Route_A"), None);
    }
}

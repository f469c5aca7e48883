//! The rule of a new rollout: which rollout a flush or read that names a challenger goes on
//! with (the kept one, or a new one that remembers the one it supersedes).

use crate::policy::Policy;
use crate::state::{RolloutState, RETIRED_MS};

impl RolloutState {
    /// The rule of a new rollout: the state to go on with when a serving isolate names
    /// `challenger` at `now_ms`. The kept state when it is about that challenger, or when
    /// the challenger was superseded by it less than [`RETIRED_MS`] ago (an isolate not yet
    /// on the new deploy); otherwise a new rollout of `challenger` that remembers the one it
    /// supersedes. Also the state to begin with when none is kept.
    pub fn for_challenger(
        kept: Option<RolloutState>,
        challenger: Option<&str>,
        policy: &Policy,
        now_ms: i64,
    ) -> RolloutState {
        let Some(kept) = kept else {
            return RolloutState::start(challenger.map(str::to_owned), policy, now_ms);
        };
        let named = |v: &Option<String>| v.as_deref() == challenger;
        if named(&kept.challenger_version)
            || kept
                .retired
                .iter()
                .any(|(v, at)| named(v) && now_ms - at < RETIRED_MS)
        {
            return kept;
        }
        let mut fresh = RolloutState::start(challenger.map(str::to_owned), policy, now_ms);
        fresh.canary = kept.canary;
        fresh.retired = kept
            .retired
            .into_iter()
            .filter(|(_, at)| now_ms - at < RETIRED_MS)
            .chain([(kept.challenger_version, now_ms)])
            .collect();
        fresh
    }
}

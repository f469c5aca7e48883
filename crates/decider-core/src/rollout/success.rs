//! The one definition of a decision's reward, shared by the Worker's live counters and by
//! `decider report`, `decider ope` and `decider train --logs`, so that the edge and the
//! offline reports score the same outcome the same way.
//!
//! A reward is in `[0, 1]`: a caller's own reward when it reported one; else, for a
//! rejected request, the configured reject reward; else success 1 when the status is one
//! that succeeds ([`Statuses`]: below 500 unless `ROLLOUT_SUCCESS` / `--success` say
//! otherwise) and (with an SLO, when the latency is known) the latency is within the SLO,
//! and 0 otherwise — a request without a status got no usable answer and is a failure.
//!
//! A routed decision's status and latency are its decided origin's first attempt
//! ([`crate::record::RouteOutcome::decided`]), not the request's final answer: failover
//! rescues the client, not the decision.

use super::statuses::Statuses;

/// What is known of one decision's outcome.
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct Observation {
    /// The caller's reward (`POST /v1/outcome` with `reward`); wins over everything else.
    pub reward: Option<f64>,
    /// The status observed (the origin's, or the caller's); None (or 0) when there was none.
    pub status: Option<u16>,
    /// Time to the response headers, ms, when known.
    pub latency_ms: Option<f64>,
    /// The decision was `reject`: no origin was asked.
    pub rejected: bool,
}

/// How a decision's reward is defined.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct SuccessRule {
    /// The statuses that succeed (`ROLLOUT_SUCCESS`, `--success`).
    pub statuses: Statuses,
    /// Latency limit: a response slower than this is a failure (when latency is known).
    pub slo_ms: Option<f64>,
    /// Reward of a rejected request (it is neither a served success nor an origin failure).
    pub reject_reward: f64,
}

impl Default for SuccessRule {
    /// Status < 500 succeeds; no SLO; a rejected request pays 0.
    fn default() -> SuccessRule {
        SuccessRule {
            statuses: Statuses::default(),
            slo_ms: None,
            reject_reward: 0.0,
        }
    }
}

impl SuccessRule {
    /// Checks the parameters once: `slo_ms` a positive number of ms, `reject_reward` in
    /// `[0, 1]`.
    ///
    /// # Errors
    /// A message naming the `decider` option the value comes from (`--slo-ms`,
    /// `--reject-reward`) and the value; the Worker checks its variables with its own
    /// parsers and builds the rule from its fields.
    pub fn new(slo_ms: Option<f64>, reject_reward: f64) -> Result<SuccessRule, String> {
        if let Some(slo) = slo_ms {
            if !(slo.is_finite() && slo > 0.0) {
                return Err(format!(
                    "--slo-ms must be a positive number of ms, got {slo}"
                ));
            }
        }
        if !(0.0..=1.0).contains(&reject_reward) {
            return Err(format!(
                "--reject-reward must be in [0, 1], got {reject_reward}"
            ));
        }
        Ok(SuccessRule {
            statuses: Statuses::default(),
            slo_ms,
            reject_reward,
        })
    }

    /// The rule with these statuses succeeding.
    pub fn with_statuses(self, statuses: Statuses) -> SuccessRule {
        SuccessRule { statuses, ..self }
    }

    /// The definition in words, for reports, model cards and training records.
    pub fn describe(&self) -> String {
        let latency = match self.slo_ms {
            Some(slo) => format!(" and latency <= {slo} ms (when known)"),
            None => String::new(),
        };
        format!(
            "an outcome line's reward when it has one; else 1 when {}{latency}, else 0; a \
             rejected request pays {}",
            self.statuses.describe(),
            self.reject_reward
        )
    }

    /// The reward of one outcome, in `[0, 1]`.
    ///
    /// A caller's reward is taken as it is (clamped into `[0, 1]`; a NaN counts as none);
    /// then a rejected request pays `reject_reward`; then success is a status of
    /// `statuses` with the latency, when both the SLO and the latency are known, at most the
    /// SLO.
    pub fn reward(&self, o: &Observation) -> f64 {
        if let Some(r) = o.reward.filter(|r| !r.is_nan()) {
            return r.clamp(0.0, 1.0);
        }
        if o.rejected {
            return self.reject_reward;
        }
        let in_slo = match (self.slo_ms, o.latency_ms.filter(|l| !l.is_nan())) {
            (Some(slo), Some(latency)) => latency <= slo,
            _ => true,
        };
        let served = matches!(o.status, Some(s) if self.statuses.contains(s));
        if served && in_slo {
            1.0
        } else {
            0.0
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_rule_is_checked_naming_the_option() {
        assert!(SuccessRule::new(Some(250.0), 0.5).is_ok());
        assert!(SuccessRule::new(None, 0.0).is_ok());
        for (slo, rej, needle) in [
            (Some(0.0), 0.0, "--slo-ms"),
            (Some(-1.0), 0.0, "--slo-ms"),
            (Some(f64::NAN), 0.0, "--slo-ms"),
            (Some(f64::INFINITY), 0.0, "--slo-ms"),
            (None, 1.5, "--reject-reward"),
            (None, -0.1, "--reject-reward"),
            (None, f64::NAN, "--reject-reward"),
        ] {
            let e = SuccessRule::new(slo, rej).unwrap_err();
            assert!(e.starts_with(needle), "{e}");
        }
    }

    #[test]
    fn reward_table() {
        let rule = SuccessRule {
            slo_ms: Some(100.0),
            reject_reward: 0.25,
            ..SuccessRule::default()
        };
        let o = |reward, status, latency_ms, rejected| Observation {
            reward,
            status,
            latency_ms,
            rejected,
        };
        for (obs, want) in [
            (o(None, Some(200), Some(50.0), false), 1.0),
            (o(None, Some(200), Some(100.0), false), 1.0),
            (o(None, Some(200), Some(150.0), false), 0.0),
            (o(None, Some(200), None, false), 1.0),
            (o(None, Some(200), Some(f64::NAN), false), 1.0),
            (o(None, Some(404), Some(20.0), false), 1.0),
            (o(None, Some(499), None, false), 1.0),
            (o(None, Some(500), Some(50.0), false), 0.0),
            (o(None, Some(503), Some(1.0), false), 0.0),
            (o(None, None, Some(1.0), false), 0.0),
            (o(None, Some(0), None, false), 0.0),
            (o(None, Some(503), Some(0.0), true), 0.25),
            (o(Some(0.7), None, None, true), 0.7),
            (o(Some(0.7), Some(503), Some(900.0), false), 0.7),
            (o(Some(1.5), None, None, false), 1.0),
            (o(Some(-0.5), None, None, false), 0.0),
            (o(Some(f64::NAN), Some(200), None, false), 1.0),
        ] {
            assert_eq!(rule.reward(&obs), want, "{obs:?}");
        }
        // Without an SLO the latency never matters.
        let no_slo = SuccessRule::default();
        assert_eq!(no_slo.reward(&o(None, Some(200), Some(1e9), false)), 1.0);
        assert_eq!(no_slo.reward(&o(None, Some(200), None, true)), 0.0);
        // ROLLOUT_SUCCESS=2xx: a 404 fails, a caller's reward still wins.
        let two = rule.with_statuses(Statuses::parse("2xx").unwrap());
        assert_eq!(two.reward(&o(None, Some(404), Some(20.0), false)), 0.0);
        assert_eq!(two.reward(&o(None, Some(204), Some(20.0), false)), 1.0);
        assert_eq!(two.reward(&o(None, Some(204), Some(200.0), false)), 0.0);
        assert_eq!(two.reward(&o(Some(0.4), Some(404), None, false)), 0.4);
        assert_eq!(two.reward(&o(None, Some(404), None, true)), 0.25);
    }

    #[test]
    fn the_description_names_the_slo_and_the_reject_reward() {
        let r = SuccessRule::new(Some(250.0), 0.5).unwrap();
        assert_eq!(
            r.describe(),
            "an outcome line's reward when it has one; else 1 when status < 500 and latency <= 250 ms (when known), else 0; a rejected request pays 0.5"
        );
        let r = r.with_statuses(Statuses::parse("2xx,3xx").unwrap());
        assert!(r
            .describe()
            .contains("else 1 when status in 200-399 and latency"));
    }
}

//! The reward flags every command that scores logged outcomes takes (`decider report`,
//! `ope`, `train --logs`, `rollout plan --logs`): one group, one meaning, the Workers'
//! `ROLLOUT_SUCCESS` and `ROLLOUT_SLO_MS` under other names.

use decider_core::rollout::{Statuses, SuccessRule};

/// What a decision's outcome is worth.
#[derive(Debug, Clone, Default, PartialEq, clap::Args)]
pub struct RewardArgs {
    /// The statuses that count as a success, as the Workers' `ROLLOUT_SUCCESS`: `2xx`,
    /// `200-399`, `204`, `status<500`, `status<=399`, comma-separated, `!` to take some out
    /// (`status<500,!404`). Default: status<500. A routed decision is scored by its decided
    /// origin's first attempt, whatever failover did next.
    #[arg(long, value_name = "SPEC")]
    pub success: Option<String>,
    /// Latency SLO in ms (`ROLLOUT_SLO_MS`): a response slower than this is a failure (when
    /// its latency is known).
    #[arg(long, value_name = "N")]
    pub slo_ms: Option<f64>,
    /// Reward of a rejected request, 0..=1 (default 0).
    #[arg(long, value_name = "R")]
    pub reject_reward: Option<f64>,
}

impl RewardArgs {
    /// The rule the flags say.
    ///
    /// # Errors
    /// The flag that is wrong and why.
    pub fn rule(&self) -> Result<SuccessRule, String> {
        let rule = SuccessRule::new(self.slo_ms, self.reject_reward.unwrap_or(0.0))?;
        match &self.success {
            Some(spec) => Statuses::parse(spec)
                .map(|s| rule.with_statuses(s))
                .map_err(|e| format!("--success {e}")),
            None => Ok(rule),
        }
    }

    /// Whether any of the flags was given.
    pub fn is_set(&self) -> bool {
        *self != RewardArgs::default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;

    #[derive(Parser)]
    struct Cli {
        #[command(flatten)]
        reward: RewardArgs,
    }

    fn rule(args: &[&str]) -> Result<SuccessRule, String> {
        let cli = Cli::try_parse_from(std::iter::once("x").chain(args.iter().copied()))
            .map_err(|e| e.to_string())?;
        cli.reward.rule()
    }

    #[test]
    fn the_flags_make_one_rule() {
        assert_eq!(rule(&[]).unwrap(), SuccessRule::default());
        let r = rule(&[
            "--success",
            "2xx",
            "--slo-ms",
            "250",
            "--reject-reward",
            "0.5",
        ])
        .unwrap();
        assert!(r.statuses.contains(200) && !r.statuses.contains(404));
        assert_eq!((r.slo_ms, r.reject_reward), (Some(250.0), 0.5));
        for (args, needle) in [
            (&["--success", "6xx"][..], "--success term \"6xx\""),
            (&["--slo-ms", "0"][..], "--slo-ms"),
            (&["--reject-reward", "2"][..], "--reject-reward"),
        ] {
            let e = rule(args).unwrap_err();
            assert!(e.contains(needle), "{args:?}: {e}");
        }
    }
}

//! `decider rollout`: the rollout's status and an operator's verbs, as Argo Rollouts users
//! know them from `kubectl argo rollouts …`, through a Worker's `/v1/admin/rollout` (the
//! serving Worker relays it to the control plane, which checks its own `ADMIN_TOKEN`).

use super::reward::RewardArgs;
use crate::report::{Judging, Report};
use crate::rollout_ops::{self, Operation};
use crate::rollout_plan::{self, Options};
use crate::CliError;
use anyhow::Result;
use decider_rollout::policy::{self, Policy};
use decider_rollout::sequential::Judge;
use decider_rollout::sim::World;
use std::path::PathBuf;

/// Flags of `decider rollout`.
#[derive(clap::Args)]
#[command(
    about = "The rollout's status and the operator's verbs: status, pause, resume, abort, promote, restart; and plan, a rollout simulated before it starts",
    after_help = "Examples:\n  decider rollout plan --challenger 0.97 --champion 0.95 --per-minute 2000\n  decider rollout status --url https://edge-decider.example.workers.dev --token \"$ROLLOUT_ADMIN_TOKEN\"\n  decider rollout pause --url http://127.0.0.1:8787 --token dev-token --reason \"origin B maintenance\"\n  decider rollout promote --url … --token … --skip-bake --reason \"verified by hand\"\n  decider rollout restart --url … --token … --reason \"the rollback was an unrelated outage\"\n\nExit code 1 with the control plane's one-line error when a verb does not apply (409),\nthe token is refused (401) or the Worker cannot be reached."
)]
pub struct Args {
    /// What to do.
    #[command(subcommand)]
    pub verb: Verb,
}

/// Where the Worker is and who asks.
#[derive(clap::Args, Debug, Clone)]
pub struct Target {
    /// The serving Worker's base URL (http:// or https://).
    #[arg(long, value_name = "URL")]
    pub url: String,
    /// The control plane's `ADMIN_TOKEN`.
    #[arg(
        long,
        value_name = "TOKEN",
        env = "ROLLOUT_ADMIN_TOKEN",
        hide_env_values = true
    )]
    pub token: String,
    /// Print the JSON status instead of text.
    #[arg(long)]
    pub json: bool,
}

/// A verb's own flags.
#[derive(clap::Args, Debug, Clone)]
pub struct Change {
    /// Where and who.
    #[command(flatten)]
    pub target: Target,
    /// Why, in words: kept in the `rollout` record and the notification.
    #[arg(long, default_value = "")]
    pub reason: String,
}

/// The subcommands.
#[derive(clap::Subcommand)]
pub enum Verb {
    /// Where the rollout stands: steps, shares, each arm's outcomes and interval, the next look.
    Status(Target),
    /// The judge keeps looking and changes nothing until resumed.
    Pause(Change),
    /// The judge acts again.
    Resume(Change),
    /// The challenger's share is 0 now.
    Abort(Change),
    /// Past the last step now (into the bake, unless --skip-bake).
    Promote {
        /// Where, who and why.
        #[command(flatten)]
        change: Change,
        /// Straight to 100%, without the bake.
        #[arg(long)]
        skip_bake: bool,
    },
    /// A new rollout of the same challenger from the first step, on fresh counts.
    Restart(Change),
    /// Simulate rollouts before starting one: how long each step takes, how often the judge
    /// is wrong.
    Plan(Box<PlanArgs>),
}

/// Flags of `decider rollout plan`.
#[derive(clap::Args, Debug, Clone)]
#[command(
    after_help = "Examples:\n  decider rollout plan --challenger 0.97 --champion 0.95 --per-minute 2000\n  decider rollout plan --challenger 0.95 --champion 0.95 --steps 50,100 --runs 2000 --json   # A/A: false decisions\n  decider rollout plan --challenger 0.97 --logs tail.json --slo-ms 250   # the champion's rate from a log\n  decider rollout plan --challenger 0.97 --champion 0.93 --judge union   # the judge before the two-sample test\n\nEach rollout runs through the control plane's own step: a look every --look outcomes,\n--per-minute outcomes a minute, the policy's ROLLOUT_* values as flags (defaults: the\ncontrol plane's). The steps' outcomes and minutes are over the rollouts that decided them."
)]
pub struct PlanArgs {
    /// The challenger's success rate, 0..=1.
    #[arg(long, value_name = "P")]
    pub challenger: f64,
    /// The champion's success rate, 0..=1 (or --logs).
    #[arg(long, value_name = "P", required_unless_present = "logs")]
    pub champion: Option<f64>,
    /// Take the champion's success rate from decision logs (its arm's, as `decider report`
    /// scores it, with the reward flags).
    #[arg(long, num_args = 1.., value_name = "FILE", conflicts_with = "champion")]
    pub logs: Vec<PathBuf>,
    /// What an outcome in --logs is worth.
    #[command(flatten)]
    pub reward: RewardArgs,
    /// The rules' success rate, for the holdout arm (default: the champion's).
    #[arg(long, value_name = "P")]
    pub rules: Option<f64>,
    /// Routing keys held out on rules, percent (100 − CANARY_PERCENT).
    #[arg(long, value_name = "PERCENT", default_value_t = 0)]
    pub holdout_percent: u8,
    /// ROLLOUT_STEPS.
    #[arg(long, value_name = "LIST", default_value = "5,20,50,100")]
    pub steps: String,
    /// Outcomes between two looks of the judge.
    #[arg(long, value_name = "N", default_value_t = 500)]
    pub look: u32,
    /// Outcomes a minute (all arms).
    #[arg(long, value_name = "N", default_value_t = 1_000.0)]
    pub per_minute: f64,
    /// Rollouts to simulate.
    #[arg(long, value_name = "R", default_value_t = 400)]
    pub runs: usize,
    /// The most looks a rollout gets before it counts as undecided.
    #[arg(long, value_name = "N", default_value_t = 2_000)]
    pub max_looks: usize,
    /// ROLLOUT_ALPHA.
    #[arg(long, value_name = "A", default_value_t = 0.05)]
    pub alpha: f64,
    /// ROLLOUT_MAX_LOSS.
    #[arg(long, value_name = "L", default_value_t = 0.0)]
    pub max_loss: f64,
    /// ROLLOUT_MIN_OUTCOMES.
    #[arg(long, value_name = "N", default_value_t = policy::DEFAULT_MIN_OUTCOMES)]
    pub min_outcomes: u64,
    /// ROLLOUT_MIN_STEP_S.
    #[arg(long, value_name = "S", default_value_t = policy::DEFAULT_MIN_STEP_S)]
    pub min_step_s: u32,
    /// ROLLOUT_BAKE_PERCENT (0: no bake).
    #[arg(long, value_name = "PERCENT", default_value_t = policy::DEFAULT_BAKE_PERCENT)]
    pub bake_percent: u8,
    /// ROLLOUT_BAKE_S.
    #[arg(long, value_name = "S", default_value_t = policy::DEFAULT_BAKE_S)]
    pub bake_s: u32,
    /// A daily pattern: every arm's success rate moves by ±D over the day.
    #[arg(long, value_name = "D", default_value_t = 0.0)]
    pub drift: f64,
    /// The test: two-sample (the control plane's) or union (the judge before it).
    #[arg(long, value_enum, default_value_t = JudgeArg::TwoSample)]
    pub judge: JudgeArg,
    /// Seed of the first rollout.
    #[arg(long, value_name = "S", default_value_t = 1)]
    pub seed: u64,
    /// Print one JSON object.
    #[arg(long)]
    pub json: bool,
    /// No progress bar.
    #[arg(long)]
    pub quiet: bool,
}

/// `--judge`.
#[derive(clap::ValueEnum, Debug, Clone, Copy, PartialEq, Eq)]
pub enum JudgeArg {
    /// The two-sample e-process (the control plane's, with a known allocation).
    TwoSample,
    /// The union of the two arms' confidence sequences.
    Union,
}

impl PlanArgs {
    /// The simulation the flags ask for.
    ///
    /// # Errors
    /// The flag that is out of range, or logs that cannot be read or hold no champion.
    pub fn options(&self) -> Result<Options, CliError> {
        let usage = |m: String| CliError::Usage(m);
        let rate = |name: &str, p: f64| {
            (0.0..=1.0)
                .contains(&p)
                .then_some(p)
                .ok_or_else(|| usage(format!("--{name} must be a rate in [0, 1], got {p}")))
        };
        let challenger = rate("challenger", self.challenger)?;
        let champion = match self.champion {
            Some(p) => rate("champion", p)?,
            None => self.champion_from_logs()?,
        };
        let rules = rate("rules", self.rules.unwrap_or(champion))?;
        let steps = policy::parse_steps(&self.steps).map_err(|e| usage(format!("--steps {e}")))?;
        let alpha = policy::parse_alpha(&self.alpha.to_string())
            .map_err(|e| usage(format!("--alpha {e}")))?;
        let max_loss = policy::parse_max_loss(&self.max_loss.to_string())
            .map_err(|e| usage(format!("--max-loss {e}")))?;
        if self.holdout_percent > 99 {
            return Err(usage(format!(
                "--holdout-percent must be 0..=99, got {}",
                self.holdout_percent
            )));
        }
        if self.look == 0 || self.look > 1_000_000 {
            return Err(usage(format!(
                "--look must be 1..=1000000 outcomes, got {}",
                self.look
            )));
        }
        if !(self.per_minute > 0.0 && self.per_minute.is_finite()) {
            return Err(usage(format!(
                "--per-minute must be a positive number, got {}",
                self.per_minute
            )));
        }
        if self.runs == 0 || self.runs > 1_000_000 {
            return Err(usage(format!(
                "--runs must be 1..=1000000, got {}",
                self.runs
            )));
        }
        if self.max_looks == 0 || self.max_looks > 1_000_000 {
            return Err(usage(format!(
                "--max-looks must be 1..=1000000, got {}",
                self.max_looks
            )));
        }
        if !(0.0..=0.5).contains(&self.drift) {
            return Err(usage(format!(
                "--drift must be in [0, 0.5], got {}",
                self.drift
            )));
        }
        if self.bake_percent > 99 {
            return Err(usage(format!(
                "--bake-percent must be 0..=99, got {}",
                self.bake_percent
            )));
        }
        let policy = Policy {
            steps,
            alpha,
            max_loss,
            min_outcomes: self.min_outcomes,
            min_step_ms: i64::from(self.min_step_s) * 1_000,
            bake_percent: self.bake_percent,
            bake_ms: i64::from(self.bake_s) * 1_000,
            ..Policy::default()
        };
        Ok(Options {
            world: World {
                champion,
                challenger,
                rules,
                holdout_percent: self.holdout_percent,
                per_window: self.look,
                window_ms: ((f64::from(self.look) / self.per_minute) * 60_000.0)
                    .round()
                    .max(1.0) as i64,
                drift: self.drift,
            },
            policy,
            runs: self.runs,
            max_windows: self.max_looks,
            seed: self.seed,
            judge: match self.judge {
                JudgeArg::TwoSample => Judge::TwoSample,
                JudgeArg::Union => Judge::Union,
            },
            progress: !self.quiet,
        })
    }

    /// The champion arm's success rate in --logs, scored as `decider report` scores it.
    fn champion_from_logs(&self) -> Result<f64, CliError> {
        let rule = self.reward.rule().map_err(CliError::Usage)?;
        let report = Report::from_paths(&self.logs, rule, Judging::default(), None, !self.quiet)
            .map_err(|e| CliError::Input(e.to_string()))?;
        report
            .agg
            .by_arm
            .iter()
            .find(|(arm, _)| arm == "champion")
            .and_then(|(_, g)| (g.with_outcome > 0).then(|| g.successes / g.with_outcome as f64))
            .ok_or_else(|| {
                CliError::Input(
                    "the logs hold no champion decision with an outcome: give --champion".into(),
                )
            })
    }
}

/// Runs `decider rollout …`.
///
/// # Errors
/// A refused or failed call, with the Worker's message.
pub fn run(a: &Args) -> Result<()> {
    let (target, op) = match &a.verb {
        Verb::Plan(p) => return plan(p),
        Verb::Status(t) => (t, Operation::Status),
        Verb::Pause(c) => (&c.target, Operation::verb("pause", &c.reason, false)),
        Verb::Resume(c) => (&c.target, Operation::verb("resume", &c.reason, false)),
        Verb::Abort(c) => (&c.target, Operation::verb("abort", &c.reason, false)),
        Verb::Promote { change, skip_bake } => (
            &change.target,
            Operation::verb("promote", &change.reason, *skip_bake),
        ),
        Verb::Restart(c) => (&c.target, Operation::verb("restart", &c.reason, false)),
    };
    let status = rollout_ops::call(&target.url, &target.token, &op)?;
    if target.json {
        println!("{status}");
    } else {
        print!("{}", rollout_ops::render(&status));
    }
    Ok(())
}

/// `decider rollout plan`.
fn plan(p: &PlanArgs) -> Result<()> {
    let o = p.options()?;
    let plan = rollout_plan::plan(&o);
    if p.json {
        println!("{}", rollout_plan::to_json(&plan, &o));
    } else {
        print!("{}", rollout_plan::render(&plan, &o));
    }
    Ok(())
}

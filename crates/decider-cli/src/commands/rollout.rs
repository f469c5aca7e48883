//! `decider rollout`: the rollout's status and an operator's verbs, as Argo Rollouts users
//! know them from `kubectl argo rollouts …`, through a Worker's `/v1/admin/rollout` (the
//! serving Worker relays it to the control plane, which checks its own `ADMIN_TOKEN`).

use crate::rollout_ops::{self, Operation};
use anyhow::Result;

/// Flags of `decider rollout`.
#[derive(clap::Args)]
#[command(
    about = "The rollout's status and the operator's verbs: status, pause, resume, abort, promote, restart",
    after_help = "Examples:\n  decider rollout status --url https://edge-decider.example.workers.dev --token \"$ROLLOUT_ADMIN_TOKEN\"\n  decider rollout pause --url http://127.0.0.1:8787 --token dev-token --reason \"origin B maintenance\"\n  decider rollout promote --url … --token … --skip-bake --reason \"verified by hand\"\n  decider rollout restart --url … --token … --reason \"the rollback was an unrelated outage\"\n\nExit code 1 with the control plane's one-line error when a verb does not apply (409),\nthe token is refused (401) or the Worker cannot be reached."
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
}

/// Runs `decider rollout …`.
///
/// # Errors
/// A refused or failed call, with the Worker's message.
pub fn run(a: &Args) -> Result<()> {
    let (target, op) = match &a.verb {
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

//! `decider`: simulate data, train and calibrate the model the Worker embeds, evaluate it,
//! run decisions through the Worker's policy, and load-test a running Worker.
//!
//! This file parses the command line and dispatches; each command is a module of
//! [`decider_cli::commands`].

use clap::{Parser, Subcommand};
use decider_cli::commands::{decide, eval, loadtest, ope, report, rollout, simulate, train};
use decider_cli::CliError;

#[derive(Parser)]
#[command(name = "decider", version, about = "Train, evaluate and exercise the edge-decider routing model", long_about = None)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    Simulate(simulate::Args),
    Train(train::Args),
    Eval(eval::Args),
    Decide(decide::Args),
    Loadtest(loadtest::Args),
    Report(report::Args),
    Ope(ope::Args),
    Rollout(rollout::Args),
}

/// Runs the command; on failure prints `decider: error: …` on one line and exits 2 for a
/// usage error ([`CliError::Usage`]), 1 otherwise (clap exits 2 itself for a bad flag).
fn main() {
    let result = match Cli::parse().command {
        Command::Simulate(a) => simulate::run(&a),
        Command::Train(a) => train::run(&a),
        Command::Eval(a) => eval::run(&a),
        Command::Decide(a) => decide::run(&a),
        Command::Loadtest(a) => loadtest::run(&a),
        Command::Report(a) => report::run(&a),
        Command::Ope(a) => ope::run(&a),
        Command::Rollout(a) => rollout::run(&a),
    };
    if let Err(e) = result {
        let msg = format!("{e:#}").replace('\n', " ");
        eprintln!("decider: error: {msg}");
        let usage = matches!(e.downcast_ref::<CliError>(), Some(CliError::Usage(_)));
        std::process::exit(if usage { 2 } else { 1 });
    }
}

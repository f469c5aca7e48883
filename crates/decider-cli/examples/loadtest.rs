//! Stand-alone `loadtest` binary over the same module as `decider loadtest`, for the
//! benchmark scripts to use until (and whether or not) the subcommand is wired into `decider`.
use clap::Parser;

#[path = "../src/loadtest.rs"]
#[allow(dead_code)]
mod loadtest;

/// Open-loop HTTP load generator (same flags as `decider loadtest`).
#[derive(Parser)]
#[command(name = "loadtest")]
struct Cli {
    #[command(flatten)]
    args: loadtest::LoadtestArgs,
}

fn main() {
    let cli = Cli::parse();
    if let Err(e) = loadtest::run(&cli.args) {
        eprintln!("error: {e:#}");
        std::process::exit(1);
    }
}

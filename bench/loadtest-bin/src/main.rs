//! `loadtest`: the module behind `decider loadtest`, built on its own so the benchmarks can
//! run while (or whether) the subcommand is wired into the `decider` binary.
use clap::Parser;

#[path = "../../../crates/decider-cli/src/loadtest.rs"]
#[allow(dead_code)]
mod loadtest;

/// Open-loop HTTP load generator (the flags of `decider loadtest`).
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

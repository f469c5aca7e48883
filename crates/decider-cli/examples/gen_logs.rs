//! Deterministic synthetic Worker logs for `decider report` (see `decider_cli::synth_logs`):
//! decision and outcome records written with the Worker's record codec, late, duplicated and
//! orphaned outcomes, and the noise around them, in any log source's envelope. The same
//! arguments give the same bytes; an output name ending in `.gz` is gzip-compressed.
//!
//! ```text
//! cargo run --release --locked -p decider-cli --example gen_logs -- --lines 1000000 --out dev.log
//! cargo run --release --locked -p decider-cli --example gen_logs -- \
//!     --lines 20000 --scenario ood-spike --out spike.log.gz
//! cargo run --release --locked -p decider-cli --example gen_logs -- \
//!     --lines 5000 --format tail --out tail.json
//! ```

use anyhow::{Context, Result};
use clap::Parser;
use decider_cli::synth_logs::{self, Format, Options, Scenario};
use std::fs::File;
use std::io::{self, BufWriter};
use std::path::PathBuf;

#[derive(Parser)]
#[command(about = "Write deterministic synthetic Worker logs for `decider report`")]
struct Args {
    /// Log lines to write (records and noise).
    #[arg(long)]
    lines: u64,
    /// Seed: the same arguments give the same bytes.
    #[arg(long, default_value_t = 1)]
    seed: u64,
    /// steady, rules-better (the holdout arm beats the model), challenger-worse (the
    /// challenger fails more) or ood-spike (out-of-distribution fallbacks jump over the last
    /// tenth of the run).
    #[arg(long, default_value = "steady", value_parser = scenario)]
    scenario: Scenario,
    /// dev (raw lines), tail (wrangler tail --format json), logpush (workers_trace_events
    /// NDJSON) or workers-logs (a JSON array of Workers Logs events).
    #[arg(long, default_value = "dev", value_parser = format)]
    format: Format,
    /// Decisions per second of log time.
    #[arg(long, default_value_t = 200.0)]
    rate: f64,
    /// Share of noise lines, in [0, 1).
    #[arg(long, default_value_t = 0.08)]
    noise: f64,
    /// Output file (`.gz`: gzip-compressed); `-` for stdout.
    #[arg(long, default_value = "-")]
    out: PathBuf,
}

fn scenario(s: &str) -> Result<Scenario, String> {
    Scenario::parse_name(s).ok_or_else(|| {
        let names: Vec<_> = Scenario::ALL.iter().map(|s| s.name()).collect();
        format!("expected one of {}", names.join(", "))
    })
}

fn format(s: &str) -> Result<Format, String> {
    Format::parse_name(s).ok_or_else(|| {
        let names: Vec<_> = Format::ALL.iter().map(|f| f.name()).collect();
        format!("expected one of {}", names.join(", "))
    })
}

fn main() -> Result<()> {
    let a = Args::parse();
    let opts = Options {
        lines: a.lines,
        seed: a.seed,
        scenario: a.scenario,
        format: a.format,
        rate: a.rate,
        noise: a.noise,
    };
    opts.check()?;
    let gzip = a.out.extension().is_some_and(|e| e == "gz");
    let written = if a.out.as_os_str() == "-" {
        synth_logs::write(&opts, io::stdout().lock())?
    } else {
        let name = a.out.display();
        let file = File::create(&a.out).with_context(|| format!("{name}: cannot create"))?;
        let out = BufWriter::new(file);
        let written = if gzip {
            synth_logs::write_gzip(&opts, out)
        } else {
            synth_logs::write(&opts, out)
        };
        written.with_context(|| format!("{name}: cannot write"))?
    };
    eprintln!("{}", serde_json::to_string(&written)?);
    Ok(())
}

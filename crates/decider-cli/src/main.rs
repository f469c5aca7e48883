//! `decider`: simulate data, train and calibrate the model the Worker embeds, evaluate it,
//! run decisions through the Worker's policy, and load-test a running Worker.

use anyhow::{anyhow, bail, Context, Result};
use clap::{Args, Parser, Subcommand};
use decider_cli::card;
use decider_cli::dataset;
use decider_cli::gbdt::{Base, GbdtParams};
use decider_cli::loadtest;
use decider_cli::metrics::{evaluate, Evaluation};
use decider_cli::report::join::SuccessRule;
use decider_cli::serving::{load_decider, load_rules, ModelArgs};
use decider_cli::simulate::{simulate, SimOptions, LABEL_NOISE};
use decider_cli::train::{self, TrainOptions};
use decider_cli::train_logs;
use decider_cli::CliError;
use decider_core::{Gates, State, ACTIONS};
use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};
use serde_json::{json, Value};
use std::io::{BufRead, IsTerminal, Write};
use std::path::{Path, PathBuf};
use std::time::Instant;

#[derive(Parser)]
#[command(name = "decider", version, about = "Train, evaluate and exercise the edge-decider routing model", long_about = None)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    Simulate(SimulateArgs),
    Train(TrainArgs),
    Eval(EvalArgs),
    Decide(DecideArgs),
    Loadtest(loadtest::LoadtestArgs),
    Report(decider_cli::report::ReportArgs),
    Ope(decider_cli::ope_cmd::OpeArgs),
}

#[derive(Args)]
#[command(
    about = "Generate a labelled synthetic dataset from the built-in routing simulator",
    after_help = "Examples:\n  decider simulate --rows 20000 --seed 1 --out data/train.jsonl\n  decider simulate --rows 5000 --seed 9 --shifted --out data/shifted.jsonl"
)]
struct SimulateArgs {
    /// Number of rows.
    #[arg(long)]
    rows: usize,
    /// Random seed; the same seed gives the same file.
    #[arg(long, default_value_t = 1)]
    seed: u64,
    /// Output JSONL file.
    #[arg(long)]
    out: PathBuf,
    /// Shifted traffic: loads above 1, deep queues, low success rates.
    #[arg(long)]
    shifted: bool,
    /// Label noise probability.
    #[arg(long, default_value_t = LABEL_NOISE)]
    noise: f64,
    /// Print a JSON summary instead of a line of text.
    #[arg(long)]
    json: bool,
}

#[derive(Args)]
#[command(
    about = "Train, early-stop, calibrate and pick the threshold; write artifact, model card and curve",
    after_help = "Examples:\n  decider train --data data/train.jsonl --out model/decision-model.json\n  decider train --data train.jsonl --valid valid.jsonl --seed 7 --target-accuracy 0.995 --out m.json\n  decider train --logs older/*.log.gz --slo-ms 250 --out candidate.json\n\nWith --logs, each logged decision that has an outcome is labelled with the action a reward\nmodel fitted on the logs says pays best among those the logs tried in similar states (the\nlogged action where exploration was off); the model card and the artifact's `training`\nrecord say so (source: logs). Estimate the result with `decider ope` on newer logs."
)]
struct TrainArgs {
    /// Training dataset (JSONL).
    #[arg(long, required_unless_present = "logs", conflicts_with = "logs")]
    data: Option<PathBuf>,
    /// Learn from decision logs instead (any format `decider report` reads; gzip too).
    #[arg(long, num_args = 1.., value_name = "FILE", conflicts_with = "valid")]
    logs: Vec<PathBuf>,
    /// With --logs: latency SLO in ms, a slower response earns 0 (when its latency is known).
    #[arg(long, value_name = "N", conflicts_with = "data")]
    slo_ms: Option<f64>,
    /// With --logs: reward of a rejected request, 0..=1.
    #[arg(long, value_name = "R", conflicts_with = "data")]
    reject_reward: Option<f64>,
    /// Output artifact (JSON). The model card (.md) and curve (.curve.svg) are written beside it.
    #[arg(long)]
    out: PathBuf,
    /// Validation dataset; without it, a seeded share of --data is held out.
    #[arg(long)]
    valid: Option<PathBuf>,
    /// Seed for the train/validation split.
    #[arg(long, default_value_t = 42)]
    seed: u64,
    /// Share held out for validation when --valid is absent.
    #[arg(long, default_value_t = 0.2)]
    valid_fraction: f64,
    /// Validation accuracy the model-decided share must keep; sets the threshold.
    #[arg(long, default_value_t = 0.99)]
    target_accuracy: f64,
    /// Rule table used for the system-accuracy metrics (default: the shipped table).
    #[arg(long)]
    rules: Option<PathBuf>,
    /// Shrinkage per tree.
    #[arg(long, default_value_t = GbdtParams::default().learning_rate)]
    learning_rate: f64,
    /// Upper bound on boosting rounds (early stopping usually ends sooner).
    #[arg(long, default_value_t = GbdtParams::default().max_rounds)]
    max_rounds: usize,
    /// Leaves per tree.
    #[arg(long, default_value_t = GbdtParams::default().max_leaves)]
    max_leaves: usize,
    /// Minimum rows per leaf.
    #[arg(long, default_value_t = GbdtParams::default().min_samples_leaf)]
    min_samples_leaf: usize,
    /// What the trees boost from: the class priors; a softmax regression on the features
    /// (`linear`); or that and 16 tanh units (`network`). For policies whose boundaries mix
    /// features (a score per cluster from load, queue depth and hour, say), which trees
    /// alone draw as staircases that stop where the training data stops. The artifact
    /// gains `model.linear` (and `model.hidden`).
    #[arg(long, value_enum, default_value_t = Base::default())]
    base: Base,
    /// Keep the model fitted on the training split instead of refitting on all rows of --data.
    #[arg(long)]
    no_refit: bool,
    /// Markdown appended to the model card (e.g. the peer comparison).
    #[arg(long)]
    card_extra: Option<PathBuf>,
    /// No progress bar.
    #[arg(long)]
    quiet: bool,
    /// Print the training summary as JSON.
    #[arg(long)]
    json: bool,
}

#[derive(Args)]
#[command(
    about = "Evaluate a model on a labelled dataset: accuracy, coverage, fallbacks, confusion, ECE",
    after_help = "Examples:\n  decider eval --model model/decision-model.json --data data/test.jsonl\n  decider eval --model m.json --data test.jsonl --threshold 0.9 --json | jq .system_accuracy"
)]
struct EvalArgs {
    #[command(flatten)]
    model: ModelArgs,
    /// Labelled dataset (JSONL).
    #[arg(long)]
    data: PathBuf,
    /// Write the accuracy–coverage curve as SVG.
    #[arg(long)]
    curve: Option<PathBuf>,
    /// Print one JSON object.
    #[arg(long)]
    json: bool,
}

#[derive(Args)]
#[command(
    about = "Decide for JSONL states on stdin (bare states or {\"state\": …}); JSONL decisions on stdout",
    after_help = "Examples:\n  echo '{\"state\":{\"request_type\":1,\"region_id\":3,\"current_load\":0.4,\"recent_success_rate\":0.97,\"queue_depth\":12,\"hour\":14}}' \\\n    | decider decide --model model/decision-model.json\n\nA line that is not a valid state yields {\"line\": N, \"error\": {…}} on stdout; the exit code is then 1."
)]
struct DecideArgs {
    #[command(flatten)]
    model: ModelArgs,
}

fn main() {
    let cli = Cli::parse();
    let result = match cli.command {
        Command::Simulate(a) => cmd_simulate(a),
        Command::Train(a) => cmd_train(a),
        Command::Eval(a) => cmd_eval(a),
        Command::Decide(a) => cmd_decide(a),
        Command::Loadtest(a) => loadtest::run(&a),
        Command::Report(a) => decider_cli::report::run(&a).map_err(Into::into),
        Command::Ope(a) => decider_cli::ope_cmd::run(&a).map_err(Into::into),
    };
    if let Err(e) = result {
        let msg = format!("{e:#}").replace('\n', " ");
        eprintln!("decider: error: {msg}");
        let usage = matches!(e.downcast_ref::<CliError>(), Some(CliError::Usage(_)));
        std::process::exit(if usage { 2 } else { 1 });
    }
}

fn cmd_simulate(a: SimulateArgs) -> Result<()> {
    if a.rows == 0 {
        bail!("--rows must be at least 1");
    }
    if !(0.0..=1.0).contains(&a.noise) {
        bail!("--noise must be in [0, 1], got {}", a.noise);
    }
    let rows = simulate(SimOptions {
        rows: a.rows,
        seed: a.seed,
        shifted: a.shifted,
        noise: a.noise,
    });
    dataset::write(&a.out, &rows)?;
    let mut counts = [0usize; 4];
    rows.iter().for_each(|(_, act)| counts[act.index()] += 1);
    if a.json {
        let by: serde_json::Map<String, Value> = ACTIONS
            .iter()
            .zip(counts)
            .map(|(n, c)| (n.to_string(), json!(c)))
            .collect();
        println!(
            "{}",
            json!({"rows": a.rows, "seed": a.seed, "shifted": a.shifted, "out": a.out, "actions": by})
        );
    } else {
        let parts: Vec<String> = ACTIONS
            .iter()
            .zip(counts)
            .map(|(n, c)| format!("{n} {c}"))
            .collect();
        println!(
            "wrote {} rows to {} ({})",
            a.rows,
            a.out.display(),
            parts.join(", ")
        );
    }
    Ok(())
}

fn sibling(out: &Path, suffix: &str) -> PathBuf {
    let stem = out
        .file_stem()
        .map_or("model".into(), |s| s.to_string_lossy().to_string());
    out.with_file_name(format!("{stem}{suffix}"))
}

fn cmd_train(a: TrainArgs) -> Result<()> {
    let started = Instant::now();
    let data = match &a.data {
        Some(path) => dataset::read(path)?,
        None => {
            let rule = SuccessRule::new(a.slo_ms, a.reject_reward.unwrap_or(0.0))
                .map_err(CliError::Usage)?;
            let (data, logs) = train_logs::dataset(&a.logs, rule, a.seed, !a.quiet)?;
            if !a.json {
                let span = logs
                    .span_iso()
                    .map_or(String::new(), |(f, t)| format!(", {f} to {t}"));
                println!(
                    "from logs: {} labelled row(s) of {} decision(s){span}",
                    data.rows.len(),
                    logs.decisions
                );
                for w in logs.warnings() {
                    println!("warning: {w}");
                }
            }
            data
        }
    };
    let valid = a.valid.as_deref().map(dataset::read).transpose()?;
    let rules = load_rules(a.rules.as_deref())?;
    let opts = TrainOptions {
        seed: a.seed,
        valid_fraction: a.valid_fraction,
        target_accuracy: a.target_accuracy,
        params: GbdtParams {
            learning_rate: a.learning_rate,
            max_rounds: a.max_rounds,
            max_leaves: a.max_leaves,
            min_samples_leaf: a.min_samples_leaf,
            base: a.base,
            ..GbdtParams::default()
        },
        refit: !a.no_refit,
    };
    let bar = if a.quiet || !std::io::stderr().is_terminal() {
        ProgressBar::hidden()
    } else {
        let b =
            ProgressBar::with_draw_target(Some(a.max_rounds as u64), ProgressDrawTarget::stderr());
        b.set_style(
            ProgressStyle::with_template("{spinner} round {pos}/{len} {bar:30} {msg} [{elapsed}]")
                .expect("static template"),
        );
        b
    };
    let trained = train::train(&data, valid.as_ref(), &opts, &rules, |r| {
        bar.set_position(r.round as u64);
        bar.set_message(if r.valid_loss.is_nan() {
            // The refit on all rows has no held-out data to report.
            format!("refit on all rows: loss {:.4}", r.train_loss)
        } else {
            format!(
                "loss {:.4} val_loss {:.4} val_acc {:.2}%",
                r.train_loss,
                r.valid_loss,
                r.valid_accuracy * 100.0
            )
        });
    })
    .map_err(|e| anyhow!(e))?;
    bar.finish_and_clear();
    let art = &trained.artifact;
    std::fs::write(&a.out, train::to_json(art)).with_context(|| format!("{}", a.out.display()))?;
    let svg_path = sibling(&a.out, ".curve.svg");
    let card_path = sibling(&a.out, ".md");
    let title = format!("{}: validation accuracy vs coverage", art.model_version);
    std::fs::write(
        &svg_path,
        card::curve_svg(&trained.curve, art.threshold, &title),
    )
    .with_context(|| format!("{}", svg_path.display()))?;
    let extra = match &a.card_extra {
        Some(p) => std::fs::read_to_string(p).with_context(|| format!("{}", p.display()))?,
        None => String::new(),
    };
    let svg_name = svg_path
        .file_name()
        .map_or(String::new(), |s| s.to_string_lossy().to_string());
    std::fs::write(&card_path, card::model_card(art, &svg_name, &extra))
        .with_context(|| format!("{}", card_path.display()))?;
    let secs = started.elapsed().as_secs_f64();
    if a.json {
        let mut s = trained.summary.clone();
        s["seconds"] = json!(secs);
        s["out"] = json!(a.out);
        println!("{s}");
    } else {
        let m = &art.training["metrics"];
        println!(
            "{}: {} rounds in {:.1}s; validation accuracy {:.2}%, threshold {:.3} (coverage {:.1}%, accuracy there {:.2}%), temperature {:.3}",
            art.model_version,
            art.training["rounds"],
            secs,
            m["valid_accuracy"].as_f64().unwrap_or(0.0) * 100.0,
            art.threshold,
            m["valid_coverage_at_threshold"].as_f64().unwrap_or(0.0) * 100.0,
            m["valid_accuracy_at_threshold"].as_f64().unwrap_or(0.0) * 100.0,
            art.calibration.temperature
        );
        println!(
            "wrote {}, {}, {}",
            a.out.display(),
            card_path.display(),
            svg_path.display()
        );
    }
    Ok(())
}

fn print_eval(e: &Evaluation) {
    println!("model {}  rows {}", e.model_version, e.n);
    println!("accuracy (argmax)       {:>7.2}%", e.accuracy * 100.0);
    println!("threshold               {:>8.4}", e.threshold);
    println!("coverage                {:>7.2}%", e.coverage * 100.0);
    println!(
        "accuracy at threshold   {:>7.2}%",
        e.accuracy_at_threshold * 100.0
    );
    println!(
        "system accuracy         {:>7.2}%   (model ≥ threshold, rules below)",
        e.system_accuracy * 100.0
    );
    println!("rules alone             {:>7.2}%", e.rules_accuracy * 100.0);
    println!(
        "fallback rate           {:>7.2}%   {:?}",
        e.fallback_rate * 100.0,
        e.fallback_reasons
    );
    println!("ECE                     {:>8.4}", e.ece);
    println!(
        "\n{:<10}{:>10}{:>10}{:>10}",
        "action", "precision", "recall", "support"
    );
    for name in ACTIONS {
        let m = &e.per_action[name];
        println!(
            "{:<10}{:>9.2}%{:>9.2}%{:>10}",
            name,
            m.precision * 100.0,
            m.recall * 100.0,
            m.support
        );
    }
    println!("\nconfusion (rows: true, columns: predicted)");
    println!(
        "{:<10}{}",
        "",
        ACTIONS
            .iter()
            .map(|a| format!("{a:>9}"))
            .collect::<String>()
    );
    for (i, row) in e.confusion.iter().enumerate() {
        println!(
            "{:<10}{}",
            ACTIONS[i],
            row.iter().map(|c| format!("{c:>9}")).collect::<String>()
        );
    }
}

fn cmd_eval(a: EvalArgs) -> Result<()> {
    let (model, d) = load_decider(&a.model)?;
    let data = dataset::read(&a.data)?;
    let e = evaluate(&model, &d, &data.rows);
    if let Some(p) = &a.curve {
        let title = format!("{} on {}", e.model_version, a.data.display());
        std::fs::write(p, card::curve_svg(&e.curve, e.threshold, &title))
            .with_context(|| format!("{}", p.display()))?;
    }
    if a.json {
        println!("{}", serde_json::to_string(&e)?);
    } else {
        print_eval(&e);
    }
    Ok(())
}

fn utc_hour() -> u8 {
    let secs = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs());
    ((secs / 3600) % 24) as u8
}

fn cmd_decide(a: DecideArgs) -> Result<()> {
    let (_, d) = load_decider(&a.model)?;
    let stdin = std::io::stdin();
    let mut out = std::io::BufWriter::new(std::io::stdout().lock());
    let mut bad = 0usize;
    for (i, line) in stdin.lock().lines().enumerate() {
        let line = line.with_context(|| format!("stdin:{}", i + 1))?;
        if line.trim().is_empty() {
            continue;
        }
        let t0 = Instant::now();
        let parsed = serde_json::from_str::<Value>(&line)
            .map_err(|e| decider_core::StateError::from_serde(&e))
            .and_then(|v| match v.get("state") {
                Some(s) if v.as_object().is_some_and(|o| o.len() == 1) => {
                    State::from_value(s, utc_hour()).map_err(|e| e.within("state"))
                }
                _ => State::from_value(&v, utc_hour()),
            });
        match parsed {
            Ok(s) => {
                let mut dec = d.decide(&s, Gates::default());
                dec.decision_us = t0.elapsed().as_micros() as u64;
                writeln!(out, "{}", serde_json::to_string(&dec)?)?;
            }
            Err(e) => {
                bad += 1;
                writeln!(
                    out,
                    "{}",
                    json!({"line": i + 1, "error": {"code": e.code(), "message": e.to_string(), "field": e.field()}})
                )?;
            }
        }
    }
    out.flush()?;
    if bad > 0 {
        bail!("{bad} input line(s) were not valid states (see the error lines on stdout)");
    }
    Ok(())
}

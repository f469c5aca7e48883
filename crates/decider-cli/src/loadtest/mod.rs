//! `decider loadtest`: an open-loop HTTP/1.1 load generator for the Worker.
//!
//! Requests go out on a fixed schedule (request `i` at `start + i / rate`) however fast the
//! target answers, and each latency counts from the request's scheduled send time. A stalled
//! target therefore shows the queueing its users would see instead of being hidden by a
//! generator that waits for it (coordinated omission).
//!
//! A run: the flags ([`crate::commands::loadtest`]) are checked into a plan (`plan`); each
//! rate is one step (`step`) whose schedule comes from `ticker`, whose requests go through
//! `client`, and whose results are tallied per target (`stats`); a ramp's knee is found by
//! `knee`; the [`Report`] (`report`) prints as a table (`table`) or as JSON. `latency_log`
//! writes `--latency-log`.
//!
//! Every run is bounded: the request count by the limits in `plan`, each request by
//! `--timeout` from its scheduled time, and open sockets by `--connections` per target.

use anyhow::Context as _;
use indicatif::{ProgressBar, ProgressStyle};
use std::io::IsTerminal as _;
use std::sync::Arc;

mod client;
mod knee;
mod latency_log;
mod plan;
mod report;
mod stats;
mod step;
mod table;
#[cfg(test)]
pub(crate) mod testing;
mod ticker;

pub use knee::find_knee;
pub use report::{Knee, Latency, Report, SendLag, StepReport, TargetReport, SOURCE_HEADER};
pub use table::render_table;
pub use ticker::Clock;

use client::Client;
use latency_log::LatencyLog;
pub(crate) use plan::{Plan, Target, MAX_DURATION, MAX_RATE, MAX_REQUESTS, MAX_STEPS, MAX_TARGETS};

/// Runs the plan on a single-threaded runtime (the target gets the other cores).
pub(crate) fn execute(plan: &Plan) -> anyhow::Result<Report> {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .context("cannot start the async runtime")?;
    let total: u64 = (Plan::count(plan.rates[0], plan.warmup)
        + plan
            .rates
            .iter()
            .map(|r| Plan::count(*r, plan.duration))
            .sum::<u64>())
        * plan.targets.len() as u64;
    let bar = progress_bar(total);
    let mut log = plan
        .latency_log
        .as_deref()
        .map(LatencyLog::create)
        .transpose()?;
    let clients: Vec<Arc<Client>> = (0..plan.targets.len())
        .map(|t| Arc::new(Client::new(plan, t)))
        .collect();
    let mut steps: Vec<Vec<StepReport>> = vec![Vec::new(); clients.len()];
    rt.block_on(async {
        if !plan.warmup.is_zero() {
            bar.set_message(format!("warmup at {}/s", plan.rates[0]));
            step::run_step(&clients, plan.rates[0], plan.warmup, &bar, false).await;
        }
        for &rate in &plan.rates {
            bar.set_message(format!("{rate}/s"));
            let (reports, records) =
                step::run_step(&clients, rate, plan.duration, &bar, log.is_some()).await;
            if let Some(log) = log.as_mut() {
                log.write_step(rate, records)?;
            }
            for (mine, s) in steps.iter_mut().zip(reports) {
                mine.push(s);
            }
            // A ramp stops once every target has its knee.
            if plan.stop_at_knee
                && plan.rates.len() > 1
                && steps
                    .iter()
                    .all(|s| knee::knee_in(s, plan.p99_limit, plan.knee_confirm, false).is_some())
            {
                break;
            }
        }
        anyhow::Ok(())
    })?;
    bar.finish_and_clear();
    if let Some(log) = log {
        log.finish()?;
    }
    let targets: Vec<TargetReport> = plan
        .targets
        .iter()
        .zip(steps)
        .map(|(t, steps)| TargetReport {
            url: t.url.clone(),
            knee: find_knee(&steps, plan.p99_limit, plan.knee_confirm),
            steps,
        })
        .collect();
    let first = targets[0].clone();
    Ok(Report {
        url: first.url,
        method: plan.method.to_string(),
        connections: plan.connections,
        warmup_s: plan.warmup.as_secs_f64(),
        duration_s: plan.duration.as_secs_f64(),
        timeout_ms: plan.timeout.as_secs_f64() * 1e3,
        clock: plan.clock,
        p99_limit_us: plan.p99_limit.as_micros() as u64,
        steps: first.steps,
        knee: first.knee,
        targets,
    })
}

/// A progress bar on stderr when it is a terminal; hidden otherwise, so a redirected stderr
/// gets no redraws.
fn progress_bar(total: u64) -> ProgressBar {
    if !std::io::stderr().is_terminal() {
        return ProgressBar::hidden();
    }
    let b = ProgressBar::new(total);
    b.set_style(
        ProgressStyle::with_template(
            "{spinner} [{elapsed_precise}] {bar:40} {pos}/{len} requests  {msg}",
        )
        .unwrap_or_else(|_| ProgressStyle::default_bar()),
    );
    b
}

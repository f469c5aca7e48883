//! `decider rollout plan`: simulated rollouts through the control plane's own step
//! ([`decider_rollout::sim`]) on every core, and what they came to ([`Plan`]): how long each
//! step takes in outcomes and in minutes, how often a step is decided, and how often the
//! judge decides wrongly. An operator asks this before starting a rollout.

use decider_rollout::policy::Policy;
use decider_rollout::sequential::Judge;
use decider_rollout::sim::{simulate, Plan, Run, World};
use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};
use serde_json::{json, Value};
use std::fmt::Write as _;
use std::io::IsTerminal;
use std::sync::atomic::{AtomicUsize, Ordering};

/// What to simulate.
#[derive(Debug, Clone)]
pub struct Options {
    /// The traffic.
    pub world: World,
    /// The control plane's policy.
    pub policy: Policy,
    /// Rollouts to simulate.
    pub runs: usize,
    /// The most windows (looks) a rollout runs.
    pub max_windows: usize,
    /// Seed of the first rollout (the others follow it).
    pub seed: u64,
    /// The judge.
    pub judge: Judge,
    /// A progress bar on stderr (when it is a terminal).
    pub progress: bool,
}

/// Simulates `o.runs` rollouts on every core and sums them up.
pub fn plan(o: &Options) -> Plan {
    let threads = std::thread::available_parallelism()
        .map_or(1, usize::from)
        .min(o.runs.max(1));
    let bar = if o.progress && std::io::stderr().is_terminal() {
        let b = ProgressBar::with_draw_target(Some(o.runs as u64), ProgressDrawTarget::stderr());
        if let Ok(style) = ProgressStyle::with_template("{bar:40} {pos}/{len} rollouts {elapsed}") {
            b.set_style(style);
        }
        b
    } else {
        ProgressBar::hidden()
    };
    let next = AtomicUsize::new(0);
    let mut runs: Vec<(usize, Run)> = std::thread::scope(|scope| {
        let handles: Vec<_> = (0..threads)
            .map(|_| {
                scope.spawn(|| {
                    let mut mine = Vec::new();
                    loop {
                        let i = next.fetch_add(1, Ordering::Relaxed);
                        if i >= o.runs {
                            break mine;
                        }
                        let seed = o.seed.wrapping_add(i as u64);
                        mine.push((
                            i,
                            simulate(o.world, &o.policy, seed, o.max_windows, o.judge),
                        ));
                        bar.inc(1);
                    }
                })
            })
            .collect();
        handles
            .into_iter()
            .flat_map(|h| h.join().unwrap_or_default())
            .collect()
    });
    bar.finish_and_clear();
    // The same rollouts in the same order whatever the number of cores.
    runs.sort_by_key(|(i, _)| *i);
    let runs: Vec<Run> = runs.into_iter().map(|(_, r)| r).collect();
    Plan::of(&runs, &o.world, &o.policy)
}

/// The plan as `--json` prints it: the plan and what it was asked.
pub fn to_json(p: &Plan, o: &Options) -> Value {
    let mut v = serde_json::to_value(p).unwrap_or(Value::Null);
    v["judge"] = json!(match o.judge {
        Judge::TwoSample => "two-sample",
        Judge::Union => "union",
    });
    v["inputs"] = json!({
        "champion": o.world.champion,
        "challenger": o.world.challenger,
        "holdout_percent": o.world.holdout_percent,
        "look_outcomes": o.world.per_window,
        "look_minutes": o.world.window_ms as f64 / 60_000.0,
        "drift": o.world.drift,
        "steps": o.policy.steps.as_slice(),
        "alpha": o.policy.alpha,
        "max_loss": o.policy.max_loss,
        "min_outcomes": o.policy.min_outcomes,
        "min_step_s": o.policy.min_step_ms / 1_000,
        "bake_percent": o.policy.bake_percent,
        "bake_s": o.policy.bake_ms / 1_000,
        "max_looks": o.max_windows,
        "seed": o.seed,
    });
    v
}

/// The plan as a table.
pub fn render(p: &Plan, o: &Options) -> String {
    let mut s = String::new();
    let w = &o.world;
    let _ = writeln!(
        s,
        "{} simulated rollouts: challenger {} vs champion {}, a look every {} outcomes ({:.1} min), α {}, judge {}{}",
        p.runs,
        w.challenger,
        w.champion,
        w.per_window,
        w.window_ms as f64 / 60_000.0,
        o.policy.alpha,
        match o.judge {
            Judge::TwoSample => "two-sample",
            Judge::Union => "union",
        },
        if w.drift > 0.0 { format!(", daily drift ±{}", w.drift) } else { String::new() },
    );
    let _ = writeln!(
        s,
        "step     reached  decided  outcomes median [p90]   minutes median [p90]"
    );
    let num = |x: Option<u64>| x.map_or("–".into(), |v| v.to_string());
    let min = |x: Option<f64>| x.map_or("–".into(), |v| format!("{v:.1}"));
    let bake = o.policy.bake_percent > 0;
    for (i, st) in p.steps.iter().enumerate() {
        let label = if bake && i + 1 == p.steps.len() {
            "bake".to_string()
        } else {
            format!("{:>4}%", st.setting)
        };
        let _ = writeln!(
            s,
            "{label:<9}{:>7}  {:>6.1}%  {:>10} [{:>8}]   {:>8} [{:>8}]",
            st.reached,
            100.0 * st.decided_share,
            num(st.median_outcomes),
            num(st.p90_outcomes),
            min(st.median_minutes),
            min(st.p90_minutes),
        );
    }
    let e = &p.to_end;
    let _ = writeln!(
        s,
        "{:<9}{:>7}  {:>6.1}%  {:>10} [{:>8}]   {:>8} [{:>8}]   (requests of every arm)",
        "all",
        e.runs,
        100.0 * e.runs as f64 / p.runs.max(1) as f64,
        num(e.median_outcomes),
        num(e.p90_outcomes),
        min(e.median_minutes),
        min(e.p90_minutes),
    );
    let pct = |x: f64| format!("{:.2}%", 100.0 * x);
    let _ = writeln!(
        s,
        "promoted {}, rolled back {}, undecided after {} looks {}; a wrong verdict in {} of the rollouts",
        pct(p.promoted),
        pct(p.rolled_back),
        o.max_windows,
        pct(p.undecided),
        pct(p.false_decision_rate)
    );
    s
}

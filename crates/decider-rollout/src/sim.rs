//! Simulated rollouts through the control plane's own [`step`]: Bernoulli rewards per arm,
//! one flush batch per window, the judge run after every window (as the Cron Trigger would).
//! `decider rollout plan` runs many of them ([`simulate`], then [`Plan::of`]) to say how
//! long each step takes and how often the judge decides wrongly, before a rollout starts.

use crate::policy::Policy;
use crate::sequential::{Judge, Verdict};
use crate::state::{step, Change, Event, RolloutState};
use crate::tally::{Tally, Windows};
use decider_core::record::Why;
use decider_core::rollout::{Arm, Counts, Phase, Setting};
use decider_core::Source;
use serde::Serialize;

const T0: i64 = 1_796_205_600_000;
const DAY_MS: f64 = 86_400_000.0;

/// SplitMix64: small, fast, and the same everywhere.
struct Rng(u64);

impl Rng {
    fn new(seed: u64) -> Rng {
        Rng(seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) ^ 0xD1B5_4A32_D192_ED03)
    }
    fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }
    fn unit(&mut self) -> f64 {
        (self.next_u64() >> 11) as f64 / (1u64 << 53) as f64
    }
}

/// The simulated traffic: success probabilities per arm, the holdout share, and how many
/// outcomes each window (each look) holds and how long it lasts.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct World {
    /// The champion's success probability.
    pub champion: f64,
    /// The challenger's.
    pub challenger: f64,
    /// The rules' (the holdout arm).
    pub rules: f64,
    /// Routing keys outside the canary, percent (the holdout arm).
    pub holdout_percent: u8,
    /// Outcomes per window: the judge looks after each.
    pub per_window: u32,
    /// A window's length, ms.
    pub window_ms: i64,
    /// A daily pattern: every arm's success probability moves by `drift · sin(2π·t/day)`.
    pub drift: f64,
}

/// One simulated rollout.
#[derive(Debug, Clone)]
pub struct Run {
    /// The changes, with the number of windows run when each was made.
    pub changes: Vec<(usize, Change)>,
    /// The state at the end.
    pub state: RolloutState,
    /// Windows run.
    pub windows: usize,
    /// After each window: the step's challenger and champion successes and outcomes.
    pub looks: Vec<[u64; 4]>,
}

/// Runs one rollout of `world` under `policy` for at most `max_windows` windows, or until it
/// stops ramping (or baking). With [`Judge::TwoSample`] the isolates name their canary share
/// (the control plane knows the allocation); with [`Judge::Union`] they do not, and the
/// judge falls back to the union of the sequences.
pub fn simulate(world: World, policy: &Policy, seed: u64, max_windows: usize, judge: Judge) -> Run {
    let mut rng = Rng::new(seed);
    let mut state = RolloutState::start(Some("m-2".into()), policy, T0);
    let canary = 100 - world.holdout_percent.min(100);
    if judge == Judge::TwoSample {
        state.hear_canary(Some(canary), T0);
    }
    let mut store = Windows::new(world.window_ms.max(1), 120);
    let mut changes = Vec::new();
    let mut looks = Vec::new();
    let mut ran = 0;
    for w in 0..max_windows {
        let start = T0 + w as i64 * world.window_ms;
        let wave = world.drift * (2.0 * std::f64::consts::PI * (start - T0) as f64 / DAY_MS).sin();
        let p = |base: f64| (base + wave).clamp(0.0, 1.0);
        let share = state.share.min(canary);
        // Champion, challenger, holdout.
        let mut counts = [Counts::default(); 3];
        for _ in 0..world.per_window {
            let bucket = (rng.next_u64() % 100) as u8;
            let (i, q) = if state.rules_only || bucket >= canary {
                (2, p(world.rules))
            } else if bucket < share {
                (1, p(world.challenger))
            } else {
                (0, p(world.champion))
            };
            counts[i].decisions += 1;
            if i == 2 {
                counts[i].fallbacks[6] += 1;
            }
            counts[i].add_reward(if rng.unit() < q { 1.0 } else { 0.0 });
        }
        let mut batch = Tally::new();
        batch.add_counts(Arm::Champion, Some("m-1"), Source::Model, &counts[0]);
        batch.add_counts(Arm::Challenger, Some("m-2"), Source::Model, &counts[1]);
        batch.add_counts(Arm::Holdout, Some("m-1"), Source::Rules, &counts[2]);
        store.add(&batch, start + world.window_ms / 2);
        let (next, events) = step(&state, policy, &store, start + world.window_ms);
        let made = events.into_iter().filter_map(|e| match e {
            Event::Changed(c) => Some(c),
            _ => None,
        });
        state = next;
        let (c, k) = (
            state.tally.arm(Arm::Challenger),
            state.tally.arm(Arm::Champion),
        );
        looks.push([
            c.reward_sum / 1_000_000,
            c.outcomes,
            k.reward_sum / 1_000_000,
            k.outcomes,
        ]);
        changes.extend(made.map(|c| (w + 1, c)));
        ran = w + 1;
        if !matches!(state.phase, Phase::Ramping | Phase::Baking) {
            break;
        }
    }
    Run {
        changes,
        state,
        windows: ran,
        looks,
    }
}

/// One step of a plan: how long the judge took to decide it, over the runs that did.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct StepPlan {
    /// The challenger's share on the step, percent.
    pub setting: u8,
    /// Runs that reached the step.
    pub reached: usize,
    /// Of the runs that reached it, the share that decided it (moved on or rolled back).
    pub decided_share: f64,
    /// Outcomes of both arms on the step when it was decided: median and 90th percentile.
    pub median_outcomes: Option<u64>,
    /// The 90th percentile.
    pub p90_outcomes: Option<u64>,
    /// Minutes on the step when it was decided: median.
    pub median_minutes: Option<f64>,
    /// The 90th percentile.
    pub p90_minutes: Option<f64>,
}

/// What many simulated rollouts came to.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Plan {
    /// Runs.
    pub runs: usize,
    /// Each step in order, the bake (when the policy has one) last.
    pub steps: Vec<StepPlan>,
    /// Runs that promoted the challenger to 100%.
    pub promoted: f64,
    /// Runs that rolled it back.
    pub rolled_back: f64,
    /// Runs still undecided when the simulation ended.
    pub undecided: f64,
    /// Runs with at least one wrong verdict: Better for a challenger no better than the
    /// champion, or Worse for one no worse than it less the tolerated loss.
    pub false_decision_rate: f64,
    /// The whole rollout, over the runs that ended (promoted or rolled back): requests of
    /// every arm from the start to the end.
    pub to_end: Span,
}

/// How long the runs that ended took: requests (every arm's outcomes) and minutes.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Span {
    /// Runs that ended.
    pub runs: usize,
    /// Median requests.
    pub median_outcomes: Option<u64>,
    /// The 90th percentile.
    pub p90_outcomes: Option<u64>,
    /// Median minutes.
    pub median_minutes: Option<f64>,
    /// The 90th percentile.
    pub p90_minutes: Option<f64>,
}

fn quantile(xs: &mut [f64], q: f64) -> Option<f64> {
    if xs.is_empty() {
        return None;
    }
    xs.sort_by(f64::total_cmp);
    Some(xs[((xs.len() - 1) as f64 * q).round() as usize])
}

impl Plan {
    /// The plan of `runs` (simulated with `world` under `policy`).
    pub fn of(runs: &[Run], world: &World, policy: &Policy) -> Plan {
        let n = runs.len().max(1) as f64;
        // Every step but 100%, where nothing is left to compare; the bake instead, if any.
        let mut settings: Vec<u8> = policy.steps.as_slice().to_vec();
        settings.pop();
        if policy.bake_percent > 0 {
            settings.push(policy.bake_share());
        }
        let minutes = |windows: usize| windows as f64 * world.window_ms as f64 / 60_000.0;
        let steps = settings
            .iter()
            .enumerate()
            .map(|(i, &setting)| {
                let (mut outcomes, mut mins, mut reached) = (Vec::new(), Vec::new(), 0);
                for r in runs {
                    if r.changes.len() < i {
                        continue;
                    }
                    if i > 0 && !matches!(r.changes[i - 1].1.to, Setting::Share(s) if s == setting)
                    {
                        continue;
                    }
                    reached += 1;
                    if let Some((w, c)) = r.changes.get(i) {
                        let before = if i == 0 { 0 } else { r.changes[i - 1].0 };
                        if let Some(s) = &c.statistics {
                            outcomes.push((s.treatment.n + s.baseline.n) as f64);
                        }
                        mins.push(minutes(w - before));
                    }
                }
                let decided = mins.len();
                StepPlan {
                    setting,
                    reached,
                    decided_share: if reached == 0 {
                        0.0
                    } else {
                        decided as f64 / reached as f64
                    },
                    median_outcomes: quantile(&mut outcomes, 0.5).map(|x| x as u64),
                    p90_outcomes: quantile(&mut outcomes, 0.9).map(|x| x as u64),
                    median_minutes: quantile(&mut mins, 0.5),
                    p90_minutes: quantile(&mut mins, 0.9),
                }
            })
            .collect();
        let count =
            |phase: Phase| runs.iter().filter(|r| r.state.phase == phase).count() as f64 / n;
        let no_better = world.challenger <= world.champion;
        let no_worse = world.challenger >= world.champion - policy.max_loss;
        let wrong = runs
            .iter()
            .filter(|r| {
                r.changes.iter().any(|(_, c)| {
                    let v = c.statistics.map(|s| s.verdict);
                    (no_better && c.why == Why::Better && v == Some(Verdict::Better))
                        || (no_worse && c.why == Why::Worse && v == Some(Verdict::Worse))
                })
            })
            .count() as f64;
        let ended: Vec<usize> = runs
            .iter()
            .filter(|r| matches!(r.state.phase, Phase::Promoted | Phase::RolledBack))
            .map(|r| r.windows)
            .collect();
        let mut outcomes: Vec<f64> = ended
            .iter()
            .map(|&w| w as f64 * f64::from(world.per_window))
            .collect();
        let mut mins: Vec<f64> = ended.iter().map(|&w| minutes(w)).collect();
        Plan {
            runs: runs.len(),
            steps,
            promoted: count(Phase::Promoted),
            rolled_back: count(Phase::RolledBack),
            undecided: 1.0 - count(Phase::Promoted) - count(Phase::RolledBack),
            false_decision_rate: wrong / n,
            to_end: Span {
                runs: ended.len(),
                median_outcomes: quantile(&mut outcomes, 0.5).map(|x| x as u64),
                p90_outcomes: quantile(&mut outcomes, 0.9).map(|x| x as u64),
                median_minutes: quantile(&mut mins, 0.5),
                p90_minutes: quantile(&mut mins, 0.9),
            },
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use decider_core::record::AlarmKind;

    /// The default policy, judged on the statistics alone: steps advance as soon as the
    /// evidence allows (no `ROLLOUT_MIN_STEP_S`) and the last step promotes at once (no bake).
    fn statistics_only() -> Policy {
        Policy {
            min_step_ms: 0,
            bake_percent: 0,
            ..Policy::default()
        }
    }

    fn world(
        champion: f64,
        challenger: f64,
        rules: f64,
        holdout_percent: u8,
        per_window: u32,
    ) -> World {
        World {
            champion,
            challenger,
            rules,
            holdout_percent,
            per_window,
            window_ms: 60_000,
            drift: 0.0,
        }
    }

    fn shares(run: &Run) -> Vec<Setting> {
        run.changes.iter().map(|(_, c)| c.to).collect()
    }

    #[test]
    fn a_better_challenger_ramps_through_every_step_to_100() {
        let world = world(0.93, 0.97, 0.90, 0, 1_000);
        let policy = statistics_only();
        for (seed, judge) in (0..20).flat_map(|s| [(s, Judge::TwoSample), (s, Judge::Union)]) {
            let run = simulate(world, &policy, seed, 1_000, judge);
            assert_eq!(
                shares(&run),
                vec![Setting::Share(20), Setting::Share(50), Setting::Share(100)],
                "seed {seed}"
            );
            assert_eq!(run.state.phase, Phase::Promoted);
            assert!(run.state.promoted());
            for (_, c) in &run.changes {
                assert_eq!(c.why, Why::Better);
                assert_eq!(c.statistics.unwrap().verdict, Verdict::Better);
                assert_eq!(c.statistics.unwrap().judge, judge);
                assert!(c.statistics.unwrap().treatment.n >= policy.min_outcomes);
            }
        }
    }

    #[test]
    fn a_worse_challenger_is_rolled_back() {
        for (champion, challenger) in [(0.97, 0.93), (0.95, 0.90), (0.99, 0.95)] {
            let world = world(champion, challenger, 0.90, 10, 1_000);
            for seed in 0..20 {
                let run = simulate(world, &statistics_only(), seed, 1_000, Judge::TwoSample);
                assert_eq!(
                    shares(&run),
                    vec![Setting::Share(0)],
                    "{challenger} seed {seed}"
                );
                assert_eq!(run.changes[0].1.why, Why::Worse);
                assert_eq!((run.state.phase, run.state.share), (Phase::RolledBack, 0));
            }
        }
    }

    /// A/A: challenger = champion = rules. Every promotion or rollback is a false decision,
    /// and so is a holdout alarm. Also counted: a naive test (a fixed-sample 95% z-test on the
    /// step's data, looked at after every window), to show the simulation catches a test that
    /// does not stay valid under repeated looks.
    #[test]
    fn aa_false_decisions_stay_within_alpha() {
        let world = world(0.95, 0.95, 0.95, 10, 400);
        let policy = statistics_only();
        let seeds = 200;
        let (mut false_decisions, mut false_alarms, mut naive) = (0, 0, 0);
        for seed in 0..seeds {
            let run = simulate(world, &policy, 1_000 + seed, 150, Judge::TwoSample);
            if !run.changes.is_empty() {
                false_decisions += 1;
            }
            if run.state.alarm(AlarmKind::Holdout).is_some() {
                false_alarms += 1;
            }
            let naive_fired = run.looks.iter().any(|&[cs, cn, ks, kn]| {
                if cn < 2 || kn < 2 {
                    return false;
                }
                let (pc, pk) = (cs as f64 / cn as f64, ks as f64 / kn as f64);
                let pooled = (cs + ks) as f64 / (cn + kn) as f64;
                let se = (pooled * (1.0 - pooled) * (1.0 / cn as f64 + 1.0 / kn as f64)).sqrt();
                se > 0.0 && ((pc - pk) / se).abs() > 1.959_963_984_540_054
            });
            if naive_fired {
                naive += 1;
            }
            assert_eq!(run.windows, 150, "seed {seed} stopped early");
        }
        let allowed = (policy.alpha * seeds as f64) as usize;
        eprintln!(
            "A/A over {seeds} seeds × 150 looks: {false_decisions} false promotions or rollbacks, \
             {false_alarms} false holdout alarms (allowed {allowed}); a naive 95% z-test looked at \
             as often: {naive}"
        );
        assert!(false_decisions <= allowed, "{false_decisions} > {allowed}");
        assert!(false_alarms <= allowed, "{false_alarms} > {allowed}");
        assert!(naive > allowed, "the naive test fired only {naive} times");
    }
}

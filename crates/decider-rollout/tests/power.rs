//! Power of the judge against its peers on simulated streams: outcomes to a correct verdict
//! and false verdicts, for the two-sample e-process (the judge), the union of two per-arm
//! confidence sequences (the judge before it) and an mSPRT (Johari, Koomen, Pekelis & Walsh,
//! *Always valid inference*, 2017: a normal mixture over the difference with τ = 0.02 and the
//! plug-in variance; valid only asymptotically), with the same looks and α.
//!
//! Minutes in release, so not in `make test`:
//! `cargo test --release -p decider-rollout --test power -- --ignored --nocapture`.

use decider_rollout::evidence::{Evidence, Prior};
use decider_rollout::{compare, Sample, Verdict};

/// SplitMix64.
struct Rng(u64);

impl Rng {
    fn unit(&mut self) -> f64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        ((z ^ (z >> 31)) >> 11) as f64 / (1u64 << 53) as f64
    }
}

#[derive(Clone, Copy, Debug, PartialEq)]
enum Judge {
    TwoSample,
    Union,
    Msprt,
}

/// The verdict of `judge` on the counts at a look; α is the whole comparison's.
fn verdict(judge: Judge, prior: &Prior, t: &Sample, b: &Sample, alpha: f64) -> Verdict {
    match judge {
        Judge::TwoSample => Evidence::with(prior, t, b).verdict(alpha),
        Judge::Union => compare(t, b, alpha, 0.0, None).verdict,
        Judge::Msprt => {
            if t.n < 2 || b.n < 2 {
                return Verdict::Undecided;
            }
            let (pt, pb) = (t.sum / t.n as f64, b.sum / b.n as f64);
            let v = pt * (1.0 - pt) / t.n as f64 + pb * (1.0 - pb) / b.n as f64;
            if v <= 0.0 {
                return Verdict::Undecided;
            }
            let tau2 = 0.02f64 * 0.02;
            let d = pt - pb;
            let ln = 0.5 * (v / (v + tau2)).ln() + d * d * tau2 / (2.0 * v * (v + tau2));
            match (ln >= (1.0 / alpha).ln(), d > 0.0) {
                (true, true) => Verdict::Better,
                (true, false) => Verdict::Worse,
                _ => Verdict::Undecided,
            }
        }
    }
}

/// Per stream: the outcomes at the first look with a verdict (None: none within `max`).
fn streams(
    judge: Judge,
    (pt, pb): (f64, f64),
    share: f64,
    runs: u64,
    look: u64,
    max: u64,
    alpha: f64,
) -> Vec<Option<(u64, Verdict)>> {
    let prior = Prior::at(share).expect("a share in (0, 1)");
    (0..runs)
        .map(|run| {
            let mut rng = Rng(0x5EED ^ run.wrapping_mul(0x9E37_79B9));
            let (mut t, mut b) = (Sample::default(), Sample::default());
            for n in 1..=max {
                let (arm, p) = if rng.unit() < share {
                    (&mut t, pt)
                } else {
                    (&mut b, pb)
                };
                let r = f64::from(u8::from(rng.unit() < p));
                arm.n += 1;
                arm.sum += r;
                arm.sum_sq += r;
                if n % look == 0 {
                    let v = verdict(judge, &prior, &t, &b, alpha);
                    if v != Verdict::Undecided {
                        return Some((n, v));
                    }
                }
            }
            None
        })
        .collect()
}

fn median(mut xs: Vec<u64>) -> u64 {
    xs.sort_unstable();
    xs[xs.len() / 2]
}

/// Median outcomes to "better" (a stream without a verdict counts as never).
fn median_to_better(results: &[Option<(u64, Verdict)>]) -> u64 {
    median(
        results
            .iter()
            .map(|r| match r {
                Some((n, Verdict::Better)) => *n,
                _ => u64::MAX,
            })
            .collect(),
    )
}

/// Must-show 1 of the issue: at a 50% share, 400 streams, a look every 250 outcomes,
/// α = 0.025, the judge's median outcomes to "better" within 1.3× of the mSPRT's and at
/// least 2× fewer than the union bound's.
#[test]
#[ignore = "minutes in release: cargo test --release -p decider-rollout --test power -- --ignored"]
fn faster_than_the_union_and_near_the_msprt() {
    for pair in [(0.97, 0.93), (0.97, 0.95)] {
        let run = |j| median_to_better(&streams(j, pair, 0.5, 400, 250, 200_000, 0.025));
        let (two, union, msprt) = (run(Judge::TwoSample), run(Judge::Union), run(Judge::Msprt));
        println!(
            "{pair:?} at 50%: two-sample {two}, union {union}, mSPRT {msprt}: {:.2}× the mSPRT, {:.2}× faster than the union",
            two as f64 / msprt as f64,
            union as f64 / two as f64
        );
        assert!(
            two as f64 <= 1.3 * msprt as f64,
            "{pair:?}: {two} vs mSPRT {msprt}"
        );
        assert!(2 * two <= union, "{pair:?}: {two} vs union {union}");
    }
}

/// A/A on raw streams: how often each judge ever declares anything within 20,000 outcomes,
/// at 5% and 50% shares (the mSPRT is not valid at a small share).
#[test]
#[ignore = "minutes in release: cargo test --release -p decider-rollout --test power -- --ignored"]
fn false_verdicts_on_raw_streams() {
    for share in [0.05, 0.5] {
        for judge in [Judge::TwoSample, Judge::Union, Judge::Msprt] {
            let r = streams(judge, (0.95, 0.95), share, 2_000, 250, 20_000, 0.05);
            let false_ = r.iter().filter(|x| x.is_some()).count();
            println!("A/A 0.95 at {share}: {judge:?} {false_} of 2000 false verdicts");
            if judge != Judge::Msprt {
                assert!(
                    false_ as f64 <= 0.05 * 2_000.0,
                    "{judge:?} at {share}: {false_}"
                );
            }
        }
    }
}

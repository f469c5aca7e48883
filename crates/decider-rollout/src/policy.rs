//! The rollout policy from configuration: the steps of the challenger's share, the
//! outcomes each step needs, the tolerated loss, the error rate, and what the judge may do
//! by itself.
//!
//! Each parser takes a variable's value and answers the value or why it is refused, in the
//! words of the Worker's other configuration parsers (`must be …`); the caller names the
//! variable and quotes the value.

use crate::sequential::DEFAULT_ALPHA;

/// The steps when `ROLLOUT_STEPS` is unset.
pub const DEFAULT_STEPS: [u8; 4] = [5, 20, 50, 100];

/// Most steps `ROLLOUT_STEPS` may list.
pub const MAX_STEPS: usize = 20;

/// `ROLLOUT_MIN_OUTCOMES` when unset.
pub const DEFAULT_MIN_OUTCOMES: u64 = 200;

/// Largest `ROLLOUT_MIN_OUTCOMES`.
pub const MAX_MIN_OUTCOMES: u64 = 100_000_000;

/// Smallest `ROLLOUT_ALPHA`.
pub const MIN_ALPHA: f64 = 1e-6;

/// Largest `ROLLOUT_ALPHA`.
pub const MAX_ALPHA: f64 = 0.5;

/// The challenger's share at each step, percent of routing keys: strictly increasing,
/// each in `1..=100`, the last 100 (where the challenger is the effective champion).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Steps(Vec<u8>);

impl Default for Steps {
    fn default() -> Steps {
        Steps(DEFAULT_STEPS.to_vec())
    }
}

impl Steps {
    /// Checks a list of steps.
    ///
    /// # Errors
    /// Why the list is refused (empty, too long, a percent outside `1..=100`, not strictly
    /// increasing, not ending at 100).
    pub fn new(steps: Vec<u8>) -> Result<Steps, String> {
        if steps.is_empty() {
            return Err("must list at least one step".into());
        }
        if steps.len() > MAX_STEPS {
            return Err(format!(
                "must list at most {MAX_STEPS} steps, got {}",
                steps.len()
            ));
        }
        for (i, w) in steps.windows(2).enumerate() {
            if w[1] <= w[0] {
                return Err(format!(
                    "must be strictly increasing: step {} ({}) is not above step {} ({})",
                    i + 2,
                    w[1],
                    i + 1,
                    w[0]
                ));
            }
        }
        if let Some(&s) = steps.iter().find(|&&s| !(1..=100).contains(&s)) {
            return Err(format!("steps must be percents 1..=100, got {s}"));
        }
        if steps.last() != Some(&100) {
            return Err("must end at 100 (the challenger's promotion)".into());
        }
        Ok(Steps(steps))
    }

    /// The steps, in order.
    pub fn as_slice(&self) -> &[u8] {
        &self.0
    }

    /// The share at step `i` (the last step's beyond the end).
    pub fn share(&self, i: usize) -> u8 {
        self.0.get(i).or(self.0.last()).copied().unwrap_or(100)
    }

    /// Index of the last step (100%).
    pub fn last(&self) -> usize {
        self.0.len().saturating_sub(1)
    }
}

/// The rollout policy.
#[derive(Debug, Clone, PartialEq)]
pub struct Policy {
    /// `ROLLOUT_STEPS`.
    pub steps: Steps,
    /// `ROLLOUT_MIN_OUTCOMES`: outcomes each of the challenger and champion arms needs on a
    /// step before it may advance (a rollback needs none).
    pub min_outcomes: u64,
    /// `ROLLOUT_MAX_LOSS`: the largest tolerated loss of mean reward, in `[0, 1]`.
    pub max_loss: f64,
    /// `ROLLOUT_AUTO`: the judge changes the share by itself; false: it only reports what it
    /// would do.
    pub auto: bool,
    /// `ROLLOUT_ALPHA`: the error rate of each comparison over the whole rollout.
    pub alpha: f64,
    /// `ROLLOUT_RULES_SWITCH`: when the holdout arm shows rules beating the model, switch
    /// all traffic to rules (otherwise only the alarm).
    pub rules_switch: bool,
    /// `ROLLOUT_MIN_STEP_S`, in ms: a step lasts at least this long before it may advance,
    /// whatever the evidence (a rollback never waits).
    pub min_step_ms: i64,
    /// `ROLLOUT_BAKE_PERCENT`: after the last step the previous champion keeps this share of
    /// routing keys while the challenger bakes (0: no bake, promoted at once).
    pub bake_percent: u8,
    /// `ROLLOUT_BAKE_S`, in ms: how long the bake lasts; the judge can still roll back.
    pub bake_ms: i64,
}

/// `ROLLOUT_MIN_STEP_S` when unset: five minutes.
pub const DEFAULT_MIN_STEP_S: u32 = 300;

/// `ROLLOUT_BAKE_PERCENT` when unset.
pub const DEFAULT_BAKE_PERCENT: u8 = 5;

/// `ROLLOUT_BAKE_S` when unset: an hour.
pub const DEFAULT_BAKE_S: u32 = 3_600;

impl Default for Policy {
    fn default() -> Policy {
        Policy {
            steps: Steps::default(),
            min_outcomes: DEFAULT_MIN_OUTCOMES,
            max_loss: 0.0,
            auto: true,
            alpha: DEFAULT_ALPHA,
            rules_switch: false,
            min_step_ms: i64::from(DEFAULT_MIN_STEP_S) * 1_000,
            bake_percent: DEFAULT_BAKE_PERCENT,
            bake_ms: i64::from(DEFAULT_BAKE_S) * 1_000,
        }
    }
}

impl Policy {
    /// The challenger's share while it bakes: 100 less the previous champion's.
    pub fn bake_share(&self) -> u8 {
        100 - self.bake_percent.min(99)
    }
}

/// `ROLLOUT_BAKE_PERCENT`: an integer `0..=50`.
///
/// # Errors
/// Why the value is refused.
pub fn parse_bake_percent(s: &str) -> Result<u8, String> {
    s.trim()
        .parse::<u8>()
        .ok()
        .filter(|v| *v <= 50)
        .ok_or_else(|| "must be an integer 0..=50".into())
}

/// `ROLLOUT_STEPS`: comma-separated percents, e.g. `5,20,50,100`.
///
/// # Errors
/// Why the value is refused.
pub fn parse_steps(s: &str) -> Result<Steps, String> {
    let mut steps = Vec::new();
    for (i, part) in s.split(',').enumerate() {
        let part = part.trim();
        if part.is_empty() {
            return Err(format!(
                "must be comma-separated percents like 5,20,50,100; step {} is empty",
                i + 1
            ));
        }
        match part.parse::<u8>() {
            Ok(v) => steps.push(v),
            Err(_) => {
                return Err(format!(
                    "steps must be percents 1..=100, got {:?}",
                    decider_core::json::short_text(part)
                ))
            }
        }
        if steps.len() > MAX_STEPS {
            return Err(format!("must list at most {MAX_STEPS} steps"));
        }
    }
    Steps::new(steps)
}

/// `ROLLOUT_MIN_OUTCOMES`: an integer `1..=100000000`.
///
/// # Errors
/// Why the value is refused.
pub fn parse_min_outcomes(s: &str) -> Result<u64, String> {
    s.trim()
        .parse::<u64>()
        .ok()
        .filter(|v| (1..=MAX_MIN_OUTCOMES).contains(v))
        .ok_or_else(|| format!("must be an integer 1..={MAX_MIN_OUTCOMES}"))
}

fn number(s: &str) -> Option<f64> {
    s.trim().parse::<f64>().ok().filter(|v| v.is_finite())
}

/// `ROLLOUT_MAX_LOSS`: a number in `[0, 1]` (mean reward; 0.01 tolerates one point of
/// success rate).
///
/// # Errors
/// Why the value is refused.
pub fn parse_max_loss(s: &str) -> Result<f64, String> {
    number(s)
        .filter(|v| (0.0..=1.0).contains(v))
        .ok_or_else(|| "must be a number in [0, 1]".into())
}

/// `ROLLOUT_ALPHA`: a number in `[0.000001, 0.5]`.
///
/// # Errors
/// Why the value is refused.
pub fn parse_alpha(s: &str) -> Result<f64, String> {
    number(s)
        .filter(|v| (MIN_ALPHA..=MAX_ALPHA).contains(v))
        .ok_or_else(|| format!("must be a number in [{MIN_ALPHA}, {MAX_ALPHA}]"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn steps_table() {
        let ok: &[(&str, &[u8])] = &[
            ("5,20,50,100", &[5, 20, 50, 100]),
            (" 1 , 100 ", &[1, 100]),
            ("100", &[100]),
            ("10,25,50,75,100", &[10, 25, 50, 75, 100]),
        ];
        for (s, want) in ok {
            assert_eq!(parse_steps(s).unwrap().as_slice(), *want, "{s}");
        }
        let bad = [
            ("", "step 1 is empty"),
            ("5,,100", "step 2 is empty"),
            ("5,20,", "step 3 is empty"),
            ("0,100", "percents 1..=100, got 0"),
            ("5,101", "percents 1..=100, got 101"),
            ("5,300", "percents 1..=100, got \"300\""),
            ("-5,100", "got \"-5\""),
            ("5.5,100", "got \"5.5\""),
            ("five,100", "got \"five\""),
            ("20,5,100", "step 2 (5) is not above step 1 (20)"),
            ("5,5,100", "step 2 (5) is not above step 1 (5)"),
            ("5,20,50", "must end at 100"),
            ("101", "percents 1..=100, got 101"),
        ];
        for (s, needle) in bad {
            let e = parse_steps(s).unwrap_err();
            assert!(e.contains(needle), "{s}: {e}");
        }
        let long: Vec<String> = (1..=21).map(|i| (i * 4).to_string()).collect();
        assert!(parse_steps(&long.join(","))
            .unwrap_err()
            .contains("at most 20"));
        let steps = parse_steps("5,20,100").unwrap();
        assert_eq!(
            (steps.share(0), steps.share(2), steps.share(9), steps.last()),
            (5, 100, 100, 2)
        );
    }

    #[test]
    fn number_parsers_table() {
        assert_eq!(parse_min_outcomes("200"), Ok(200));
        assert_eq!(parse_min_outcomes(" 1 "), Ok(1));
        for bad in ["0", "-1", "1.5", "x", "", "100000001"] {
            assert!(parse_min_outcomes(bad).is_err(), "{bad}");
        }
        assert_eq!(parse_max_loss("0"), Ok(0.0));
        assert_eq!(parse_max_loss("0.01"), Ok(0.01));
        assert_eq!(parse_max_loss("1"), Ok(1.0));
        for bad in ["-0.01", "1.01", "NaN", "inf", "x", ""] {
            assert_eq!(
                parse_max_loss(bad),
                Err("must be a number in [0, 1]".into()),
                "{bad}"
            );
        }
        assert_eq!(parse_alpha("0.05"), Ok(0.05));
        assert_eq!(parse_alpha("0.5"), Ok(0.5));
        assert_eq!(parse_alpha("1e-6"), Ok(1e-6));
        for bad in ["0", "0.6", "-0.05", "NaN", "x", "1e-7"] {
            assert!(parse_alpha(bad).is_err(), "{bad}");
        }
        let p = Policy::default();
        assert_eq!(p.steps.as_slice(), &DEFAULT_STEPS);
        assert!(p.auto && !p.rules_switch);
        assert_eq!((p.alpha, p.max_loss, p.min_outcomes), (0.05, 0.0, 200));
        assert_eq!(
            (p.min_step_ms, p.bake_percent, p.bake_ms),
            (300_000, 5, 3_600_000)
        );
        assert_eq!(p.bake_share(), 95);
        assert_eq!(parse_bake_percent("0"), Ok(0));
        assert_eq!(parse_bake_percent(" 50 "), Ok(50));
        for bad in ["51", "-1", "x", "", "5.5"] {
            assert!(parse_bake_percent(bad).is_err(), "{bad}");
        }
    }
}

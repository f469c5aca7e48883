//! Property tests of decider-core's laws (proptest):
//!
//! - the encoder's features are finite and within their ranges for any valid state,
//!   bursts far above nominal included;
//! - the model's probabilities sum to 1 (within 1e-6) for any valid state, on the tiny
//!   artifact, the shipped one when present, and generated tree ensembles;
//! - `decide` never panics and stays self-consistent for any state, any model outcome
//!   (NaN and infinite numbers included) and any configuration;
//! - the rule table is first-hit: it picks the first rule whose conditions all hold,
//!   checked against a literal reference evaluation;
//! - the lockstep tree walk gives the margins of the artifact's node-by-node definition bit
//!   for bit, for trees of any shape and any features, NaN included;
//! - calibration is monotonic: a higher temperature never raises the top probability;
//! - any text near a valid body parses to a valid state or to an error that names the
//!   field (only malformed text and a non-object body go without one);
//! - a decimal of any length, sign and number of fraction digits is read bit for bit as
//!   the standard parser reads it.

use decider_core::model::{
    argmax, softmax,
    tests_support::{reference_margins, TINY_ARTIFACT},
    Artifact, FeatureRanges, Tree,
};
use decider_core::policy::{decide, Inputs};
use decider_core::rules::{Condition, Rule, RuleTableSpec};
use decider_core::{
    encode, Action, FallbackReason, Gates, Model, ModelError, ModelOutcome, ModelOutput,
    PolicyConfig, RuleTable, Rules, Source, State, DEFAULT_RULES_JSON, FEATURE_DIM, NUM_ACTIONS,
};
use proptest::prelude::*;
use proptest::sample::select;
use std::collections::BTreeMap;

// ---------------------------------------------------------------------------------------
// Strategies

/// Finite, non-negative f64 of any magnitude (zero, subnormal, up to f64::MAX).
fn non_negative() -> impl Strategy<Value = f64> {
    prop::num::f64::POSITIVE
        | prop::num::f64::ZERO
        | prop::num::f64::SUBNORMAL
        | prop::num::f64::NORMAL
}

/// Any valid state: loads and queues from nominal to far above it.
fn valid_state() -> impl Strategy<Value = State> {
    let load = prop_oneof![0.0..=1.0f64, 1.0..100.0f64, non_negative()];
    let queue = prop_oneof![0.0..=200.0f64, non_negative()];
    (0..=5u8, 0..=9u8, load, 0.0..=1.0f64, queue, 0..=23u8).prop_map(
        |(request_type, region_id, current_load, recent_success_rate, queue_depth, hour)| State {
            request_type,
            region_id,
            current_load,
            recent_success_rate,
            queue_depth,
            hour,
        },
    )
}

/// A JSON token for a state field: valid values and every near miss a parser must refuse
/// (integral floats, `-0`, exponents, out-of-range, huge and negative integers, non-numbers).
fn field_token() -> impl Strategy<Value = String> {
    prop_oneof![
        4 => (0..=30i64).prop_map(|v| v.to_string()),
        2 => decimal(),
        2 => (0.0..=1.5f64).prop_map(|v| v.to_string()),
        1 => non_negative().prop_map(|v| format!("{v:e}")),
        1 => (0..=30u8).prop_map(|v| format!("{v}.0")),
        1 => select(vec![
            "-0", "-0.0", "-1", "1e0", "3E0", "0.5e1", "1e400", "-1e400", "1e-400",
            "18446744073709551615", "18446744073709551616", "-9223372036854775809",
            "null", "true", "\"3\"", "[]", "{}", "[1]", "5.5", "23.000000000000001",
            "01", "1.", ".5", "+1", "1e", "1e+", "-", "0x1", "1_0", "inf", "NaN", "Infinity",
            "-Infinity", "1.5e+2", "2E-1", "0.0e0", "1 2", "1,", "\u{a0}1", "１",
        ])
        .prop_map(str::to_string),
    ]
}

/// A decimal as a client writes one: up to 18 digits, 0 to 17 of them after the point
/// (past the 15 digits an f64 holds exactly), optionally negative.
fn decimal() -> impl Strategy<Value = String> {
    (1u32..=18)
        .prop_flat_map(|width| {
            (
                0..10u64.pow(width),
                Just(width as usize),
                0usize..18,
                any::<bool>(),
            )
        })
        .prop_map(|(m, width, frac, neg)| {
            let digits = format!("{m:0width$}");
            let frac = frac.min(width - 1);
            let (int, f) = digits.split_at(width - frac);
            // JSON allows no leading zero before other digits.
            let int = int.trim_start_matches('0');
            let int = if int.is_empty() { "0" } else { int };
            let sign = if neg { "-" } else { "" };
            if f.is_empty() {
                format!("{sign}{int}")
            } else {
                format!("{sign}{int}.{f}")
            }
        })
}

/// Text near a valid `{"state": {…}}` body: fields dropped, duplicated, renamed, escaped
/// or given any [`field_token`]; extra keys; other envelopes; whitespace; trailing junk.
fn near_body() -> impl Strategy<Value = String> {
    let fields =
        prop::collection::vec((0..9usize, field_token(), prop::bool::weighted(0.05)), 0..9);
    let valid = valid_state().prop_map(|s| s.to_value().to_string());
    let mutated = fields.prop_map(|fs| {
        // The state's fields, then near misses.
        let names: Vec<&str> = decider_core::state::STATE_FIELDS
            .into_iter()
            .chain(["regoin_id", "", "Hour"])
            .collect();
        let parts: Vec<String> = fs
            .iter()
            .map(|(k, v, escape)| {
                let name = if *escape {
                    // The same key, with its first letter escaped.
                    let n = names[*k];
                    n.chars().next().map_or(String::new(), |c| {
                        format!("\\u{:04x}{}", c as u32, &n[c.len_utf8()..])
                    })
                } else {
                    names[*k].to_string()
                };
                format!("\"{name}\": {v}")
            })
            .collect();
        format!("{{{}}}", parts.join(", "))
    });
    // A full valid state with one field overwritten, so most cases get deep into validation.
    let one_off = (valid_state(), 0..6usize, field_token()).prop_map(|(s, k, v)| {
        let mut obj = s.to_value();
        let name = decider_core::state::STATE_FIELDS[k];
        obj[name] = serde_json::Value::Null;
        obj.to_string()
            .replace(&format!("\"{name}\":null"), &format!("\"{name}\":{v}"))
    });
    let state = prop_oneof![2 => valid, 3 => one_off, 2 => mutated];
    let envelope = select(vec![
        "{\"state\": S}",
        "{\"state\":S}",
        " {\"state\" : S } ",
        "{\"state\": S, \"x\": 1}",
        "{\"state\": S, \"state\": S}",
        "[{\"state\": S}]",
        "{\"stat\\u0065\": S}",
        "{\"state\": S} x",
        "{\"state\": [S]}",
        "S",
        "{}",
        "{\"state\": S",
    ]);
    // JSON whitespace anywhere between tokens, and some that is not JSON whitespace.
    let spacing = select(vec![
        "", " ", "\t", "\n", "\r\n", " \u{c} ", "\u{a0}", "\u{0}",
    ]);
    (state, envelope, spacing, any::<bool>()).prop_map(|(s, e, sp, spread)| {
        let b = e.replace('S', &s);
        if spread {
            b.replace(',', &format!("{sp},{sp}"))
                .replace(':', &format!("{sp}:{sp}"))
        } else {
            b
        }
    })
}

/// Any value of the `State` type, validated or not: NaN, infinities, out-of-range ids.
fn any_state() -> impl Strategy<Value = State> {
    (
        any::<u8>(),
        any::<u8>(),
        prop::num::f64::ANY,
        prop::num::f64::ANY,
        prop::num::f64::ANY,
        any::<u8>(),
    )
        .prop_map(
            |(request_type, region_id, current_load, recent_success_rate, queue_depth, hour)| {
                State {
                    request_type,
                    region_id,
                    current_load,
                    recent_success_rate,
                    queue_depth,
                    hour,
                }
            },
        )
}

/// Any f64 at all, weighted towards the values that break naive code.
fn wild_f64() -> impl Strategy<Value = f64> {
    prop_oneof![
        prop::num::f64::ANY,
        select(vec![
            f64::NAN,
            f64::INFINITY,
            f64::NEG_INFINITY,
            0.0,
            -0.0,
            1.0,
            f64::MIN_POSITIVE,
            f64::MAX,
            f64::EPSILON,
        ]),
        0.0..=1.0f64,
    ]
}

fn action() -> impl Strategy<Value = Action> {
    select(Action::ALL.to_vec())
}

/// A complete binary tree in heap layout: node `i < k` splits with children `2i+1`,
/// `2i+2` (always after their parent), the rest are leaves with one value per action.
fn tree(leaf: impl Strategy<Value = f64> + Clone + 'static) -> impl Strategy<Value = Tree> {
    (0..=7usize).prop_flat_map(move |k| {
        let n = 2 * k + 1;
        (
            Just(k),
            prop::collection::vec(0..FEATURE_DIM as i32, k),
            prop::collection::vec(-1.5..1.5f64, k),
            prop::collection::vec(prop::array::uniform4(leaf.clone()), n),
        )
            .prop_map(|(k, features, thresholds, values)| {
                let n = 2 * k + 1;
                let internal = |i: usize| i < k;
                Tree {
                    feature: (0..n)
                        .map(|i| if internal(i) { features[i] } else { -1 })
                        .collect(),
                    threshold: (0..n)
                        .map(|i| if internal(i) { thresholds[i] } else { 0.0 })
                        .collect(),
                    left: (0..n)
                        .map(|i| if internal(i) { 2 * i as u32 + 1 } else { 0 })
                        .collect(),
                    right: (0..n)
                        .map(|i| if internal(i) { 2 * i as u32 + 2 } else { 0 })
                        .collect(),
                    value: (0..n)
                        .map(|i| {
                            if internal(i) {
                                [0.0; NUM_ACTIONS]
                            } else {
                                values[i]
                            }
                        })
                        .collect(),
                }
            })
    })
}

fn tiny_artifact() -> Artifact {
    decider_core::model::parse_json(TINY_ARTIFACT).unwrap()
}

/// A tree of any shape: grown by splitting random leaves (chains, bushes, up to 80 leaves),
/// on random features, with thresholds drawn
/// from a small set so that splits tie.
fn any_shape_tree() -> impl Strategy<Value = Tree> {
    let threshold = prop_oneof![select(vec![-1.0, 0.0, 0.25, 0.5, 1.0]), -1.5..1.5f64,];
    let size = prop_oneof![4 => 0..16usize, 1 => 16..80usize];
    size.prop_flat_map(move |n| {
        prop::collection::vec(
            (
                any::<prop::sample::Index>(),
                0..FEATURE_DIM as i32,
                threshold.clone(),
            ),
            n,
        )
    })
    .prop_flat_map(|splits| {
        let n = 2 * splits.len() + 1;
        (
            Just(splits),
            prop::collection::vec(prop::array::uniform4(-10.0..10.0f64), n),
        )
    })
    .prop_map(|(splits, values)| {
        let mut t = Tree {
            feature: vec![-1],
            threshold: vec![0.0],
            left: vec![0],
            right: vec![0],
            value: vec![values[0]],
        };
        let mut leaves = vec![0usize];
        for (k, (pick, f, th)) in splits.into_iter().enumerate() {
            let i = leaves.swap_remove(pick.index(leaves.len()));
            let (l, r) = (t.feature.len(), t.feature.len() + 1);
            t.feature[i] = f;
            t.threshold[i] = th;
            t.left[i] = l as u32;
            t.right[i] = r as u32;
            t.value[i] = [0.0; NUM_ACTIONS];
            for c in [l, r] {
                t.feature.push(-1);
                t.threshold.push(0.0);
                t.left.push(0);
                t.right.push(0);
                t.value.push(values[2 * k + 1 + (c - l)]);
                leaves.push(c);
            }
        }
        t
    })
}

/// Features as the encoder makes them, or anything at all (NaN and infinities included).
fn any_features() -> impl Strategy<Value = [f64; FEATURE_DIM]> {
    prop_oneof![
        valid_state().prop_map(|s| encode(&s)),
        prop::array::uniform16(prop_oneof![
            select(vec![
                -1.0,
                0.0,
                0.25,
                0.5,
                1.0,
                f64::NAN,
                f64::INFINITY,
                f64::NEG_INFINITY
            ]),
            -2.0..2.0f64,
        ]),
    ]
}

/// A valid artifact with a generated ensemble, temperature and threshold. Leaves range
/// from ordinary to huge (1e300, where margins are still bounded).
fn generated_artifact() -> impl Strategy<Value = Artifact> {
    let leaf = prop_oneof![4 => -10.0..10.0f64, 1 => -1e300..1e300f64];
    (
        prop::collection::vec(-5.0..5.0f64, NUM_ACTIONS),
        prop::collection::vec(tree(leaf), 0..12),
        prop_oneof![0.01..=100.0f64, Just(100.0), Just(1e-300)],
        0.0..=1.0f64,
    )
        .prop_map(|(base_score, trees, temperature, threshold)| {
            let mut a = tiny_artifact();
            a.model.base_score = base_score;
            a.model.trees = trees;
            a.calibration.temperature = temperature;
            a.threshold = threshold;
            a
        })
}

/// [`generated_artifact`], loaded.
fn generated_model() -> impl Strategy<Value = Model> {
    generated_artifact()
        .prop_map(|a| Model::from_artifact(a).expect("generated artifacts are valid"))
}

/// The shipped artifact, when the lead has committed it.
fn shipped_model() -> Option<Model> {
    let path = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../model/decision-model.json"
    );
    let text = std::fs::read_to_string(path).ok()?;
    Some(Model::from_json(&text).expect("the shipped artifact loads"))
}

fn any_outcome() -> impl Strategy<Value = ModelOutcome> {
    let probs = || prop::array::uniform4(wild_f64());
    prop_oneof![
        // Past the constructors: a hand-built output with any numbers at all.
        (action(), wild_f64(), prop::option::of(probs())).prop_map(|(a, c, p)| {
            ModelOutcome::Output(ModelOutput {
                action: a,
                confidence: c,
                probabilities: p,
            })
        }),
        // Through the constructors, whatever they make of it.
        probs().prop_map(|p| match ModelOutput::from_probabilities(p) {
            Ok(o) => ModelOutcome::Output(o),
            Err(e) => ModelOutcome::Error(e),
        }),
        (action(), wild_f64()).prop_map(|(a, c)| match ModelOutput::from_action(a, c) {
            Ok(o) => ModelOutcome::Output(o),
            Err(e) => ModelOutcome::Error(e),
        }),
        // A valid probability vector, normalised.
        prop::array::uniform4(0.0..1.0f64)
            .prop_filter("non-zero", |p| p.iter().sum::<f64>() > 1e-9)
            .prop_map(|p| {
                let s: f64 = p.iter().sum();
                ModelOutcome::Output(ModelOutput::from_probabilities(p.map(|v| v / s)).unwrap())
            }),
        Just(ModelOutcome::Error(ModelError::Backend("boom".into()))),
        Just(ModelOutcome::Timeout),
        Just(ModelOutcome::Unavailable),
        Just(ModelOutcome::NotRun),
    ]
}

fn any_ranges() -> impl Strategy<Value = Option<FeatureRanges>> {
    prop::option::of(
        (prop::array::uniform2(wild_f64()), any_state()).prop_map(|([lo, hi], s)| {
            let mut r = FeatureRanges::empty();
            r.include(&s);
            r.current_load = [lo, hi];
            r
        }),
    )
}

// ---------------------------------------------------------------------------------------
// Rule tables

/// Fields a rule may test, whether they are integers, and the values states and bounds
/// are drawn from (so that boundaries are hit often).
const RULE_FIELDS: [(&str, bool, &[f64]); 6] = [
    (
        "request_type",
        true,
        &[-1.0, 0.0, 1.0, 2.0, 3.0, 4.0, 5.0, 6.0],
    ),
    ("region_id", true, &[-1.0, 0.0, 2.0, 3.0, 5.0, 9.0, 10.0]),
    (
        "current_load",
        false,
        &[0.0, 0.3, 0.5, 0.8, 0.95, 1.0, 1.5, 7.0],
    ),
    ("recent_success_rate", false, &[0.0, 0.15, 0.5, 0.9, 1.0]),
    (
        "queue_depth",
        false,
        &[0.0, 10.0, 49.5, 50.0, 100.0, 1000.0],
    ),
    ("hour", true, &[0.0, 1.0, 5.0, 6.0, 12.0, 23.0, 24.0]),
];

/// One valid condition on field `f` of [`RULE_FIELDS`].
fn condition(f: usize) -> impl Strategy<Value = Condition> {
    let (_, integer, grid) = RULE_FIELDS[f];
    let bound = prop_oneof![select(grid.to_vec()), -2.0..1100.0f64];
    let set = if integer {
        prop::option::of(prop::collection::vec(-1..=24i64, 1..4)).boxed()
    } else {
        Just(None).boxed()
    };
    (0..3u8, 0..3u8, bound.clone(), bound, set).prop_map(|(lo_op, hi_op, a, b, one_of)| {
        let (mut lo, mut hi) = (a.min(b), a.max(b));
        let (mut lo_op, mut hi_op) = (lo_op, hi_op);
        if lo == hi && lo_op == 1 {
            lo_op = 2; // gt == lt / gte: an empty range; make it a point range
        }
        if lo == hi && hi_op == 1 {
            hi_op = 2;
        }
        if lo_op == 0 && hi_op == 0 && one_of.is_none() {
            (lo_op, hi_op) = (2, 2); // at least one condition
        }
        if lo_op == 0 || hi_op == 0 {
            // An open side makes any order of a and b non-empty; keep the drawn values.
            (lo, hi) = (a, b);
        }
        Condition {
            gt: (lo_op == 1).then_some(lo),
            gte: (lo_op == 2).then_some(lo),
            lt: (hi_op == 1).then_some(hi),
            lte: (hi_op == 2).then_some(hi),
            one_of,
        }
    })
}

fn rule(i: usize) -> impl Strategy<Value = Rule> {
    (
        prop::sample::subsequence((0..RULE_FIELDS.len()).collect::<Vec<_>>(), 1..=3),
        action(),
    )
        .prop_flat_map(move |(fields, a)| {
            let conds: Vec<_> = fields.iter().map(|&f| condition(f)).collect();
            (Just(fields), conds, Just(a))
        })
        .prop_map(move |(fields, conds, a)| Rule {
            name: format!("r{i}"),
            when: fields
                .iter()
                .map(|&f| RULE_FIELDS[f].0.to_string())
                .zip(conds)
                .collect(),
            action: a.name().to_string(),
        })
}

fn rule_table() -> impl Strategy<Value = RuleTableSpec> {
    (0..8usize)
        .prop_flat_map(|n| ((0..n).map(rule).collect::<Vec<_>>(), action()))
        .prop_map(|(mut rules, last)| {
            rules.push(Rule {
                name: "catch-all".into(),
                when: BTreeMap::new(),
                action: last.name().to_string(),
            });
            RuleTableSpec {
                version: "generated".into(),
                rules,
            }
        })
}

/// A valid state whose values often sit on the bounds rules use.
fn grid_state() -> impl Strategy<Value = State> {
    let pick = |f: usize, lo: f64, hi: f64| {
        let on_grid: Vec<f64> = RULE_FIELDS[f]
            .2
            .iter()
            .copied()
            .filter(|v| (lo..=hi).contains(v))
            .collect();
        prop_oneof![select(on_grid), lo..=hi]
    };
    (
        0..=5u8,
        0..=9u8,
        pick(2, 0.0, 10.0),
        pick(3, 0.0, 1.0),
        pick(4, 0.0, 2000.0),
        0..=23u8,
    )
        .prop_map(|(rt, region, load, success, queue, hour)| State {
            request_type: rt,
            region_id: region,
            current_load: load,
            recent_success_rate: success,
            queue_depth: queue,
            hour,
        })
}

/// Literal first-hit reading of the table: the first rule whose every condition holds.
/// `lookup` returns `None` for a field whose value is unknown; its conditions fail.
fn reference_rule(spec: &RuleTableSpec, lookup: impl Fn(&str) -> Option<f64>) -> Option<usize> {
    spec.rules.iter().position(|r| {
        r.when.iter().all(|(field, c)| {
            let Some(v) = lookup(field) else {
                return false;
            };
            let mut holds = true;
            if let Some(b) = c.gt {
                holds &= v > b;
            }
            if let Some(b) = c.gte {
                holds &= v >= b;
            }
            if let Some(b) = c.lt {
                holds &= v < b;
            }
            if let Some(b) = c.lte {
                holds &= v <= b;
            }
            if let Some(set) = &c.one_of {
                holds &= set.iter().any(|&i| i as f64 == v);
            }
            holds
        })
    })
}

// ---------------------------------------------------------------------------------------
// Laws

fn assert_probabilities(p: &[f64; NUM_ACTIONS]) -> Result<(), TestCaseError> {
    prop_assert!(
        p.iter().all(|v| v.is_finite() && (0.0..=1.0).contains(v)),
        "{p:?}"
    );
    prop_assert!((p.iter().sum::<f64>() - 1.0).abs() <= 1e-6, "{p:?}");
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    #[test]
    fn encoded_features_are_finite_and_within_range(s in valid_state()) {
        let x = encode(&s);
        prop_assert!(x.iter().all(|v| v.is_finite()), "{x:?}");
        prop_assert!((0.0..=1.0).contains(&x[0]));
        prop_assert_eq!(x[1], s.current_load.min(1.0));
        prop_assert_eq!(x[2], s.recent_success_rate);
        prop_assert_eq!(x[3], (s.queue_depth / 100.0).min(1.0));
        for v in &x[1..=3] {
            prop_assert!((0.0..=1.0).contains(v), "{x:?}");
        }
        for v in &x[4..=5] {
            prop_assert!((-1.0..=1.0).contains(v), "{x:?}");
        }
        let ones: Vec<usize> = (6..FEATURE_DIM).filter(|&i| x[i] == 1.0).collect();
        prop_assert_eq!(ones, vec![6 + s.region_id as usize]);
        prop_assert_eq!(x[6..].iter().sum::<f64>(), 1.0);
    }

    #[test]
    fn valid_states_pass_validation_unchanged(s in valid_state(), default_hour in any::<u8>()) {
        let parsed = State::parse_json(&s.to_value().to_string(), default_hour).unwrap();
        prop_assert_eq!(parsed, s);
    }

    #[test]
    fn texts_near_a_body_parse_or_name_the_problem(body in near_body(), default_hour in any::<u8>()) {
        match State::from_body(body.as_bytes(), default_hour) {
            Ok(st) => {
                prop_assert!(st.request_type <= 5 && st.region_id <= 9 && st.hour <= 23);
                prop_assert!(st.current_load.is_finite() && st.current_load >= 0.0);
                prop_assert!((0.0..=1.0).contains(&st.recent_success_rate));
                prop_assert!(st.queue_depth.is_finite() && st.queue_depth >= 0.0);
            }
            Err(e) => {
                // Only malformed text and a body that is not an object go without a field.
                let fieldless = matches!(e.code(), "invalid_json") || e.field().is_none() && e.code() == "invalid_type";
                prop_assert!(e.field().is_some() || fieldless, "{}: {:?}", body, e);
                match e.field() {
                    // A key given twice, wherever it is, is named by its path (`state.hour`,
                    // `[0].state.hour`), which ends in a key the text holds twice.
                    Some(f) if e.code() == "duplicate_field" => {
                        let last = f.rsplit('.').next().unwrap_or_default();
                        let written = decider_core::state::STATE_FIELDS
                            .into_iter()
                            .chain(["regoin_id", "", "Hour", "state"]);
                        prop_assert!(written.into_iter().any(|k| k == last), "{}: {}", body, f);
                    }
                    Some(f) => {
                        prop_assert!(f == "state" || f.starts_with("state.") || !f.contains('.'), "{}: {}", body, f);
                    }
                    None => {}
                }
            }
        }
    }

    #[test]
    fn decimals_are_read_as_the_standard_parser_reads_them(
        s in valid_state(),
        d in decimal(),
        field in 2..5usize,
    ) {
        // current_load, recent_success_rate or queue_depth: the fields that keep a fraction.
        let mut v = s.to_value();
        let name = decider_core::state::STATE_FIELDS[field];
        v[name] = serde_json::Value::Null;
        let body = format!("{{\"state\":{}}}", v.to_string().replace(&format!("\"{name}\":null"), &format!("\"{name}\":{d}")));
        let want: f64 = d.parse().unwrap();
        match State::from_body(body.as_bytes(), 0) {
            Ok(s) => {
                let got = [s.current_load, s.recent_success_rate, s.queue_depth][field - 2];
                prop_assert_eq!(got.to_bits(), want.to_bits(), "{}", body);
            }
            // Refused only when out of range, naming the field.
            Err(e) => {
                prop_assert!(want < 0.0 || (field == 3 && want > 1.0), "{} refused: {}", body, e);
                let want = format!("state.{name}");
                prop_assert_eq!(e.field(), Some(want.as_str()));
            }
        }
    }

    #[test]
    fn encoding_is_finite_even_for_unvalidated_states(s in any_state()) {
        prop_assert!(encode(&s).iter().all(|v| v.is_finite()));
    }

    #[test]
    fn tiny_and_shipped_models_probabilities_sum_to_one(s in valid_state()) {
        let x = encode(&s);
        let tiny = Model::from_json(TINY_ARTIFACT).unwrap();
        assert_probabilities(&tiny.predict(&x))?;
        if let Some(m) = shipped_model() {
            assert_probabilities(&m.predict(&x))?;
        }
    }

    #[test]
    fn tree_walk_matches_the_artifact_definition_bit_for_bit(
        trees in prop::collection::vec(any_shape_tree(), 0..40),
        xs in prop::collection::vec(any_features(), 1..8),
    ) {
        // Up to 40 trees: several groups of lanes, the last one partly filled.
        let mut a = tiny_artifact();
        a.model.trees = trees;
        let m = Model::from_artifact(a.clone()).expect("generated artifacts are valid");
        for x in &xs {
            let want = reference_margins(&a, x);
            prop_assert_eq!(m.margins(x).map(f64::to_bits), want.map(f64::to_bits));
        }
    }

    #[test]
    fn generated_models_probabilities_sum_to_one(m in generated_model(), s in valid_state()) {
        let x = encode(&s);
        let p = m.predict(&x);
        assert_probabilities(&p)?;
        prop_assert_eq!(m.top(&x), argmax(&p));
        // What the model says is usable by the policy as it stands.
        let o = ModelOutput::from_probabilities(p).unwrap();
        prop_assert_eq!(o.action, argmax(&p).0);
    }

    #[test]
    fn calibration_is_monotonic_in_temperature(
        a in generated_artifact(),
        s in valid_state(),
        t1 in 0.01..=100.0f64,
        t2 in 0.01..=100.0f64,
    ) {
        let (lo, hi) = (t1.min(t2), t1.max(t2));
        let with_t = |t: f64| {
            let mut a = a.clone();
            a.calibration.temperature = t;
            Model::from_artifact(a).unwrap()
        };
        let x = encode(&s);
        let (_, p_lo) = with_t(lo).top(&x);
        let (_, p_hi) = with_t(hi).top(&x);
        prop_assert!(p_hi <= p_lo, "T {lo} → {p_lo}, T {hi} → {p_hi}");
        prop_assert!(p_hi >= 1.0 / NUM_ACTIONS as f64 - 1e-12);
    }

    #[test]
    fn softmax_top_probability_never_rises_with_temperature(
        margins in prop::array::uniform4(-1e3..1e3f64),
        t1 in 1e-3..=100.0f64,
        t2 in 1e-3..=100.0f64,
    ) {
        let (lo, hi) = (t1.min(t2), t1.max(t2));
        let (p_lo, p_hi) = (softmax(&margins, lo), softmax(&margins, hi));
        assert_probabilities(&p_lo)?;
        assert_probabilities(&p_hi)?;
        prop_assert!(argmax(&p_hi).1 <= argmax(&p_lo).1);
    }

    #[test]
    fn probability_constructor_accepts_only_usable_vectors(p in prop::array::uniform4(wild_f64())) {
        match ModelOutput::from_probabilities(p) {
            Ok(o) => {
                prop_assert!(p.iter().all(|v| v.is_finite() && *v >= 0.0));
                prop_assert!(o.confidence.is_finite() && (0.0..=1.0).contains(&o.confidence));
                assert_probabilities(&o.probabilities.unwrap())?;
            }
            Err(ModelError::NonFinite(_)) => prop_assert!(p.iter().any(|v| !v.is_finite())),
            Err(_) => {}
        }
    }

    #[test]
    fn action_constructor_accepts_only_confidences_in_unit_range(a in action(), c in wild_f64()) {
        let ok = ModelOutput::from_action(a, c).is_ok();
        prop_assert_eq!(ok, c.is_finite() && (0.0..=1.0).contains(&c));
    }

    #[test]
    fn remote_answers_with_any_numbers_never_panic(p in prop::array::uniform4(wild_f64()), a in action()) {
        // serde_json turns NaN and infinities into null, as a JS bridge would.
        let answers = [
            serde_json::json!({"probabilities": p}),
            serde_json::json!({"result": p}),
            serde_json::json!({"probabilities": {"route_a": p[0], "route_b": p[1], "route_c": p[2], "reject": p[3]}}),
            serde_json::json!({"action": a.name(), "confidence": p[0]}),
        ];
        for v in answers {
            if let Ok(o) = ModelOutput::from_remote_json(&v) {
                prop_assert!(o.confidence.is_finite() && (0.0..=1.0).contains(&o.confidence));
                if let Some(p) = o.probabilities {
                    assert_probabilities(&p)?;
                }
            }
        }
    }

    #[test]
    fn decide_never_panics_and_stays_consistent(
        s in any_state(),
        outcome in any_outcome(),
        stale_signals in any::<bool>(),
        holdout in any::<bool>(),
        threshold in wild_f64(),
        default_action in action(),
        ood_check in any::<bool>(),
        shadow in any::<bool>(),
        with_rules in any::<bool>(),
        ranges in any_ranges(),
    ) {
        let table = Rules::from(RuleTable::from_json(DEFAULT_RULES_JSON).unwrap());
        let cfg = PolicyConfig { threshold, default_action, ood_check, shadow };
        let gates = Gates { stale_signals, holdout };
        let d = decide(
            Inputs {
                state: &s,
                outcome: &outcome,
                gates,
                rules: with_rules.then_some(&table),
                ranges: ranges.as_ref(),
                model_version: Some("m"),
            },
            &cfg,
        );
        serde_json::to_string(&d).unwrap();
        if stale_signals {
            prop_assert_eq!(d.fallback_reason, Some(FallbackReason::StaleSignals));
        } else if holdout {
            prop_assert_eq!(d.fallback_reason, Some(FallbackReason::Holdout));
        }
        match d.source {
            Source::Model => {
                prop_assert!(!shadow && d.fallback_reason.is_none());
                let ModelOutcome::Output(o) = &outcome else {
                    return Err(TestCaseError::fail("model decided without an output"));
                };
                prop_assert_eq!(d.action, o.action);
                prop_assert!(o.confidence >= threshold, "{} < {threshold}", o.confidence);
            }
            // The default table ends in a catch-all, so with it rules always decide.
            Source::Rules => prop_assert!(with_rules && d.rule.is_some()),
            Source::Default => {
                prop_assert!(!with_rules);
                prop_assert_eq!(d.action, default_action);
            }
        }
        prop_assert_eq!(d.shadow.is_some(), shadow);
    }

    #[test]
    fn rule_table_is_first_hit(spec in rule_table(), s in grid_state(), unknown in any::<[bool; 6]>()) {
        let table = RuleTable::from_spec(spec.clone())
            .map_err(|e| TestCaseError::fail(format!("generated table refused: {e}")))?;
        let hit = table.evaluate(&s).expect("the catch-all always decides");
        let want = reference_rule(&spec, |f| s.field(f)).expect("the catch-all matches");
        prop_assert_eq!(hit.rule, spec.rules[want].name.as_str());
        prop_assert_eq!(hit.action.name(), spec.rules[want].action.as_str());

        // With some fields unknown (stale signals), their conditions fail.
        let lookup = |f: &str| {
            let i = RULE_FIELDS.iter().position(|(n, _, _)| *n == f)?;
            if unknown[i] { None } else { s.field(f) }
        };
        let hit = table.evaluate_with(lookup).expect("the catch-all always decides");
        let want = reference_rule(&spec, lookup).expect("the catch-all matches");
        prop_assert_eq!(hit.rule, spec.rules[want].name.as_str());
    }
}

//! Rule-table JSON → load. A loaded table must decide every valid state (its last rule is a
//! catch-all), pick exactly the rule a literal first-hit reading picks — on sample states
//! and on states sitting on and next to each bound in the table — and fall through to the
//! catch-all when every field is unknown.
#![no_main]

use decider_core::rules::RuleTableSpec;
use decider_core::{RuleTable, State};
use decider_fuzz::{reference_rule, sample_states, with_field};
use libfuzzer_sys::fuzz_target;

fn check(table: &RuleTable, spec: &RuleTableSpec, s: &State) {
    let hit = table.evaluate(s).expect("a valid table always decides");
    let want = &spec.rules[reference_rule(spec, s).expect("the catch-all matches")];
    assert_eq!(hit.rule, want.name, "{s:?}");
    assert_eq!(hit.action.name(), want.action, "{s:?}");
}

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    let table = match RuleTable::from_json(text) {
        Ok(t) => t,
        Err(e) => {
            assert!(!e.to_string().is_empty());
            return;
        }
    };
    let spec: RuleTableSpec = serde_json::from_str(text).expect("a loaded table parses");
    assert_eq!(table.len(), spec.rules.len());
    assert!(spec.rules.last().is_some_and(|r| r.when.is_empty()));
    let all_unknown = table.evaluate_with(|_| None).expect("catch-all decides");
    assert_eq!(all_unknown.rule, spec.rules[spec.rules.len() - 1].name);

    let samples = sample_states();
    for s in &samples {
        check(&table, &spec, s);
    }
    let mut probes = 0;
    for rule in &spec.rules {
        for (field, c) in &rule.when {
            let set = c.one_of.iter().flatten().map(|&i| i as f64);
            for b in [c.gt, c.gte, c.lt, c.lte].into_iter().flatten().chain(set) {
                for v in [b, b.next_down(), b.next_up()] {
                    if let Some(s) = with_field(samples[1], field, v) {
                        check(&table, &spec, &s);
                    }
                }
                probes += 1;
                if probes > 64 {
                    return;
                }
            }
        }
    }
});

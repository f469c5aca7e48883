//! Bytes → the record reader, as `decider report`, `decider ope` and `decider train --logs`
//! read every log line. Laws: nothing panics; every record handed on reads back the same
//! after it is written again (the writer and the reader are one codec); a refused record
//! names its field or is malformed JSON; counts add up.
#![no_main]

use decider_core::record::{Reader, Record};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let mut reader = Reader::new(3);
    let mut records = Vec::new();
    let found = reader.read_unit(data, "fuzz:1", &mut |r| records.push(r));
    assert_eq!(found.records as usize, records.len());
    for r in &records {
        let line = r.to_line();
        let back = Record::from_line(&line).expect("a record read reads back when written");
        // A long decision line may drop its probabilities to fit; everything else stays.
        match (r, &back) {
            (Record::Decision(a), Record::Decision(b)) => {
                assert_eq!((a.state, a.action, a.propensity, a.arm), (b.state, b.action, b.propensity, b.arm));
                assert_eq!(a.outcome, b.outcome);
            }
            (a, b) => assert_eq!(a, b),
        }
    }
    for e in &found.bad {
        assert!(e.field().is_some() || e.code() == "invalid_type", "{e:?}");
    }
    let s = reader.stats();
    assert_eq!(s.decisions + s.outcomes, found.records as u64);
});

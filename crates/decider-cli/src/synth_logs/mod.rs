//! Deterministic synthetic Worker logs, for `decider report` and its tests and benchmarks.
//!
//! [`write()`] writes `lines` log lines mixing what a Worker's logs hold:
//! - decision records on both endpoints, with every source, fallback reason and rollout arm;
//!   routed ones carry their outcome (origin, status, latency, failover, attempts);
//! - outcome records for `/v1/decide` decisions, written when they fall due (0.05–5 s after
//!   their decision, so they come late and interleaved), 1% of them twice (a caller retrying
//!   its `POST /v1/outcome`), and orphans (outcomes for decisions these logs do not hold);
//! - the noise `wrangler dev` prints around them: request lines, start-up banners, blank
//!   lines, lines cut short, and records with one out-of-range field.
//!
//! Every record line is a [`DecisionRecord`](decider_core::record::DecisionRecord) or
//! [`OutcomeRecord`](decider_core::record::OutcomeRecord) value written with the
//! record codec, the Worker's own writer
//! ([`DecisionRecord::to_line`](decider_core::record::DecisionRecord::to_line)); a bad record is
//! a record value holding an out-of-range field (an hour of 24, a reward of 1.5), written
//! the same way. The same [`Options`] give the same bytes.
//!
//! [`Scenario`]s give the statistics a shape that `decider report` should see; [`Format`]s
//! put each line in the envelope of a log source.

use crate::CliError;
use std::io::{BufWriter, Write};

mod envelope;
mod gen;
mod options;

use envelope::Envelope;
use gen::Gen;
pub use options::{Format, Options, Scenario, Written, CHALLENGER, CHAMPION, RULES, START_MS};

/// Writes `opts.lines` lines of synthetic logs to `out` (see the [module docs](self)).
///
/// # Errors
/// [`CliError::Usage`] for options out of range (nothing is written), [`CliError::Io`] when
/// `out` fails.
pub fn write<W: Write>(opts: &Options, out: W) -> Result<Written, CliError> {
    opts.check()?;
    let mut out = BufWriter::with_capacity(1 << 16, out);
    let mut gen = Gen::new(*opts);
    let mut envelope = Envelope::new(opts.format, opts.seed);
    envelope.open(&mut out)?;
    for i in 0..opts.lines {
        let ms = START_MS + gen.t_us / 1000;
        let (line, object) = gen.next_line(i);
        envelope.put(&mut out, &line, object, ms)?;
    }
    envelope.close(&mut out)?;
    out.flush()?;
    Ok(gen.written)
}

/// [`write()`], gzip-compressed (with no name and a zero modification time in the header, so
/// the same options still give the same bytes).
///
/// # Errors
/// As [`write()`].
pub fn write_gzip<W: Write>(opts: &Options, out: W) -> Result<Written, CliError> {
    // Checked before the encoder exists: dropped, it would still write an empty stream.
    opts.check()?;
    let mut gz = flate2::write::GzEncoder::new(out, flate2::Compression::default());
    let written = write(opts, &mut gz)?;
    gz.finish()?.flush()?;
    Ok(written)
}

#[cfg(test)]
mod tests {
    use super::options::iso_ms;
    use super::*;

    #[test]
    fn times_carry_milliseconds() {
        assert_eq!(iso_ms(START_MS), "2026-12-02T10:00:00.000Z");
        assert_eq!(iso_ms(START_MS + 3_723_045), "2026-12-02T11:02:03.045Z");
    }

    #[test]
    fn options_out_of_range_are_refused_naming_the_option() {
        for (opts, name) in [
            (
                Options {
                    lines: 0,
                    ..Options::default()
                },
                "lines",
            ),
            (
                Options {
                    rate: 0.0,
                    ..Options::default()
                },
                "rate",
            ),
            (
                Options {
                    rate: f64::INFINITY,
                    ..Options::default()
                },
                "rate",
            ),
            (
                Options {
                    rate: 1e-6,
                    ..Options::default()
                },
                "rate",
            ),
            (
                Options {
                    noise: 1.0,
                    ..Options::default()
                },
                "noise",
            ),
        ] {
            let mut out = Vec::new();
            let e = write(&opts, &mut out).unwrap_err();
            assert!(e.to_string().starts_with(name), "{e}");
            assert!(out.is_empty());
        }
    }

    #[test]
    fn names_round_trip() {
        for s in Scenario::ALL {
            assert_eq!(Scenario::parse_name(s.name()), Some(s));
        }
        for f in Format::ALL {
            assert_eq!(Format::parse_name(f.name()), Some(f));
        }
        assert_eq!(Scenario::parse_name("calm"), None);
    }
}

//! `--latency-log FILE`: every measured request as a CSV row, for lining requests up with
//! a target's own logs.

use anyhow::Context as _;
use std::fs::File;
use std::io::{BufWriter, Write};
use std::path::{Path, PathBuf};

/// The first line of a `--latency-log` file.
pub(super) const LATENCY_LOG_HEADER: &str = "target,rate,scheduled_unix_us,latency_us,outcome";

/// One measured request, for `--latency-log`.
#[derive(Debug, Clone, Copy)]
pub(super) struct Record {
    /// Index of its target, in `--url` order.
    pub(super) target: usize,
    /// When it was scheduled to be sent, µs since the Unix epoch.
    pub(super) scheduled_unix_us: u64,
    /// From its scheduled send time to the end of the response body (or the failure), µs.
    pub(super) latency_us: u64,
    pub(super) outcome: RecordOutcome,
}

/// How a logged request ended.
#[derive(Debug, Clone, Copy)]
pub(super) enum RecordOutcome {
    Status(u16),
    Failed(&'static str),
}

impl std::fmt::Display for RecordOutcome {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            RecordOutcome::Status(s) => write!(f, "{s}"),
            RecordOutcome::Failed(kind) => f.write_str(kind),
        }
    }
}

/// An open `--latency-log` file.
pub(super) struct LatencyLog {
    path: PathBuf,
    w: BufWriter<File>,
}

fn log_error(p: &Path) -> String {
    format!("cannot write --latency-log {}", p.display())
}

impl LatencyLog {
    /// Creates (or truncates) the file and writes the header. Called before any load, so a
    /// bad path fails the run at once.
    pub(super) fn create(path: &Path) -> anyhow::Result<LatencyLog> {
        let f = File::create(path).with_context(|| log_error(path))?;
        let mut w = BufWriter::new(f);
        writeln!(w, "{LATENCY_LOG_HEADER}").with_context(|| log_error(path))?;
        Ok(LatencyLog {
            path: path.to_path_buf(),
            w,
        })
    }

    /// Appends one step's records.
    pub(super) fn write_step(&mut self, rate: f64, records: Vec<Record>) -> anyhow::Result<()> {
        write_records(&mut self.w, rate, records)
    }

    /// Flushes what is buffered.
    pub(super) fn finish(mut self) -> anyhow::Result<()> {
        self.w.flush().with_context(|| log_error(&self.path))
    }
}

/// Appends one step's records, in schedule order, as CSV rows.
fn write_records(w: &mut impl Write, rate: f64, mut records: Vec<Record>) -> anyhow::Result<()> {
    // The records come in the order the requests finished.
    records.sort_by_key(|r| (r.scheduled_unix_us, r.target));
    for r in &records {
        writeln!(
            w,
            "{},{rate},{},{},{}",
            r.target, r.scheduled_unix_us, r.latency_us, r.outcome
        )
        .context("cannot write --latency-log")?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::commands::loadtest::{plan, StepSpec};
    use crate::loadtest::execute;
    use crate::loadtest::testing::{args, report, server};
    use std::time::{Duration, SystemTime, UNIX_EPOCH};

    #[test]
    fn records_are_written_in_schedule_order() {
        let rec = |target, scheduled_unix_us, latency_us, outcome| Record {
            target,
            scheduled_unix_us,
            latency_us,
            outcome,
        };
        let records = vec![
            rec(1, 2_000, 7, RecordOutcome::Failed("timeout")),
            rec(1, 1_000, 5, RecordOutcome::Status(503)),
            rec(0, 1_000, 3, RecordOutcome::Status(200)),
        ];
        let mut out = Vec::new();
        write_records(&mut out, 12.5, records).unwrap();
        assert_eq!(
            String::from_utf8(out).unwrap(),
            "0,12.5,1000,3,200\n1,12.5,1000,5,503\n1,12.5,2000,7,timeout\n"
        );
    }

    #[test]
    fn the_latency_log_has_every_measured_request_on_its_schedule() {
        fn fast(_: u64) -> (u16, Duration, Option<&'static str>) {
            (200, Duration::ZERO, Some("model"))
        }
        fn slow_failing(_: u64) -> (u16, Duration, Option<&'static str>) {
            (503, Duration::from_millis(30), None)
        }
        let dir = std::env::temp_dir().join(format!("loadtest-log-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("latency.csv");
        let urls = [server(fast), server(slow_failing)].map(|a| format!("http://{a}/x"));
        let mut a = args(urls[0].clone());
        a.url = urls.to_vec();
        a.step = Some(StepSpec {
            start: 50.0,
            end: 100.0,
            step: 50.0,
        });
        a.duration = Duration::from_millis(400);
        a.warmup = Duration::from_millis(100);
        a.no_stop_at_knee = true;
        a.latency_log = Some(path.clone());
        let before = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .unwrap()
            .as_micros() as u64;
        let r = report(&a);
        let after = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .unwrap()
            .as_micros() as u64;
        let text = std::fs::read_to_string(&path).unwrap();
        let mut lines = text.lines();
        assert_eq!(lines.next(), Some(LATENCY_LOG_HEADER));
        let rows: Vec<Vec<&str>> = lines.map(|l| l.split(',').collect()).collect();
        // The warmup is not written: 20 + 40 requests per target, in the two steps.
        assert_eq!(rows.len(), 2 * (20 + 40), "{text}");
        for (target, rate, n, outcome) in [
            (0, 50, 20, "200"),
            (0, 100, 40, "200"),
            (1, 50, 20, "503"),
            (1, 100, 40, "503"),
        ] {
            let mine: Vec<&Vec<&str>> = rows
                .iter()
                .filter(|c| c[0] == target.to_string() && c[1] == rate.to_string())
                .collect();
            assert_eq!(mine.len(), n, "target {target} at {rate}/s");
            assert!(mine.iter().all(|c| c[4] == outcome), "{mine:?}");
            // Scheduled times are the schedule's, on the wall clock of the run: the turn order
            // rotates each round, so a target's requests come two per 2/rate.
            let at: Vec<u64> = mine.iter().map(|c| c[2].parse().unwrap()).collect();
            assert!(at.iter().all(|t| (before..=after).contains(t)), "{at:?}");
            let gap = 2_000_000 / rate as u64;
            assert!(
                at.windows(3)
                    .all(|w| w[2] - w[0] >= gap - 2 && w[2] - w[0] <= gap + 2),
                "{at:?}"
            );
            let lat: Vec<u64> = mine.iter().map(|c| c[3].parse().unwrap()).collect();
            if target == 1 {
                assert!(lat.iter().all(|l| *l >= 30_000), "{lat:?}");
            }
        }
        // The log agrees with the report: the same count and the same slowest request.
        let max0 = rows
            .iter()
            .filter(|c| c[0] == "0" && c[1] == "100")
            .map(|c| c[3].parse::<u64>().unwrap())
            .max()
            .unwrap();
        let step = &r.targets[0].steps[1];
        assert_eq!(step.responses, 40);
        let reported = step.latency.unwrap().max_us;
        assert!(
            max0.abs_diff(reported) <= reported / 500 + 1,
            "log {max0} vs histogram {reported}"
        );
        // Rows are in schedule order.
        let all: Vec<u64> = rows.iter().map(|c| c[2].parse().unwrap()).collect();
        assert!(all.windows(2).all(|w| w[0] <= w[1]));

        // A path that cannot be written fails the run before any load.
        let mut bad = args(urls[0].clone());
        bad.latency_log = Some(dir.join("no-such-dir").join("x.csv"));
        let err = execute(&plan(&bad).unwrap()).unwrap_err();
        assert!(
            format!("{err:#}").contains("cannot write --latency-log"),
            "{err:#}"
        );
        std::fs::remove_dir_all(&dir).unwrap();
    }
}

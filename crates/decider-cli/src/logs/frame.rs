//! Framing (lines, pretty-printed values, JSON arrays, gzip) and envelope unwrapping.
//!
//! A line is one unit unless it is a lone `{` or `[` — how `JSON.stringify(v, null, 2)`,
//! jq and Python's `json.dump(indent=…)` open a pretty-printed value. Then the value is
//! gathered over the following lines by bracket depth; an array is streamed element by
//! element, so a multi-gigabyte export is never held whole. A lone unindented `{` inside
//! a value that never closed starts over: the value before it was truncated.

use super::multi::Multi;
use super::{ReadOptions, ReadStats, Record, SkipReason};
use decider_core::record::Reader;
use flate2::read::MultiGzDecoder;
use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};
use std::cell::Cell;
use std::fs::File;
use std::io::{self, BufRead, BufReader, IsTerminal, Read};
use std::path::Path;
use std::rc::Rc;

const BUF_BYTES: usize = 256 << 10;

/// Streams records out of log files; see the [module docs](super).
pub struct LogReader {
    opts: ReadOptions,
    reader: Reader,
    bar: ProgressBar,
    read_before: u64,
}

struct Counting<R> {
    inner: R,
    n: Rc<Cell<u64>>,
}

impl<R: Read> Read for Counting<R> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let k = self.inner.read(buf)?;
        self.n.set(self.n.get() + k as u64);
        Ok(k)
    }
}

impl LogReader {
    /// A reader with no input read yet.
    pub fn new(opts: ReadOptions) -> LogReader {
        LogReader {
            reader: Reader::new(opts.samples_per_reason),
            opts,
            bar: ProgressBar::hidden(),
            read_before: 0,
        }
    }

    /// What has been read so far.
    pub fn stats(&self) -> &ReadStats {
        self.reader.stats()
    }

    /// The counters, consuming the reader.
    pub fn into_stats(self) -> ReadStats {
        self.bar.finish_and_clear();
        self.reader.into_stats()
    }

    /// Reads every path in order (`-` is stdin), handing each record to `visit`.
    ///
    /// # Errors
    /// A path that cannot be opened, named in the message. Unreadable content is counted
    /// as [`SkipReason::ReadError`] instead.
    pub fn read_paths<P: AsRef<Path>>(
        &mut self,
        paths: &[P],
        visit: &mut dyn FnMut(Record),
    ) -> io::Result<()> {
        let mut files = Vec::with_capacity(paths.len());
        let mut total = 0u64;
        for p in paths {
            let p = p.as_ref();
            if p.as_os_str() == "-" {
                files.push(None);
                continue;
            }
            let f = File::open(p).map_err(|e| named(p, e))?;
            let meta = f.metadata().map_err(|e| named(p, e))?;
            if meta.is_dir() {
                return Err(named(p, io::Error::other("is a directory")));
            }
            total += meta.len();
            files.push(Some(f));
        }
        if self.opts.progress && std::io::stderr().is_terminal() {
            let bar = ProgressBar::with_draw_target(Some(total), ProgressDrawTarget::stderr());
            if let Ok(style) = ProgressStyle::with_template(
                "{spinner} reading logs {bar:30} {binary_bytes}/{binary_total_bytes} [{elapsed}]",
            ) {
                bar.set_style(style);
            }
            self.bar = bar;
        }
        for (p, f) in paths.iter().zip(files) {
            let name = p.as_ref().display().to_string();
            match f {
                Some(f) => self.read_stream(&name, f, visit)?,
                None => self.read_stream("stdin", io::stdin().lock(), visit)?,
            }
        }
        self.bar.finish_and_clear();
        Ok(())
    }

    /// Reads one input (plain or gzip), handing each record to `visit`.
    ///
    /// # Errors
    /// None yet: a read failure is counted as [`SkipReason::ReadError`] and ends this input.
    /// The `io::Result` leaves room for callers that want to stop instead.
    pub fn read_stream<R: Read>(
        &mut self,
        name: &str,
        input: R,
        visit: &mut dyn FnMut(Record),
    ) -> io::Result<()> {
        self.reader.stats_mut().files += 1;
        let count = Rc::new(Cell::new(0u64));
        let mut head = BufReader::with_capacity(
            BUF_BYTES,
            Counting {
                inner: input,
                n: count.clone(),
            },
        );
        let gzip = match head.fill_buf() {
            Ok(b) => b.starts_with(&[0x1f, 0x8b]),
            Err(e) => {
                self.skip(SkipReason::ReadError, name, 0, &format!("read error: {e}"));
                return Ok(());
            }
        };
        if gzip {
            let body = BufReader::with_capacity(BUF_BYTES, MultiGzDecoder::new(head));
            self.lines(name, body, &count, visit);
        } else {
            self.lines(name, head, &count, visit);
        }
        self.read_before += count.get();
        self.reader.stats_mut().bytes += count.get();
        self.bar.set_position(self.read_before);
        Ok(())
    }

    fn lines<R: BufRead>(
        &mut self,
        name: &str,
        mut r: R,
        count: &Cell<u64>,
        visit: &mut dyn FnMut(Record),
    ) {
        let max = self.opts.max_value_bytes;
        let mut line = Vec::with_capacity(4096);
        let mut multi: Option<Multi> = None;
        let mut lineno = 0u64;
        loop {
            line.clear();
            let got = (&mut r).take(max as u64 + 1).read_until(b'\n', &mut line);
            match got {
                Ok(0) => break,
                Ok(_) => {}
                Err(e) => {
                    self.skip(
                        SkipReason::ReadError,
                        name,
                        lineno + 1,
                        &format!("read error: {e}"),
                    );
                    break;
                }
            }
            lineno += 1;
            self.reader.stats_mut().lines += 1;
            if lineno.is_multiple_of(16_384) {
                self.bar.set_position(self.read_before + count.get());
            }
            if line.len() > max && line.last() != Some(&b'\n') {
                // Drop the rest of the line unread into memory.
                if let Err(e) = r.skip_until(b'\n') {
                    self.skip(
                        SkipReason::ReadError,
                        name,
                        lineno,
                        &format!("read error: {e}"),
                    );
                    break;
                }
                if let Some(m) = multi.take() {
                    self.skip(
                        SkipReason::TooLong,
                        name,
                        m.start_line,
                        "JSON value over the size limit",
                    );
                }
                self.skip(
                    SkipReason::TooLong,
                    name,
                    lineno,
                    &format!("line longer than {max} bytes"),
                );
                continue;
            }
            let trimmed = line.trim_ascii();
            if let Some(m) = &multi {
                if (trimmed == b"{" || trimmed == b"[")
                    && line[0] == trimmed[0]
                    && m.depth > m.level
                {
                    let start = m.start_line;
                    multi = None;
                    self.skip(SkipReason::NotJson, name, start, "JSON value never closed");
                }
            }
            if multi.is_none() {
                if trimmed.is_empty() {
                    continue;
                }
                if trimmed == b"{" || trimmed == b"[" {
                    multi = Some(Multi::new(u32::from(trimmed == b"["), lineno));
                } else {
                    self.unit(&line, name, lineno, visit);
                    continue;
                }
            }
            if let Some(m) = multi.as_mut() {
                let done = m.feed(&line, lineno, max, &mut |elem, overflow, at| {
                    if overflow {
                        self.skip(
                            SkipReason::TooLong,
                            name,
                            at,
                            "JSON value over the size limit",
                        );
                    } else {
                        self.unit(elem, name, at, visit);
                    }
                });
                if done {
                    multi = None;
                }
            }
        }
        if let Some(m) = multi {
            self.skip(
                SkipReason::NotJson,
                name,
                m.start_line,
                "JSON value never closed",
            );
        }
    }

    /// One line or one gathered value: a record, an envelope of records, or a skip.
    fn unit(&mut self, text: &[u8], name: &str, at: u64, visit: &mut dyn FnMut(Record)) {
        self.reader.read_unit(text, &format!("{name}:{at}"), visit);
    }

    fn skip(&mut self, reason: SkipReason, name: &str, at: u64, msg: &str) {
        self.reader.skip(reason, &format!("{name}:{at}"), msg);
    }
}

fn named(p: &Path, e: io::Error) -> io::Error {
    io::Error::new(e.kind(), format!("{}: {e}", p.display()))
}

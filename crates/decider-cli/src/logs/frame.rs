//! Framing (lines, pretty-printed values, JSON arrays, gzip) and envelope unwrapping.
//!
//! A line is one unit unless it is a lone `{` or `[` — how `JSON.stringify(v, null, 2)`,
//! jq and Python's `json.dump(indent=…)` open a pretty-printed value. Then the value is
//! gathered over the following lines by bracket depth; an array is streamed element by
//! element, so a multi-gigabyte export is never held whole. A lone unindented `{` inside
//! a value that never closed starts over: the value before it was truncated.

use super::multi::Multi;
use super::raw::{Lax, RawLine, Scalar};
use super::record::{is_record, to_record};
use super::{ReadOptions, ReadStats, Record, SkipReason};
use flate2::read::MultiGzDecoder;
use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};
use serde::Deserialize;
use std::cell::Cell;
use std::fs::File;
use std::io::{self, BufRead, BufReader, IsTerminal, Read};
use std::path::Path;
use std::rc::Rc;

/// How deep envelopes may nest (tail event → message string → record is depth 2).
const MAX_ENVELOPE_DEPTH: u32 = 6;
const BUF_BYTES: usize = 256 << 10;

/// Streams records out of log files; see the [module docs](super).
pub struct LogReader {
    opts: ReadOptions,
    stats: ReadStats,
    bar: ProgressBar,
    read_before: u64,
}

/// Records and bad records found in one unit.
#[derive(Default)]
struct Tally {
    found: u32,
    bad: u32,
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
            opts,
            stats: ReadStats::default(),
            bar: ProgressBar::hidden(),
            read_before: 0,
        }
    }

    /// What has been read so far.
    pub fn stats(&self) -> &ReadStats {
        &self.stats
    }

    /// The counters, consuming the reader.
    pub fn into_stats(self) -> ReadStats {
        self.bar.finish_and_clear();
        self.stats
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
        self.stats.files += 1;
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
        self.stats.bytes += count.get();
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
            self.stats.lines += 1;
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
        let text = text.trim_ascii_end();
        let mut tally = Tally::default();
        let first = text
            .iter()
            .position(|c| !c.is_ascii_whitespace())
            .unwrap_or(0);
        if text.get(first) == Some(&b'[') {
            let mut de = serde_json::Deserializer::from_slice(&text[first..]);
            if let Ok(items) = Lax::<Box<RawLine<'_>>>::deserialize(&mut de) {
                self.walk_lax(&items, 0, &mut tally, name, at, visit);
                return self.end_unit(&tally, name, at);
            }
        }
        let Some(brace) = text.iter().position(|&c| c == b'{') else {
            return self.skip(SkipReason::NotJson, name, at, "no JSON object on the line");
        };
        // Checking UTF-8 once for the whole line is much cheaper than serde_json checking
        // each string of a byte slice; invalid UTF-8 goes the slice way for its message.
        let parsed = match std::str::from_utf8(&text[brace..]) {
            Ok(s) => RawLine::deserialize(&mut serde_json::Deserializer::from_str(s)),
            Err(_) => {
                RawLine::deserialize(&mut serde_json::Deserializer::from_slice(&text[brace..]))
            }
        };
        match parsed {
            Ok(raw) => self.walk(&raw, 0, &mut tally, name, at, visit),
            Err(e) => {
                let reason = if e.classify() == serde_json::error::Category::Data {
                    SkipReason::BadRecord
                } else {
                    SkipReason::NotJson
                };
                return self.skip(reason, name, at, &e.to_string());
            }
        }
        self.end_unit(&tally, name, at);
    }

    fn end_unit(&mut self, tally: &Tally, name: &str, at: u64) {
        if tally.found == 0 && tally.bad == 0 {
            self.skip(
                SkipReason::NotARecord,
                name,
                at,
                "no decision or outcome record in this JSON value",
            );
        }
    }

    fn walk(
        &mut self,
        raw: &RawLine<'_>,
        depth: u32,
        tally: &mut Tally,
        name: &str,
        at: u64,
        visit: &mut dyn FnMut(Record),
    ) {
        if is_record(raw) {
            match to_record(raw) {
                Ok(rec) => {
                    tally.found += 1;
                    match rec {
                        Record::Decision(_) => self.stats.decisions += 1,
                        Record::Outcome(_) => self.stats.outcomes += 1,
                    }
                    visit(rec);
                }
                Err(b) => {
                    tally.bad += 1;
                    self.skip(SkipReason::BadRecord, name, at, &b.to_string());
                }
            }
            return;
        }
        if depth >= MAX_ENVELOPE_DEPTH {
            return;
        }
        for logs in [&raw.logs, &raw.logs_logpush].into_iter().flatten() {
            let Lax::Seq(entries) = logs else { continue };
            for entry in entries {
                let Lax::Map(entry) = entry else { continue };
                for msg in [&entry.message, &entry.message_logpush]
                    .into_iter()
                    .flatten()
                {
                    self.walk_lax(msg, depth + 1, tally, name, at, visit);
                }
            }
        }
        let before = (tally.found, tally.bad);
        if let Some(source) = &raw.source {
            self.walk_lax(source, depth + 1, tally, name, at, visit);
        }
        // Workers Logs keeps the raw text in $metadata.message; read it only when the
        // parsed `source` held no record (good or bad), or a record would count twice.
        if (tally.found, tally.bad) == before {
            if let Some(Lax::Map(meta)) = &raw.metadata {
                if let Some(Scalar::Str(s)) = &meta.message {
                    self.text(s, depth + 1, tally, name, at, visit);
                }
            }
        }
        for inner in [&raw.result, &raw.events].into_iter().flatten() {
            self.walk_lax(inner, depth + 1, tally, name, at, visit);
        }
    }

    fn walk_lax(
        &mut self,
        v: &Lax<'_, Box<RawLine<'_>>>,
        depth: u32,
        tally: &mut Tally,
        name: &str,
        at: u64,
        visit: &mut dyn FnMut(Record),
    ) {
        match v {
            Lax::Map(raw) => self.walk(raw, depth, tally, name, at, visit),
            Lax::Seq(items) => {
                for item in items {
                    if !matches!(item, Lax::Seq(_)) {
                        self.walk_lax(item, depth, tally, name, at, visit);
                    }
                }
            }
            Lax::Scalar(Scalar::Str(s)) => self.text(s, depth, tally, name, at, visit),
            Lax::Scalar(_) => {}
        }
    }

    /// A message string inside an envelope: our line, possibly after a prefix.
    fn text(
        &mut self,
        s: &str,
        depth: u32,
        tally: &mut Tally,
        name: &str,
        at: u64,
        visit: &mut dyn FnMut(Record),
    ) {
        let Some(brace) = s.find('{') else { return };
        let mut de = serde_json::Deserializer::from_str(&s[brace..]);
        if let Ok(raw) = RawLine::deserialize(&mut de) {
            self.walk(&raw, depth, tally, name, at, visit);
        }
    }

    fn skip(&mut self, reason: SkipReason, name: &str, at: u64, msg: &str) {
        let kept = self.stats.skipped.get(reason);
        self.stats.skipped.add(reason);
        if kept < self.opts.samples_per_reason as u64 {
            let mut msg = msg.to_owned();
            if msg.len() > 200 {
                let cut = (0..=200)
                    .rev()
                    .find(|&i| msg.is_char_boundary(i))
                    .unwrap_or(0);
                msg.truncate(cut);
                msg.push('…');
            }
            self.stats
                .samples
                .push(format!("{name}:{at}: {}: {msg}", reason.name()));
        }
    }
}

fn named(p: &Path, e: io::Error) -> io::Error {
    io::Error::new(e.kind(), format!("{}: {e}", p.display()))
}

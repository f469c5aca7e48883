//! The envelopes of the log sources a [`Format`] names: each line as `wrangler dev` prints it,
//! as a `wrangler tail --format json` event, a Logpush `workers_trace_events` line, or an
//! entry of a Workers Logs export.

use super::options::Format;
use crate::rng::Rng;
use serde::Serialize;
use std::io::{self, Write};

/// Puts lines into the envelope of a log source.
pub(super) struct Envelope {
    format: Format,
    /// Ray ids and event ids: its own stream, so every format holds the same records.
    rng: Rng,
    first: bool,
}

/// A `wrangler tail --format json` event.
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct TailEvent<'a> {
    outcome: &'a str,
    script_name: &'a str,
    diagnostics_channel_events: [(); 0],
    exceptions: [(); 0],
    logs: [TailLog<'a>; 1],
    event_timestamp: i64,
    event: TailTrigger<'a>,
}

#[derive(Serialize)]
struct TailLog<'a> {
    message: [&'a str; 1],
    level: &'a str,
    timestamp: i64,
}

#[derive(Serialize)]
struct TailTrigger<'a> {
    request: TailRequest<'a>,
}

#[derive(Serialize)]
struct TailRequest<'a> {
    url: &'a str,
    method: &'a str,
    headers: Empty,
}

/// `{}`.
#[derive(Serialize)]
struct Empty {}

/// A Logpush `workers_trace_events` event.
#[derive(Serialize)]
#[serde(rename_all = "PascalCase")]
struct LogpushEvent<'a> {
    dispatch_namespace: &'a str,
    event: LogpushRay,
    event_timestamp_ms: i64,
    event_type: &'a str,
    exceptions: [(); 0],
    logs: [LogpushLog<'a>; 1],
    outcome: &'a str,
    script_name: &'a str,
    script_tags: [(); 0],
}

#[derive(Serialize)]
struct LogpushRay {
    #[serde(rename = "RayID")]
    ray_id: String,
}

#[derive(Serialize)]
#[serde(rename_all = "PascalCase")]
struct LogpushLog<'a> {
    level: &'a str,
    message: [&'a str; 1],
    timestamp_ms: i64,
}

impl Envelope {
    pub(super) fn new(format: Format, seed: u64) -> Envelope {
        Envelope {
            format,
            // "envelope" in ASCII: a stream apart from the records' for any seed.
            rng: Rng::new(seed ^ 0x656E_7665_6C6F_7065),
            first: true,
        }
    }

    pub(super) fn open(&mut self, out: &mut impl Write) -> io::Result<()> {
        match self.format {
            Format::WorkersLogs => out.write_all(b"[\n"),
            _ => Ok(()),
        }
    }

    /// Writes `line` (a JSON object when `object`) logged at `ms`.
    pub(super) fn put(
        &mut self,
        out: &mut impl Write,
        line: &str,
        object: bool,
        ms: i64,
    ) -> io::Result<()> {
        match self.format {
            Format::Dev => {
                out.write_all(line.as_bytes())?;
                out.write_all(b"\n")
            }
            Format::Tail => {
                let ev = TailEvent {
                    outcome: "ok",
                    script_name: "edge-decider",
                    diagnostics_channel_events: [],
                    exceptions: [],
                    logs: [TailLog {
                        message: [line],
                        level: "log",
                        timestamp: ms,
                    }],
                    event_timestamp: ms,
                    event: TailTrigger {
                        request: TailRequest {
                            url: "https://edge.example/v1/decide",
                            method: "POST",
                            headers: Empty {},
                        },
                    },
                };
                serde_json::to_writer_pretty(&mut *out, &ev)?;
                out.write_all(b"\n")
            }
            Format::Logpush => {
                let ev = LogpushEvent {
                    dispatch_namespace: "",
                    event: LogpushRay {
                        ray_id: format!("{:016x}", self.rng.next_u64()),
                    },
                    event_timestamp_ms: ms,
                    event_type: "fetch",
                    exceptions: [],
                    logs: [LogpushLog {
                        level: "log",
                        message: [line],
                        timestamp_ms: ms,
                    }],
                    outcome: "ok",
                    script_name: "edge-decider",
                    script_tags: [],
                };
                serde_json::to_writer(&mut *out, &ev)?;
                out.write_all(b"\n")
            }
            Format::WorkersLogs => {
                out.write_all(if self.first { b"  " } else { b",\n  " })?;
                self.first = false;
                // Workers Logs parses a JSON line into `source`: the record's own bytes go
                // there as they are; other text stays a string.
                out.write_all(b"{\"source\":")?;
                if object {
                    out.write_all(line.as_bytes())?;
                } else {
                    serde_json::to_writer(&mut *out, line)?;
                }
                let (hi, lo) = (self.rng.next_u64(), self.rng.next_u64());
                write!(
                    out,
                    ",\"dataset\":\"cloudflare-workers\",\"timestamp\":{ms},\
                     \"$workers\":{{\"scriptName\":\"edge-decider\",\"outcome\":\"ok\",\"eventType\":\"fetch\"}},\
                     \"$metadata\":{{\"id\":\"{hi:016x}{lo:016x}\",\"message\":"
                )?;
                serde_json::to_writer(&mut *out, line)?;
                out.write_all(b",\"type\":\"cf-worker-log\"}}")
            }
        }
    }

    pub(super) fn close(&mut self, out: &mut impl Write) -> io::Result<()> {
        match self.format {
            Format::WorkersLogs => out.write_all(b"\n]\n"),
            _ => Ok(()),
        }
    }
}

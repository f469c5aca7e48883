//! A body on its way through the Worker, either way, moved chunk by chunk so that the
//! origin's time can be told apart from the client's.
//!
//! Both ways, only the origin is timed, never the client:
//! - to the origin (a request body): the origin may leave one chunk untaken for at most
//!   `ORIGIN_TIMEOUT_MS`, and the wait for response headers starts once it has taken the
//!   last byte. Reading the client is not timed: a slow upload holds only its own request.
//! - to the client (a response body): the origin may send nothing for at most
//!   `ORIGIN_BODY_IDLE_MS`; then the body is cut. Writing to the client is not timed: a slow
//!   reader holds only its own response, and the origin is read no faster than it reads.
//!
//! Nothing is buffered: the pass-through streams complete a write when its bytes are read.

use crate::js;
use js_sys::futures::{spawn_local, JsFuture};
use js_sys::{BigInt, Function, Promise, Reflect};
use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};
use wasm_bindgen::{JsCast, JsValue};
use web_sys::{ReadableStream, ReadableStreamDefaultReader, WritableStreamDefaultWriter};
use worker::worker_sys::FixedLengthStream;

/// How moving a body ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Moved {
    /// Every byte was moved.
    All,
    /// A side failed: the source errored (the client went away mid-upload, the origin
    /// dropped its connection mid-body), or the destination stopped reading (the attempt
    /// ended, the client went away).
    Broken,
    /// The origin waited out the bound (took no chunk, or sent none): the body was cut.
    Stalled,
}

impl Moved {
    fn name(self) -> &'static str {
        match self {
            Moved::All => "all",
            Moved::Broken => "broken",
            Moved::Stalled => "stalled",
        }
    }

    fn from_name(v: &JsValue) -> Moved {
        match v.as_string().as_deref() {
            Some("all") => Moved::All,
            Some("stalled") => Moved::Stalled,
            _ => Moved::Broken,
        }
    }
}

/// Which side of a pipe is the origin, and so which wait is bounded.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Origin {
    /// The origin reads (a request body): each write waits at most the bound.
    Reads,
    /// The origin writes (a response body): each read waits at most the bound.
    Writes,
}

/// A body being moved: the stream to hand on, and how the moving ends.
#[derive(Debug)]
pub struct Pipe {
    /// What the destination reads (the origin's request body, the client's response body).
    pub body: ReadableStream,
    writer: WritableStreamDefaultWriter,
    ended: Promise,
}

/// Workers' own pass-through stream (no buffer: a write completes when its bytes are read).
/// Its readable side has no declared length, so the body goes chunked.
#[wasm_bindgen::prelude::wasm_bindgen]
extern "C" {
    #[wasm_bindgen(extends = web_sys::TransformStream)]
    #[derive(Debug, Clone)]
    type IdentityTransformStream;

    #[wasm_bindgen(constructor, catch)]
    fn new() -> Result<IdentityTransformStream, JsValue>;
}

impl Pipe {
    /// Starts moving `source` into a new stream. A `length` is kept (a `FixedLengthStream`,
    /// so the destination sees `content-length`); without one the body goes chunked. The
    /// origin's side (`origin`) may keep a chunk waiting at most `bound_ms`.
    ///
    /// # Errors
    /// The runtime refusing to create the streams.
    pub fn start(
        source: &ReadableStream,
        length: Option<u64>,
        origin: Origin,
        bound_ms: u32,
    ) -> Result<Pipe, JsValue> {
        let pass: web_sys::TransformStream = match length {
            Some(n) => match u32::try_from(n) {
                Ok(small) => FixedLengthStream::new(small)?.into(),
                Err(_) => FixedLengthStream::new_big_int(BigInt::from(n))?.into(),
            },
            None => IdentityTransformStream::new()?.into(),
        };
        let writer = pass.writable().get_writer()?;
        let reader: ReadableStreamDefaultReader = source.get_reader().unchecked_into();
        let mut settle = None;
        let ended = Promise::new(&mut |resolve, _reject| settle = Some(resolve));
        let done = settle.ok_or_else(|| JsValue::from_str("no promise resolver"))?;
        spawn_local(pump(reader, writer.clone(), origin, bound_ms, done));
        Ok(Pipe {
            body: pass.readable(),
            writer,
            ended,
        })
    }

    /// A future for the end of the moving (it holds no borrow of the pipe).
    pub fn ended(&self) -> Ended {
        Ended(JsFuture::from(self.ended.clone()))
    }

    /// Stops moving: the destination will not read the rest (an attempt without a usable
    /// answer).
    pub fn abandon(&self) {
        js::quietly(self.writer.abort());
    }
}

/// How a [`Pipe`] ends, once it has.
pub struct Ended(JsFuture);

impl std::fmt::Debug for Ended {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Ended")
    }
}

impl Future for Ended {
    type Output = Moved;

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Moved> {
        Pin::new(&mut self.0)
            .poll(cx)
            .map(|v| v.map_or(Moved::Broken, |v| Moved::from_name(&v)))
    }
}

/// Moves chunks from `reader` to `writer` until the source ends, the origin's side keeps a
/// chunk waiting for `bound_ms`, or either side fails; then resolves `done` with the
/// [`Moved`] name.
async fn pump(
    reader: ReadableStreamDefaultReader,
    writer: WritableStreamDefaultWriter,
    origin: Origin,
    bound_ms: u32,
    done: Function,
) {
    let end = loop {
        let read = JsFuture::from(reader.read());
        let next = match origin {
            Origin::Writes => match js::within(read, bound_ms).await {
                Some(next) => next,
                None => {
                    js::quietly(reader.cancel());
                    js::quietly(writer.abort());
                    break Moved::Stalled;
                }
            },
            Origin::Reads => read.await,
        };
        let next = match next {
            Ok(next) => next,
            Err(e) => {
                js::quietly(writer.abort_with_reason(&e));
                break Moved::Broken;
            }
        };
        let finished = Reflect::get(&next, &JsValue::from_str("done"))
            .ok()
            .and_then(|d| d.as_bool())
            .unwrap_or(true);
        if finished {
            js::quietly(writer.close());
            break Moved::All;
        }
        let chunk = Reflect::get(&next, &JsValue::from_str("value")).unwrap_or(JsValue::UNDEFINED);
        let write = JsFuture::from(writer.write_with_chunk(&chunk));
        let written = match origin {
            Origin::Reads => js::within(write, bound_ms).await,
            Origin::Writes => Some(write.await),
        };
        match written {
            Some(Ok(_)) => {}
            Some(Err(_)) => {
                js::quietly(reader.cancel());
                break Moved::Broken;
            }
            None => {
                js::quietly(reader.cancel());
                js::quietly(writer.abort());
                break Moved::Stalled;
            }
        }
    };
    let _ = done.call1(&JsValue::NULL, &JsValue::from_str(end.name()));
}

//! A routed request's body on its way to an origin, moved chunk by chunk so that the origin's
//! time can be told apart from the client's.
//!
//! `ORIGIN_TIMEOUT_MS` bounds the origin, never the client: the wait for response headers
//! starts once the last byte of the body has been taken by the origin, and while the body is
//! being sent, the origin may leave one chunk untaken for at most that long. Reading the
//! client is not timed: a slow upload holds only the client's own request.

use crate::js;
use js_sys::futures::{spawn_local, JsFuture};
use js_sys::{BigInt, Function, Promise, Reflect};
use wasm_bindgen::{JsCast, JsValue};
use web_sys::{ReadableStream, ReadableStreamDefaultReader, WritableStreamDefaultWriter};
use worker::worker_sys::FixedLengthStream;

/// How sending a body ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Sent {
    /// Every byte was taken by the origin.
    All,
    /// The client's body failed (it went away mid-upload), or the origin's request stopped
    /// reading it (the attempt ended): the attempt's own result says what happened.
    Broken,
    /// The origin took no chunk for the stall bound: counts as an origin timeout.
    Stalled,
}

impl Sent {
    fn name(self) -> &'static str {
        match self {
            Sent::All => "all",
            Sent::Broken => "broken",
            Sent::Stalled => "stalled",
        }
    }

    fn from_name(v: &JsValue) -> Sent {
        match v.as_string().as_deref() {
            Some("all") => Sent::All,
            Some("stalled") => Sent::Stalled,
            _ => Sent::Broken,
        }
    }
}

/// A body being sent: the stream to give `fetch`, and how the sending ends.
#[derive(Debug)]
pub struct Upload {
    /// What the origin's request carries.
    pub body: ReadableStream,
    writer: WritableStreamDefaultWriter,
    sent: Promise,
}

/// Workers' own pass-through stream (no buffer: a write completes when its bytes are read).
/// Its readable side has no declared length, so `fetch` sends it chunked.
#[wasm_bindgen::prelude::wasm_bindgen]
extern "C" {
    #[wasm_bindgen(extends = web_sys::TransformStream)]
    #[derive(Debug, Clone)]
    type IdentityTransformStream;

    #[wasm_bindgen(constructor, catch)]
    fn new() -> Result<IdentityTransformStream, JsValue>;
}

impl Upload {
    /// Starts moving `source` into a new stream for `fetch`. A `length` is kept (a
    /// `FixedLengthStream`, so the origin sees `content-length`); without one the body goes
    /// chunked. The origin may leave a chunk untaken for at most `stall_ms`.
    ///
    /// # Errors
    /// The runtime refusing to create the streams.
    pub fn start(
        source: &ReadableStream,
        length: Option<u64>,
        stall_ms: u32,
    ) -> Result<Upload, JsValue> {
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
        let sent = Promise::new(&mut |resolve, _reject| settle = Some(resolve));
        let done = settle.ok_or_else(|| JsValue::from_str("no promise resolver"))?;
        spawn_local(pump(reader, writer.clone(), stall_ms, done));
        Ok(Upload {
            body: pass.readable(),
            writer,
            sent,
        })
    }

    /// A future for the end of the sending (call it once, before awaiting the origin).
    pub fn sent(&self) -> impl std::future::Future<Output = Sent> {
        let sent = JsFuture::from(self.sent.clone());
        async move { sent.await.map_or(Sent::Broken, |v| Sent::from_name(&v)) }
    }

    /// Stops sending: the attempt is over without a usable answer.
    pub fn abandon(&self) {
        js::quietly(self.writer.abort());
    }
}

/// Moves chunks from the client's body to the origin's request until the body ends, the
/// origin leaves a chunk untaken for `stall_ms`, or either side fails; then resolves `done`
/// with the [`Sent`] name.
async fn pump(
    reader: ReadableStreamDefaultReader,
    writer: WritableStreamDefaultWriter,
    stall_ms: u32,
    done: Function,
) {
    let end = loop {
        let next = match JsFuture::from(reader.read()).await {
            Ok(next) => next,
            Err(e) => {
                js::quietly(writer.abort_with_reason(&e));
                break Sent::Broken;
            }
        };
        let finished = Reflect::get(&next, &JsValue::from_str("done"))
            .ok()
            .and_then(|d| d.as_bool())
            .unwrap_or(true);
        if finished {
            js::quietly(writer.close());
            break Sent::All;
        }
        let chunk = Reflect::get(&next, &JsValue::from_str("value")).unwrap_or(JsValue::UNDEFINED);
        let write = JsFuture::from(writer.write_with_chunk(&chunk));
        match js::within(write, stall_ms).await {
            Some(Ok(_)) => {}
            Some(Err(_)) => {
                js::quietly(reader.cancel());
                break Sent::Broken;
            }
            None => {
                js::quietly(reader.cancel());
                js::quietly(writer.abort());
                break Sent::Stalled;
            }
        }
    };
    let _ = done.call1(&JsValue::NULL, &JsValue::from_str(end.name()));
}

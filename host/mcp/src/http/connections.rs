//! The table of open client connections: who holds a slot, what each has
//! sent, and which goes when the table is full; and how a client's
//! half-close is told from its leaving.
//!
//! Design decisions:
//!
//! - **A full table makes room from the connections that have sent
//!   least.** Every accepted connection holds one of `max_connections`
//!   slots. When the table is full, a new connection is not turned away
//!   while a connection without a request in flight is open: the oldest
//!   connection that has sent nothing goes first, then the one idle (a
//!   partial request head, or kept alive between requests) the longest.
//!   So silent or dribbling sockets cannot lock callers and health probes
//!   out; they only push each other out. A connection with a request in
//!   flight (its call, its stream) is never closed to make room; when
//!   every slot holds one, the new connection is closed at once.
//! - **A half-close is not a leave, for a client that takes a stream.**
//!   A client that sends its request and then shuts its sending side
//!   (`shutdown(SHUT_WR)`, `nc -N`, some proxies) looks, from here,
//!   exactly like a client that closed its socket: both send a FIN, and
//!   only a write tells them apart (a closed socket answers with a reset).
//!   While a request whose client accepts `text/event-stream` is in flight,
//!   that end of the request stream is held back from hyper
//!   ([`Watched`]): the answer is written, and a client that is gone is
//!   noticed at that write or at the stream's next keep-alive comment
//!   (`reply.rs`). A client that accepts only JSON has nothing written to
//!   it before its answer, which could be a long call's: its end of stream
//!   is taken as its leaving, and its call stopped, as before. (A client
//!   that half-closes in the middle of its body waits for the body
//!   timeout, as one that stops sending does.)

use std::collections::HashMap;
use std::convert::Infallible;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll, Waker};
use std::time::Instant;

use axum::body::Body;
use axum::response::Response;
use bytes::Bytes;
use http::{HeaderMap, header};
use hyper::body::{Frame, SizeHint};
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::sync::Notify;

/// One open connection, as the table sees it.
#[derive(Debug)]
pub(crate) struct Conn {
    /// The table's clock: times below are in ms after it.
    base: Instant,
    accepted: Instant,
    /// A byte arrived from the client.
    read_any: AtomicBool,
    /// Requests of it being served (their answers not yet all written).
    in_flight: AtomicUsize,
    /// Of those, the ones whose client takes a stream: its end of stream
    /// is held back meanwhile.
    hold_eof: AtomicUsize,
    /// Since when nothing has been in flight, in ms after `base`.
    idle_since_ms: AtomicU64,
    /// Told to close to make room.
    evicted: Notify,
    /// hyper's read, waiting on an end of stream held back.
    eof_waiter: Mutex<Option<Waker>>,
}

impl Conn {
    fn new(base: Instant) -> Conn {
        let accepted = Instant::now();
        Conn {
            base,
            accepted,
            read_any: AtomicBool::new(false),
            in_flight: AtomicUsize::new(0),
            hold_eof: AtomicUsize::new(0),
            idle_since_ms: AtomicU64::new(ms(accepted.duration_since(base))),
            evicted: Notify::new(),
            eof_waiter: Mutex::new(None),
        }
    }

    /// Which to close first: lower goes first; `None`: not to be closed.
    fn eviction_order(&self) -> Option<(bool, u64)> {
        if self.in_flight.load(Ordering::Acquire) > 0 {
            return None;
        }
        if !self.read_any.load(Ordering::Acquire) {
            return Some((false, 0));
        }
        let since = self.idle_since_ms.load(Ordering::Acquire);
        Some((true, since))
    }

    fn wake_reader(&self) {
        if let Some(waker) = self
            .eof_waiter
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .take()
        {
            waker.wake();
        }
    }
}

/// The table of open connections.
#[derive(Debug)]
pub(crate) struct ConnectionTable {
    max: usize,
    base: Instant,
    open: Mutex<(u64, HashMap<u64, Arc<Conn>>)>,
}

/// A connection's place in the table, given back when dropped.
#[derive(Debug)]
pub(crate) struct Slot {
    table: Arc<ConnectionTable>,
    key: u64,
    conn: Arc<Conn>,
}

impl Drop for Slot {
    fn drop(&mut self) {
        let mut open = self.table.open.lock().unwrap_or_else(|e| e.into_inner());
        open.1.remove(&self.key);
    }
}

impl Slot {
    /// The connection, for its I/O and its service.
    pub(crate) fn conn(&self) -> Arc<Conn> {
        Arc::clone(&self.conn)
    }

    /// Completes when the connection is to close to make room.
    pub(crate) fn evicted(&self) -> impl Future<Output = ()> + Send + 'static {
        let conn = Arc::clone(&self.conn);
        async move { conn.evicted.notified().await }
    }
}

/// What [`ConnectionTable::admit`] did.
#[derive(Debug)]
pub(crate) enum Admitted {
    /// A free slot.
    Free(Slot),
    /// A slot made by closing a connection with nothing in flight.
    MadeRoom(Slot),
    /// Every slot holds a request in flight.
    Full,
}

impl ConnectionTable {
    pub(crate) fn new(max: usize) -> Arc<ConnectionTable> {
        Arc::new(ConnectionTable {
            max: max.max(1),
            base: Instant::now(),
            open: Mutex::new((0, HashMap::new())),
        })
    }

    /// A slot for a connection just accepted.
    pub(crate) fn admit(self: &Arc<Self>) -> Admitted {
        let mut open = self.open.lock().unwrap_or_else(|e| e.into_inner());
        let mut made_room = false;
        if open.1.len() >= self.max {
            let victim = open
                .1
                .iter()
                .filter_map(|(key, conn)| {
                    conn.eviction_order()
                        .map(|order| (order, conn.accepted, *key))
                })
                .min()
                .map(|(_, _, key)| key);
            let Some(victim) = victim else {
                return Admitted::Full;
            };
            if let Some(conn) = open.1.remove(&victim) {
                conn.evicted.notify_one();
            }
            made_room = true;
        }
        open.0 += 1;
        let key = open.0;
        let conn = Arc::new(Conn::new(self.base));
        open.1.insert(key, Arc::clone(&conn));
        let slot = Slot {
            table: Arc::clone(self),
            key,
            conn,
        };
        if made_room {
            Admitted::MadeRoom(slot)
        } else {
            Admitted::Free(slot)
        }
    }

    /// How many connections hold a slot.
    #[cfg(test)]
    fn len(&self) -> usize {
        self.open.lock().unwrap_or_else(|e| e.into_inner()).1.len()
    }
}

/// A client socket whose reads tell its connection what arrived, and
/// whose end of stream waits while a request that takes a stream is in
/// flight (the module docs say why).
#[derive(Debug)]
pub(crate) struct Watched<T> {
    inner: T,
    conn: Arc<Conn>,
}

impl<T> Watched<T> {
    pub(crate) fn new(inner: T, conn: Arc<Conn>) -> Watched<T> {
        Watched { inner, conn }
    }
}

impl<T: AsyncRead + Unpin> AsyncRead for Watched<T> {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<std::io::Result<()>> {
        let before = buf.filled().len();
        let wanted = buf.remaining() > 0;
        let this = &mut *self;
        match Pin::new(&mut this.inner).poll_read(cx, buf) {
            Poll::Ready(Ok(())) if buf.filled().len() > before => {
                this.conn.read_any.store(true, Ordering::Release);
                Poll::Ready(Ok(()))
            }
            Poll::Ready(Ok(())) if wanted && this.conn.hold_eof.load(Ordering::Acquire) > 0 => {
                // The end of the request stream, held back until the
                // answer is written.
                *this
                    .conn
                    .eof_waiter
                    .lock()
                    .unwrap_or_else(|e| e.into_inner()) = Some(cx.waker().clone());
                // The answer may have ended meanwhile.
                if this.conn.hold_eof.load(Ordering::Acquire) == 0 {
                    this.conn.wake_reader();
                }
                Poll::Pending
            }
            other => other,
        }
    }
}

impl<T: AsyncWrite + Unpin> AsyncWrite for Watched<T> {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<std::io::Result<usize>> {
        Pin::new(&mut self.inner).poll_write(cx, buf)
    }

    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[std::io::IoSlice<'_>],
    ) -> Poll<std::io::Result<usize>> {
        Pin::new(&mut self.inner).poll_write_vectored(cx, bufs)
    }

    fn is_write_vectored(&self) -> bool {
        self.inner.is_write_vectored()
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.inner).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.inner).poll_shutdown(cx)
    }
}

/// A request in flight on its connection, until its answer is written.
#[derive(Debug)]
struct InFlight {
    conn: Arc<Conn>,
    holds_eof: bool,
}

impl InFlight {
    fn new(conn: Arc<Conn>, headers: &HeaderMap) -> InFlight {
        let holds_eof = takes_a_stream(headers);
        conn.in_flight.fetch_add(1, Ordering::AcqRel);
        if holds_eof {
            conn.hold_eof.fetch_add(1, Ordering::AcqRel);
        }
        InFlight { conn, holds_eof }
    }
}

impl Drop for InFlight {
    fn drop(&mut self) {
        if self.conn.in_flight.fetch_sub(1, Ordering::AcqRel) == 1 {
            let since = ms(self.conn.base.elapsed());
            self.conn.idle_since_ms.store(since, Ordering::Release);
        }
        if self.holds_eof && self.conn.hold_eof.fetch_sub(1, Ordering::AcqRel) == 1 {
            self.conn.wake_reader();
        }
    }
}

fn ms(duration: std::time::Duration) -> u64 {
    u64::try_from(duration.as_millis()).unwrap_or(u64::MAX)
}

/// Whether the request's `Accept` takes an event stream (none: it does,
/// as `exchange.rs` reads it).
fn takes_a_stream(headers: &HeaderMap) -> bool {
    let mut values = headers.get_all(header::ACCEPT).iter().peekable();
    if values.peek().is_none() {
        return true;
    }
    values.any(|value| {
        value.to_str().is_ok_and(|value| {
            value.split(',').any(|range| {
                let media = range.split(';').next().unwrap_or_default().trim();
                ["text/event-stream", "text/*", "*/*"]
                    .iter()
                    .any(|m| media.eq_ignore_ascii_case(m))
            })
        })
    })
}

/// `service`, each request counted in flight on `conn` until its answer
/// is written (or dropped).
#[derive(Clone)]
pub(crate) struct Tracked<S> {
    service: S,
    conn: Arc<Conn>,
}

impl<S> Tracked<S> {
    pub(crate) fn new(service: S, conn: Arc<Conn>) -> Tracked<S> {
        Tracked { service, conn }
    }
}

impl<S, R> hyper::service::Service<http::Request<R>> for Tracked<S>
where
    S: hyper::service::Service<http::Request<R>, Response = Response, Error = Infallible>,
    S::Future: Send + 'static,
{
    type Response = Response;
    type Error = Infallible;
    type Future = Pin<Box<dyn Future<Output = Result<Response, Infallible>> + Send>>;

    fn call(&self, request: http::Request<R>) -> Self::Future {
        let in_flight = InFlight::new(Arc::clone(&self.conn), request.headers());
        let answer = self.service.call(request);
        Box::pin(async move {
            let response = answer.await?;
            Ok(response.map(|body| {
                Body::new(Answered {
                    body,
                    _in_flight: in_flight,
                })
            }))
        })
    }
}

/// A response body that keeps its request in flight until it is written.
struct Answered {
    body: Body,
    _in_flight: InFlight,
}

impl hyper::body::Body for Answered {
    type Data = Bytes;
    type Error = axum::Error;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, axum::Error>>> {
        Pin::new(&mut self.body).poll_frame(cx)
    }

    fn is_end_stream(&self) -> bool {
        self.body.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.body.size_hint()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn accept(value: &'static str) -> HeaderMap {
        let mut headers = HeaderMap::new();
        headers.insert(header::ACCEPT, http::HeaderValue::from_static(value));
        headers
    }

    #[test]
    fn a_full_table_closes_the_silent_first_then_the_idle_never_the_busy() {
        let table = ConnectionTable::new(3);
        let Admitted::Free(busy) = table.admit() else {
            panic!("free")
        };
        let Admitted::Free(idle) = table.admit() else {
            panic!("free")
        };
        let Admitted::Free(silent) = table.admit() else {
            panic!("free")
        };
        busy.conn.read_any.store(true, Ordering::Release);
        let _request = InFlight::new(busy.conn(), &HeaderMap::new());
        idle.conn.read_any.store(true, Ordering::Release);
        let Admitted::MadeRoom(first) = table.admit() else {
            panic!("room made")
        };
        assert_eq!(table.len(), 3);
        let evicted = silent.evicted();
        futures_lite_ready(evicted);
        // Next the idle one (the new one has sent nothing, but is newer).
        first.conn.read_any.store(true, Ordering::Release);
        let Admitted::MadeRoom(_second) = table.admit() else {
            panic!("room made")
        };
        futures_lite_ready(idle.evicted());
        // Only busy ones left: no room.
        let _a = InFlight::new(first.conn(), &HeaderMap::new());
        let _b = InFlight::new(_second.conn(), &HeaderMap::new());
        assert!(matches!(table.admit(), Admitted::Full));
        drop(busy);
        assert!(matches!(table.admit(), Admitted::Free(_)));
    }

    /// `future` is ready at once.
    fn futures_lite_ready(future: impl Future<Output = ()>) {
        let mut future = std::pin::pin!(future);
        let mut cx = Context::from_waker(Waker::noop());
        assert!(future.as_mut().poll(&mut cx).is_ready());
    }

    #[test]
    fn a_client_takes_a_stream_unless_it_accepts_only_json() {
        assert!(takes_a_stream(&HeaderMap::new()));
        assert!(takes_a_stream(&accept(
            "application/json, text/event-stream"
        )));
        assert!(takes_a_stream(&accept("*/*")));
        assert!(!takes_a_stream(&accept("application/json")));
    }

    #[tokio::test]
    async fn the_end_of_stream_waits_for_an_answer_that_takes_a_stream() {
        use tokio::io::{AsyncReadExt, AsyncWriteExt};
        let conn = Arc::new(Conn::new(Instant::now()));
        let (near, mut far) = tokio::io::duplex(64);
        let mut watched = Watched::new(near, Arc::clone(&conn));
        far.write_all(b"x").await.unwrap();
        far.shutdown().await.unwrap();
        let mut buf = [0; 8];
        assert_eq!(watched.read(&mut buf).await.unwrap(), 1);
        assert!(conn.read_any.load(Ordering::Acquire));
        let request = InFlight::new(Arc::clone(&conn), &HeaderMap::new());
        let reading = tokio::spawn(async move { watched.read(&mut buf).await.unwrap() });
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
        assert!(!reading.is_finished(), "the end is held back");
        drop(request);
        assert_eq!(reading.await.unwrap(), 0, "then it comes");
        // A JSON-only client's end is not held back.
        let conn = Arc::new(Conn::new(Instant::now()));
        let (near, far) = tokio::io::duplex(64);
        drop(far);
        let mut watched = Watched::new(near, Arc::clone(&conn));
        let _request = InFlight::new(conn, &accept("application/json"));
        assert_eq!(watched.read(&mut [0; 8]).await.unwrap(), 0);
    }
}

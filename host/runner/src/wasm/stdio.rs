//! The guest's stdout and stderr as the host sees them.
//!
//! - stdout is a [`CappedStdout`]: every byte counts against the call's
//!   output cap, and the write that would cross it traps the guest (a hard
//!   stop: a guest cannot ignore a trap the way it can ignore an I/O error).
//!   Completed lines go to the runner over a channel as they are written, so
//!   `progress` reaches the caller live and the response ends the call at once.
//! - stderr is a [`StderrTail`]: it never fails a write, it only keeps the last
//!   [`STDERR_TAIL_BYTES`] for error reports.

use std::pin::Pin;
use std::sync::{Arc, Mutex, MutexGuard};
use std::task::{Context, Poll};

use bytes::Bytes;
use tokio::io::AsyncWrite;
use tokio::sync::mpsc::UnboundedSender;
use wasmtime_wasi::cli::{IsTerminal, StdoutStream};
use wasmtime_wasi::p2::{OutputStream, Pollable, StreamError};

use crate::STDERR_TAIL_BYTES;

/// How much a guest may write per `check-write` permit. Small enough that the
/// cap is checked often, large enough not to slow an honest guest down.
const WRITE_PERMIT: usize = 64 * 1024;

/// The guest's stdout: capped, split into lines, lines sent to the runner.
#[derive(Debug, Clone)]
pub(super) struct CappedStdout {
    shared: Arc<Mutex<StdoutState>>,
}

#[derive(Debug)]
struct StdoutState {
    limit: u64,
    written: u64,
    exceeded: bool,
    /// Bytes after the last newline.
    partial: Vec<u8>,
    lines: UnboundedSender<Vec<u8>>,
}

impl CappedStdout {
    pub(super) fn new(limit: u64, lines: UnboundedSender<Vec<u8>>) -> Self {
        let state = StdoutState {
            limit,
            written: 0,
            exceeded: false,
            partial: Vec::new(),
            lines,
        };
        CappedStdout {
            shared: Arc::new(Mutex::new(state)),
        }
    }

    /// Whether the guest tried to write past the cap.
    pub(super) fn exceeded(&self) -> bool {
        self.lock().exceeded
    }

    /// What the guest wrote after its last newline (a last line without its
    /// newline still counts, as it does for a native module at EOF).
    pub(super) fn take_partial(&self) -> Vec<u8> {
        std::mem::take(&mut self.lock().partial)
    }

    fn lock(&self) -> MutexGuard<'_, StdoutState> {
        // A poisoned lock only means a panic elsewhere mid-write; the byte
        // counts are still the best information there is.
        self.shared
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// Accept `bytes` or refuse them all (`Err`) when they cross the cap.
    fn accept(&self, bytes: &[u8]) -> Result<(), u64> {
        let mut state = self.lock();
        if state.exceeded || state.written + bytes.len() as u64 > state.limit {
            state.exceeded = true;
            return Err(state.limit);
        }
        state.written += bytes.len() as u64;
        let mut rest = bytes;
        while let Some(newline) = rest.iter().position(|b| *b == b'\n') {
            let mut line = std::mem::take(&mut state.partial);
            line.extend_from_slice(&rest[..newline]);
            // The receiver is gone only when the call is already over.
            let _ = state.lines.send(line);
            rest = &rest[newline + 1..];
        }
        state.partial.extend_from_slice(rest);
        Ok(())
    }
}

fn over_cap(limit: u64) -> StreamError {
    StreamError::trap(&format!("stdout exceeded the output cap of {limit} bytes"))
}

#[wasmtime_wasi::async_trait]
impl Pollable for CappedStdout {
    async fn ready(&mut self) {}
}

impl OutputStream for CappedStdout {
    fn write(&mut self, bytes: Bytes) -> Result<(), StreamError> {
        self.accept(&bytes).map_err(over_cap)
    }

    fn flush(&mut self) -> Result<(), StreamError> {
        Ok(())
    }

    fn check_write(&mut self) -> Result<usize, StreamError> {
        let state = self.lock();
        if state.exceeded {
            return Err(over_cap(state.limit));
        }
        // Always grant a full permit: the write that crosses the cap traps,
        // rather than a zero permit leaving the guest waiting forever.
        Ok(WRITE_PERMIT)
    }
}

impl AsyncWrite for CappedStdout {
    fn poll_write(
        self: Pin<&mut Self>,
        _cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<std::io::Result<usize>> {
        Poll::Ready(self.accept(buf).map(|()| buf.len()).map_err(|limit| {
            std::io::Error::other(format!("stdout exceeded the output cap of {limit} bytes"))
        }))
    }

    fn poll_flush(self: Pin<&mut Self>, _cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Poll::Ready(Ok(()))
    }

    fn poll_shutdown(self: Pin<&mut Self>, _cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Poll::Ready(Ok(()))
    }
}

impl IsTerminal for CappedStdout {
    fn is_terminal(&self) -> bool {
        false
    }
}

impl StdoutStream for CappedStdout {
    fn async_stream(&self) -> Box<dyn AsyncWrite + Send + Sync> {
        Box::new(self.clone())
    }

    fn p2_stream(&self) -> Box<dyn OutputStream> {
        // Directly, not through the default adapter (which spawns a task per
        // stream and buffers, blurring where the cap was crossed).
        Box::new(self.clone())
    }
}

/// The guest's stderr: never refuses a write, keeps only the tail.
#[derive(Debug, Clone, Default)]
pub(super) struct StderrTail {
    bytes: Arc<Mutex<Vec<u8>>>,
}

impl StderrTail {
    fn push(&self, data: &[u8]) {
        let mut bytes = self
            .bytes
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        bytes.extend_from_slice(data);
        // Trim in batches so a flood costs amortized O(1) per byte.
        if bytes.len() > 2 * STDERR_TAIL_BYTES {
            let cut = bytes.len() - STDERR_TAIL_BYTES;
            bytes.drain(..cut);
        }
    }

    pub(super) fn text(&self) -> String {
        let bytes = self
            .bytes
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        let start = bytes.len().saturating_sub(STDERR_TAIL_BYTES);
        String::from_utf8_lossy(&bytes[start..]).into_owned()
    }
}

#[wasmtime_wasi::async_trait]
impl Pollable for StderrTail {
    async fn ready(&mut self) {}
}

impl OutputStream for StderrTail {
    fn write(&mut self, bytes: Bytes) -> Result<(), StreamError> {
        self.push(&bytes);
        Ok(())
    }

    fn flush(&mut self) -> Result<(), StreamError> {
        Ok(())
    }

    fn check_write(&mut self) -> Result<usize, StreamError> {
        Ok(WRITE_PERMIT)
    }
}

impl AsyncWrite for StderrTail {
    fn poll_write(
        self: Pin<&mut Self>,
        _cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<std::io::Result<usize>> {
        self.push(buf);
        Poll::Ready(Ok(buf.len()))
    }

    fn poll_flush(self: Pin<&mut Self>, _cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Poll::Ready(Ok(()))
    }

    fn poll_shutdown(self: Pin<&mut Self>, _cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Poll::Ready(Ok(()))
    }
}

impl IsTerminal for StderrTail {
    fn is_terminal(&self) -> bool {
        false
    }
}

impl StdoutStream for StderrTail {
    fn async_stream(&self) -> Box<dyn AsyncWrite + Send + Sync> {
        Box::new(self.clone())
    }

    fn p2_stream(&self) -> Box<dyn OutputStream> {
        Box::new(self.clone())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lines_are_split_and_the_cap_is_hard() {
        let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel();
        let stdout = CappedStdout::new(20, tx);
        stdout.accept(b"one\ntw").unwrap();
        stdout.accept(b"o\nthree").unwrap();
        assert_eq!(rx.try_recv().unwrap(), b"one");
        assert_eq!(rx.try_recv().unwrap(), b"two");
        assert!(rx.try_recv().is_err());
        // 13 bytes so far; 8 more would make 21 > 20.
        assert_eq!(stdout.accept(b"12345678"), Err(20));
        assert!(stdout.exceeded());
        // Once over, always over, even for a byte.
        assert_eq!(stdout.accept(b"x"), Err(20));
        assert_eq!(stdout.take_partial(), b"three");
    }

    #[test]
    fn stderr_keeps_the_tail() {
        let tail = StderrTail::default();
        for _ in 0..5 {
            tail.push(&[b'a'; STDERR_TAIL_BYTES]);
        }
        tail.push(b"END");
        let text = tail.text();
        assert_eq!(text.len(), STDERR_TAIL_BYTES);
        assert!(text.ends_with("END"));
    }
}

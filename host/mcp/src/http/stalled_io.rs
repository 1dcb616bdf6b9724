//! A client connection whose writes fail once they make no progress for a
//! while: how the server lets go of a client that stopped reading.
//!
//! A client that stops reading an SSE stream (or a large JSON body) fills
//! its socket buffer; every write then waits, and without a bound the
//! response, and the call producing it, would wait for ever. Here a write
//! (or flush) that has been pending for the stall bound fails with
//! `TimedOut`; hyper then ends the connection, which drops the response
//! body, and with it the call (its module's process group is killed when
//! the call's future is dropped). Reads are not bounded here: hyper bounds
//! the headers' time, and the server the body's.

use std::io::{self, IoSlice};
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Duration;

use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::time::{Instant, Sleep};

/// `inner`, its writes failing after `stall` without progress.
#[derive(Debug)]
pub(crate) struct StallGuarded<T> {
    inner: T,
    stall: Duration,
    /// Set while a write is pending: when it fails.
    deadline: Option<Pin<Box<Sleep>>>,
}

impl<T> StallGuarded<T> {
    pub(crate) fn new(inner: T, stall: Duration) -> StallGuarded<T> {
        StallGuarded {
            inner,
            stall,
            deadline: None,
        }
    }

    /// `outcome` of a write, failed when it has been pending too long.
    fn bounded<R>(
        &mut self,
        cx: &mut Context<'_>,
        outcome: Poll<io::Result<R>>,
    ) -> Poll<io::Result<R>> {
        match outcome {
            Poll::Ready(result) => {
                self.deadline = None;
                Poll::Ready(result)
            }
            Poll::Pending => {
                let stall = self.stall;
                let deadline = self.deadline.get_or_insert_with(|| {
                    Box::pin(tokio::time::sleep_until(Instant::now() + stall))
                });
                match deadline.as_mut().poll(cx) {
                    Poll::Ready(()) => {
                        self.deadline = None;
                        Poll::Ready(Err(io::Error::new(
                            io::ErrorKind::TimedOut,
                            format!(
                                "the client read nothing for {} ms; the connection is dropped",
                                stall.as_millis()
                            ),
                        )))
                    }
                    Poll::Pending => Poll::Pending,
                }
            }
        }
    }
}

impl<T: AsyncRead + Unpin> AsyncRead for StallGuarded<T> {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_read(cx, buf)
    }
}

impl<T: AsyncWrite + Unpin> AsyncWrite for StallGuarded<T> {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        let outcome = Pin::new(&mut self.inner).poll_write(cx, buf);
        self.bounded(cx, outcome)
    }

    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        let outcome = Pin::new(&mut self.inner).poll_write_vectored(cx, bufs);
        self.bounded(cx, outcome)
    }

    fn is_write_vectored(&self) -> bool {
        self.inner.is_write_vectored()
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let outcome = Pin::new(&mut self.inner).poll_flush(cx);
        self.bounded(cx, outcome)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let outcome = Pin::new(&mut self.inner).poll_shutdown(cx);
        self.bounded(cx, outcome)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::io::{AsyncReadExt, AsyncWriteExt};

    #[tokio::test]
    async fn a_write_nobody_reads_fails_after_the_stall_and_a_slow_reader_is_not_cut_off() {
        let stall = Duration::from_millis(300);
        let (near, mut far) = tokio::io::duplex(64);
        let mut guarded = StallGuarded::new(near, stall);
        guarded.write_all(&[0; 64]).await.unwrap();
        // The pipe is full: the next write waits, then fails.
        let started = Instant::now();
        let error = guarded.write_all(&[1; 8]).await.unwrap_err();
        assert_eq!(error.kind(), io::ErrorKind::TimedOut);
        assert!(started.elapsed() >= stall);
        // A reader slower than the writer, but never stalled that long.
        let reader = tokio::spawn(async move {
            let mut total = 0;
            let mut buf = [0; 32];
            while total < 64 + 512 {
                tokio::time::sleep(Duration::from_millis(20)).await;
                total += far.read(&mut buf).await.unwrap();
            }
        });
        guarded.write_all(&[2; 512]).await.unwrap();
        guarded.flush().await.unwrap();
        reader.await.unwrap();
    }
}

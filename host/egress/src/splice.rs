//! A tunnel's bytes moved by `splice(2)` through a pipe per direction:
//! the data is never copied into the proxy. A copying relay reads and
//! writes every byte once more than the client and the server do; on the
//! loopback, where a download is bound by the CPU, splicing cut the proxy's
//! CPU per 100 MB by about a quarter (`benches/egress.rs`).
//!
//! A `splice` to a socket whose peer left raises `SIGPIPE`, which the
//! host ignores (as every Rust program does: std sets it before `main`),
//! so it is an `EPIPE` that ends the tunnel.

use std::io;
use std::os::fd::OwnedFd;

use rustix::net::Shutdown;
use rustix::pipe::{PipeFlags, SpliceFlags};
use tokio::io::{AsyncWriteExt, Interest};
use tokio::net::TcpStream;

/// The most bytes one `splice` call asks for; the pipe keeps its
/// default size (growing it would spend the user's pipe quota, which
/// the user's other programs share, for no measured gain).
const CHUNK: usize = 1 << 20;

/// One pipe per direction: `(read end, write end)`.
pub(crate) struct Pipes {
    upward: (OwnedFd, OwnedFd),
    downward: (OwnedFd, OwnedFd),
}

impl Pipes {
    pub(crate) fn new() -> io::Result<Pipes> {
        let pipe = || rustix::pipe::pipe_with(PipeFlags::NONBLOCK | PipeFlags::CLOEXEC);
        Ok(Pipes {
            upward: pipe()?,
            downward: pipe()?,
        })
    }
}

/// Relay between `client` and `upstream` until both directions end or
/// either fails; `early` (what the client sent after its `CONNECT`
/// head, read already) goes first.
pub(crate) async fn relay(
    client: &TcpStream,
    early: &[u8],
    upstream: &mut TcpStream,
    pipes: Pipes,
) -> io::Result<()> {
    if !early.is_empty() {
        upstream.write_all(early).await?;
    }
    let upstream = &*upstream;
    tokio::try_join!(
        pump(client, upstream, &pipes.upward),
        pump(upstream, client, &pipes.downward)
    )?;
    Ok(())
}

/// Move everything `from` sends to `to` through `pipe`, then shut
/// `to`'s sending side (the half-close the sender meant).
async fn pump(from: &TcpStream, to: &TcpStream, pipe: &(OwnedFd, OwnedFd)) -> io::Result<()> {
    let (drain, fill) = pipe;
    let flags = SpliceFlags::MOVE | SpliceFlags::NONBLOCK;
    loop {
        // The pipe is empty here, so a `WouldBlock` is the socket's (it
        // has nothing to read), and clearing its readiness is right.
        let moved = match from.try_io(Interest::READABLE, || {
            Ok(rustix::pipe::splice(from, None, fill, None, CHUNK, flags)?)
        }) {
            Ok(moved) => moved,
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                from.readable().await?;
                continue;
            }
            Err(e) => return Err(e),
        };
        if moved == 0 {
            let _ = rustix::net::shutdown(to, Shutdown::Write);
            return Ok(());
        }
        // Empty the pipe before reading again; a `WouldBlock` here is
        // `to`'s full send buffer.
        let mut held = moved;
        while held > 0 {
            match to.try_io(Interest::WRITABLE, || {
                Ok(rustix::pipe::splice(drain, None, to, None, held, flags)?)
            }) {
                Ok(0) => return Err(io::ErrorKind::WriteZero.into()),
                Ok(sent) => held -= sent,
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => to.writable().await?,
                Err(e) => return Err(e),
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    use tokio::net::{TcpListener, TcpStream};

    use super::{Pipes, relay};

    const LIMIT: std::time::Duration = std::time::Duration::from_secs(10);

    /// A connected pair of loopback sockets.
    async fn pair() -> (TcpStream, TcpStream) {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let near = TcpStream::connect(listener.local_addr().unwrap())
            .await
            .unwrap();
        let (far, _) = listener.accept().await.unwrap();
        (near, far)
    }

    fn pattern(len: usize, seed: u8) -> Vec<u8> {
        (0..len).map(|i| (i % 251) as u8 ^ seed).collect()
    }

    /// What the client sent with its `CONNECT` comes first, megabytes go
    /// both ways intact, and each side's half-close reaches the other.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_spliced_tunnel_relays_both_ways_and_passes_each_half_close_on() {
        let (mut client, relay_client) = pair().await;
        let (mut relay_upstream, mut server) = pair().await;
        let relay = tokio::spawn(async move {
            let pipes = Pipes::new().unwrap();
            relay(&relay_client, b"early ", &mut relay_upstream, pipes).await
        });
        let request = pattern(3 << 20, 0x5a);
        let answer = pattern(2 << 20, 0xa5);

        let sent = request.clone();
        let sending = tokio::spawn(async move {
            client.write_all(&sent).await.unwrap();
            client.shutdown().await.unwrap();
            let mut got = Vec::new();
            client.read_to_end(&mut got).await.unwrap();
            got
        });
        // The server answers only once the client's half-close arrived (a
        // half-close lost in the tunnel is a hang, bounded here).
        let mut received = Vec::new();
        tokio::time::timeout(LIMIT, server.read_to_end(&mut received))
            .await
            .expect("the client's half-close never reached the server")
            .unwrap();
        assert_eq!(received.len(), 6 + request.len());
        assert!(received.starts_with(b"early "));
        assert!(
            received[6..] == request[..],
            "the request was changed in the tunnel"
        );
        server.write_all(&answer).await.unwrap();
        drop(server);

        let got = tokio::time::timeout(LIMIT, sending)
            .await
            .expect("the server's close never reached the client")
            .unwrap();
        assert!(
            got == answer,
            "the answer was changed in the tunnel ({} bytes)",
            got.len()
        );
        relay.await.unwrap().unwrap();
    }
}

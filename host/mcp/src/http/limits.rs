//! The bounds of `modhost mcp --http`: what one client, or all of them, can
//! make the server hold.
//!
//! Design decisions:
//!
//! - **Every resource a request holds has a bound, and a bound answers.**
//!   A body over [`HttpLimits::max_body_bytes`] is 413; headers over
//!   [`HttpLimits::max_header_bytes`] or [`HttpLimits::max_headers`] are
//!   431 (hyper's parser); headers not complete within
//!   [`HttpLimits::header_timeout`] close the connection (a slowloris client
//!   holds a socket for that long, no more, and no task beyond hyper's);
//!   a body not complete within [`HttpLimits::body_timeout`] is 408; calls
//!   beyond [`HttpLimits::max_concurrent_calls`] and streams beyond
//!   [`HttpLimits::max_open_streams`] are 503 with `Retry-After`, so a load
//!   balancer or the client tries again (elsewhere). Past
//!   [`HttpLimits::max_connections`], the open connection that has sent
//!   least (nothing at all first, then the one idle longest) is closed to
//!   make room; only when every one has a request in flight is the new one
//!   closed as it is accepted (`connections.rs`).
//! - **A client that stops reading is a client that left.** A write that
//!   makes no progress for [`HttpLimits::write_stall`] fails the
//!   connection (`stalled_io.rs`), which drops its response and so ends its
//!   call: a module never runs on for a reader that is not there.
//! - **The descriptor limit is part of the bound.** The soft limit is
//!   raised to the hard one at the start (as the egress proxy does), and
//!   the connection bound is kept below what it leaves, with a reserve for
//!   module pipes, rulesets and the home's files.

use std::time::Duration;

use modhost::http_config::HttpConfig;

/// Descriptors kept for everything but client connections.
const RESERVED_DESCRIPTORS: u64 = 512;

/// Connections allowed beyond streams and calls: short requests
/// (`tools/list`, health checks, metrics scrapes).
const SHORT_REQUEST_CONNECTIONS: usize = 256;

/// What `modhost mcp --http` bounds.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HttpLimits {
    /// The most `tools/call` requests running at once.
    pub max_concurrent_calls: usize,
    /// The most SSE response streams open at once (calls that stream, and
    /// `subscriptions/listen` and handshake `GET` streams).
    pub max_open_streams: usize,
    /// The largest request body read.
    pub max_body_bytes: u64,
    /// The most request header fields.
    pub max_headers: usize,
    /// The most bytes of request line and headers.
    pub max_header_bytes: usize,
    /// How long a client may take to send a request's headers (also how
    /// long an idle kept-alive connection stays open).
    pub header_timeout: Duration,
    /// How long a client may take to send a request's body.
    pub body_timeout: Duration,
    /// How long a write to a client may make no progress before the
    /// connection is dropped, and its call with it.
    pub write_stall: Duration,
    /// How often an open SSE stream with nothing to say sends a comment.
    pub keep_alive: Duration,
    /// The most client connections open at once.
    pub max_connections: usize,
    /// How long a drain (SIGTERM) waits for running calls to finish.
    pub drain_timeout: Duration,
}

impl Default for HttpLimits {
    fn default() -> Self {
        HttpLimits::from_config(&HttpConfig::default())
    }
}

impl HttpLimits {
    /// The bounds `[http]` sets, the rest at their defaults.
    pub fn from_config(config: &HttpConfig) -> HttpLimits {
        let max_concurrent_calls = config.max_concurrent_calls.max(1);
        let max_open_streams = config.max_open_streams.max(1);
        HttpLimits {
            max_concurrent_calls,
            max_open_streams,
            max_body_bytes: config.max_body_bytes.max(1024),
            max_headers: 64,
            // A signed session id, a JWT and a W3C trace fit many times.
            max_header_bytes: 32 * 1024,
            header_timeout: Duration::from_secs(config.header_timeout_secs.max(1)),
            body_timeout: Duration::from_secs(30),
            write_stall: Duration::from_secs(config.write_timeout_secs.max(1)),
            keep_alive: Duration::from_secs(config.keepalive_secs.max(1)),
            max_connections: max_open_streams
                .saturating_add(max_concurrent_calls)
                .saturating_add(SHORT_REQUEST_CONNECTIONS),
            drain_timeout: Duration::from_secs(config.drain_timeout_secs),
        }
    }

    /// These bounds with the connection bound kept within what the
    /// descriptor limit leaves (raised to its hard limit first); the limit
    /// in force.
    pub(crate) fn within_descriptor_limit(mut self) -> (HttpLimits, Option<u64>) {
        let limit = modhost_egress::raise_descriptor_limit();
        if let Some(limit) = limit {
            let room = limit.saturating_sub(RESERVED_DESCRIPTORS).max(16);
            let room = usize::try_from(room).unwrap_or(usize::MAX);
            if self.max_connections > room {
                tracing::warn!(
                    "the descriptor limit ({limit}) leaves room for {room} client connections, \
                     fewer than the {} [http] max_open_streams and max_concurrent_calls ask for; \
                     raise `ulimit -n` (LimitNOFILE= in a systemd unit)",
                    self.max_connections
                );
                self.max_connections = room;
            }
        }
        (self, limit)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn connections_cover_streams_calls_and_short_requests_within_the_descriptor_limit() {
        let limits = HttpLimits::default();
        assert_eq!(
            limits.max_connections,
            limits.max_open_streams + limits.max_concurrent_calls + SHORT_REQUEST_CONNECTIONS
        );
        let (bounded, limit) = limits.clone().within_descriptor_limit();
        let limit = limit.expect("the descriptor limit is readable");
        assert!(bounded.max_connections as u64 <= limit.max(RESERVED_DESCRIPTORS + 16));
        assert!(bounded.max_connections <= limits.max_connections);
    }
}

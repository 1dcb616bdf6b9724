//! `modhost mcp --http`: the MCP streamable HTTP transport at `/mcp`, for
//! every revision the server speaks: 2026-07-28 (POST only, request
//! metadata mirrored in headers, a JSON or per-request SSE answer,
//! `subscriptions/listen` streams) and the handshake revisions 2025-03-26
//! to 2025-11-25 (`Mcp-Session-Id` sessions, a `GET` stream).
//!
//! Design decisions:
//!
//! - **One protocol implementation.** Each request is served by the same
//!   connection code as stdio (`server.rs`'s `Connection`, made for that
//!   one request), its messages going to the request's own answer
//!   instead of stdout (`reply.rs`). Revisions, shapes, approval,
//!   lockdown and list changes are not written twice.
//! - **Nothing shared between replicas but the signing key** (and the
//!   home). A 2026-07-28 request relies on no earlier one: its approval
//!   state is sealed (`elicitation.rs`). A handshake session's id is
//!   sealed too (`session.rs`): any replica with the key serves any
//!   request of any session. What a handshake session does later (a
//!   question asked, a call to cancel, lockdown) is remembered by the
//!   replica that saw it (`replica.rs`): behind a load balancer, the
//!   handshake era's elicitation and cancellation need session affinity;
//!   the 2026-07-28 era's do not.
//! - **No client roots over HTTP.** A call's workspace is the host's
//!   (`--workspace`, `MODHOST_WORKSPACE`): the server never asks
//!   `roots/list`. Its answer would have to reach the replica that asked
//!   for every call, and a remote client's roots name folders of its own
//!   machine; letting a remote caller choose which folder of the server a
//!   call may write would widen what the operator granted.
//! - **The caller is authenticated on every request** (`auth.rs`), before
//!   the body is read, and named in every call: its rules, its quotas,
//!   its audit records, and the result's `_meta["dev.modhost/principal"]`.
//!   Without authentication configured the caller is the local user, the
//!   server then refuses to listen beyond the loopback, and it serves only
//!   connections from the account it runs as (`peer_uid.rs`).
//! - **Origin** is checked on every request to `/mcp` (`origin.rs`), and,
//!   on a loopback bind, `Host` on every route (`host_check.rs`, against
//!   DNS rebinding); every resource a request can hold is bounded
//!   (`limits.rs`), and when the connection table is full the connection
//!   that has sent least goes first (`connections.rs`).
//! - **Lockdown narrows in every era.** A handshake session is locked down
//!   as a connection is (`replica.rs`); a principal's 2026-07-28 requests
//!   share one lockdown on this server, lifted after an idle hour
//!   (`principal_lockdown.rs`). Without a shared store another replica
//!   does not know either.
//! - **Operations.** One log record per request (`access_log.rs`),
//!   Prometheus metrics at `/metrics` (`metrics.rs`), `/healthz` and
//!   `/readyz`, and a graceful drain on SIGTERM (`drain.rs`).
//!
//! # API
//!
//! [`HttpServer`] (bind, then serve until a stop), [`HttpOptions`],
//! [`HttpLimits`], [`HttpError`], [`AccessRecord`] and [`AccessLog`];
//! [`auth`] holds the authenticator.

pub mod auth;

mod access_log;
mod connections;
mod drain;
mod endpoint;
mod exchange;
mod host_check;
mod limits;
mod metrics;
mod mirrored_headers;
mod origin;
mod peer_uid;
mod principal_lockdown;
mod replica;
mod reply;
mod session;
mod stalled_io;
mod state;

use std::future::Future;
use std::net::SocketAddr;
use std::sync::Arc;

use tokio::net::TcpListener;
use tokio::sync::Semaphore;

pub use access_log::{AccessLog, AccessRecord, MAX_NAME_CHARS};
pub use limits::HttpLimits;

use crate::Backend;
use crate::elicitation::ApprovalStates;
use crate::signed::SigningKey;
use auth::{AuthConfigError, Authenticator};
use drain::Drain;
use metrics::Metrics;
use origin::{HostPolicy, OriginPolicy};
use principal_lockdown::PrincipalLockdowns;
use replica::Sessions;
use state::ServerState;

/// What `modhost mcp --http` is started with, beyond `[http]`.
#[derive(Clone, Default)]
pub struct HttpOptions {
    /// The key sessions and approval states are sealed with; `None`: a key
    /// of this process alone (replicas cannot continue each other's
    /// conversations).
    pub signing_key: Option<Arc<SigningKey>>,
    /// Where request records go; `None`: nowhere.
    pub access_log: Option<AccessLog>,
}

impl std::fmt::Debug for HttpOptions {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("HttpOptions")
            .field("signing_key", &self.signing_key)
            .field("access_log", &self.access_log.is_some())
            .finish()
    }
}

/// Why the HTTP server could not start.
#[derive(Debug, thiserror::Error)]
pub enum HttpError {
    #[error(
        "refusing to serve on {addr}: it is reachable beyond this machine and no caller \
         authentication is configured, so anyone who can reach it could run this host's tools. \
         Configure [[http.tokens]] (`modhost token new --principal NAME` prints one) or \
         [http.oauth] in config.toml, or serve on the loopback (127.0.0.1:PORT) behind a proxy \
         that authenticates"
    )]
    OpenWithoutAuth { addr: SocketAddr },
    #[error("could not listen on {addr}: {source}")]
    Bind {
        addr: SocketAddr,
        source: std::io::Error,
    },
    #[error(transparent)]
    Auth(#[from] AuthConfigError),
    #[error("could not make a signing key for this process: {0}")]
    Key(std::io::Error),
}

/// How long the end of a server waits for stopped calls to be gone.
const FINISHING: std::time::Duration = std::time::Duration::from_secs(5);

/// A bound HTTP server for a backend's tools.
pub struct HttpServer<B> {
    listener: TcpListener,
    state: Arc<ServerState<B>>,
    addr: SocketAddr,
    warnings: Vec<String>,
}

impl<B> std::fmt::Debug for HttpServer<B> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("HttpServer")
            .field("addr", &self.addr)
            .finish_non_exhaustive()
    }
}

impl<B: Backend> HttpServer<B> {
    /// Listen on `addr` (port 0: any free port) for `backend`'s tools, as
    /// `[http]` (`http`) says. Refused when `addr` is reachable beyond the
    /// loopback and `[http]` configures no authentication.
    pub async fn bind(
        addr: SocketAddr,
        backend: Arc<B>,
        http: &modhost::http_config::HttpConfig,
        options: HttpOptions,
    ) -> Result<HttpServer<B>, HttpError> {
        let auth = Authenticator::new(http)?;
        let loopback = addr.ip().is_loopback();
        if !loopback && !auth.is_configured() {
            return Err(HttpError::OpenWithoutAuth { addr });
        }
        let mut warnings = Vec::new();
        let key = match options.signing_key {
            Some(key) => key,
            None => {
                warnings.push(
                    "no [http] signing_key_file (or MODHOST_SIGNING_KEY_FILE): sessions and approval \
                     states are sealed with a key of this process alone, so another replica (or this \
                     one after a restart) cannot continue them"
                        .to_owned(),
                );
                Arc::new(SigningKey::ephemeral().map_err(HttpError::Key)?)
            }
        };
        let (limits, _) = HttpLimits::from_config(http).within_descriptor_limit();
        let listener = TcpListener::bind(addr)
            .await
            .map_err(|source| HttpError::Bind { addr, source })?;
        let addr = listener
            .local_addr()
            .map_err(|source| HttpError::Bind { addr, source })?;
        let live = backend.tool_list_changes().is_some();
        let state = ServerState {
            approvals: ApprovalStates::new(Arc::clone(&key)),
            key,
            sessions: Sessions::default(),
            principal_lockdowns: PrincipalLockdowns::default(),
            origins: OriginPolicy::new(&http.allowed_origins, loopback),
            hosts: HostPolicy::new(
                loopback,
                http.canonical_url.as_deref(),
                &http.allowed_origins,
            ),
            auth,
            metrics: Metrics::default(),
            calls: Arc::new(Semaphore::new(limits.max_concurrent_calls)),
            streams: Arc::new(Semaphore::new(limits.max_open_streams)),
            drain: Arc::new(Drain::default()),
            access_log: options.access_log,
            live,
            limits,
            backend,
        };
        Ok(HttpServer {
            listener,
            state: Arc::new(state),
            addr,
            warnings,
        })
    }

    /// The address it listens on (the real port when bound to port 0).
    pub fn local_addr(&self) -> SocketAddr {
        self.addr
    }

    /// What the operator should know about how it was started.
    pub fn warnings(&self) -> &[String] {
        &self.warnings
    }

    /// The bounds in force (the connection bound within the descriptor limit).
    pub fn limits(&self) -> &HttpLimits {
        &self.state.limits
    }

    /// Serve until `stop` completes, then drain (`drain.rs`): not ready,
    /// new requests refused with 503, streams closed, running calls
    /// finished, for at most the drain timeout or until `force` completes.
    /// Whatever still runs when this returns is stopped when the runtime
    /// drops its tasks.
    pub async fn serve(
        self,
        stop: impl Future<Output = ()>,
        force: impl Future<Output = ()>,
    ) -> std::io::Result<()> {
        let HttpServer {
            listener, state, ..
        } = self;
        let router = host_check::guard(endpoint::router(&state), &state, state.hosts.clone());
        // The authorization server's keys, fetched now: a wrong `jwks_uri`
        // or CA is a warning at once, and the server serves meanwhile.
        let prefetching = Arc::clone(&state);
        tokio::spawn(async move { prefetching.auth.prefetch_keys().await });
        let (stop_accepting, accept_until) = tokio::sync::oneshot::channel::<()>();
        let accepting = tokio::spawn(endpoint::accept(
            listener,
            Arc::clone(&state),
            router,
            async move {
                let _ = accept_until.await;
            },
        ));
        stop.await;
        state.drain.begin();
        let timeout = state.limits.drain_timeout;
        tracing::info!(
            "draining: not ready, new requests refused; waiting up to {} s for {} exchanges in flight",
            timeout.as_secs(),
            state.drain.in_flight()
        );
        tokio::select! {
            settled = state.drain.settled(timeout) => {
                if !settled {
                    tracing::warn!(
                        "the drain timeout passed with {} exchanges in flight; they are stopped",
                        state.drain.in_flight()
                    );
                }
            }
            () = force => tracing::warn!("a second signal: stopping what still runs"),
        }
        // Stop accepting; end the connections still open (and the calls
        // on them), and wait until their calls' futures are gone.
        let _ = stop_accepting.send(());
        if let Ok(mut open) = accepting.await {
            open.shutdown().await;
        }
        state.drain.settled(FINISHING).await;
        Ok(())
    }
}

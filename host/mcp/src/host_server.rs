//! A host's tools served over MCP on stdio, exactly as `modhost mcp` serves
//! them: the tool list follows the operator's changes while it serves, each
//! call's process is started ahead while the client is busy elsewhere, and
//! the server runs on a single-threaded runtime of its own. Over HTTP
//! (`modhost mcp --http`, [`HostServer::bind_http`]) it serves many clients
//! at once, so it runs on the command's multi-threaded runtime.
//!
//! Why one thread: a call is a short chain of wake-ups (a request line, a
//! spawn, the module's answer, a response line); on the multi-threaded
//! runtime each link could hop between worker threads, and on a busy
//! two-core machine every hop is a context switch on the latency path. One
//! thread keeps the chain on one core; blocking work (a native module's
//! spawn and reaping, what a component call does after its first slice)
//! goes to the runtime's blocking pool, in the runner, so neither a slow
//! start nor a busy guest stalls the reader.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use modhost::tools::{HostInvoker, open_live_toolbox};
use modhost::{Host, OverrideError};

use crate::http::{AccessLog, HttpError, HttpOptions, HttpServer};
use crate::{ToolboxBackend, serve_stdio};

/// How long a server that has ended waits for its runtime's blocking-pool
/// tasks. One can be stuck in the kernel for good (a component's open of a
/// fifo in its root, a hung mount); it ends with the process instead.
const BLOCKING_TASKS_GRACE: Duration = Duration::from_secs(1);

/// What `modhost mcp`'s flags choose.
#[derive(Debug, Clone, Default)]
pub struct ServeOptions {
    /// `--delegate-approval`: the client approves every call of an `ask`
    /// tool (recorded as approved by "client") instead of the user being
    /// asked for each call through the client.
    pub delegate_approval: bool,
    /// The key approval states and session ids are sealed with
    /// ([`crate::SigningKey::load`] of `[http] signing_key_file`): replicas
    /// holding the same key continue each other's conversations. `None`: a
    /// key of this process alone ([`crate::SigningKey::ephemeral`]).
    pub signing_key: Option<Arc<crate::SigningKey>>,
}

/// A host's tools, ready to be served.
#[derive(Debug)]
pub struct HostServer {
    host: Host,
    backend: Arc<ToolboxBackend<HostInvoker>>,
    signing_key: Option<Arc<crate::SigningKey>>,
}

impl HostServer {
    /// The tools of `host` (its source roots and workspace as given), kept
    /// warm and following the operator's changes. Fails when a source root
    /// given for the host is one no module declares.
    pub async fn open(host: &Host, options: ServeOptions) -> Result<HostServer, OverrideError> {
        let host = host.clone().keep_warm();
        host.engines()
            .set_up_wasm_ahead(&host.layout().modules_dir());
        let toolbox = open_live_toolbox(&host).await?;
        Ok(HostServer {
            host,
            backend: Arc::new(ToolboxBackend {
                toolbox,
                delegate_approval: options.delegate_approval,
            }),
            signing_key: options.signing_key,
        })
    }

    /// Tools left out at the start, one line each (`modhost mcp` prints
    /// them to stderr as warnings).
    pub fn problems(&self) -> Vec<String> {
        self.backend.toolbox.problems()
    }

    /// Serve on this process's stdin and stdout until stdin closes or a
    /// termination signal comes (see [`serve_stdio`]), on a thread and
    /// runtime of its own; then the processes started ahead are stopped on
    /// that runtime, and the runtime is shut down.
    pub async fn serve_stdio(self) -> std::io::Result<()> {
        let HostServer { host, backend, .. } = self;
        let (done, finished) = tokio::sync::oneshot::channel();
        std::thread::Builder::new()
            .name("modhost-mcp".into())
            .spawn(move || {
                let result = tokio::runtime::Builder::new_current_thread()
                    .enable_all()
                    .build()
                    .and_then(|runtime| {
                        let served = runtime.block_on(async {
                            let served = serve_stdio(backend).await;
                            host.shutdown().await;
                            served
                        });
                        runtime.shutdown_timeout(BLOCKING_TASKS_GRACE);
                        served
                    });
                let _ = done.send(result);
            })?;
        finished
            .await
            .map_err(|_| std::io::Error::other("the MCP server thread died"))?
    }

    /// Listen on `addr` for MCP over HTTP, as the host's `[http]` says
    /// (refused beyond the loopback without authentication); each request
    /// goes to `access_log`.
    pub async fn bind_http(
        self,
        addr: SocketAddr,
        access_log: Option<AccessLog>,
    ) -> Result<HostHttpServer, HttpError> {
        let HostServer {
            host,
            backend,
            signing_key,
        } = self;
        let options = HttpOptions {
            signing_key,
            access_log,
        };
        let server = HttpServer::bind(addr, backend, &host.config().http, options).await?;
        // Watched from now: the caller says it listens next.
        let stop = Box::pin(crate::termination());
        Ok(HostHttpServer { host, server, stop })
    }
}

/// A host's tools listening over HTTP ([`HostServer::bind_http`]).
pub struct HostHttpServer {
    host: Host,
    server: HttpServer<ToolboxBackend<HostInvoker>>,
    /// The first termination signal, watched since the bind.
    stop: std::pin::Pin<Box<dyn Future<Output = ()> + Send>>,
}

impl std::fmt::Debug for HostHttpServer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("HostHttpServer")
            .field("host", &self.host)
            .field("server", &self.server)
            .finish_non_exhaustive()
    }
}

impl HostHttpServer {
    /// The address it listens on (the real port when bound to port 0).
    pub fn local_addr(&self) -> SocketAddr {
        self.server.local_addr()
    }

    /// What the operator should know about how it was started.
    pub fn warnings(&self) -> &[String] {
        self.server.warnings()
    }

    /// Serve until SIGTERM, SIGINT or SIGHUP, then drain (a second signal
    /// ends the drain at once); the processes started ahead are stopped
    /// and the audit log written before this returns.
    pub async fn serve_until_signalled(self) -> std::io::Result<()> {
        let HostHttpServer { host, server, stop } = self;
        let served = server
            .serve(stop, async {
                // Armed once the first signal began the drain.
                crate::termination().await;
            })
            .await;
        host.shutdown().await;
        served
    }
}

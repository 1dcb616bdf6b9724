//! The routes of `modhost mcp --http`, and the accept loop that serves
//! them, one HTTP/1.1 connection at a time within the server's bounds.
//!
//! - `POST /mcp`, `GET /mcp` (a handshake session's stream), `DELETE /mcp`
//!   (405: sessions are self-contained and expire, `session.rs`);
//! - `/healthz` (200 while the process serves), `/readyz` (200, or 503
//!   once a drain began), `/metrics` (Prometheus);
//! - the protected resource metadata (RFC 9728) at
//!   `/.well-known/oauth-protected-resource` and its path-inserted form,
//!   when authentication with a canonical URL is configured.
//!
//! Every connection is HTTP/1.1 (hyper), with the header bounds and the
//! header-read timeout of [`super::HttpLimits`], its writes bounded by
//! `stalled_io.rs`, and at most `max_connections` at once: past that, the
//! connection that has sent least is closed to make room, and when every
//! one has a request in flight the new one is closed as it is accepted
//! (`connections.rs`).

use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use axum::Router;
use axum::body::Body;
use axum::extract::Request;
use axum::response::Response;
use axum::routing::{any, get};
use http::{HeaderValue, StatusCode, header};
use hyper::body::Incoming;
use hyper_util::rt::{TokioIo, TokioTimer};
use tokio::net::TcpListener;
use tokio::task::JoinSet;

use super::connections::{Admitted, ConnectionTable, Tracked, Watched};
use super::exchange::{self, Refusal};
use super::metrics;
use super::stalled_io::StallGuarded;
use super::state::ServerState;
use crate::Backend;

/// The client address of a request, put there by the accept loop.
#[derive(Debug, Clone, Copy)]
struct Peer(SocketAddr);

fn peer_of(request: &Request) -> Option<SocketAddr> {
    request.extensions().get::<Peer>().map(|peer| peer.0)
}

/// The routes, over `state`.
pub(crate) fn router<B: Backend>(state: &Arc<ServerState<B>>) -> Router {
    let mcp = {
        let state = Arc::clone(state);
        move |request: Request| {
            let state = Arc::clone(&state);
            async move {
                let peer = peer_of(&request);
                let response = match request.method().as_str() {
                    "POST" => exchange::post(Arc::clone(&state), peer, request).await,
                    "GET" => exchange::get(Arc::clone(&state), peer, request).await,
                    _ => not_allowed(&state, peer, &request),
                };
                state.metrics.answered(response.status().as_u16());
                response
            }
        }
    };
    let ready = {
        let state = Arc::clone(state);
        move || {
            let state = Arc::clone(&state);
            async move {
                if state.drain.draining() {
                    text(StatusCode::SERVICE_UNAVAILABLE, "draining\n")
                } else {
                    text(StatusCode::OK, "ready\n")
                }
            }
        }
    };
    let scrape = {
        let state = Arc::clone(state);
        move || {
            let state = Arc::clone(&state);
            async move {
                let mut response = Response::new(Body::from(state.metrics.render()));
                response.headers_mut().insert(
                    header::CONTENT_TYPE,
                    HeaderValue::from_static(metrics::CONTENT_TYPE),
                );
                response
            }
        }
    };
    let mut router = Router::new()
        .route("/mcp", any(mcp))
        .route("/healthz", get(|| async { text(StatusCode::OK, "ok\n") }))
        .route("/readyz", get(ready))
        .route("/metrics", get(scrape));
    if let Some(document) = state.auth.protected_resource_metadata() {
        let body = document.to_string();
        let mut paths: Vec<String> = state.auth.protected_resource_metadata_paths().to_vec();
        for path in [
            "/.well-known/oauth-protected-resource",
            "/.well-known/oauth-protected-resource/mcp",
        ] {
            if !paths.iter().any(|p| p == path) {
                paths.push(path.to_owned());
            }
        }
        for path in paths {
            let body = body.clone();
            router = router.route(
                &path,
                get(move || {
                    let body = body.clone();
                    async move { super::reply::json(StatusCode::OK, body) }
                }),
            );
        }
    }
    router.fallback(|| async {
        text(
            StatusCode::NOT_FOUND,
            "not found: the MCP endpoint is /mcp\n",
        )
    })
}

fn text(status: StatusCode, body: &'static str) -> Response {
    let mut response = Response::new(Body::from(body));
    *response.status_mut() = status;
    response.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("text/plain; charset=utf-8"),
    );
    response
}

/// `DELETE /mcp` and anything but `GET` and `POST`.
fn not_allowed<B: Backend>(
    state: &ServerState<B>,
    peer: Option<SocketAddr>,
    request: &Request,
) -> Response {
    let (parts, ()) = http::Request::builder()
        .method(request.method().clone())
        .uri(request.uri().clone())
        .body(())
        .unwrap_or_default()
        .into_parts();
    let record = exchange::record(&parts, peer);
    let why = if request.method() == http::Method::DELETE {
        "Method Not Allowed: sessions end by themselves (their ids are signed and expire), so \
         DELETE does not end one"
    } else {
        "Method Not Allowed: send MCP messages with POST"
    };
    let refusal = Refusal::rpc(
        StatusCode::METHOD_NOT_ALLOWED,
        "method_not_allowed",
        None,
        -32600,
        why,
    );
    let mut response = state.refuse(record, std::time::Instant::now(), refusal);
    response
        .headers_mut()
        .insert(header::ALLOW, HeaderValue::from_static("GET, POST"));
    response
}

/// The router for one connection, with its peer's address.
#[derive(Clone)]
struct PeerService {
    router: Router,
    peer: SocketAddr,
    /// Its client socket, whose owner a server without auth checks.
    socket: super::peer_uid::PeerSocket,
}

impl hyper::service::Service<http::Request<Incoming>> for PeerService {
    type Response = Response;
    type Error = Infallible;
    type Future = axum::routing::future::RouteFuture<Infallible>;

    fn call(&self, mut request: http::Request<Incoming>) -> Self::Future {
        request.extensions_mut().insert(Peer(self.peer));
        request.extensions_mut().insert(self.socket.clone());
        let mut router = self.router.clone();
        tower_service::Service::call(&mut router, request)
    }
}

/// Accept and serve connections until `stop`; the connections still open
/// then.
pub(crate) async fn accept<B: Backend>(
    listener: TcpListener,
    state: Arc<ServerState<B>>,
    router: Router,
    stop: impl Future<Output = ()>,
) -> JoinSet<()> {
    let mut stop = std::pin::pin!(stop);
    let mut open = JoinSet::new();
    let limits = state.limits.clone();
    let connections = ConnectionTable::new(limits.max_connections);
    let mut builder = hyper::server::conn::http1::Builder::new();
    builder
        .timer(TokioTimer::new())
        .header_read_timeout(limits.header_timeout)
        .max_headers(limits.max_headers)
        .max_header_size(limits.max_header_bytes)
        .max_buf_size(limits.max_header_bytes.max(8192) * 2);
    let mut closing = builder.clone();
    closing.keep_alive(false);
    loop {
        while open.try_join_next().is_some() {}
        let accepted = tokio::select! {
            accepted = listener.accept() => accepted,
            () = &mut stop => return open,
        };
        let (stream, peer) = match accepted {
            Ok(accepted) => accepted,
            Err(e) => {
                // Out of descriptors, or the like: wait a little, go on.
                tracing::warn!("could not accept a connection: {e}");
                tokio::time::sleep(Duration::from_millis(50)).await;
                continue;
            }
        };
        // A full table closes the connection that sent least (`connections.rs`).
        let permit = match connections.admit() {
            Admitted::Free(slot) => slot,
            Admitted::MadeRoom(slot) => {
                state.metrics.refused("connection_evicted");
                slot
            }
            Admitted::Full => {
                state.metrics.refused("connections_full");
                drop(stream);
                continue;
            }
        };
        let _ = stream.set_nodelay(true);
        let stream = Watched::new(stream, permit.conn());
        let io = TokioIo::new(StallGuarded::new(stream, limits.write_stall));
        let service = PeerService {
            router: router.clone(),
            peer,
            socket: super::peer_uid::PeerSocket::new(peer, listener.local_addr().ok()),
        };
        let service = Tracked::new(service, permit.conn());
        let evicted = permit.evicted();
        if state.drain.draining() {
            // Answered (503, or `/readyz`'s 503) and closed.
            let connection = closing.serve_connection(io, service);
            open.spawn(async move {
                let _permit = permit;
                tokio::select! {
                    _ = connection => {}
                    () = evicted => {}
                }
            });
            continue;
        }
        let connection = builder.serve_connection(io, service);
        let drained = state.drain.begun();
        open.spawn(async move {
            let _permit = permit;
            let mut connection = std::pin::pin!(connection);
            tokio::select! {
                _ = connection.as_mut() => {}
                // Closed to make room: it had nothing in flight.
                () = evicted => {}
                () = drained => {
                    // What is in flight on it finishes; it takes no more.
                    connection.as_mut().graceful_shutdown();
                    let _ = connection.await;
                }
            }
        });
    }
}

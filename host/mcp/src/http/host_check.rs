//! The `Host` check in front of every route (`origin.rs`'s
//! [`HostPolicy`]): on a loopback bind, a request naming a host that is
//! not this server's (a DNS-rebinding page) is answered 421 before any
//! route sees it, `/metrics`, `/healthz` and `/readyz` included.

use std::sync::Arc;
use std::time::Instant;

use axum::Router;
use axum::extract::Request;
use axum::middleware::Next;
use axum::response::Response;
use http::{HeaderValue, StatusCode, header};

use super::exchange;
use super::origin::HostPolicy;
use super::state::ServerState;
use crate::Backend;

/// `router`, each request first checked against `policy`.
pub(crate) fn guard<B: Backend>(
    router: Router,
    state: &Arc<ServerState<B>>,
    policy: HostPolicy,
) -> Router {
    let state = Arc::clone(state);
    let policy = Arc::new(policy);
    router.layer(axum::middleware::from_fn(
        move |request: Request, next: Next| {
            let state = Arc::clone(&state);
            let policy = Arc::clone(&policy);
            async move {
                match policy.check(host_of(&request)) {
                    Ok(()) => next.run(request).await,
                    Err(why) => refuse(&state, &request, &why),
                }
            }
        },
    ))
}

/// The host a request names: its absolute URI's, else its `Host` header.
fn host_of(request: &Request) -> Option<&str> {
    if let Some(authority) = request.uri().authority() {
        return Some(authority.as_str());
    }
    let mut hosts = request.headers().get_all(header::HOST).iter();
    let host = hosts.next()?;
    if hosts.next().is_some() {
        return None;
    }
    host.to_str().ok()
}

fn refuse<B: Backend>(state: &ServerState<B>, request: &Request, why: &str) -> Response {
    let (parts, ()) = http::Request::builder()
        .method(request.method().clone())
        .uri(request.uri().clone())
        .body(())
        .unwrap_or_default()
        .into_parts();
    let record = exchange::record(&parts, None);
    let refusal =
        exchange::Refusal::rpc(StatusCode::MISDIRECTED_REQUEST, "host", None, -32600, why);
    let mut response = state.refuse(record, Instant::now(), refusal);
    response
        .headers_mut()
        .insert(header::CONNECTION, HeaderValue::from_static("close"));
    state.metrics.answered(response.status().as_u16());
    response
}

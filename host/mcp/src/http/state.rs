//! What the routes of `modhost mcp --http` share: the backend, the key,
//! the bounds and their counters, the authenticator, the metrics, the
//! drain; and the shapes every answer uses.

use std::sync::Arc;

use modproto::{ErrorCode, Id, Response, RpcError};
use tokio::sync::Semaphore;

use super::access_log::{AccessLog, AccessRecord};
use super::auth::Authenticator;
use super::drain::Drain;
use super::limits::HttpLimits;
use super::metrics::Metrics;
use super::origin::{HostPolicy, OriginPolicy};
use super::principal_lockdown::PrincipalLockdowns;
use super::replica::Sessions;
use crate::elicitation::ApprovalStates;
use crate::signed::SigningKey;

/// The era a request was served in (its statuses differ).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum ServedWith {
    Stateless,
    Handshake,
}

/// Everything the routes share.
pub(crate) struct ServerState<B> {
    pub(crate) backend: Arc<B>,
    pub(crate) key: Arc<SigningKey>,
    pub(crate) approvals: ApprovalStates,
    pub(crate) sessions: Sessions,
    /// Each principal's lockdown over its 2026-07-28 requests.
    pub(crate) principal_lockdowns: PrincipalLockdowns,
    pub(crate) limits: HttpLimits,
    pub(crate) origins: OriginPolicy,
    pub(crate) hosts: HostPolicy,
    pub(crate) auth: Authenticator,
    pub(crate) metrics: Metrics,
    /// A slot per call that may run at once.
    pub(crate) calls: Arc<Semaphore>,
    /// A slot per stream that may be open at once.
    pub(crate) streams: Arc<Semaphore>,
    pub(crate) drain: Arc<Drain>,
    pub(crate) access_log: Option<AccessLog>,
    /// The backend's tools can change while it serves.
    pub(crate) live: bool,
}

impl<B> ServerState<B> {
    /// Hand `record` to the request log.
    pub(crate) fn log(&self, record: &AccessRecord) {
        if let Some(log) = &self.access_log {
            log(record);
        }
    }
}

/// A JSON-RPC error response, as a body.
pub(crate) fn rpc_error_body(id: Option<&Id>, code: i64, message: &str) -> String {
    let error = RpcError::new(ErrorCode::from_code(code), message);
    modproto::Message::Response(Response::err(id.cloned().unwrap_or(Id::Null), error)).to_line()
}

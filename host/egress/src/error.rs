//! What can keep the proxy from serving a call.

/// Why the proxy could not start, or could not open a call.
#[derive(Debug, thiserror::Error)]
pub enum EgressError {
    #[error("the egress proxy could not start its runtime: {0}")]
    Runtime(#[source] std::io::Error),
    #[error("the egress proxy could not serve the call's listener: {0}")]
    Listener(#[source] std::io::Error),
    #[error("the egress proxy could not draw a token for the call: {0}")]
    Token(String),
}

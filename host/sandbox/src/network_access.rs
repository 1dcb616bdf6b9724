//! What network a call's process may reach.

/// The network of one native call, from its capability's `effects.network`
/// as the operator granted it.
///
/// There is no "any TCP" access: a call with network reaches the outside
/// only through the host's egress proxy, which checks every host and
/// address against what that call was granted. What the sandbox enforces
/// is that the proxy is the only way out.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum NetworkAccess {
    /// No network: every IP and UNIX socket refused (seccomp), TCP bind and
    /// connect denied (landlock ABI 4+).
    None,
    /// TCP connect to `port` only (the call's egress proxy listener; landlock
    /// ABI 4+), never bind; stream sockets over IPv4 and IPv6 only, so no
    /// UDP and no DNS of the module's own (seccomp); and the process sits in
    /// the host's egress network namespace, whose only interface is its
    /// own loopback (`egress_namespace`).
    Proxy {
        /// The egress proxy's port on 127.0.0.1, in the egress namespace.
        port: u16,
    },
}

impl NetworkAccess {
    /// Whether the call may open TCP connections at all: selects the
    /// seccomp filter and the spawner threads of calls with network.
    pub fn is_used(self) -> bool {
        matches!(self, NetworkAccess::Proxy { .. })
    }

    /// The one TCP port a call may connect to.
    pub(crate) fn proxy_port(self) -> Option<u16> {
        match self {
            NetworkAccess::None => None,
            NetworkAccess::Proxy { port } => Some(port),
        }
    }
}

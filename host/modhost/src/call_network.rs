//! The network of one call: a ticket of the host's egress proxy, opened for
//! that call alone, and what the call's module is told about it.
//!
//! The proxy (`modhost_egress`) is started by the first call with network
//! and shared by every later one. Each call gets a listener of its own and
//! a token. A confined native call's listener is inside the egress network
//! namespace (its process can connect to that port and nowhere else,
//! `modhost_sandbox::NetworkAccess::Proxy`); a component's is on the host's
//! loopback, where the host itself sends the component's `wasi:http`
//! requests; so is a native call's under `confinement = "off"` (where
//! nothing stops a module from going around it, and the call's warning says
//! so). Dropping the ticket closes the listener and every connection of the
//! call.

use modhost_egress::{CallGrant, Contacts, Proxy, Ticket};
use modhost_runner::{CallNetwork, Transport};
use modhost_sandbox::ConfinementMode;

use crate::host::{Host, HostError};

/// Open the egress of one call granted `grant`.
pub(crate) fn open(
    host: &Host,
    grant: CallGrant,
    transport: Transport,
    confinement: ConfinementMode,
) -> Result<(Ticket, CallNetwork), HostError> {
    let failed = |e: &dyn std::fmt::Display| {
        HostError::Refused(format!(
            "could not open the egress proxy for this call: {e}; the call was not run"
        ))
    };
    let in_namespace = transport != Transport::Component && confinement != ConfinementMode::Off;
    let listener = if in_namespace {
        modhost_sandbox::egress_listener()
            .map_err(|e| failed(&e))?
            .listener
    } else {
        std::net::TcpListener::bind(("127.0.0.1", 0)).map_err(|e| failed(&e))?
    };
    let proxy = match host.egress.get() {
        Some(proxy) => proxy,
        None => {
            let started = Proxy::new(
                modhost_egress::Resolver::System,
                crate::network_config::proxy_settings(&host.config().network),
            )
            .map_err(|e| failed(&e))?;
            // Two first calls at once: one proxy is kept, the other dropped.
            host.egress.get_or_init(move || started)
        }
    };
    let ticket = proxy.open(grant, listener).map_err(|e| failed(&e))?;
    let network = CallNetwork {
        proxy_port: ticket.port(),
        proxy_url: ticket.proxy_url(),
    };
    Ok((ticket, network))
}

/// One line per refusal, for a failed call's diagnosis: what the module
/// tried to reach and why the proxy said no.
pub(crate) fn refusal_lines(contacts: &Contacts) -> impl Iterator<Item = String> + '_ {
    contacts
        .refused
        .iter()
        .map(|r| format!("the egress proxy refused {}: {}", r.host, r.reason))
}

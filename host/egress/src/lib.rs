//! The egress proxy of modhost's calls with network.
//!
//! A module granted network reaches the outside only through this proxy:
//! a native module's sandbox lets it connect to one port, its call's
//! listener, and nothing else (`modhost-sandbox`); a component's
//! `wasi:http` requests are tunnelled through it by the host
//! (`modhost-runner`). The proxy serves HTTP `CONNECT`
//! tunnels and absolute-URI `http://` requests, so curl, Python's
//! `urllib` and `requests`, Node's proxy agents, Go and Rust clients work
//! unchanged through the `HTTPS_PROXY`/`HTTP_PROXY`/`ALL_PROXY` variables
//! the host sets.
//!
//! Every request passes two checks of the call's [`CallGrant`]: the name
//! or address literal it asks for must be granted ([`CallGrant::admits`]),
//! then each address the proxy resolves it to must be public, or granted
//! outright by the operator ([`CallGrant::reaches`], [`classify`]). The
//! proxy connects to exactly the address it checked, so neither DNS
//! rebinding nor an address literal slips past. What a call reached and
//! what it was refused, with the reason, is its [`Contacts`].
//!
//! # API
//!
//! - [`Proxy`]: one per host; [`Proxy::open`] serves one call on a
//!   listener and returns its [`Ticket`] (port, proxy URL, and at the end
//!   the [`Contacts`]).
//! - [`CallGrant`], [`HostGrant`], [`Target`]: what a call may reach.
//! - [`classify`], [`AddressClass`]: which addresses are public.
//! - [`Resolver`], [`Settings`], [`EgressError`], [`REFUSAL_HEADER`].

#![deny(unnameable_types, unreachable_pub)]

mod address_class;
mod contacts;
mod descriptor_budget;
mod error;
mod grant;
mod proxy;
#[cfg(target_os = "linux")]
mod splice;

pub use address_class::{AddressClass, classify, embedded_v4};
pub use contacts::{Contacts, MAX_ENTRIES, Refusal};
pub use descriptor_budget::raise_limit as raise_descriptor_limit;
pub use error::EgressError;
pub use grant::{CallGrant, HostGrant, Target};
pub use proxy::{Proxy, REFUSAL_HEADER, Resolver, Settings, Ticket};

#[cfg(test)]
mod tests;

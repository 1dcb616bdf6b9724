//! `fetch`: one web page as readable text, through the host's egress proxy.
//!
//! One capability, [`get`]: a URL in, the final URL, status, content type
//! and the page as text out, cut at a size the caller picks within a cap.
//! It declares `network: true` (any public host) because no one can name in
//! advance the pages an agent will need; the operator narrows it to the
//! hosts they grant, in the home's `config.toml`:
//!
//! ```toml
//! [capabilities."fetch.fetch.get"]
//! network = ["docs.rs:443", "*.wikipedia.org:443"]
//! ```
//!
//! Under modhost a call with network reaches nothing but the host's egress
//! proxy, which checks every host it is asked for, redirects included; a
//! refusal comes back as a clear error naming the proxy's reason and the
//! line the operator would add ([`error`]).
//!
//! - [`target`]: which URLs are fetched (http and https, no credentials).
//! - [`client`]: ureq, the redirects (each a request of its own, so each
//!   is checked by the proxy), the deadline, the body read only as far as
//!   needed.
//! - [`tunnel`]: the CONNECT step, which keeps the proxy's reason when it
//!   refuses (ureq's own drops it).
//! - [`readable`]: the body as text: type, charset, HTML to text, the cut.
//!
//! Native only: it speaks HTTP over its own sockets (ureq, rustls), which
//! a component does not have; a component reaches the network through
//! `wasi:http` instead.

mod client;
mod error;
mod get;
mod readable;
mod target;
mod tunnel;

use modsdk::modproto::Network;
use modsdk::{Capability, Cost, Effects, Module, Semantics};

use crate::client::Client;

fn module() -> Module {
    Module::new("fetch", env!("CARGO_PKG_VERSION"))
        .contract_version("2.0.0")
        .title("Fetch")
        .description(
            "Fetch web pages as readable text (HTML turned into text, size-capped), through the host's egress proxy: only the hosts the operator grants in config.toml are reached.",
        )
        .capability(
            Capability::new("fetch.get", |ctx, input| {
                let output = get::run(ctx, &Client::from_env(), &input)?;
                ctx.set_text(get::render(&output));
                Ok(output)
            })
            .title("Fetch a web page")
            .description(get::DESCRIPTION)
            .effects(Effects {
                network: Network::AnyPublic,
                cost: Cost::Remote,
                ..Effects::default()
            }),
        )
        .operation(
            "fetch-page",
            "fetch.get",
            Semantics {
                external: Network::AnyPublic,
                ..Semantics::default()
            },
        )
}

fn main() {
    module().serve()
}

#[cfg(test)]
mod tests;

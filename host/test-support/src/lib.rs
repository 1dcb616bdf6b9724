//! Not shipped: what the host crates' tests share.
//!
//! A leaf crate on purpose: it depends on none of the host's crates, so a
//! crate's own unit tests can use it without building a second copy of that
//! crate (a dev-dependency that depended back on it would).

pub mod guests;
pub mod modules;
pub mod mounts;

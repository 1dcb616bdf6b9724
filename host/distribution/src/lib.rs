//! Getting module bytes from elsewhere, and knowing who vouches for them.
//!
//! modhost installs modules from a local path; this crate brings remote
//! bytes to a local file the install path then treats exactly like a local
//! one (archive safety, conformance, pinning), plus what was established
//! about them on the way:
//!
//! - [`source`]: what the operator named (`https://…`, `oci://…`, a path),
//!   parsed and refused early (plain `http://` never).
//! - [`https`]: a download over rustls, streamed to a temporary file,
//!   bounded in size and time, its sha256 computed on the way.
//! - [`oci`]: a pull from an OCI registry; a tag is resolved to a digest,
//!   and the digest is what is pinned.
//! - [`signature`]: Sigstore signatures (cosign key pairs, keyless bundles)
//!   verified offline against a trust root the operator pins.
//!
//! Design decisions:
//! - **Nothing half-done.** A fetch writes into a folder the caller owns
//!   (inside the home's staging area, same filesystem) and either returns a
//!   complete file whose digest was checked, or an error and no file.
//! - **Bounded by default.** Every fetch has a byte cap and time limits
//!   ([`limits::FetchLimits`]); an endless or stalled download ends with an
//!   error naming the limit.
//! - **The network is the caller's only via this crate's clients**, built
//!   by [`trust`] with the webpki roots plus the operator's own CAs.

pub mod error;
pub mod fetched;
pub mod https;
pub mod limits;
pub mod oci;
pub mod signature;
pub mod source;
pub mod trust;

pub use error::DistributionError;
pub use fetched::{Fetched, Origin};
pub use limits::{FetchLimits, NoProgress, Progress};
pub use source::{Source, SourceError};

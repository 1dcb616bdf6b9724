//! Why an OCI pull failed, and how the https client's errors are told apart.

use std::path::PathBuf;
use std::time::Duration;

use super::reference::{self, OciReference};

/// Why an OCI pull failed; nothing was kept.
#[derive(Debug, thiserror::Error)]
pub enum OciError {
    #[error(transparent)]
    Reference(#[from] reference::ReferenceError),
    #[error("the OCI client could not be set up: {reason}")]
    Client { reason: String },
    #[error(
        "could not {step} from {registry} ({reference}): {reason}. modhost talks to registries only over https, trusting the webpki roots and the CA files in `[distribution] ca_certificates`; a registry serving plain http is refused"
    )]
    Connect {
        registry: String,
        reference: String,
        step: String,
        reason: String,
    },
    #[error("the registry refused to {step} for {reference}: {reason}")]
    Registry {
        reference: String,
        step: String,
        reason: String,
    },
    #[error(
        "{reference}: the registry has no such manifest (or blob); check the repository and the tag or digest"
    )]
    NotFound { reference: String },
    #[error(
        "the manifest the registry sent for {reference} has digest {actual}, not {expected}: the registry's content does not match the reference"
    )]
    ManifestDigestMismatch {
        reference: String,
        expected: String,
        actual: String,
    },
    #[error(
        "a blob of {reference} has digest {actual}, not {expected} as its manifest says: the registry's copy is damaged or tampered with"
    )]
    BlobDigestMismatch {
        reference: String,
        expected: String,
        actual: String,
    },
    #[error("{reference} is not something modhost installs: {reason}")]
    UnsupportedManifest { reference: String, reason: String },
    #[error(
        "{reference} has no entry for this machine ({wanted}); it has: {}. Publish the module for {wanted}, or install on a machine it was built for",
        available.join(", ")
    )]
    NoPlatform {
        reference: String,
        wanted: String,
        available: Vec<String>,
    },
    #[error(
        "{what} is larger than the limit of {limit} bytes (raise `[distribution] max_download_bytes` if it is expected)"
    )]
    TooLarge { what: String, limit: u64 },
    #[error(
        "{what}: the registry sent more than the {declared} bytes its manifest declares: it is broken or hostile"
    )]
    Oversent { what: String, declared: u64 },
    #[error(
        "{what} took longer than the whole fetch may ({limit:?}; `[distribution] download_timeout_secs` sets it)"
    )]
    TimedOut { what: String, limit: Duration },
    #[error(
        "{what} stalled: no bytes for {limit:?} (`[distribution] stall_timeout_secs` sets it); try again, or check the registry"
    )]
    Stalled { what: String, limit: Duration },
    #[error("{what} failed: {reason}")]
    Transfer { what: String, reason: String },
    #[error("could not write {}: {source}", path.display())]
    Io {
        path: PathBuf,
        source: std::io::Error,
    },
}

/// The registry sent the client to `url` over plain http: refused.
pub(crate) fn plain_http(reference: &OciReference, step: &str, url: Option<String>) -> OciError {
    OciError::Connect {
        registry: reference.registry.clone(),
        reference: reference.to_string(),
        step: step.to_string(),
        reason: format!(
            "the registry sent modhost to {}, which is not https (a plain http hop could change or watch what is fetched)",
            url.unwrap_or_else(|| "a plain http URL".into())
        ),
    }
}

impl OciError {
    /// An error of modhost's own https client (registry.rs) in `step`.
    pub(crate) fn from_request(
        reference: &OciReference,
        step: &str,
        error: &reqwest::Error,
    ) -> OciError {
        let mut source: Option<&(dyn std::error::Error + 'static)> = Some(error);
        while let Some(e) = source {
            if let Some(crate::trust::RedirectRefused::NotHttps { to }) =
                e.downcast_ref::<crate::trust::RedirectRefused>()
            {
                return plain_http(reference, step, Some(to.clone()));
            }
            source = e.source();
        }
        let what = format!("{step} from {} ({reference})", reference.registry);
        if error.is_timeout() {
            return OciError::Transfer {
                what,
                reason: "the registry did not answer within the stall limit (`[distribution] stall_timeout_secs`)".into(),
            };
        }
        let mut reason = error_chain(error);
        if error.is_connect() || error.is_request() || error.is_redirect() {
            // rustls's word for a server that answered the handshake with
            // something that is not TLS.
            if reason.contains("InvalidContentType") {
                reason.push_str(" (the registry does not speak TLS there: plain http?)");
            }
            return OciError::Connect {
                registry: reference.registry.clone(),
                reference: reference.to_string(),
                step: step.to_string(),
                reason,
            };
        }
        OciError::Transfer { what, reason }
    }
}

/// An error and its sources, one line.
pub(crate) fn error_chain(error: &dyn std::error::Error) -> String {
    let mut text = error.to_string();
    let mut source = error.source();
    while let Some(inner) = source {
        let more = inner.to_string();
        if !text.contains(&more) {
            text.push_str(": ");
            text.push_str(&more);
        }
        source = inner.source();
    }
    text
}

//! Whom a download trusts: the web PKI's roots plus the operator's own CAs
//! (`[distribution] ca_certificates`), over rustls with the ring provider.
//!
//! Design decisions:
//! - **ring, chosen explicitly.** The workspace builds no aws-lc (it needs
//!   cmake), and a process with no installed default provider must not
//!   depend on one: every config here is built with
//!   `builder_with_provider(ring)`.
//! - **Roots are additive, never a bypass.** An operator's CA (an internal
//!   mirror, a test lab) is added to the webpki roots; there is no switch
//!   that skips verification.
//! - **One client for every fetch.** [`https_client`] is what an https
//!   source and an OCI pull (`oci::registry`) both use, so the two trust
//!   the same roots and refuse the same redirects.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use rustls::pki_types::CertificateDer;
use rustls::pki_types::pem::PemObject;

/// The client [`https_client`] builds (callers need not depend on reqwest).
pub type HttpsClient = reqwest::Client;

/// The most redirects one download follows.
pub const MAX_REDIRECTS: usize = 5;

/// Why the trust settings could not be used.
#[derive(Debug, thiserror::Error)]
pub enum TrustError {
    #[error(
        "[distribution] ca_certificates: could not read {path}: {source}; name a readable PEM file"
    )]
    Read {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error(
        "[distribution] ca_certificates: {path} holds no PEM certificate (-----BEGIN CERTIFICATE-----)"
    )]
    NoCertificate { path: PathBuf },
    #[error("[distribution] ca_certificates: {path}: {reason}")]
    BadCertificate { path: PathBuf, reason: String },
    #[error("could not build the TLS client: {0}")]
    Client(String),
}

/// The certificates of the operator's CA files (PEM, one or more
/// certificates each), in DER, for rustls or an OCI client's
/// `extra_root_certificates`.
pub fn load_ca_certificates(paths: &[PathBuf]) -> Result<Vec<CertificateDer<'static>>, TrustError> {
    let mut all = Vec::new();
    for path in paths {
        all.extend(load_one(path)?);
    }
    Ok(all)
}

fn load_one(path: &Path) -> Result<Vec<CertificateDer<'static>>, TrustError> {
    let pem = std::fs::read(path).map_err(|source| TrustError::Read {
        path: path.to_path_buf(),
        source,
    })?;
    let certificates = CertificateDer::pem_slice_iter(&pem)
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| TrustError::BadCertificate {
            path: path.to_path_buf(),
            reason: format!("not valid PEM: {e}"),
        })?;
    if certificates.is_empty() {
        return Err(TrustError::NoCertificate {
            path: path.to_path_buf(),
        });
    }
    Ok(certificates)
}

/// A rustls client config (ring) trusting the webpki roots plus `extra`.
pub fn client_config(
    extra: &[CertificateDer<'static>],
) -> Result<rustls::ClientConfig, TrustError> {
    let mut roots = rustls::RootCertStore {
        roots: webpki_roots::TLS_SERVER_ROOTS.to_vec(),
    };
    for certificate in extra {
        roots
            .add(certificate.clone())
            .map_err(|e| TrustError::Client(format!("a CA certificate was refused: {e}")))?;
    }
    // rustls deprecates ring's provider for lacking post-quantum key
    // exchange; classical TLS 1.2 and 1.3 are what it offers, and aws-lc
    // (the alternative) needs cmake.
    #[allow(deprecated)]
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let mut config = rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(|e| TrustError::Client(e.to_string()))?
        .with_root_certificates(roots)
        .with_no_client_auth();
    config.alpn_protocols = vec![b"http/1.1".to_vec()];
    Ok(config)
}

/// Why a redirect was not followed (found in a request error's chain).
#[derive(Debug, thiserror::Error)]
pub enum RedirectRefused {
    #[error("it redirects to {to}, which is not https (a plain http hop could change the bytes)")]
    NotHttps { to: String },
    #[error("it redirects more than {MAX_REDIRECTS} times")]
    TooMany,
}

/// The https client every download uses: [`client_config`], redirects only
/// to https and at most [`MAX_REDIRECTS`], `connect_timeout` for the TCP and
/// TLS handshake. Other bounds (bytes, total time, stalls) are the
/// download's own ([`crate::https`]), so they name the limit that struck.
pub fn https_client(
    extra: &[CertificateDer<'static>],
    connect_timeout: Duration,
) -> Result<HttpsClient, TrustError> {
    let redirects = reqwest::redirect::Policy::custom(|attempt| {
        if attempt.url().scheme() != "https" {
            let to = attempt.url().to_string();
            attempt.error(RedirectRefused::NotHttps { to })
        } else if attempt.previous().len() > MAX_REDIRECTS {
            attempt.error(RedirectRefused::TooMany)
        } else {
            attempt.follow()
        }
    });
    reqwest::Client::builder()
        .tls_backend_preconfigured(client_config(extra)?)
        .redirect(redirects)
        .connect_timeout(connect_timeout)
        .https_only(true)
        .user_agent(concat!("modhost/", env!("CARGO_PKG_VERSION")))
        .build()
        .map_err(|e| TrustError::Client(e.to_string()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_ca_file_is_read_and_a_bad_one_refused_with_its_path() {
        let dir = tempfile::tempdir().unwrap();
        let key = rcgen::KeyPair::generate().unwrap();
        let ca = rcgen::CertificateParams::new(Vec::<String>::new())
            .unwrap()
            .self_signed(&key)
            .unwrap();
        let good = dir.path().join("ca.pem");
        std::fs::write(&good, ca.pem()).unwrap();
        let loaded = load_ca_certificates(std::slice::from_ref(&good)).unwrap();
        assert_eq!(loaded.len(), 1);
        client_config(&loaded).unwrap();

        let empty = dir.path().join("empty.pem");
        std::fs::write(&empty, "not a certificate\n").unwrap();
        let e = load_ca_certificates(&[empty]).unwrap_err();
        assert!(matches!(e, TrustError::NoCertificate { .. }), "{e}");
        let e = load_ca_certificates(&[dir.path().join("missing.pem")]).unwrap_err();
        assert!(e.to_string().contains("missing.pem"), "{e}");
    }
}

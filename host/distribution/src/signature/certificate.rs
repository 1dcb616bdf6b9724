//! A Fulcio signing certificate: its chain to the trust root's CA at the
//! log's integration time (rustls-webpki, ring), and the identity it names.
//!
//! Fulcio certificates live ten minutes; what matters is that the
//! certificate was valid when the transparency log integrated the
//! signature, so the chain is checked at that (log-signed) time, never at
//! the time of the install. Only the trust root's own certificates build
//! the chain (a bundle's extra certificates are not trusted as
//! intermediates), and the leaf must be for code signing (extended key
//! usage) with a digital-signature key usage, and embed an SCT from a CT
//! log of the trust root (`sct.rs`).

use rustls::pki_types::{CertificateDer, UnixTime};
use x509_parser::prelude::{FromDer as _, GeneralName, ParsedExtension, X509Certificate};

use super::public_key::PublicKey;
use super::sct;
use super::transparency::show_time;
use super::trust_root::{Authority, TrustRoot};

/// id-kp-codeSigning (1.3.6.1.5.5.7.3.3), as DER content octets.
const CODE_SIGNING: &[u8] = &[0x2b, 0x06, 0x01, 0x05, 0x05, 0x07, 0x03, 0x03];
/// Fulcio's OIDC issuer extension (v2, a DER UTF8String).
const ISSUER_V2: &str = "1.3.6.1.4.1.57264.1.8";
/// Fulcio's OIDC issuer extension (v1, raw bytes; deprecated).
const ISSUER_V1: &str = "1.3.6.1.4.1.57264.1.1";
/// Fulcio's otherName SAN for usernames.
const USERNAME_SAN: &str = "1.3.6.1.4.1.57264.1.7";

/// What a certificate says about its holder.
#[derive(Debug)]
pub(crate) struct Identity {
    pub(crate) subject: String,
    pub(crate) issuer: Option<String>,
}

/// The leaf's public key.
pub(crate) fn public_key(der: &[u8]) -> Result<PublicKey, String> {
    let (_, cert) = X509Certificate::from_der(der)
        .map_err(|_| "the signing certificate is not a DER X.509 certificate".to_string())?;
    PublicKey::from_spki_der(cert.public_key().raw)
        .map_err(|why| format!("the signing certificate's key: {why}"))
}

/// Check that `der` chains to one of the trust root's certificate
/// authorities and was valid at `at` (Unix seconds), for code signing.
pub(crate) fn verify_chain(der: &[u8], root: &TrustRoot, at: i64) -> Result<(), String> {
    check_digital_signature(der)?;
    let leaf = CertificateDer::from(der);
    let end_entity = webpki::EndEntityCert::try_from(&leaf)
        .map_err(|e| format!("the signing certificate cannot be read: {e}"))?;
    let time = UnixTime::since_unix_epoch(std::time::Duration::from_secs(
        u64::try_from(at).unwrap_or(0),
    ));
    let mut reasons = Vec::new();
    for authority in &root.authorities {
        let Some((anchor_der, intermediates)) = authority.chain.split_last() else {
            continue;
        };
        let anchor_der = CertificateDer::from(anchor_der.as_slice());
        let Ok(anchor) = webpki::anchor_from_trusted_cert(&anchor_der) else {
            continue;
        };
        let intermediates: Vec<CertificateDer<'_>> = intermediates
            .iter()
            .map(|c| CertificateDer::from(c.as_slice()))
            .collect();
        match end_entity.verify_for_usage(
            webpki::ALL_VERIFICATION_ALGS,
            &[anchor],
            &intermediates,
            time,
            webpki::KeyUsage::required(CODE_SIGNING),
            None,
            None,
        ) {
            Ok(_) if authority.valid.contains(at) => {
                return sct::verify_embedded(der, &issuer_spki(der, authority)?, &root.ctlogs);
            }
            Ok(_) => reasons.push(format!(
                "the certificate authority {} was not valid at {}",
                authority.uri,
                show_time(at)
            )),
            Err(error) => reasons.push(explain(&error, at)),
        }
    }
    reasons.dedup();
    Err(if reasons.is_empty() {
        format!(
            "the trust root {} names no usable certificate authority",
            root.name()
        )
    } else {
        reasons.join("; ")
    })
}

/// The public key (SPKI DER) of the authority's certificate that issued
/// `leaf`: the chain certificate whose subject is the leaf's issuer.
fn issuer_spki(leaf: &[u8], authority: &Authority) -> Result<Vec<u8>, String> {
    let (_, leaf) = X509Certificate::from_der(leaf)
        .map_err(|_| "the signing certificate is not a DER X.509 certificate".to_string())?;
    authority
        .chain
        .iter()
        .filter_map(|der| X509Certificate::from_der(der).ok().map(|(_, cert)| cert))
        .find(|ca| ca.subject().as_raw() == leaf.issuer().as_raw())
        .map(|ca| ca.public_key().raw.to_vec())
        .ok_or_else(|| {
            format!(
                "the certificate authority {} holds no certificate named as the signing \
                 certificate's issuer",
                authority.uri
            )
        })
}

/// Fulcio's profile: the leaf's key usage names digital signature
/// (webpki checks the extended key usage only; sigstore-python checks
/// both). A missing key usage extension is refused as well.
fn check_digital_signature(der: &[u8]) -> Result<(), String> {
    let (_, cert) = X509Certificate::from_der(der)
        .map_err(|_| "the signing certificate is not a DER X.509 certificate".to_string())?;
    match cert.key_usage() {
        Ok(Some(usage)) if usage.value.digital_signature() => Ok(()),
        Ok(_) => Err(
            "the signing certificate's key usage is not digital signature (it is not a signing \
             certificate)"
                .into(),
        ),
        Err(_) => Err("the signing certificate's key usage extension cannot be read".into()),
    }
}

fn explain(error: &webpki::Error, at: i64) -> String {
    match error {
        webpki::Error::CertExpired { .. } | webpki::Error::CertNotValidYet { .. } => format!(
            "the signing certificate was not valid at the log's integration time {} (expired or \
             not yet valid)",
            show_time(at)
        ),
        // A CA of the same name but another key fails on the signature.
        webpki::Error::UnknownIssuer | webpki::Error::InvalidSignatureForPublicKey => {
            "the signing certificate was not issued by a certificate authority of the trust root \
             (untrusted CA)"
                .into()
        }
        webpki::Error::RequiredEkuNotFoundContext(_) => {
            "the signing certificate is not for code signing".into()
        }
        other => format!("the signing certificate does not chain to the trust root: {other}"),
    }
}

/// The identity (SAN) and OIDC issuer a Fulcio certificate names.
pub(crate) fn identity(der: &[u8]) -> Result<Identity, String> {
    let (_, cert) = X509Certificate::from_der(der)
        .map_err(|_| "the signing certificate is not a DER X.509 certificate".to_string())?;
    let mut subject = None;
    let mut issuer_v1 = None;
    let mut issuer_v2 = None;
    for extension in cert.iter_extensions() {
        let oid = extension.oid.to_id_string();
        if oid == ISSUER_V2 {
            // A DER UTF8String: tag 0x0c, a short or long length.
            issuer_v2 = x509_parser::der_parser::parse_der(extension.value)
                .ok()
                .and_then(|(_, object)| object.as_str().ok().map(str::to_string));
        } else if oid == ISSUER_V1 {
            issuer_v1 = std::str::from_utf8(extension.value)
                .ok()
                .map(str::to_string);
        } else if let ParsedExtension::SubjectAlternativeName(san) = extension.parsed_extension() {
            subject = san.general_names.iter().find_map(|name| match name {
                GeneralName::RFC822Name(email) => Some(email.to_string()),
                GeneralName::URI(uri) => Some(uri.to_string()),
                GeneralName::OtherName(oid, value) if oid.to_id_string() == USERNAME_SAN => {
                    x509_parser::der_parser::parse_der(value)
                        .ok()
                        .and_then(|(_, object)| object.as_str().ok().map(str::to_string))
                }
                _ => None,
            });
        }
    }
    let subject = subject.ok_or("the signing certificate names no identity (no email or URI)")?;
    Ok(Identity {
        subject,
        issuer: issuer_v2.or(issuer_v1),
    })
}

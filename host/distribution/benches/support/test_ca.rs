//! The benches' test CA: a CA and a server certificate for 127.0.0.1, as
//! PEM files nginx or docker-registry read (`server.crt`, `server.key`) and
//! the client trusts (`ca.pem`).

use std::path::{Path, PathBuf};

/// Write `ca.pem`, `server.crt` and `server.key` into `dir`; the CA's path.
pub fn write_ca_and_server_cert(dir: &Path) -> PathBuf {
    let mut ca_params = rcgen::CertificateParams::new(Vec::<String>::new()).unwrap();
    ca_params.is_ca = rcgen::IsCa::Ca(rcgen::BasicConstraints::Unconstrained);
    ca_params.key_usages = vec![rcgen::KeyUsagePurpose::KeyCertSign];
    // Distinct names: a certificate whose issuer is its own subject
    // looks self-signed to curl (OpenSSL).
    ca_params
        .distinguished_name
        .push(rcgen::DnType::CommonName, "modhost bench CA");
    let ca = rcgen::CertifiedIssuer::self_signed(ca_params, rcgen::KeyPair::generate().unwrap())
        .unwrap();
    let ca_pem = dir.join("ca.pem");
    std::fs::write(&ca_pem, ca.pem()).unwrap();
    let key = rcgen::KeyPair::generate().unwrap();
    let mut params = rcgen::CertificateParams::new(vec!["127.0.0.1".to_owned()]).unwrap();
    params
        .distinguished_name
        .push(rcgen::DnType::CommonName, "127.0.0.1");
    let cert = params.signed_by(&key, &ca).unwrap();
    std::fs::write(dir.join("server.crt"), cert.pem()).unwrap();
    std::fs::write(dir.join("server.key"), key.serialize_pem()).unwrap();
    ca_pem
}

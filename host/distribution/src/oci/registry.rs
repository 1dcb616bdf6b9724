//! The https client a pull uses, and what it reads from a registry:
//! manifests, referrer lists, blobs, the anonymous pull token.
//!
//! Design decisions:
//! - **One client, the https source's own** ([`trust::https_client`]):
//!   https only, redirects only to https and at most `MAX_REDIRECTS`, the
//!   webpki roots plus the operator's CAs (`[distribution]
//!   ca_certificates`), the environment's proxy as for an https source.
//!   oci-client is not used for pulling: it builds its reqwest client
//!   itself, with reqwest's default redirect policy (plain http included)
//!   and no https-only switch, fetches a token realm the registry names
//!   whatever its scheme, and reads manifests, tokens, referrer lists and
//!   error answers whole into memory, so a registry sending an endless one
//!   a byte under the stall limit grew memory until the fetch's deadline.
//! - **Every read is bounded while it arrives**: a manifest or referrer list
//!   at most 4 MiB (the distribution spec's floor for what registries
//!   accept), a token answer 64 KiB, an error answer 16 KiB (then cut);
//!   each wait for the answer or its next bytes by the stall limit, the
//!   whole by the fetch's deadline (the caller's). A blob is streamed by
//!   blob.rs within its declared size.
//! - **The protocol is the distribution spec's plain GETs** (`/v2/<name>/
//!   manifests|blobs|referrers/<reference>`), and its token flow for
//!   anonymous pulls: a `401` from `/v2/` with a `Bearer` challenge
//!   (parsed by `http-auth`, the parser oci-client uses) names a realm,
//!   which must be https, asked for `repository:<name>:pull`.
//! - **Manifests are checked here, not trusted from headers:** their sha256
//!   is computed from the bytes received and must equal the digest asked
//!   for (or, for a tag, the `Docker-Content-Digest` the registry sent, when
//!   it sent one); for a tag it *is* the resolved digest.

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::Duration;

use rustls::pki_types::CertificateDer;
use sha2::{Digest, Sha256};

use super::error::{OciError, error_chain};
use super::reference::OciReference;
use crate::trust;

/// The largest manifest (or referrer list) read.
pub const MAX_MANIFEST_BYTES: usize = 4 * 1024 * 1024;

/// The largest error body of a registry read (for its message).
const MAX_ERROR_BYTES: usize = 16 * 1024;

/// The largest token answer read.
const MAX_TOKEN_BYTES: usize = 64 * 1024;

/// Make ring rustls's process-wide provider unless one is installed.
pub fn ensure_crypto_provider() {
    if rustls::crypto::CryptoProvider::get_default().is_none() {
        // Another thread may have installed one meanwhile: either is ring
        // in this workspace, and the error then only says so. rustls
        // deprecates ring's provider for lacking post-quantum key exchange;
        // classical TLS 1.2 and 1.3 are what it offers (aws-lc needs cmake).
        #[allow(deprecated)]
        let _ = rustls::crypto::ring::default_provider().install_default();
    }
}

/// The client of one pull, and the tokens it was given.
pub struct RegistryClient {
    https: trust::HttpsClient,
    stall: Duration,
    /// The bearer token per repository (`None`: the registry wants none).
    tokens: Mutex<HashMap<String, Option<String>>>,
}

impl std::fmt::Debug for RegistryClient {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RegistryClient").finish_non_exhaustive()
    }
}

/// Build the client: https only, the given roots beside the webpki ones,
/// connections bounded by the fetch's stall limit.
pub fn client(
    extra_roots: &[CertificateDer<'static>],
    stall: Duration,
) -> Result<RegistryClient, OciError> {
    ensure_crypto_provider();
    let https = trust::https_client(extra_roots, stall).map_err(|e| OciError::Client {
        reason: error_chain(&e),
    })?;
    Ok(RegistryClient {
        https,
        stall,
        tokens: Mutex::new(HashMap::new()),
    })
}

/// A manifest's bytes and its sha256 digest (`sha256:<hex>`), computed
/// here.
#[derive(Debug)]
pub struct RawManifest {
    pub bytes: Vec<u8>,
    pub digest: String,
}

/// Fetch the manifest `reference` names; with a digest, its bytes must hash
/// to it. `Ok(None)`: the registry has no such manifest.
pub async fn manifest(
    client: &RegistryClient,
    reference: &OciReference,
    accepted: &[&str],
) -> Result<Option<RawManifest>, OciError> {
    let name = match (&reference.digest, &reference.tag) {
        (Some(digest), _) => digest.as_str(),
        (None, Some(tag)) => tag.as_str(),
        (None, None) => unreachable!("parse requires a tag or a digest"),
    };
    let Some((bytes, said)) = get(
        client,
        reference,
        "read the manifest",
        "manifests",
        name,
        accepted,
    )
    .await?
    else {
        return Ok(None);
    };
    let digest = format!("sha256:{:x}", Sha256::digest(&bytes));
    // The digest asked for, else the one the registry says it sent
    // (`Docker-Content-Digest`): a registry whose bytes are not what it
    // says is damaged or tampered with, even for a tag.
    let expected = reference
        .digest
        .clone()
        .or(said.filter(|d| d.starts_with("sha256:")));
    if let Some(expected) = expected
        && expected != digest
    {
        return Err(OciError::ManifestDigestMismatch {
            reference: reference.to_string(),
            expected,
            actual: digest,
        });
    }
    Ok(Some(RawManifest { bytes, digest }))
}

/// The referrers list (an image index) of `digest`; `Ok(None)` when the
/// registry has no referrers API (404): the caller then reads the tag
/// schema's index.
pub async fn referrers(
    client: &RegistryClient,
    reference: &OciReference,
    digest: &str,
) -> Result<Option<Vec<u8>>, OciError> {
    let listed = get(
        client,
        reference,
        "list the referrers",
        "referrers",
        digest,
        &[super::layout::OCI_INDEX],
    )
    .await?;
    Ok(listed.map(|(bytes, _)| bytes))
}

/// `GET https://REGISTRY/v2/REPOSITORY/<kind>/<name>`, its body at most
/// [`MAX_MANIFEST_BYTES`], and its `Docker-Content-Digest`; `Ok(None)` on
/// 404.
async fn get(
    client: &RegistryClient,
    reference: &OciReference,
    step: &str,
    kind: &str,
    name: &str,
    accepted: &[&str],
) -> Result<Option<(Vec<u8>, Option<String>)>, OciError> {
    let url = format!(
        "https://{}/v2/{}/{kind}/{name}",
        registry_host(reference),
        reference.repository
    );
    let mut request = client
        .https
        .get(&url)
        .header(reqwest::header::ACCEPT, accepted.join(", "));
    if let Some(token) = token(client, reference).await? {
        request = request.bearer_auth(token);
    }
    let response = send(client, reference, step, request).await?;
    let status = response.status();
    if status == reqwest::StatusCode::NOT_FOUND {
        return Ok(None);
    }
    let said = response
        .headers()
        .get("docker-content-digest")
        .and_then(|value| value.to_str().ok())
        .map(str::to_owned);
    let body = read(client, reference, step, response, MAX_MANIFEST_BYTES).await?;
    Ok(Some((body, said)))
}

/// The answer to `GET /v2/<name>/blobs/<digest>`, its status a success,
/// for blob.rs to stream.
pub async fn blob(
    client: &RegistryClient,
    reference: &OciReference,
    digest: &str,
) -> Result<reqwest::Response, OciError> {
    let step = "send the blob";
    let url = format!(
        "https://{}/v2/{}/blobs/{digest}",
        registry_host(reference),
        reference.repository
    );
    let mut request = client.https.get(&url);
    if let Some(token) = token(client, reference).await? {
        request = request.bearer_auth(token);
    }
    let response = send(client, reference, step, request).await?;
    if response.status() == reqwest::StatusCode::NOT_FOUND {
        return Err(OciError::NotFound {
            reference: format!("{reference} (blob {digest})"),
        });
    }
    if response.status().is_success() {
        return Ok(response);
    }
    // `read` turns an unsuccessful answer into the error quoting it.
    let status = response.status();
    read(client, reference, step, response, 0).await?;
    Err(OciError::Registry {
        reference: reference.to_string(),
        step: step.to_owned(),
        reason: format!("it answered {status}"),
    })
}

/// The registry's host as requests name it (oci-client's resolution:
/// `docker.io` is served by `registry-1.docker.io`).
fn registry_host(reference: &OciReference) -> String {
    reference.client_reference().resolve_registry().to_owned()
}

/// Send `request`, its answer's head within the stall limit.
async fn send(
    client: &RegistryClient,
    reference: &OciReference,
    step: &str,
    request: reqwest::RequestBuilder,
) -> Result<reqwest::Response, OciError> {
    tokio::time::timeout(client.stall, request.send())
        .await
        .map_err(|_| OciError::Stalled {
            what: format!("{step} for {reference}"),
            limit: client.stall,
        })?
        .map_err(|e| OciError::from_request(reference, step, &e))
}

/// `response`'s body, at most `limit` bytes (more is refused), each wait
/// within the stall limit. An unsuccessful answer is an error quoting the
/// start of its body.
async fn read(
    client: &RegistryClient,
    reference: &OciReference,
    step: &str,
    mut response: reqwest::Response,
    limit: usize,
) -> Result<Vec<u8>, OciError> {
    let status = response.status();
    let limit = match status.is_success() {
        true => limit,
        false => MAX_ERROR_BYTES,
    };
    let too_large = |announced: String| OciError::TooLarge {
        what: format!("the answer to {step} for {reference}{announced}"),
        limit: limit as u64,
    };
    if status.is_success()
        && let Some(length) = response.content_length()
        && length > limit as u64
    {
        return Err(too_large(format!(" ({length} bytes announced)")));
    }
    let mut body = Vec::new();
    loop {
        let chunk = tokio::time::timeout(client.stall, response.chunk())
            .await
            .map_err(|_| OciError::Stalled {
                what: format!("{step} for {reference}"),
                limit: client.stall,
            })?
            .map_err(|e| OciError::from_request(reference, step, &e))?;
        let Some(chunk) = chunk else { break };
        if body.len() + chunk.len() > limit {
            if !status.is_success() {
                break;
            }
            return Err(too_large(String::new()));
        }
        body.extend_from_slice(&chunk);
    }
    if !status.is_success() {
        let text = String::from_utf8_lossy(&body);
        let text: String = text.chars().take(512).collect();
        return Err(OciError::Registry {
            reference: reference.to_string(),
            step: step.to_owned(),
            reason: format!("it answered {status}: {}", text.trim()),
        });
    }
    Ok(body)
}

/// The bearer token for `reference`'s repository (anonymous pull), once
/// per repository: `None` when the registry asks for none.
async fn token(
    client: &RegistryClient,
    reference: &OciReference,
) -> Result<Option<String>, OciError> {
    if let Ok(tokens) = client.tokens.lock()
        && let Some(token) = tokens.get(&reference.repository)
    {
        return Ok(token.clone());
    }
    let token = fetch_token(client, reference).await?;
    if let Ok(mut tokens) = client.tokens.lock() {
        tokens.insert(reference.repository.clone(), token.clone());
    }
    Ok(token)
}

async fn fetch_token(
    client: &RegistryClient,
    reference: &OciReference,
) -> Result<Option<String>, OciError> {
    let step = "authenticate with the registry";
    let url = format!("https://{}/v2/", registry_host(reference));
    let answer = send(client, reference, step, client.https.get(&url)).await?;
    if answer.status() != reqwest::StatusCode::UNAUTHORIZED {
        return Ok(None);
    }
    let challenge = answer
        .headers()
        .get_all(reqwest::header::WWW_AUTHENTICATE)
        .iter()
        .filter_map(|value| value.to_str().ok())
        .find_map(bearer_challenge);
    drop(answer);
    // No Bearer challenge: an anonymous pull has nothing to answer with;
    // the requests themselves will say what the registry refuses.
    let Some((realm, service)) = challenge else {
        return Ok(None);
    };
    let refused = |reason: String| OciError::Registry {
        reference: reference.to_string(),
        step: step.to_owned(),
        reason,
    };
    let mut realm_url = reqwest::Url::parse(&realm)
        .map_err(|e| refused(format!("its token realm {realm:?} is not a URL: {e}")))?;
    if realm_url.scheme() != "https" {
        return Err(super::error::plain_http(reference, step, Some(realm)));
    }
    realm_url.query_pairs_mut().append_pair(
        "scope",
        &format!("repository:{}:pull", reference.repository),
    );
    if let Some(service) = service {
        realm_url.query_pairs_mut().append_pair("service", &service);
    }
    let answer = send(client, reference, step, client.https.get(realm_url)).await?;
    let body = read(client, reference, step, answer, MAX_TOKEN_BYTES).await?;
    #[derive(serde::Deserialize)]
    struct TokenAnswer {
        token: Option<String>,
        access_token: Option<String>,
    }
    let parsed: TokenAnswer = serde_json::from_slice(&body)
        .map_err(|e| refused(format!("its token answer is not JSON: {e}")))?;
    parsed
        .token
        .or(parsed.access_token)
        .filter(|token| !token.is_empty())
        .map(Some)
        .ok_or_else(|| refused("its token answer holds no token".into()))
}

/// The realm and service of a `Bearer` challenge in `header`.
fn bearer_challenge(header: &str) -> Option<(String, Option<String>)> {
    http_auth::ChallengeParser::new(header)
        .filter_map(Result::ok)
        .find(|challenge| challenge.scheme.eq_ignore_ascii_case("bearer"))
        .and_then(|challenge| {
            let param = |name: &str| {
                challenge
                    .params
                    .iter()
                    .find(|(key, _)| key.eq_ignore_ascii_case(name))
                    .map(|(_, value)| value.to_unescaped())
            };
            Some((param("realm")?, param("service")))
        })
}

#[cfg(test)]
mod tests {
    #[test]
    fn a_bearer_challenge_is_read_and_others_are_not() {
        assert_eq!(
            super::bearer_challenge(
                r#"Bearer realm="https://auth.example/token",service="registry.example",scope="x""#
            ),
            Some((
                "https://auth.example/token".into(),
                Some("registry.example".into())
            ))
        );
        assert_eq!(super::bearer_challenge(r#"Basic realm="x""#), None);
        assert_eq!(super::bearer_challenge(r#"Bearer service="x""#), None);
    }
}

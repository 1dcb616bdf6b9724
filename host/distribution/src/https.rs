//! A download over https into a file: streamed, digested on the way,
//! bounded, removed on any failure.
//!
//! Design decisions:
//! - **Bounded while the bytes arrive.** A `Content-Length` above
//!   [`FetchLimits::max_bytes`] is refused before the body is read; a body
//!   that grows past it (no or a lying `Content-Length`) is cut at the cap.
//!   The whole download has [`FetchLimits::total`], and every wait for the
//!   next chunk [`FetchLimits::stall`]: an endless or stalled server ends
//!   with an error naming the limit and the config key that raises it.
//! - **Digest on the fly.** The sha256 is computed as the bytes are
//!   written, so a multi-megabyte archive is never read twice, and compared
//!   with the expected one before the file is handed over.
//! - **Nothing half-done.** The file is created new (never over another)
//!   and removed by a guard on every early return, error or cancellation
//!   (a dropped future included); only a complete, checked file survives.
//! - **Synchronous writes.** Chunks go to a buffered `std::fs::File` from
//!   the async task: a page-cache write of a chunk is cheaper than a hop to
//!   the blocking pool per chunk, and this is a CLI's one download.
//! - **The bytes as served.** The client asks for no compression
//!   (reqwest is built without decoders), so the digest is of the file the
//!   publisher hashed.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::time::Duration;

use sha2::{Digest, Sha256};
use url::Url;

use crate::fetched::{Fetched, Origin};
use crate::limits::{FetchLimits, Progress};
use crate::trust::RedirectRefused;

/// Why a download failed; the file is gone.
#[derive(Debug, thiserror::Error)]
pub enum HttpsError {
    #[error("{url}: only https:// is fetched")]
    NotHttps { url: String },
    #[error("--sha256 {given:?} is not a sha256 (64 hex digits, optionally prefixed sha256:)")]
    BadExpectedDigest { given: String },
    #[error("{url}: redirect refused: {reason}")]
    Redirect { url: String, reason: String },
    #[error(
        "{url}: the server's certificate is not trusted ({reason}); if it is your own CA, add its PEM file to [distribution] ca_certificates in config.toml"
    )]
    Untrusted { url: String, reason: String },
    #[error(
        "{url}: the server's certificate is out of its validity period ({reason}); the server must renew it (or this machine's clock is wrong)"
    )]
    Expired { url: String, reason: String },
    #[error("{url}: could not connect: {reason}")]
    Connect { url: String, reason: String },
    #[error("{url}: the server answered {status}")]
    Status { url: String, status: String },
    #[error(
        "{url}: the server announces {announced} bytes, more than the {limit} allowed; raise [distribution] max_download_bytes if that is expected"
    )]
    TooLargeAnnounced {
        url: String,
        announced: u64,
        limit: u64,
    },
    #[error(
        "{url}: the download passed {limit} bytes and was stopped; raise [distribution] max_download_bytes if that is expected"
    )]
    TooLarge { url: String, limit: u64 },
    #[error(
        "{url}: the download took longer than {}s and was stopped; raise [distribution] download_timeout_secs if the connection is slow",
        limit.as_secs_f64()
    )]
    TimedOut { url: String, limit: Duration },
    #[error(
        "{url}: no data for {}s and the download was stopped; raise [distribution] stall_timeout_secs if the server is slow",
        limit.as_secs_f64()
    )]
    Stalled { url: String, limit: Duration },
    #[error("{url}: the download broke off: {reason}")]
    Interrupted { url: String, reason: String },
    #[error("{url}: sha256 mismatch: expected {expected}, got {actual}")]
    DigestMismatch {
        url: String,
        expected: String,
        actual: String,
    },
    #[error("{url}: could not {action} {}: {source}", path.display())]
    Io {
        url: String,
        action: &'static str,
        path: PathBuf,
        source: std::io::Error,
    },
}

/// A sha256 as the operator may write it (`sha256:` prefix, upper case),
/// in the form it is compared: 64 lowercase hex digits.
pub fn normalize_sha256(given: &str) -> Result<String, HttpsError> {
    let hex = given.trim();
    let hex = hex.strip_prefix("sha256:").unwrap_or(hex);
    if hex.len() != 64 || !hex.bytes().all(|b| b.is_ascii_hexdigit()) {
        return Err(HttpsError::BadExpectedDigest {
            given: given.to_owned(),
        });
    }
    Ok(hex.to_ascii_lowercase())
}

/// The name a download of `url` is saved under: the URL's last path
/// segment, only `[A-Za-z0-9._-]` kept (anything else becomes `_`), no
/// leading dots, at most 128 characters (the end kept: the extension is
/// what the install path reads), `download` when nothing is left.
pub fn file_name_for(url: &Url) -> String {
    let last = url
        .path_segments()
        .and_then(|mut segments| segments.next_back())
        .unwrap_or("");
    let cleaned: String = last
        .chars()
        .map(|c| match c {
            'A'..='Z' | 'a'..='z' | '0'..='9' | '.' | '_' | '-' => c,
            _ => '_',
        })
        .collect();
    let cleaned = cleaned.trim_start_matches('.');
    let chars: Vec<char> = cleaned.chars().collect();
    let kept: String = chars[chars.len().saturating_sub(128)..].iter().collect();
    let kept = kept.trim_start_matches('.');
    if kept.is_empty() {
        "download".to_owned()
    } else {
        kept.to_owned()
    }
}

/// Download `url` into a new file in `into` (named by [`file_name_for`]),
/// its sha256 checked against `expected_sha256` when given.
pub async fn fetch(
    client: &reqwest::Client,
    url: &Url,
    into: &Path,
    expected_sha256: Option<&str>,
    limits: &FetchLimits,
    progress: &dyn Progress,
) -> Result<Fetched, HttpsError> {
    let expected = expected_sha256.map(normalize_sha256).transpose()?;
    let path = into.join(file_name_for(url));
    let io = |action, path: &Path| {
        let url = url.to_string();
        let path = path.to_path_buf();
        move |source| HttpsError::Io {
            url,
            action,
            path,
            source,
        }
    };
    let file = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .open(&path)
        .map_err(io("create", &path))?;
    let mut guard = RemoveOnDrop(Some(path.clone()));
    let mut writer = std::io::BufWriter::with_capacity(256 * 1024, file);
    let (bytes, sha256) = download(client, url, limits, progress, &mut writer).await?;
    writer
        .into_inner()
        .map_err(|e| e.into_error())
        .map_err(io("write", &path))?;
    if let Some(expected) = expected
        && expected != sha256
    {
        return Err(HttpsError::DigestMismatch {
            url: url.to_string(),
            expected,
            actual: sha256,
        });
    }
    guard.0 = None;
    Ok(Fetched {
        path,
        sha256,
        bytes,
        origin: Origin {
            source: url.to_string(),
            oci_digest: None,
            resolved_tag: None,
        },
    })
}

/// Download `url` into memory (a signature, a bundle), with the same
/// client and bounds as [`fetch`].
pub async fn fetch_bytes(
    client: &reqwest::Client,
    url: &Url,
    limits: &FetchLimits,
    progress: &dyn Progress,
) -> Result<Vec<u8>, HttpsError> {
    let mut bytes = Vec::new();
    download(client, url, limits, progress, &mut bytes).await?;
    Ok(bytes)
}

/// Stream `url`'s body into `sink` within `limits`: its length and sha256.
async fn download(
    client: &reqwest::Client,
    url: &Url,
    limits: &FetchLimits,
    progress: &dyn Progress,
    sink: &mut dyn Write,
) -> Result<(u64, String), HttpsError> {
    if url.scheme() != "https" {
        return Err(HttpsError::NotHttps {
            url: url.to_string(),
        });
    }
    let _finish = FinishOnDrop(progress);
    let body = async {
        // The stall limit holds for the answer's head too: a server that
        // completes the handshake and never answers would otherwise hold
        // the download until the whole limit.
        let sent = client
            .get(url.clone())
            .header(reqwest::header::ACCEPT_ENCODING, "identity")
            .send();
        let response = tokio::time::timeout(limits.stall, sent)
            .await
            .map_err(|_| HttpsError::Stalled {
                url: url.to_string(),
                limit: limits.stall,
            })?
            .map_err(|e| request_error(url, &e))?;
        let status = response.status();
        if !status.is_success() {
            return Err(HttpsError::Status {
                url: url.to_string(),
                status: status.to_string(),
            });
        }
        let announced = response.content_length();
        if let Some(announced) = announced.filter(|n| *n > limits.max_bytes) {
            return Err(HttpsError::TooLargeAnnounced {
                url: url.to_string(),
                announced,
                limit: limits.max_bytes,
            });
        }
        progress.start(url.as_str(), announced);
        let mut response = response;
        let mut hasher = Sha256::new();
        let mut received: u64 = 0;
        loop {
            let chunk = tokio::time::timeout(limits.stall, response.chunk())
                .await
                .map_err(|_| HttpsError::Stalled {
                    url: url.to_string(),
                    limit: limits.stall,
                })?
                .map_err(|e| HttpsError::Interrupted {
                    url: url.to_string(),
                    reason: error_chain(&e),
                })?;
            let Some(chunk) = chunk else { break };
            received += chunk.len() as u64;
            if received > limits.max_bytes {
                return Err(HttpsError::TooLarge {
                    url: url.to_string(),
                    limit: limits.max_bytes,
                });
            }
            hasher.update(&chunk);
            sink.write_all(&chunk).map_err(|source| HttpsError::Io {
                url: url.to_string(),
                action: "write",
                path: PathBuf::from("the download"),
                source,
            })?;
            progress.advance(chunk.len() as u64);
        }
        Ok((received, hex(&hasher.finalize())))
    };
    tokio::time::timeout(limits.total, body)
        .await
        .map_err(|_| HttpsError::TimedOut {
            url: url.to_string(),
            limit: limits.total,
        })?
}

/// A request that failed before an answer: which of the reasons an
/// operator can act on it was.
fn request_error(url: &Url, error: &reqwest::Error) -> HttpsError {
    let url = url.to_string();
    let mut source: Option<&(dyn std::error::Error + 'static)> = Some(error);
    while let Some(e) = source {
        if let Some(refused) = e.downcast_ref::<RedirectRefused>() {
            return HttpsError::Redirect {
                url,
                reason: refused.to_string(),
            };
        }
        // io::Error's `source` skips its payload: look inside it too.
        let inner = e
            .downcast_ref::<std::io::Error>()
            .and_then(|io| io.get_ref())
            .map(|inner| inner as &(dyn std::error::Error + 'static));
        for candidate in [Some(e), inner].into_iter().flatten() {
            if let Some(tls) = candidate.downcast_ref::<rustls::Error>()
                && matches!(
                    tls,
                    rustls::Error::InvalidCertificate(_)
                        | rustls::Error::AlertReceived(rustls::AlertDescription::UnknownCA)
                )
            {
                return certificate_error(url, tls.to_string());
            }
        }
        // Wrapped where no downcast reaches (a boxed connector error):
        // rustls's own words for a certificate it refused.
        let text = e.to_string();
        if let Some(at) = text.find("invalid peer certificate") {
            return certificate_error(url, text[at..].to_owned());
        }
        source = e.source();
    }
    if error.is_redirect() {
        return HttpsError::Redirect {
            url,
            reason: error_chain(error),
        };
    }
    HttpsError::Connect {
        url,
        reason: error_chain(error),
    }
}

/// A certificate rustls refused: out of date (the server's to fix), or
/// not from a trusted CA (the operator's, when it is their own CA).
fn certificate_error(url: String, reason: String) -> HttpsError {
    if reason.contains("expired") || reason.contains("not valid yet") {
        HttpsError::Expired { url, reason }
    } else {
        HttpsError::Untrusted { url, reason }
    }
}

/// An error and its causes on one line.
fn error_chain(error: &dyn std::error::Error) -> String {
    let mut text = error.to_string();
    let mut source = error.source();
    while let Some(e) = source {
        let more = e.to_string();
        if !text.contains(&more) {
            text.push_str(": ");
            text.push_str(&more);
        }
        source = e.source();
    }
    text
}

fn hex(bytes: &[u8]) -> String {
    use std::fmt::Write as _;
    bytes.iter().fold(String::with_capacity(64), |mut s, b| {
        let _ = write!(s, "{b:02x}");
        s
    })
}

/// Removes a partial download unless disarmed.
struct RemoveOnDrop(Option<PathBuf>);

impl Drop for RemoveOnDrop {
    fn drop(&mut self) {
        if let Some(path) = self.0.take() {
            let _ = std::fs::remove_file(path);
        }
    }
}

/// Tells the progress the download ended, however it ended.
struct FinishOnDrop<'a>(&'a dyn Progress);

impl Drop for FinishOnDrop<'_> {
    fn drop(&mut self) {
        self.0.finish();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_file_is_named_after_the_last_segment_made_safe() {
        let name = |u: &str| file_name_for(&Url::parse(u).unwrap());
        assert_eq!(name("https://h/r/v1/notes-1.0.tar.gz"), "notes-1.0.tar.gz");
        assert_eq!(name("https://h/m.wasm?x=1#f"), "m.wasm");
        assert_eq!(
            name("https://h/..%2F..%2Fetc%2Fpasswd"),
            "_2F.._2Fetc_2Fpasswd"
        );
        assert_eq!(name("https://h/.hidden"), "hidden");
        assert_eq!(name("https://h/"), "download");
        assert_eq!(name("https://h/..."), "download");
        let long = format!("https://h/{}.tar.gz", "a".repeat(300));
        let long = name(&long);
        assert!(long.len() <= 128 && long.ends_with(".tar.gz"), "{long}");
    }

    #[test]
    fn an_expected_digest_is_normalized_or_refused() {
        let hex = "AB".repeat(32);
        assert_eq!(
            normalize_sha256(&format!("sha256:{hex}")).unwrap(),
            "ab".repeat(32)
        );
        assert!(normalize_sha256("abc").is_err());
        assert!(normalize_sha256(&"g".repeat(64)).is_err());
    }
}

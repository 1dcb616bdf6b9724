//! What the operator named as a module's source: a local path, an
//! `https://` URL or an `oci://` reference, told apart and refused early.
//!
//! Design decisions:
//! - **A scheme makes it a URL.** Text starting `scheme://` is a URL and
//!   must be one this host fetches; anything else is a local path (a file
//!   literally named `x://y` is reached as `./x://y`).
//! - **Plain `http://` is refused**, not upgraded: bytes on an unencrypted
//!   connection can be changed on the way, and a silent upgrade would hide
//!   that the operator named an insecure source. Other schemes (`file://`,
//!   `ftp://`, …) are refused with what to write instead.
//! - **No credentials in a URL:** the source is recorded with the pin (and
//!   in a lockfile), so a `user:password@` part would be written to disk.
//! - **`oci://` is kept as the reference text** (`registry/repository`
//!   with `:tag` or `@sha256:…`), only checked for its shape here; the OCI
//!   client parses it fully.

use std::fmt;
use std::path::PathBuf;

/// A module's source.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Source {
    /// A local file or folder.
    Local(PathBuf),
    /// An `https://` URL.
    Https(url::Url),
    /// An OCI reference, without its `oci://` prefix:
    /// `registry[:port]/repository[:tag][@sha256:…]`.
    Oci(String),
}

/// Why a source was refused before anything was fetched.
#[derive(Debug, thiserror::Error)]
pub enum SourceError {
    #[error(
        "{source_text}: plain http is refused (bytes on an unencrypted connection can be changed on the way); use an https:// URL"
    )]
    PlainHttp { source_text: String },
    #[error(
        "{source_text}: the scheme {scheme}:// is not a source modhost fetches; name a local path, an https:// URL or an oci://registry/repository reference"
    )]
    UnsupportedScheme { source_text: String, scheme: String },
    #[error("{source_text}: not a valid URL ({reason})")]
    BadUrl { source_text: String, reason: String },
    #[error(
        "{source_text}: a URL with a user name or password is refused (the source is recorded with the pin); use a URL without credentials"
    )]
    Credentials { source_text: String },
    #[error(
        "{source_text}: not an OCI reference ({reason}); write oci://registry/repository:tag or oci://registry/repository@sha256:<64 hex>"
    )]
    BadOciReference { source_text: String, reason: String },
}

impl Source {
    /// Parse what the operator wrote.
    pub fn parse(text: &str) -> Result<Source, SourceError> {
        let Some(scheme) = scheme_of(text) else {
            return Ok(Source::Local(PathBuf::from(text)));
        };
        let source_text = text.to_owned();
        match scheme.to_ascii_lowercase().as_str() {
            "https" => {
                let url = url::Url::parse(text).map_err(|e| SourceError::BadUrl {
                    source_text: source_text.clone(),
                    reason: e.to_string(),
                })?;
                if !url.username().is_empty() || url.password().is_some() {
                    return Err(SourceError::Credentials { source_text });
                }
                if url.host_str().is_none_or(str::is_empty) {
                    return Err(SourceError::BadUrl {
                        source_text,
                        reason: "no host".into(),
                    });
                }
                Ok(Source::Https(url))
            }
            "http" => Err(SourceError::PlainHttp { source_text }),
            "oci" => {
                let reference = &text[scheme.len() + 3..];
                check_oci_reference(reference).map_err(|reason| SourceError::BadOciReference {
                    source_text,
                    reason,
                })?;
                Ok(Source::Oci(reference.to_owned()))
            }
            _ => Err(SourceError::UnsupportedScheme {
                source_text,
                scheme: scheme.to_owned(),
            }),
        }
    }

    /// Whether the bytes come over the network.
    pub fn is_remote(&self) -> bool {
        !matches!(self, Source::Local(_))
    }
}

impl fmt::Display for Source {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Source::Local(path) => write!(f, "{}", path.display()),
            Source::Https(url) => write!(f, "{url}"),
            Source::Oci(reference) => write!(f, "oci://{reference}"),
        }
    }
}

/// Whether `text` looks like a URL of some scheme: `scheme://…` with an
/// RFC 3986 scheme (a letter, then letters, digits, `+`, `-`, `.`).
pub fn looks_like_url(text: &str) -> bool {
    scheme_of(text).is_some()
}

fn scheme_of(text: &str) -> Option<&str> {
    let (scheme, _) = text.split_once("://")?;
    let mut chars = scheme.chars();
    let first = chars.next()?;
    (first.is_ascii_alphabetic()
        && chars.all(|c| c.is_ascii_alphanumeric() || matches!(c, '+' | '-' | '.')))
    .then_some(scheme)
}

/// The shape of `registry/repository[:tag][@sha256:<hex>]`.
fn check_oci_reference(reference: &str) -> Result<(), String> {
    if reference.is_empty() {
        return Err("it is empty".into());
    }
    if reference
        .chars()
        .any(|c| c.is_whitespace() || c.is_control())
    {
        return Err("it contains white space".into());
    }
    let (name, digest) = match reference.split_once('@') {
        Some((name, digest)) => (name, Some(digest)),
        None => (reference, None),
    };
    let Some((registry, repository)) = name.split_once('/') else {
        return Err("no registry: the reference starts with the registry's host".into());
    };
    if registry.is_empty() || repository.is_empty() {
        return Err("the registry or the repository is empty".into());
    }
    if let Some(digest) = digest {
        let hex = digest
            .strip_prefix("sha256:")
            .ok_or_else(|| format!("the digest {digest:?} is not sha256:<64 hex>"))?;
        if hex.len() != 64 || !hex.bytes().all(|b| b.is_ascii_hexdigit()) {
            return Err(format!("the digest {digest:?} is not sha256:<64 hex>"));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paths_urls_and_references_are_told_apart() {
        assert_eq!(
            Source::parse("./m.tar.gz").unwrap(),
            Source::Local("./m.tar.gz".into())
        );
        assert_eq!(
            Source::parse("/abs/m").unwrap(),
            Source::Local("/abs/m".into())
        );
        assert!(matches!(
            Source::parse("https://example.org/m.wasm").unwrap(),
            Source::Https(url) if url.path() == "/m.wasm"
        ));
        assert_eq!(
            Source::parse("oci://ghcr.io/acme/notes:1.0").unwrap(),
            Source::Oci("ghcr.io/acme/notes:1.0".into())
        );
        let digest = format!("oci://localhost:5000/m@sha256:{}", "a".repeat(64));
        assert_eq!(
            Source::parse(&digest).unwrap().to_string(),
            digest,
            "displayed as written"
        );
    }

    #[test]
    fn plain_http_and_other_schemes_are_refused_with_the_reason() {
        let e = Source::parse("http://example.org/m")
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("plain http is refused") && e.contains("https://"),
            "{e}"
        );
        let e = Source::parse("HTTP://example.org/m").unwrap_err();
        assert!(matches!(e, SourceError::PlainHttp { .. }), "{e}");
        let e = Source::parse("file:///tmp/m").unwrap_err().to_string();
        assert!(e.contains("file://") && e.contains("local path"), "{e}");
        let e = Source::parse("https://user:pw@example.org/m").unwrap_err();
        assert!(matches!(e, SourceError::Credentials { .. }), "{e}");
    }

    #[test]
    fn malformed_oci_references_are_refused() {
        for bad in [
            "oci://",
            "oci://justaname",
            "oci://r/m@sha256:abc",
            "oci://r/m@md5:00",
            "oci://r/ m",
        ] {
            let e = Source::parse(bad).unwrap_err();
            assert!(
                matches!(e, SourceError::BadOciReference { .. }),
                "{bad}: {e}"
            );
        }
    }
}

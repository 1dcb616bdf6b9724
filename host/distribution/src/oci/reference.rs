//! An `oci://registry/repository:tag` or `…@sha256:<hex>` reference, parsed
//! strictly before anything is fetched.
//!
//! Design decisions:
//! - **The registry is always named.** `oci://` has no default registry (no
//!   Docker Hub guess, no `library/` prefix): what is written is where the
//!   bytes come from. The registry is a host name, an IPv4 address or a
//!   bracketed IPv6 address, with an optional port.
//! - **A tag or a digest is required.** No implicit `latest`: a module's
//!   bytes are pinned by the manifest digest, and an operator who names no
//!   version is told to name one rather than getting whatever `latest` is.
//! - **Only sha256 digests.** The pin, the lockfile and signatures all speak
//!   sha256; another algorithm is refused with that reason.
//! - The repository grammar is the distribution spec's (lowercase path
//!   components joined by `/`, separators `.`, `_`, `__` or dashes), so the
//!   last component is always a safe file name.

use std::fmt;

/// The scheme an OCI source is written with.
pub const SCHEME: &str = "oci://";

/// A parsed OCI reference.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OciReference {
    /// `host[:port]`, as written.
    pub registry: String,
    /// `a/b/c`.
    pub repository: String,
    /// The tag, when one was named.
    pub tag: Option<String>,
    /// `sha256:<64 hex>`, when one was named.
    pub digest: Option<String>,
}

/// Why a reference was refused (the message says what to write instead).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{reason}")]
pub struct ReferenceError {
    pub reason: String,
}

fn refuse(reference: &str, why: impl fmt::Display) -> ReferenceError {
    ReferenceError {
        reason: format!(
            "`{reference}` is not an OCI reference modhost accepts: {why} (write oci://REGISTRY[:PORT]/REPOSITORY:TAG or oci://REGISTRY[:PORT]/REPOSITORY@sha256:DIGEST)"
        ),
    }
}

impl OciReference {
    /// Parse `oci://registry[:port]/repository(:tag|@sha256:hex|:tag@sha256:hex)`.
    /// The `oci://` prefix may be left out.
    pub fn parse(text: &str) -> Result<OciReference, ReferenceError> {
        let rest = text.strip_prefix(SCHEME).unwrap_or(text);
        if rest.is_empty() {
            return Err(refuse(text, "it names no registry"));
        }
        if let Some(c) = rest
            .chars()
            .find(|c| c.is_whitespace() || c.is_control() || matches!(c, '?' | '#' | '\\'))
        {
            return Err(refuse(text, format_args!("it contains {c:?}")));
        }
        let Some((registry, path)) = rest.split_once('/') else {
            return Err(refuse(text, "it names a registry but no repository"));
        };
        check_registry(registry).map_err(|why| refuse(text, why))?;

        let (name_and_tag, digest) = match path.split_once('@') {
            Some((name, digest)) => (name, Some(digest)),
            None => (path, None),
        };
        if let Some(digest) = digest {
            check_digest(digest).map_err(|why| refuse(text, why))?;
        }
        // A tag is what follows the last `:` after the last `/`.
        let last_slash = name_and_tag.rfind('/').map_or(0, |i| i + 1);
        let (repository, tag) = match name_and_tag[last_slash..].rfind(':') {
            Some(i) => (
                &name_and_tag[..last_slash + i],
                Some(&name_and_tag[last_slash + i + 1..]),
            ),
            None => (name_and_tag, None),
        };
        check_repository(repository).map_err(|why| refuse(text, why))?;
        if let Some(tag) = tag {
            check_tag(tag).map_err(|why| refuse(text, why))?;
        }
        if tag.is_none() && digest.is_none() {
            return Err(refuse(
                text,
                "it names neither a tag nor a digest (modhost does not guess `latest`)",
            ));
        }
        if registry.len() + 1 + repository.len() > 255 {
            return Err(refuse(text, "the name is longer than 255 characters"));
        }
        Ok(OciReference {
            registry: registry.to_string(),
            repository: repository.to_string(),
            tag: tag.map(str::to_string),
            digest: digest.map(str::to_string),
        })
    }

    /// The repository's last path component: the fetched file's name.
    pub fn name(&self) -> &str {
        self.repository
            .rsplit('/')
            .next()
            .unwrap_or(&self.repository)
    }

    /// The same repository at `digest`, no tag: what a pinned fetch asks for.
    pub fn at_digest(&self, digest: &str) -> OciReference {
        OciReference {
            registry: self.registry.clone(),
            repository: self.repository.clone(),
            tag: None,
            digest: Some(digest.to_string()),
        }
    }

    /// The same repository at `tag`.
    pub fn at_tag(&self, tag: &str) -> OciReference {
        OciReference {
            registry: self.registry.clone(),
            repository: self.repository.clone(),
            tag: Some(tag.to_string()),
            digest: None,
        }
    }

    /// The reference for oci-client: the digest when there is one (it then
    /// decides; a tag beside it is only a label), else the tag.
    pub(crate) fn client_reference(&self) -> oci_client::Reference {
        match (&self.digest, &self.tag) {
            (Some(digest), _) => oci_client::Reference::with_digest(
                self.registry.clone(),
                self.repository.clone(),
                digest.clone(),
            ),
            (None, Some(tag)) => oci_client::Reference::with_tag(
                self.registry.clone(),
                self.repository.clone(),
                tag.clone(),
            ),
            (None, None) => unreachable!("parse requires a tag or a digest"),
        }
    }
}

impl fmt::Display for OciReference {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{SCHEME}{}/{}", self.registry, self.repository)?;
        if let Some(tag) = &self.tag {
            write!(f, ":{tag}")?;
        }
        if let Some(digest) = &self.digest {
            write!(f, "@{digest}")?;
        }
        Ok(())
    }
}

fn check_registry(registry: &str) -> Result<(), String> {
    if registry.is_empty() {
        return Err("the registry is empty".into());
    }
    if registry.contains('@') {
        return Err("credentials do not belong in a reference".into());
    }
    let (host, port) = if let Some(rest) = registry.strip_prefix('[') {
        let Some((v6, after)) = rest.split_once(']') else {
            return Err("an IPv6 registry address lacks its closing `]`".into());
        };
        if v6.parse::<std::net::Ipv6Addr>().is_err() {
            return Err(format!("`{v6}` is not an IPv6 address"));
        }
        match after {
            "" => (v6, None),
            _ => match after.strip_prefix(':') {
                Some(port) => (v6, Some(port)),
                None => return Err(format!("`{after}` follows the IPv6 address")),
            },
        }
    } else {
        match registry.split_once(':') {
            Some((host, port)) => (host, Some(port)),
            None => (registry, None),
        }
    };
    if let Some(port) = port {
        match port.parse::<u16>() {
            Ok(p) if p > 0 && port.bytes().all(|b| b.is_ascii_digit()) => {}
            _ => return Err(format!("`{port}` is not a port")),
        }
    }
    if !registry.starts_with('[') {
        let labels_ok = host.split('.').all(|label| {
            !label.is_empty()
                && label.len() <= 63
                && !label.starts_with('-')
                && !label.ends_with('-')
                && label
                    .bytes()
                    .all(|b| b.is_ascii_alphanumeric() || b == b'-')
        });
        if !labels_ok || host.len() > 253 {
            return Err(format!("`{host}` is not a registry host name"));
        }
    }
    Ok(())
}

/// One repository path component: `[a-z0-9]+` runs joined by `.`, `_`,
/// `__` or one or more `-`.
fn check_component(component: &str) -> Result<(), String> {
    let bad = || {
        format!(
            "the repository component `{component}` is not lowercase letters and digits joined by `.`, `_`, `__` or `-`"
        )
    };
    if component.is_empty() {
        return Err("the repository has an empty path component".into());
    }
    let bytes = component.as_bytes();
    let alnum = |b: u8| b.is_ascii_lowercase() || b.is_ascii_digit();
    if !alnum(bytes[0]) || !alnum(bytes[bytes.len() - 1]) {
        return Err(bad());
    }
    let mut i = 0;
    while i < bytes.len() {
        if alnum(bytes[i]) {
            i += 1;
            continue;
        }
        let start = i;
        while i < bytes.len() && !alnum(bytes[i]) {
            i += 1;
        }
        let separator = &component[start..i];
        let fine = matches!(separator, "." | "_" | "__") || separator.bytes().all(|b| b == b'-');
        if !fine {
            return Err(bad());
        }
    }
    Ok(())
}

fn check_repository(repository: &str) -> Result<(), String> {
    if repository.is_empty() {
        return Err("it names no repository".into());
    }
    repository.split('/').try_for_each(check_component)
}

fn check_tag(tag: &str) -> Result<(), String> {
    let bytes = tag.as_bytes();
    let ok = !bytes.is_empty()
        && bytes.len() <= 128
        && (bytes[0].is_ascii_alphanumeric() || bytes[0] == b'_')
        && bytes
            .iter()
            .all(|&b| b.is_ascii_alphanumeric() || matches!(b, b'_' | b'.' | b'-'));
    if ok {
        Ok(())
    } else {
        Err(format!(
            "`{tag}` is not a tag (letters, digits, `_`, `.`, `-`, at most 128, not starting with `.` or `-`)"
        ))
    }
}

fn check_digest(digest: &str) -> Result<(), String> {
    let Some((algorithm, hex)) = digest.split_once(':') else {
        return Err(format!(
            "`{digest}` is not a digest (sha256:<64 hex digits>)"
        ));
    };
    if algorithm != "sha256" {
        return Err(format!(
            "the digest algorithm `{algorithm}` is not supported: name the manifest by its sha256 digest"
        ));
    }
    if hex.len() != 64
        || !hex
            .bytes()
            .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
    {
        return Err(format!(
            "`{digest}` is not a sha256 digest (64 lowercase hex digits)"
        ));
    }
    Ok(())
}

/// `sha256:<hex>` is a well-formed sha256 digest.
pub(crate) fn is_sha256_digest(digest: &str) -> bool {
    check_digest(digest).is_ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    const HEX: &str = "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef";

    #[test]
    fn registry_with_port_nested_repository_and_tag() {
        let r = OciReference::parse("oci://127.0.0.1:5000/team/tools/echo:1.2.0").unwrap();
        assert_eq!(r.registry, "127.0.0.1:5000");
        assert_eq!(r.repository, "team/tools/echo");
        assert_eq!(r.tag.as_deref(), Some("1.2.0"));
        assert_eq!(r.digest, None);
        assert_eq!(r.name(), "echo");
        assert_eq!(r.to_string(), "oci://127.0.0.1:5000/team/tools/echo:1.2.0");
    }

    #[test]
    fn digest_and_tag_with_digest() {
        let r = OciReference::parse(&format!("oci://ghcr.io/a/b@sha256:{HEX}")).unwrap();
        assert_eq!(r.digest.as_deref(), Some(format!("sha256:{HEX}").as_str()));
        assert_eq!(r.tag, None);
        let both = OciReference::parse(&format!("ghcr.io/a/b:v1@sha256:{HEX}")).unwrap();
        assert_eq!(both.tag.as_deref(), Some("v1"));
        assert!(both.digest.is_some());
        let r = OciReference::parse("oci://[::1]:5000/a:x").unwrap();
        assert_eq!(r.registry, "[::1]:5000");
        let r = OciReference::parse("oci://localhost/my_mod-x.y__z:latest").unwrap();
        assert_eq!(r.name(), "my_mod-x.y__z");
    }

    #[test]
    fn nonsense_is_refused_with_a_reason() {
        for (text, needle) in [
            ("oci://", "no registry"),
            ("oci://registry.example", "no repository"),
            ("oci://registry.example/repo", "neither a tag nor a digest"),
            ("oci://registry.example/Repo:1", "not lowercase"),
            ("oci://registry.example/a//b:1", "empty path component"),
            ("oci://registry.example/a..b:1", "not lowercase"),
            ("oci://registry.example/-a:1", "not lowercase"),
            ("oci://registry.example/a:.x", "not a tag"),
            ("oci://registry.example/a:", "not a tag"),
            ("oci://registry.example:0/a:1", "not a port"),
            ("oci://registry.example:99999/a:1", "not a port"),
            ("oci://registry.example:+5/a:1", "not a port"),
            ("oci://user:pw@registry.example/a:1", "credentials"),
            ("oci://reg_istry/a:1", "not a registry host name"),
            ("oci://[::1/a:1", "closing"),
            ("oci://registry.example/a@sha512:abcd", "not supported"),
            ("oci://registry.example/a@sha256:ABC", "not a sha256 digest"),
            ("oci://registry.example/a@sha256", "not a digest"),
            ("oci://registry.example/a b:1", "contains"),
            ("oci://registry.example/a:1?x=y", "contains"),
        ] {
            let err = OciReference::parse(text).expect_err(text).to_string();
            assert!(err.contains(needle), "{text}: {err}");
        }
    }

    #[test]
    fn the_last_component_is_a_safe_file_name() {
        for text in ["oci://r.example/a/..:1", "oci://r.example/./x:1"] {
            assert!(OciReference::parse(text).is_err(), "{text}");
        }
    }
}

//! Which URLs are fetched: the caller's, and each redirect's `Location`.
//!
//! A URL is parsed as a browser parses it (the `url` crate, WHATWG), so
//! what is checked here is what is requested: `HTTP://Example.org:80/a b`
//! becomes `http://example.org/a%20b`, a name in another script becomes its
//! punycode. Then:
//!
//! - **http and https only.** `file:`, `ftp:`, `data:` and the rest are
//!   refused, for the caller's URL and for a redirect alike: a redirect may
//!   not take the fetch anywhere the caller could not have asked for.
//! - **No user name or password in the URL.** They would travel to the
//!   site as credentials the caller put in a tool call's input; a URL that
//!   carries them is refused rather than quietly stripped.
//! - **The fragment is dropped**: it is never sent, and the final URL is
//!   reported without it.
//!
//! Whether the host may be reached is not decided here: that is the egress
//! proxy's job, for every request, redirects included.

use url::Url;

/// Why a URL is not fetched.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum UrlError {
    #[error("{url:?} is not a URL: {problem}")]
    Malformed { url: String, problem: String },
    #[error("{url:?} is a {scheme}: URL; only http and https URLs are fetched")]
    Scheme { url: String, scheme: String },
    #[error("{url:?} carries a user name or password; they are not sent")]
    Credentials { url: String },
}

/// The caller's URL, checked.
pub fn parse(text: &str) -> Result<Url, UrlError> {
    let trimmed = text.trim();
    let url = Url::parse(trimmed).map_err(|e| UrlError::Malformed {
        url: trimmed.to_owned(),
        problem: match e {
            url::ParseError::RelativeUrlWithoutBase => {
                "it has no scheme (write https://example.org/…)".to_owned()
            }
            other => other.to_string(),
        },
    })?;
    check(url)
}

/// Where a redirect from `from` leads: `location` resolved against it.
pub fn redirect(from: &Url, location: &str) -> Result<Url, UrlError> {
    let url = from
        .join(location.trim())
        .map_err(|e| UrlError::Malformed {
            url: location.to_owned(),
            problem: e.to_string(),
        })?;
    check(url)
}

fn check(mut url: Url) -> Result<Url, UrlError> {
    match url.scheme() {
        "http" | "https" => {}
        scheme => {
            return Err(UrlError::Scheme {
                scheme: scheme.to_owned(),
                url: url.into(),
            });
        }
    }
    if url.host_str().is_none_or(str::is_empty) {
        return Err(UrlError::Malformed {
            url: url.into(),
            problem: "it names no host".to_owned(),
        });
    }
    if !url.username().is_empty() || url.password().is_some() {
        return Err(UrlError::Credentials {
            url: redacted(&url),
        });
    }
    url.set_fragment(None);
    Ok(url)
}

/// The URL with its credentials replaced, for a message.
fn redacted(url: &Url) -> String {
    let mut shown = url.clone();
    let _ = shown.set_username("…");
    let _ = shown.set_password(None);
    shown.into()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn urls_are_normalized_and_fragments_dropped() {
        let url = parse("  HTTP://Example.ORG:80/a b?q=1#top ").unwrap();
        assert_eq!(url.as_str(), "http://example.org/a%20b?q=1");
        let url = parse("https://bücher.example/").unwrap();
        assert_eq!(url.host_str(), Some("xn--bcher-kva.example"));
        assert_eq!(
            parse("https://[::1]:8443/").unwrap().as_str(),
            "https://[::1]:8443/"
        );
    }

    #[test]
    fn other_schemes_relative_urls_and_credentials_are_refused() {
        for (text, expected) in [
            ("file:///etc/passwd", "file: URL"),
            ("ftp://example.org/", "ftp: URL"),
            ("data:text/plain,hi", "data: URL"),
            ("example.org/page", "no scheme"),
            ("http://", "empty host"),
            ("https://user:secret@example.org/", "user name or password"),
        ] {
            let err = parse(text).expect_err(text).to_string();
            assert!(err.contains(expected), "{text}: {err}");
            assert!(!err.contains("secret"), "{text}: the password shows: {err}");
        }
    }

    #[test]
    fn redirects_resolve_against_the_page_and_obey_the_same_rules() {
        let from = parse("https://example.org/docs/a?x=1").unwrap();
        assert_eq!(
            redirect(&from, "b").unwrap().as_str(),
            "https://example.org/docs/b"
        );
        assert_eq!(
            redirect(&from, "//other.example/x#f").unwrap().as_str(),
            "https://other.example/x"
        );
        assert_eq!(
            redirect(&from, "http://127.0.0.1:9/").unwrap().as_str(),
            "http://127.0.0.1:9/"
        );
        assert!(matches!(
            redirect(&from, "file:///etc/passwd"),
            Err(UrlError::Scheme { .. })
        ));
    }
}

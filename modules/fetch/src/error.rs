//! [`FetchError`]: why a page did not come back, and how each reason reaches
//! the caller as a [`ModError`] with a remedy.
//!
//! The one a caller most needs to understand is the egress proxy's
//! refusal: the operator has not granted this call the host. The message
//! carries the proxy's own reason (its `X-Modhost-Refused`) and the remedy
//! names the line the operator would add, so an agent can ask for exactly
//! that instead of retrying.

use std::time::Duration;

use modsdk::ModError;

use crate::readable::NotText;
use crate::target::UrlError;
use crate::tunnel::TunnelError;

/// The key of this capability's section in the operator's `config.toml`.
pub const CONFIG_SECTION: &str = "[capabilities.\"fetch.fetch.get\"]";

/// URLs are kept as text (they are only shown): a `Url` is large, and
/// this is the error of every step.
#[derive(Debug, thiserror::Error)]
pub enum FetchError {
    /// The caller's URL.
    #[error(transparent)]
    Url(#[from] UrlError),
    /// A redirect to a URL that is not fetched.
    #[error("{from} redirected to {location:?}, which is not fetched: {problem}")]
    Redirect {
        from: String,
        location: String,
        problem: UrlError,
    },
    #[error("{first} redirected more than {max} times (the last to {last}); stopped there")]
    TooManyRedirects {
        first: String,
        last: String,
        max: usize,
    },
    /// The egress proxy refused a request's host.
    #[error("{}", refusal_message(url, redirected_from.as_ref(), target, reason))]
    Refused {
        url: String,
        redirected_from: Option<String>,
        /// `host:port`, as a host entry is written.
        target: String,
        reason: String,
    },
    /// The proxy could not reach the host, or answered otherwise.
    #[error("fetching {url}: {tunnel}")]
    Proxy { url: String, tunnel: TunnelError },
    #[error("fetching {url}: no complete answer within {:.1} s", budget.as_secs_f64())]
    Timeout { url: String, budget: Duration },
    #[error("fetching {url}: {detail}")]
    Connection { url: String, detail: String },
    #[error("fetching {url}: TLS failed: {detail}")]
    Tls { url: String, detail: String },
    #[error("fetching {url}: {not_text}")]
    NotText { url: String, not_text: NotText },
}

fn refusal_message(url: &str, from: Option<&String>, target: &str, reason: &str) -> String {
    let via = from
        .map(|from| format!(" (the redirect from {from})"))
        .unwrap_or_default();
    format!("the host's egress proxy refused {target} for {url}{via}: {reason}")
}

impl From<FetchError> for ModError {
    fn from(error: FetchError) -> ModError {
        let message = error.to_string();
        match error {
            FetchError::Url(_) => ModError::invalid_input(message).with_remedy(
                "pass an absolute http:// or https:// URL without a user name or password, such as https://example.org/page",
            ),
            FetchError::Redirect { .. } => ModError::failed(message)
                .with_remedy("the site sends the fetch where it cannot go; ask for the page a different way"),
            FetchError::TooManyRedirects { .. } => ModError::failed(message)
                .with_remedy("the site redirects in a loop or too often; fetch the last URL named, or another page"),
            FetchError::Refused { target, .. } => ModError::denied(message).with_remedy(format!(
                "this call may reach only the hosts the operator grants: to fetch here, the operator adds {target:?} to network = [...] under {CONFIG_SECTION} in the modhost home's config.toml (an address that is not public, such as the loopback or a private network, must also be in allow_private = [...] there); otherwise fetch a URL on a host already granted"
            )),
            FetchError::Proxy { .. } => ModError::failed(message).with_remedy(
                "check the host name and that the site is up; the host's egress proxy could not reach it for this call",
            ),
            FetchError::Timeout { .. } => ModError::failed(message).with_remedy(
                "the site is slow or does not answer; try again later, or raise the call's deadline ([limits] deadline_ms in config.toml, or --deadline-ms)",
            ),
            FetchError::Connection { .. } => ModError::failed(message).with_remedy(
                "check the URL and that the site is up; a call only reaches the network through the host's egress proxy, which the operator grants per capability in config.toml",
            ),
            FetchError::Tls { .. } => ModError::failed(message).with_remedy(
                "the site's certificate is not valid for its name or not from a known authority; fetch is never made to trust it",
            ),
            FetchError::NotText { .. } => ModError::failed(message)
                .with_remedy("fetch returns text (HTML, plain text, JSON, XML); this URL is something else"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_refusal_names_the_reason_the_host_and_the_operator_s_line() {
        let error = FetchError::Refused {
            url: "http://127.0.0.1:9/".into(),
            redirected_from: Some("http://198.51.100.2:8080/redirect".into()),
            target: "127.0.0.1:9".into(),
            reason: "127.0.0.1:9 is not granted to this call (it may reach 198.51.100.2:8080)"
                .into(),
        };
        let error = ModError::from(error);
        assert_eq!(error.kind().to_string(), "denied");
        assert!(
            error.message().contains("refused 127.0.0.1:9 for http://127.0.0.1:9/ (the redirect from http://198.51.100.2:8080/redirect): 127.0.0.1:9 is not granted"),
            "{error}"
        );
        let remedy = error.remedy().unwrap_or_default();
        for expected in [
            "\"127.0.0.1:9\"",
            "network = [...]",
            CONFIG_SECTION,
            "config.toml",
            "allow_private",
        ] {
            assert!(remedy.contains(expected), "{expected:?} missing: {remedy}");
        }
    }
}

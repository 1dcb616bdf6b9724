//! OAuth 2.0 Protected Resource Metadata (RFC 9728): the document that
//! tells a client which authorization server issues tokens for this
//! server, and where that document is.
//!
//! Design decisions:
//!
//! - **`resource` is `canonical_url`,** the very string a token's audience
//!   must name, so a client asks the authorization server for exactly the
//!   token this server accepts (RFC 8707 `resource`).
//! - **The challenge points at the path-inserted URL** (RFC 9728 §3.1):
//!   for `https://mcp.example.com/mcp`,
//!   `https://mcp.example.com/.well-known/oauth-protected-resource/mcp`;
//!   for a canonical URL without a path, the root well-known URL. The
//!   server answers the same document at both paths ([`paths`]), the two
//!   places the MCP specification has clients look.
//! - **`bearer_methods_supported` is `["header"]`:** tokens in a query
//!   string or a form body are refused (`bearer.rs`).
//! - **Only with authentication and a canonical URL.** A server that lets
//!   anyone in (loopback, no tokens) has no metadata and no challenge to
//!   point at it.

use serde_json::{Value, json};

use modhost::http_config::HttpConfig;

/// The well-known suffix of RFC 9728.
pub(crate) const WELL_KNOWN: &str = "/.well-known/oauth-protected-resource";

/// The metadata document and where it lives.
#[derive(Debug, Clone)]
pub(crate) struct ResourceMetadata {
    /// The absolute URL named in `WWW-Authenticate: ... resource_metadata`.
    pub(crate) url: String,
    /// The paths the server answers it at.
    pub(crate) paths: Vec<String>,
    pub(crate) document: Value,
}

/// The metadata of the server `http` configures, when it has any.
pub(crate) fn of(http: &HttpConfig) -> Option<ResourceMetadata> {
    let canonical = http.canonical_url.as_deref()?;
    if !http.has_auth() {
        return None;
    }
    let (origin, path) = split_origin(canonical);
    let resource_path = if path == "/" { "" } else { path };
    let url = format!("{origin}{WELL_KNOWN}{resource_path}");
    let mut paths = vec![format!("{WELL_KNOWN}{resource_path}")];
    if !resource_path.is_empty() {
        paths.push(WELL_KNOWN.to_owned());
    }
    let mut document = json!({
        "resource": canonical,
        "bearer_methods_supported": ["header"],
        "resource_name": "modhost",
    });
    if let Some(oauth) = &http.oauth {
        document["authorization_servers"] = json!(oauth.advertised_authorization_servers());
        if !oauth.scopes_supported.is_empty() {
            document["scopes_supported"] = json!(oauth.scopes_supported);
        }
    }
    Some(ResourceMetadata {
        url,
        paths,
        document,
    })
}

/// `scheme://authority` and the path of an absolute URL (the config's
/// loader checked it has neither query nor fragment).
fn split_origin(url: &str) -> (&str, &str) {
    let after_scheme = url.find("://").map_or(0, |i| i + 3);
    match url[after_scheme..].find('/') {
        Some(slash) => url.split_at(after_scheme + slash),
        None => (url, ""),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use modhost::http_config::{OAuthConfig, StaticToken};

    fn config(canonical: &str, oauth: bool) -> HttpConfig {
        HttpConfig {
            canonical_url: Some(canonical.into()),
            tokens: vec![StaticToken {
                principal: "ci".into(),
                sha256: "0".repeat(64),
                scopes: vec![],
            }],
            oauth: oauth.then(|| OAuthConfig {
                issuer: "https://auth.example.com".into(),
                jwks_uri: "https://auth.example.com/jwks".into(),
                authorization_servers: vec![],
                required_scopes: vec!["mcp:tools".into()],
                scopes_supported: vec!["mcp:tools".into(), "files:write".into()],
                jwks_ca_file: None,
                leeway_seconds: 30,
            }),
            ..HttpConfig::default()
        }
    }

    #[test]
    fn the_document_names_the_canonical_url_and_the_authorization_server() {
        let meta = of(&config("https://mcp.example.com/mcp", true)).unwrap();
        assert_eq!(
            meta.url,
            "https://mcp.example.com/.well-known/oauth-protected-resource/mcp"
        );
        assert_eq!(
            meta.paths,
            vec![
                "/.well-known/oauth-protected-resource/mcp".to_owned(),
                "/.well-known/oauth-protected-resource".to_owned()
            ]
        );
        assert_eq!(meta.document["resource"], "https://mcp.example.com/mcp");
        assert_eq!(
            meta.document["authorization_servers"],
            json!(["https://auth.example.com"])
        );
        assert_eq!(
            meta.document["scopes_supported"],
            json!(["mcp:tools", "files:write"])
        );
        assert_eq!(meta.document["bearer_methods_supported"], json!(["header"]));
    }

    #[test]
    fn a_root_resource_has_the_root_document_and_static_tokens_name_no_server() {
        let meta = of(&config("https://mcp.example.com:8443", false)).unwrap();
        assert_eq!(
            meta.url,
            "https://mcp.example.com:8443/.well-known/oauth-protected-resource"
        );
        assert_eq!(meta.paths, vec![WELL_KNOWN.to_owned()]);
        assert!(meta.document.get("authorization_servers").is_none());
    }

    #[test]
    fn no_authentication_or_no_canonical_url_is_no_metadata() {
        assert!(of(&HttpConfig::default()).is_none());
        let mut http = config("https://mcp.example.com/mcp", false);
        http.canonical_url = None;
        assert!(of(&http).is_none());
    }
}

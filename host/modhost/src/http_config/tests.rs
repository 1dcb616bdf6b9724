use super::*;
use crate::config::Config;
use std::path::Path;

fn parse(text: &str) -> Result<Config, String> {
    Config::parse(text, Path::new("/h/config.toml")).map_err(|e| e.to_string())
}

const DIGEST: &str = "9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08";

#[test]
fn no_section_is_no_auth_and_the_default_bounds() {
    let config = parse("").unwrap();
    assert_eq!(config.http, HttpConfig::default());
    assert!(!config.http.has_auth());
    assert_eq!(config.http.max_concurrent_calls, 64);
    assert_eq!(config.http.max_body_bytes, 4 << 20);
}

#[test]
fn a_full_section_parses() {
    let config = parse(&format!(
        r#"
[http]
canonical_url = "https://mcp.example.com/mcp"
allowed_origins = ["https://app.example.com", "http://localhost:3000"]
signing_key_file = "/run/secrets/key"
max_concurrent_calls = 8
[[http.tokens]]
principal = "ci-bot"
sha256 = "{DIGEST}"
scopes = ["mcp:tools"]
[http.oauth]
issuer = "https://auth.example.com"
jwks_uri = "https://auth.example.com/.well-known/jwks.json"
required_scopes = ["mcp:tools"]
scopes_supported = ["mcp:tools", "files:write"]
[http.implied_scopes]
"mcp:admin" = ["mcp:tools"]
"#
    ))
    .unwrap();
    let http = &config.http;
    assert!(http.has_auth());
    assert_eq!(http.tokens[0].principal, "ci-bot");
    let oauth = http.oauth.as_ref().unwrap();
    assert_eq!(
        oauth.advertised_authorization_servers(),
        vec!["https://auth.example.com".to_owned()]
    );
    assert_eq!(oauth.leeway_seconds, 30);
    assert_eq!(
        http.scope_closure(["mcp:admin".to_owned()]),
        BTreeSet::from(["mcp:admin".to_owned(), "mcp:tools".to_owned()])
    );
}

#[test]
fn a_mistyped_key_is_refused_naming_it() {
    let err = parse("[http]\ncanonical_uri = \"https://x.example\"\n").unwrap_err();
    assert!(err.contains("canonical_uri"), "{err}");
    let err = parse(&format!(
        "[[http.tokens]]\nprincipal = \"a\"\nsha = \"{DIGEST}\"\n"
    ))
    .unwrap_err();
    assert!(err.contains("sha"), "{err}");
    let err =
        parse("[http.oauth]\nissuer = \"https://a\"\njwks_url = \"https://a/k\"\n").unwrap_err();
    assert!(err.contains("jwks_url"), "{err}");
}

/// A token that could pass for the local user or an OAuth subject, two
/// tokens with one name or one digest, a digest that is not one: each
/// refused, naming the line and the fix.
#[test]
fn ambiguous_or_malformed_tokens_are_refused() {
    let token = |principal: &str, digest: &str| {
        format!("[[http.tokens]]\nprincipal = \"{principal}\"\nsha256 = \"{digest}\"\n")
    };
    for reserved in ["local:root", "oauth:https://a#b"] {
        let err = parse(&token(reserved, DIGEST)).unwrap_err();
        assert!(err.contains("reserved"), "{err}");
        assert!(err.contains("/h/config.toml"), "{err}");
    }
    let other = DIGEST.replace('9', "8");
    let err = parse(&(token("ci", DIGEST) + &token("ci", &other))).unwrap_err();
    assert!(err.contains("a second token with this principal"), "{err}");
    let err = parse(&(token("ci", DIGEST) + &token("cd", &DIGEST.to_uppercase()))).unwrap_err();
    assert!(err.contains("same sha256"), "{err}");
    let err = parse(&token("ci", "abc")).unwrap_err();
    assert!(err.contains("64 hex digits"), "{err}");
    assert!(err.contains("modhost token new --principal ci"), "{err}");
    let err = parse(&token("two words", DIGEST)).unwrap_err();
    assert!(err.contains("letters, digits"), "{err}");
    let err = parse(&(token("ci", DIGEST) + "scopes = [\"a b\"]\n")).unwrap_err();
    assert!(err.contains("is not a scope"), "{err}");
}

#[test]
fn oauth_needs_https_and_a_canonical_url() {
    let oauth = |issuer: &str, jwks: &str| {
        format!("[http.oauth]\nissuer = \"{issuer}\"\njwks_uri = \"{jwks}\"\n")
    };
    let err = parse(&oauth("https://a.example", "https://a.example/jwks")).unwrap_err();
    assert!(err.contains("canonical_url"), "{err}");
    let with_url = "[http]\ncanonical_url = \"https://mcp.example.com/mcp\"\n";
    parse(&(with_url.to_owned() + &oauth("https://a.example", "https://a.example/jwks"))).unwrap();
    let err = parse(&(with_url.to_owned() + &oauth("https://a.example", "http://a.example/jwks")))
        .unwrap_err();
    assert!(
        err.contains("jwks_uri") && err.contains("must be https://"),
        "{err}"
    );
    let err =
        parse(&(with_url.to_owned() + &oauth("a.example", "https://a.example/jwks"))).unwrap_err();
    assert!(
        err.contains("issuer") && err.contains("absolute URL"),
        "{err}"
    );
    let err = parse(
        &(with_url.to_owned()
            + &oauth("https://a.example", "https://a.example/jwks")
            + "leeway_seconds = 3600\nscopes_supported = [\"offline_access\"]\n"),
    )
    .unwrap_err();
    assert!(err.contains("leeway_seconds = 3600"), "{err}");
    assert!(err.contains("offline_access"), "{err}");
}

#[test]
fn the_canonical_url_is_https_or_loopback_http_without_query_or_fragment() {
    for good in [
        "https://mcp.example.com/mcp",
        "https://mcp.example.com",
        "https://mcp.example.com:8443/server/mcp",
        "http://127.0.0.1:8750/mcp",
        "http://localhost:8750/mcp",
        "http://[::1]:8750/mcp",
    ] {
        check_canonical_url(good).unwrap_or_else(|e| panic!("{good}: {e}"));
    }
    for (bad, why) in [
        ("http://mcp.example.com/mcp", "must be https://"),
        ("http://10.0.0.5/mcp", "must be https://"),
        ("https://mcp.example.com/mcp#x", "no ?query or #fragment"),
        ("https://mcp.example.com/mcp?a=b", "no ?query or #fragment"),
        ("mcp.example.com/mcp", "absolute URL"),
        ("https://user:pw@mcp.example.com/mcp", "no user name"),
        ("https://mcp.example.com/mcp/", "trailing '/'"),
        ("https:///mcp", "not a host name"),
        ("https://mcp.example.com:99999/mcp", "not a port"),
    ] {
        let err = check_canonical_url(bad).unwrap_err();
        assert!(err.contains(why), "{bad}: {err}");
    }
}

#[test]
fn origins_have_no_path() {
    check_origin("https://app.example.com").unwrap();
    check_origin("http://localhost:3000").unwrap();
    assert!(check_origin("https://app.example.com/").is_err());
    assert!(check_origin("*").is_err());
    let err = parse("[http]\nallowed_origins = [\"https://a.example/x\"]\n").unwrap_err();
    assert!(err.contains("allowed_origins entry"), "{err}");
}

#[test]
fn zero_bounds_are_refused() {
    let err = parse("[http]\nmax_open_streams = 0\n").unwrap_err();
    assert!(err.contains("max_open_streams = 0"), "{err}");
}

#[test]
fn scope_closure_follows_implications_transitively_and_ends_on_cycles() {
    let http = HttpConfig {
        implied_scopes: BTreeMap::from([
            ("admin".to_owned(), vec!["write".to_owned()]),
            (
                "write".to_owned(),
                vec!["read".to_owned(), "admin".to_owned()],
            ),
        ]),
        ..HttpConfig::default()
    };
    assert_eq!(
        http.scope_closure(["admin".to_owned()]),
        BTreeSet::from(["admin", "read", "write"].map(str::to_owned))
    );
    assert_eq!(
        http.scope_closure(["read".to_owned()]),
        BTreeSet::from(["read".to_owned()])
    );
}

//! The bearer token of a request: from the `Authorization` header only
//! (RFC 6750 §2.1), never from the query string or the body.
//!
//! Design decisions:
//!
//! - **The header, and only the header.** A token in a URL ends up in
//!   access logs, proxies' logs and browser history; the MCP specification
//!   forbids it and the protected resource metadata says
//!   `bearer_methods_supported: ["header"]`. A request whose query names
//!   `access_token` is refused outright (400), even with a good header, so
//!   a client that leaks its token that way learns it at once.
//! - **One `Authorization` header.** Two could be read differently by a
//!   proxy in front and by this server: refused (400).
//! - **Another scheme is no token.** `Basic ...` or `Digest ...` gets the
//!   challenge that says Bearer is wanted, as if nothing was sent.
//! - **Bounded.** A token longer than [`MAX_TOKEN_BYTES`], or with bytes a
//!   `token68` does not have, is refused before anything parses it.

use http::HeaderMap;
use http::header::AUTHORIZATION;

/// The longest bearer token looked at (JWTs with many claims stay far below).
pub(crate) const MAX_TOKEN_BYTES: usize = 16 * 1024;

/// What the request carries.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Presented<'a> {
    /// No bearer token.
    Nothing,
    /// A bearer token, its characters those of an RFC 6750 `b64token`.
    Token(&'a str),
    /// A malformed bearer token (401 `invalid_token`).
    Malformed(&'static str),
    /// A malformed request (400 `invalid_request`).
    BadRequest(&'static str),
}

/// The bearer token in `headers`.
pub(crate) fn presented(headers: &HeaderMap) -> Presented<'_> {
    let mut values = headers.get_all(AUTHORIZATION).iter();
    let Some(value) = values.next() else {
        return Presented::Nothing;
    };
    if values.next().is_some() {
        return Presented::BadRequest("more than one Authorization header: send exactly one");
    }
    let Ok(value) = value.to_str() else {
        return Presented::Malformed("the Authorization header is not ASCII");
    };
    let value = value.trim();
    let (scheme, rest) = value.split_once(' ').unwrap_or((value, ""));
    if !scheme.eq_ignore_ascii_case("bearer") {
        return Presented::Nothing;
    }
    let token = rest.trim_start_matches(' ');
    if token.is_empty() {
        return Presented::Malformed("the Authorization header has no token after Bearer");
    }
    if token.len() > MAX_TOKEN_BYTES {
        return Presented::Malformed("the bearer token is too long");
    }
    if !is_b64token(token) {
        return Presented::Malformed(
            "the bearer token has characters a token cannot (RFC 6750 b64token)",
        );
    }
    Presented::Token(token)
}

/// Whether a request's query string carries a token (`access_token`, the
/// RFC 6750 §2.3 parameter); the refusal's reason if so.
pub(crate) fn token_in_query(query: Option<&str>) -> Option<&'static str> {
    let query = query?;
    let names_a_token = query.split(['&', ';']).any(|pair| {
        let name = pair.split_once('=').map_or(pair, |(name, _)| name);
        percent_decoded(name).eq_ignore_ascii_case(b"access_token")
    });
    names_a_token.then_some(
        "a token in the query string is refused (it ends up in logs); send `Authorization: Bearer <token>`, \
         and revoke the token sent",
    )
}

/// `text` with its `%XX` escapes decoded (a malformed escape stays as is).
fn percent_decoded(text: &str) -> Vec<u8> {
    let bytes = text.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        let hex = |b: u8| (b as char).to_digit(16);
        if bytes[i] == b'%'
            && let Some(high) = bytes.get(i + 1).copied().and_then(hex)
            && let Some(low) = bytes.get(i + 2).copied().and_then(hex)
        {
            out.push((high * 16 + low) as u8);
            i += 3;
        } else {
            out.push(bytes[i]);
            i += 1;
        }
    }
    out
}

/// RFC 6750 `b64token`: `1*( ALPHA / DIGIT / "-" / "." / "_" / "~" / "+" / "/" ) *"="`.
fn is_b64token(token: &str) -> bool {
    let body = token.trim_end_matches('=');
    !body.is_empty()
        && body.bytes().all(|b| {
            b.is_ascii_alphanumeric() || matches!(b, b'-' | b'.' | b'_' | b'~' | b'+' | b'/')
        })
}

#[cfg(test)]
mod tests {
    use super::*;
    use http::HeaderValue;

    fn headers(values: &[&str]) -> HeaderMap {
        let mut map = HeaderMap::new();
        for value in values {
            map.append(AUTHORIZATION, HeaderValue::from_str(value).unwrap());
        }
        map
    }

    #[test]
    fn a_bearer_token_is_read_whatever_the_schemes_case() {
        assert_eq!(
            presented(&headers(&["Bearer abc.def-_~+/=="])),
            Presented::Token("abc.def-_~+/==")
        );
        assert_eq!(
            presented(&headers(&["bearer abc"])),
            Presented::Token("abc")
        );
        assert_eq!(
            presented(&headers(&["BEARER   abc "])),
            Presented::Token("abc")
        );
    }

    #[test]
    fn nothing_or_another_scheme_is_no_token() {
        assert_eq!(presented(&HeaderMap::new()), Presented::Nothing);
        assert_eq!(
            presented(&headers(&["Basic dXNlcjpwdw=="])),
            Presented::Nothing
        );
        assert_eq!(presented(&headers(&["Bearerabc"])), Presented::Nothing);
    }

    #[test]
    fn malformed_tokens_and_two_headers_are_refused() {
        assert!(matches!(
            presented(&headers(&["Bearer"])),
            Presented::Malformed(_)
        ));
        assert!(matches!(
            presented(&headers(&["Bearer a b"])),
            Presented::Malformed(_)
        ));
        assert!(matches!(
            presented(&headers(&["Bearer a\"b"])),
            Presented::Malformed(_)
        ));
        assert!(matches!(
            presented(&headers(&["Bearer ==="])),
            Presented::Malformed(_)
        ));
        let long = format!("Bearer {}", "a".repeat(MAX_TOKEN_BYTES + 1));
        assert!(matches!(
            presented(&headers(&[&long])),
            Presented::Malformed(_)
        ));
        assert!(matches!(
            presented(&headers(&["Bearer a", "Bearer b"])),
            Presented::BadRequest(_)
        ));
    }

    #[test]
    fn a_token_in_the_query_is_named() {
        assert!(token_in_query(None).is_none());
        assert!(token_in_query(Some("session=1&x=access_token")).is_none());
        assert!(token_in_query(Some("access_token=abc")).is_some());
        assert!(token_in_query(Some("a=1&ACCESS_TOKEN=abc")).is_some());
        assert!(token_in_query(Some("a=1&access%5Ftoken=abc")).is_some());
        assert!(token_in_query(Some("access_token")).is_some());
        assert!(token_in_query(Some("%61ccess_t%6Fken=abc")).is_some());
        assert!(token_in_query(Some("a=1;access_token=abc")).is_some());
    }
}

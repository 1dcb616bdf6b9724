//! The 2026-07-28 request metadata headers: `MCP-Protocol-Version`,
//! `Mcp-Method` and `Mcp-Name` mirror fields of the body so that load
//! balancers and gateways can route without parsing it; the server checks
//! that they say what the body says ("Server Validation" of the streamable
//! HTTP transport), or a proxy routing on the header and this server acting
//! on the body could disagree about what a request is.
//!
//! Design decisions:
//!
//! - **Missing, malformed or different is one refusal:** 400 with
//!   `HeaderMismatch` (-32020), the message naming the header and both
//!   values.
//! - **Values compare exactly** (they are case-sensitive; names are not, as
//!   `http::HeaderMap` already treats them), after the optional whitespace
//!   HTTP allows around a field value is dropped (RFC 9110 §5.5) and a
//!   Base64 sentinel (`=?base64?…?=`) is decoded.
//! - **`Mcp-Param-*` headers are ignored:** they mirror arguments a tool's
//!   schema marks with `x-mcp-header`, and no modhost tool marks any, so
//!   none is recognized (the specification's rule for unrecognized ones).
//! - **Notifications are not checked:** the revision defines no header
//!   requirements for notification POSTs.
//! - **Sent, they are checked in every era.** The handshake revisions do
//!   not require them, but a gateway that routes or authorizes on
//!   `Mcp-Method` or `Mcp-Name` is as misled there by a header the body
//!   contradicts: a handshake request that sends either must agree with
//!   its body, or it is refused in the same way ([`check_sent`]).

use base64::Engine;
use base64::engine::general_purpose::STANDARD;
use http::HeaderMap;
use serde_json::Value;

/// 2026-07-28 `HeaderMismatch`.
pub(crate) const HEADER_MISMATCH: i64 = -32020;

/// The header naming the protocol version (every revision from 2025-06-18).
pub(crate) const PROTOCOL_VERSION: &str = "mcp-protocol-version";
const METHOD: &str = "mcp-method";
const NAME: &str = "mcp-name";

/// The methods whose `Mcp-Name` is required, and the param it mirrors.
fn named_param(method: &str) -> Option<&'static str> {
    match method {
        "tools/call" | "prompts/get" => Some("name"),
        "resources/read" => Some("uri"),
        _ => None,
    }
}

/// The value of header `name`, whitespace around it dropped: `Ok(None)`
/// when absent, `Err` when repeated or not visible ASCII.
pub(crate) fn header<'a>(headers: &'a HeaderMap, name: &str) -> Result<Option<&'a str>, String> {
    let mut values = headers.get_all(name).iter();
    let Some(value) = values.next() else {
        return Ok(None);
    };
    if values.next().is_some() {
        return Err(format!("Header mismatch: {name} is sent more than once"));
    }
    let text = value
        .to_str()
        .map_err(|_| format!("Header mismatch: {name} holds characters a header value may not"))?;
    Ok(Some(text.trim_matches([' ', '\t'])))
}

/// A mirrored value as the body has it: the Base64 sentinel decoded.
fn decoded(name: &str, value: &str) -> Result<String, String> {
    let Some(inner) = value
        .strip_prefix("=?base64?")
        .and_then(|v| v.strip_suffix("?="))
    else {
        return Ok(value.to_owned());
    };
    let bytes = STANDARD
        .decode(inner)
        .map_err(|e| format!("Header mismatch: {name} is not valid Base64 ({e})"))?;
    String::from_utf8(bytes)
        .map_err(|_| format!("Header mismatch: {name} does not decode to UTF-8 text"))
}

/// Check the headers of a 2026-07-28 request for `method` with `params`,
/// whose `_meta` names `version`; the `HeaderMismatch` message if they do
/// not say what the body says.
pub(crate) fn check(
    headers: &HeaderMap,
    method: &str,
    params: Option<&Value>,
    version: &str,
) -> Result<(), String> {
    let sent_version = header(headers, PROTOCOL_VERSION)?.ok_or_else(|| {
        "Header mismatch: MCP-Protocol-Version is required on every request".to_owned()
    })?;
    if sent_version != version {
        return Err(format!(
            "Header mismatch: MCP-Protocol-Version header value '{sent_version}' does not match \
             body value '{version}' (params._meta[\"io.modelcontextprotocol/protocolVersion\"])"
        ));
    }
    let sent_method = header(headers, METHOD)?
        .ok_or_else(|| "Header mismatch: Mcp-Method is required on every request".to_owned())?;
    if sent_method != method {
        return Err(format!(
            "Header mismatch: Mcp-Method header value '{sent_method}' does not match body value '{method}'"
        ));
    }
    let Some(param) = named_param(method) else {
        return Ok(());
    };
    let body_value = params.and_then(|p| p.get(param)).and_then(Value::as_str);
    let sent_name = header(headers, NAME)?;
    match (sent_name, body_value) {
        // Nothing to mirror: the body's own check refuses the request.
        (None, None) => Ok(()),
        (None, Some(_)) => Err(format!(
            "Header mismatch: Mcp-Name is required for {method} (it mirrors params.{param})"
        )),
        (Some(sent), body) => {
            let sent = decoded("Mcp-Name", sent)?;
            match body {
                Some(body) if body == sent => Ok(()),
                Some(body) => Err(format!(
                    "Header mismatch: Mcp-Name header value '{sent}' does not match body value '{body}'"
                )),
                None => Err(format!(
                    "Header mismatch: Mcp-Name is '{sent}' but the body has no params.{param}"
                )),
            }
        }
    }
}

/// Check the `Mcp-Method` and `Mcp-Name` headers a handshake-era request
/// for `method` with `params` sent (they are optional there); the
/// `HeaderMismatch` message if one does not say what the body says.
pub(crate) fn check_sent(
    headers: &HeaderMap,
    method: &str,
    params: Option<&Value>,
) -> Result<(), String> {
    if let Some(sent) = header(headers, METHOD)?
        && sent != method
    {
        return Err(format!(
            "Header mismatch: Mcp-Method header value '{sent}' does not match body value '{method}'"
        ));
    }
    let Some(sent) = header(headers, NAME)? else {
        return Ok(());
    };
    let sent = decoded("Mcp-Name", sent)?;
    let Some(param) = named_param(method) else {
        return Err(format!(
            "Header mismatch: Mcp-Name is '{sent}' but {method} names nothing"
        ));
    };
    match params.and_then(|p| p.get(param)).and_then(Value::as_str) {
        Some(body) if body == sent => Ok(()),
        Some(body) => Err(format!(
            "Header mismatch: Mcp-Name header value '{sent}' does not match body value '{body}'"
        )),
        None => Err(format!(
            "Header mismatch: Mcp-Name is '{sent}' but the body has no params.{param}"
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use http::HeaderValue;
    use serde_json::json;

    fn headers(pairs: &[(&'static str, &str)]) -> HeaderMap {
        let mut map = HeaderMap::new();
        for (name, value) in pairs {
            map.append(*name, HeaderValue::from_str(value).unwrap());
        }
        map
    }

    const V: &str = "2026-07-28";

    #[test]
    fn matching_headers_pass_whatever_their_names_case_and_surrounding_space() {
        let call = json!({"name": "files__search"});
        let ok = headers(&[
            ("MCP-PROTOCOL-VERSION", V),
            ("mcp-method", " tools/call\t"),
            ("Mcp-Name", "  files__search  "),
        ]);
        assert_eq!(check(&ok, "tools/call", Some(&call), V), Ok(()));
        let list = headers(&[("mcp-protocol-version", V), ("MCP-METHOD", "tools/list")]);
        assert_eq!(check(&list, "tools/list", None, V), Ok(()));
        // A name outside the safe set arrives as Base64.
        let odd = json!({"name": "héllo"});
        let encoded = format!("=?base64?{}?=", STANDARD.encode("héllo"));
        let sent = headers(&[
            ("mcp-protocol-version", V),
            ("mcp-method", "tools/call"),
            ("mcp-name", &encoded),
        ]);
        assert_eq!(check(&sent, "tools/call", Some(&odd), V), Ok(()));
    }

    #[test]
    fn missing_different_or_malformed_headers_are_a_mismatch() {
        let call = json!({"name": "a"});
        let cases: Vec<(HeaderMap, &str)> = vec![
            (
                headers(&[("mcp-method", "tools/call"), ("mcp-name", "a")]),
                "required",
            ),
            (
                headers(&[
                    ("mcp-protocol-version", "2025-11-25"),
                    ("mcp-method", "tools/call"),
                    ("mcp-name", "a"),
                ]),
                "does not match",
            ),
            (
                headers(&[("mcp-protocol-version", V), ("mcp-name", "a")]),
                "Mcp-Method is required",
            ),
            (
                headers(&[
                    ("mcp-protocol-version", V),
                    ("mcp-method", "TOOLS/CALL"),
                    ("mcp-name", "a"),
                ]),
                "does not match",
            ),
            (
                headers(&[("mcp-protocol-version", V), ("mcp-method", "tools/call")]),
                "Mcp-Name is required",
            ),
            (
                headers(&[
                    ("mcp-protocol-version", V),
                    ("mcp-method", "tools/call"),
                    ("mcp-name", "b"),
                ]),
                "'b' does not match body value 'a'",
            ),
            (
                headers(&[
                    ("mcp-protocol-version", V),
                    ("mcp-method", "tools/call"),
                    ("mcp-name", "=?base64?!!?="),
                ]),
                "Base64",
            ),
            (
                headers(&[
                    ("mcp-protocol-version", V),
                    ("mcp-method", "tools/call"),
                    ("mcp-method", "tools/call"),
                    ("mcp-name", "a"),
                ]),
                "more than once",
            ),
        ];
        for (sent, why) in cases {
            let refused = check(&sent, "tools/call", Some(&call), V).unwrap_err();
            assert!(refused.contains(why), "{refused:?} should say {why:?}");
            assert!(refused.starts_with("Header mismatch"), "{refused}");
        }
    }

    #[test]
    fn handshake_headers_are_optional_but_checked_when_sent() {
        let call = json!({"name": "a"});
        assert_eq!(
            check_sent(&HeaderMap::new(), "tools/call", Some(&call)),
            Ok(())
        );
        let right = headers(&[("mcp-method", "tools/call"), ("mcp-name", "a")]);
        assert_eq!(check_sent(&right, "tools/call", Some(&call)), Ok(()));
        for (sent, method) in [
            (headers(&[("mcp-method", "tools/list")]), "tools/call"),
            (headers(&[("mcp-name", "b")]), "tools/call"),
            (headers(&[("mcp-name", "a")]), "tools/list"),
            (
                headers(&[("mcp-method", "tools/call"), ("mcp-method", "tools/call")]),
                "tools/call",
            ),
        ] {
            let refused = check_sent(&sent, method, Some(&call)).unwrap_err();
            assert!(refused.starts_with("Header mismatch"), "{refused}");
        }
    }
}

//! The request log: one record per HTTP request, written when its answer
//! is complete (for a stream, when the stream ends).
//!
//! The library hands each record to the caller's [`AccessLog`] and does
//! not choose the format; `modhost mcp --http` writes one JSON object per
//! line to stderr, which a container's log collector takes as it is. A
//! record holds no argument, result or header value: what the client
//! names (the JSON-RPC method, the tool) is cut to [`MAX_NAME_CHARS`].

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use serde_json::{Value, json};

/// The longest client-chosen name a record keeps.
pub const MAX_NAME_CHARS: usize = 128;

/// One HTTP request, answered.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AccessRecord {
    /// The HTTP method.
    pub method: String,
    /// The request path (no query).
    pub path: String,
    /// The HTTP status answered.
    pub status: u16,
    /// Who the request was from, once authenticated.
    pub principal: Option<String>,
    /// The JSON-RPC method of a `/mcp` request.
    pub rpc: Option<String>,
    /// The tool a `tools/call` named.
    pub tool: Option<String>,
    /// How a `tools/call` ended: `ok`, `tool_error`, `rpc_error`,
    /// `input_required`, `cancelled` or `busy`; or why a request was refused
    /// before it was served (`origin`, `auth`, `header_mismatch`, ...).
    pub result: Option<&'static str>,
    /// The MCP revision the request was served in.
    pub revision: Option<&'static str>,
    /// From the request's arrival to the end of its answer.
    pub duration: Duration,
    /// The client's address (a load balancer's, behind one).
    pub peer: Option<SocketAddr>,
}

impl AccessRecord {
    /// The record as one JSON object.
    pub fn to_json(&self) -> Value {
        let mut record = json!({
            "method": self.method,
            "path": self.path,
            "status": self.status,
            "duration_ms": (self.duration.as_secs_f64() * 1000.0 * 1000.0).round() / 1000.0,
        });
        let optional = [
            ("principal", self.principal.as_deref()),
            ("rpc", self.rpc.as_deref()),
            ("tool", self.tool.as_deref()),
            ("result", self.result),
            ("revision", self.revision),
        ];
        for (key, value) in optional {
            if let Some(value) = value {
                record[key] = json!(value);
            }
        }
        if let Some(peer) = self.peer {
            record["peer"] = json!(peer.to_string());
        }
        record
    }

    /// [`AccessRecord::to_json`] as one line of text, written without
    /// building the object first (a server writes one per request).
    pub fn to_line(&self) -> String {
        /// The fields in the order `to_json`'s object prints them.
        #[derive(serde::Serialize)]
        struct Line<'a> {
            duration_ms: f64,
            method: &'a str,
            path: &'a str,
            #[serde(skip_serializing_if = "Option::is_none")]
            peer: Option<SocketAddr>,
            #[serde(skip_serializing_if = "Option::is_none")]
            principal: Option<&'a str>,
            #[serde(skip_serializing_if = "Option::is_none")]
            result: Option<&'a str>,
            #[serde(skip_serializing_if = "Option::is_none")]
            revision: Option<&'a str>,
            #[serde(skip_serializing_if = "Option::is_none")]
            rpc: Option<&'a str>,
            status: u16,
            #[serde(skip_serializing_if = "Option::is_none")]
            tool: Option<&'a str>,
        }
        let line = Line {
            duration_ms: (self.duration.as_secs_f64() * 1000.0 * 1000.0).round() / 1000.0,
            method: &self.method,
            path: &self.path,
            peer: self.peer,
            principal: self.principal.as_deref(),
            result: self.result,
            revision: self.revision,
            rpc: self.rpc.as_deref(),
            status: self.status,
            tool: self.tool.as_deref(),
        };
        serde_json::to_string(&line).unwrap_or_else(|_| self.to_json().to_string())
    }
}

/// Where request records go.
pub type AccessLog = Arc<dyn Fn(&AccessRecord) + Send + Sync>;

/// `name` cut to [`MAX_NAME_CHARS`] characters.
pub(crate) fn bounded(name: &str) -> String {
    match name.char_indices().nth(MAX_NAME_CHARS) {
        Some((end, _)) => format!("{}…", &name[..end]),
        None => name.to_owned(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_record_names_who_what_and_how_and_cuts_what_the_client_chose() {
        let record = AccessRecord {
            method: "POST".into(),
            path: "/mcp".into(),
            status: 200,
            principal: Some("ci-bot".into()),
            rpc: Some("tools/call".into()),
            tool: Some(bounded(&"t".repeat(1000))),
            result: Some("ok"),
            revision: Some("2026-07-28"),
            duration: Duration::from_micros(1500),
            peer: None,
        };
        let json = record.to_json();
        assert_eq!(json["principal"], json!("ci-bot"));
        assert_eq!(json["result"], json!("ok"));
        assert_eq!(json["duration_ms"], json!(1.5));
        assert_eq!(
            json["tool"].as_str().unwrap().chars().count(),
            MAX_NAME_CHARS + 1
        );
        assert!(json.get("peer").is_none());
        assert_eq!(record.to_line(), json.to_string());
    }

    #[test]
    fn a_line_is_the_object_written_out() {
        let mut record = AccessRecord {
            method: "GET".into(),
            path: "/healthz".into(),
            status: 503,
            principal: None,
            rpc: None,
            tool: None,
            result: None,
            revision: None,
            duration: Duration::from_nanos(123_456_789),
            peer: Some("[::1]:8080".parse().unwrap()),
        };
        assert_eq!(record.to_line(), record.to_json().to_string());
        record.peer = Some("10.0.0.7:443".parse().unwrap());
        record.tool = Some("a \"quoted\"\nname".into());
        record.result = Some("busy");
        assert_eq!(record.to_line(), record.to_json().to_string());
    }
}

//! The JSON-RPC 2.0 envelope.
//!
//! One message per line, UTF-8. [`Message::parse`] classifies a line the way
//! the host must: strictly, because the line came from an untrusted process.

use serde::{Deserialize, Serialize};
use serde_json::Value;
use std::fmt;

use crate::error::ErrorData;
use crate::error_code::ErrorCode;
use crate::strict_json::StrictJsonError;

/// The literal `"2.0"` every JSON-RPC 2.0 message carries.
pub const JSONRPC_VERSION: &str = "2.0";

/// A request id: a number or a string. `Null` only appears in an error
/// response to a request whose id could not be read.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(untagged)]
pub enum Id {
    Num(i64),
    Str(String),
    Null,
}

impl fmt::Display for Id {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Id::Num(n) => write!(f, "{n}"),
            Id::Str(s) => write!(f, "{s:?}"),
            Id::Null => f.write_str("null"),
        }
    }
}

impl From<i64> for Id {
    fn from(n: i64) -> Self {
        Id::Num(n)
    }
}

impl From<&str> for Id {
    fn from(s: &str) -> Self {
        Id::Str(s.to_owned())
    }
}

/// A call that expects exactly one response.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Request {
    pub jsonrpc: String,
    pub id: Id,
    pub method: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub params: Option<Value>,
}

impl Request {
    pub fn new(id: impl Into<Id>, method: impl Into<String>, params: Option<Value>) -> Self {
        Request {
            jsonrpc: JSONRPC_VERSION.to_owned(),
            id: id.into(),
            method: method.into(),
            params,
        }
    }
}

/// A message that expects no response (module-to-host `progress` and `log`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Notification {
    pub jsonrpc: String,
    pub method: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub params: Option<Value>,
}

impl Notification {
    pub fn new(method: impl Into<String>, params: Option<Value>) -> Self {
        Notification {
            jsonrpc: JSONRPC_VERSION.to_owned(),
            method: method.into(),
            params,
        }
    }
}

/// The error member of a failed response.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RpcError {
    pub code: i64,
    pub message: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub data: Option<ErrorData>,
}

impl RpcError {
    pub fn new(code: ErrorCode, message: impl Into<String>) -> Self {
        RpcError {
            code: code.code(),
            message: message.into(),
            data: None,
        }
    }

    pub fn with_data(mut self, data: ErrorData) -> Self {
        self.data = Some(data);
        self
    }

    /// The machine-readable kind from `data`, if the sender gave one.
    pub fn kind(&self) -> Option<&crate::ErrorKind> {
        self.data.as_ref().map(|d| &d.kind)
    }
}

impl fmt::Display for RpcError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} (code {})", self.message, self.code)?;
        if let Some(remedy) = self.data.as_ref().and_then(|d| d.remedy.as_deref()) {
            write!(f, "; {remedy}")?;
        }
        Ok(())
    }
}

/// A response: exactly one of `result` or `error`.
#[derive(Debug, Clone, PartialEq)]
pub struct Response {
    pub id: Id,
    pub outcome: Result<Value, RpcError>,
}

impl Response {
    pub fn ok(id: Id, result: Value) -> Self {
        Response {
            id,
            outcome: Ok(result),
        }
    }

    pub fn err(id: Id, error: RpcError) -> Self {
        Response {
            id,
            outcome: Err(error),
        }
    }
}

impl Serialize for Response {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        use serde::ser::SerializeMap;
        let mut map = s.serialize_map(Some(3))?;
        map.serialize_entry("jsonrpc", JSONRPC_VERSION)?;
        map.serialize_entry("id", &self.id)?;
        match &self.outcome {
            Ok(result) => map.serialize_entry("result", result)?,
            Err(error) => map.serialize_entry("error", error)?,
        }
        map.end()
    }
}

impl<'de> Deserialize<'de> for Response {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let value = Value::deserialize(d)?;
        match Message::from_value(value).map_err(serde::de::Error::custom)? {
            Message::Response(r) => Ok(r),
            _ => Err(serde::de::Error::custom("not a JSON-RPC response")),
        }
    }
}

/// Any one line of the protocol, classified.
#[derive(Debug, Clone, PartialEq)]
pub enum Message {
    Request(Request),
    Notification(Notification),
    Response(Response),
}

/// Why a line is not a JSON-RPC 2.0 message.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum DecodeError {
    /// Not JSON at all (maps to -32700).
    Parse(String),
    /// JSON, but not a valid JSON-RPC 2.0 message (maps to -32600).
    Invalid(String),
}

impl DecodeError {
    /// The JSON-RPC error code a receiver answers this with.
    pub fn code(&self) -> ErrorCode {
        match self {
            DecodeError::Parse(_) => ErrorCode::ParseError,
            DecodeError::Invalid(_) => ErrorCode::InvalidRequest,
        }
    }
}

impl fmt::Display for DecodeError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            DecodeError::Parse(m) => write!(f, "not JSON: {m}"),
            DecodeError::Invalid(m) => write!(f, "not a JSON-RPC 2.0 message: {m}"),
        }
    }
}

impl std::error::Error for DecodeError {}

impl Message {
    /// Parse and classify one line. Strict about the envelope: `jsonrpc` must
    /// be `"2.0"`, a response carries exactly one of `result` and `error`, an
    /// id is a number, a string or (in an error response only) null, and no
    /// object anywhere in the line repeats a key ([`crate::strict_json`]).
    pub fn parse(line: &str) -> Result<Message, DecodeError> {
        let value = crate::strict_json::from_str(line).map_err(|e| match e {
            StrictJsonError::Syntax(m) => DecodeError::Parse(m),
            StrictJsonError::DuplicateKey(m) => DecodeError::Invalid(m),
        })?;
        Message::from_value(value)
    }

    /// Classify an already-parsed JSON value.
    pub fn from_value(value: Value) -> Result<Message, DecodeError> {
        let Value::Object(mut obj) = value else {
            return Err(invalid("a message must be a JSON object"));
        };
        match obj.get("jsonrpc") {
            Some(Value::String(v)) if v == JSONRPC_VERSION => {}
            Some(_) => return Err(invalid("\"jsonrpc\" must be \"2.0\"")),
            None => return Err(invalid("missing \"jsonrpc\": \"2.0\"")),
        }
        let id = match obj.remove("id") {
            None => None,
            Some(v) => Some(parse_id(v)?),
        };
        if let Some(method) = obj.remove("method") {
            let Value::String(method) = method else {
                return Err(invalid("\"method\" must be a string"));
            };
            let params = obj.remove("params");
            if let Some(p) = &params
                && !(p.is_object() || p.is_array())
            {
                return Err(invalid("\"params\" must be an object or an array"));
            }
            return Ok(match id {
                Some(Id::Null) => return Err(invalid("a request id may not be null")),
                Some(id) => Message::Request(Request {
                    jsonrpc: JSONRPC_VERSION.to_owned(),
                    id,
                    method,
                    params,
                }),
                None => Message::Notification(Notification {
                    jsonrpc: JSONRPC_VERSION.to_owned(),
                    method,
                    params,
                }),
            });
        }
        let Some(id) = id else {
            return Err(invalid(
                "a response needs an \"id\" (or the message a \"method\")",
            ));
        };
        let outcome = match (obj.remove("result"), obj.remove("error")) {
            (Some(result), None) => Ok(result),
            (None, Some(error)) => Err(serde_json::from_value::<RpcError>(error)
                .map_err(|e| invalid(&format!("malformed \"error\": {e}")))?),
            (Some(_), Some(_)) => {
                return Err(invalid("a response has both \"result\" and \"error\""));
            }
            (None, None) => return Err(invalid("a response needs \"result\" or \"error\"")),
        };
        if id == Id::Null && outcome.is_ok() {
            return Err(invalid("a successful response may not have a null id"));
        }
        Ok(Message::Response(Response { id, outcome }))
    }

    /// Serialize as one line, without the trailing newline.
    pub fn to_line(&self) -> String {
        let result = match self {
            Message::Request(r) => serde_json::to_string(r),
            Message::Notification(n) => serde_json::to_string(n),
            Message::Response(r) => serde_json::to_string(r),
        };
        // Serializing these types cannot fail: every map key is a string.
        result.unwrap_or_default()
    }
}

fn parse_id(v: Value) -> Result<Id, DecodeError> {
    match v {
        Value::Null => Ok(Id::Null),
        Value::String(s) => Ok(Id::Str(s)),
        Value::Number(n) => n
            .as_i64()
            .map(Id::Num)
            .ok_or_else(|| invalid("a numeric id must be an integer")),
        _ => Err(invalid("\"id\" must be a number or a string")),
    }
}

fn invalid(message: &str) -> DecodeError {
    DecodeError::Invalid(message.to_owned())
}

/// Build the `error.data` of an invalid-request answer for a decode failure.
pub fn decode_error_response(err: &DecodeError) -> Response {
    Response::err(
        Id::Null,
        RpcError::new(err.code(), err.to_string()).with_data(ErrorData::new(
            match err {
                DecodeError::Parse(_) => crate::ModuleErrorKind::Parse,
                DecodeError::Invalid(_) => crate::ModuleErrorKind::InvalidRequest,
            },
            "send one JSON-RPC 2.0 object per line",
        )),
    )
}

//! The `format` values JSON Schema 2020-12 defines.
//!
//! Any other format is an extension: Ajv-based MCP clients warn about it on
//! every tools/list and refuse the schema in strict mode. The SDK derives
//! schemas with these formats only, and conformance warns about any other
//! (one list, shared by both).

/// Every format JSON Schema 2020-12 defines.
pub const STANDARD_FORMATS: &[&str] = &[
    "date-time",
    "date",
    "time",
    "duration",
    "email",
    "idn-email",
    "hostname",
    "idn-hostname",
    "ipv4",
    "ipv6",
    "uri",
    "uri-reference",
    "iri",
    "iri-reference",
    "uuid",
    "uri-template",
    "json-pointer",
    "relative-json-pointer",
    "regex",
];

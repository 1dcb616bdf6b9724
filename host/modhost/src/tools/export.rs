//! Tool definitions in each provider's exact shape, ready to paste into a request.
//!
//! - `openai` (Chat Completions): `{"type": "function", "function": {"name", "description", "parameters", "strict"?}}`
//! - `openai-responses` (Responses API, flat): `{"type": "function", "name", "description", "parameters", "strict"}`
//! - `anthropic` (Messages): `{"name", "description", "input_schema"}`
//! - `mcp`: `tools/list` entries, `{"name", "title", "description", "inputSchema", "outputSchema"?, "annotations"}`
//! - `json`: modhost's own [`ToolDef`], with effects and the approval decision.
//!
//! Design decisions:
//!
//! - **Each shape is checked against the provider's own types**: the
//!   integration test `provider_exports` type-checks every format's output
//!   with tsc against the official SDKs' definitions (`tests/providers/`).
//! - **Transform faithfully or leave out.** A provider format gets the
//!   module's schema changed only where the change keeps its meaning
//!   (`portable`); a tool whose schema a provider would reject is left out
//!   of that export, with the reason ([`Export::left_out`]), so one tool
//!   never breaks a whole request. MCP and `json` take every tool.
//! - **Strict only when faithful** (`strict`): with `--strict` each OpenAI
//!   tool is strict when that keeps its meaning, else exported as it was
//!   and reported ([`Export::not_strict`]).
//!
//! MCP annotations come from [`super::Hints`], derived from the capability's
//! grant authority ([`crate::grants::authority`]).
//! `outputSchema` is given only for an object-rooted schema, as MCP requires.

mod portable;
mod strict;

use modconform::portability::SchemaRole;
use serde_json::{Map, Value, json};

use super::ToolDef;

/// An export format: a provider's tool-definition shape (see the module
/// docs), parsed from its `--format` name.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum Format {
    Json,
    OpenAi,
    OpenAiResponses,
    Anthropic,
    Mcp,
}

/// Every format name, as `--format` takes it.
pub(crate) const FORMAT_NAMES: &[&str] =
    &["json", "mcp", "openai", "openai-responses", "anthropic"];

impl std::str::FromStr for Format {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s {
            "json" => Ok(Format::Json),
            "openai" => Ok(Format::OpenAi),
            "openai-responses" => Ok(Format::OpenAiResponses),
            "anthropic" => Ok(Format::Anthropic),
            "mcp" => Ok(Format::Mcp),
            other => Err(format!(
                "unknown format {other:?}: use one of {}",
                FORMAT_NAMES.join(", ")
            )),
        }
    }
}

impl Format {
    /// Its `--format` name.
    pub fn as_str(self) -> &'static str {
        match self {
            Format::Json => "json",
            Format::OpenAi => "openai",
            Format::OpenAiResponses => "openai-responses",
            Format::Anthropic => "anthropic",
            Format::Mcp => "mcp",
        }
    }

    /// Whether `--strict` means anything for this format.
    pub fn has_strict_mode(self) -> bool {
        matches!(self, Format::OpenAi | Format::OpenAiResponses)
    }
}

/// A tool an export left out or could not make strict, and why.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Omission {
    pub tool: String,
    pub reason: String,
}

/// One export: the tool array and what it had to leave out.
#[derive(Debug, Clone, PartialEq)]
pub struct Export {
    /// The JSON array to paste.
    pub tools: Value,
    /// Tools the provider would reject, left out.
    pub left_out: Vec<Omission>,
    /// With `strict`: tools exported without strict mode.
    pub not_strict: Vec<Omission>,
}

/// Every tool in `format`, ready to paste into a provider's request;
/// `strict` asks for OpenAI strict mode (ignored by formats without one,
/// see [`Format::has_strict_mode`]). A tool the provider would reject is
/// left out, never changed in meaning ([`Export::left_out`]). The tools
/// are exported as given: pass only the offered ones
/// ([`ToolDef::is_offered`]) to leave out what the policy denies.
pub fn export<'a>(
    tools: impl IntoIterator<Item = &'a ToolDef>,
    format: Format,
    strict: bool,
) -> Export {
    let mut out = Export {
        tools: Value::Array(Vec::new()),
        left_out: Vec::new(),
        not_strict: Vec::new(),
    };
    let mut items = Vec::new();
    for tool in tools {
        let parameters = match format {
            Format::Json | Format::Mcp => Value::Null,
            _ => match portable::input_schema(&tool.input_schema) {
                Ok(schema) => schema,
                Err(reason) => {
                    out.left_out.push(Omission {
                        tool: tool.name.clone(),
                        reason,
                    });
                    continue;
                }
            },
        };
        let strict_parameters = if strict && format.has_strict_mode() {
            match strict::strict_schema(&parameters) {
                Ok(schema) => Some(schema),
                Err(reason) => {
                    out.not_strict.push(Omission {
                        tool: tool.name.clone(),
                        reason,
                    });
                    None
                }
            }
        } else {
            None
        };
        items.push(shape(tool, format, parameters, strict_parameters, strict));
    }
    out.tools = Value::Array(items);
    out
}

fn shape(
    tool: &ToolDef,
    format: Format,
    parameters: Value,
    strict: Option<Value>,
    asked_strict: bool,
) -> Value {
    let is_strict = strict.is_some();
    let parameters = strict.unwrap_or(parameters);
    match format {
        Format::Json => serde_json::to_value(tool).unwrap_or(Value::Null),
        Format::Mcp => mcp_tool(tool),
        Format::OpenAi => {
            let mut function = json!({
                "name": tool.name,
                "description": tool.description,
                "parameters": parameters,
            });
            if asked_strict {
                function["strict"] = json!(is_strict);
            }
            json!({"type": "function", "function": function})
        }
        // `strict` is required by the Responses type and defaults to true
        // there: always said, true only for a schema made strict.
        Format::OpenAiResponses => json!({
            "type": "function",
            "name": tool.name,
            "description": tool.description,
            "parameters": parameters,
            "strict": is_strict,
        }),
        Format::Anthropic => json!({
            "name": tool.name,
            "description": tool.description,
            "input_schema": parameters,
        }),
    }
}

/// One MCP `Tool` object.
pub fn mcp_tool(tool: &ToolDef) -> Value {
    let mut obj = Map::new();
    obj.insert("name".into(), json!(tool.name));
    let title = if tool.title.is_empty() {
        &tool.capability
    } else {
        &tool.title
    };
    obj.insert("title".into(), json!(title));
    obj.insert("description".into(), json!(tool.description));
    // A non-standard format is an annotation the host never asserts, and
    // Ajv-based clients warn about it on every list: left out.
    obj.insert(
        "inputSchema".into(),
        portable::without_non_standard_formats(&tool.input_schema, SchemaRole::Input),
    );
    if let Some(schema) = tool.output_schema.as_ref().filter(|s| has_object_root(s)) {
        obj.insert(
            "outputSchema".into(),
            portable::without_non_standard_formats(schema, SchemaRole::Output),
        );
    }
    obj.insert("annotations".into(), annotations(tool));
    Value::Object(obj)
}

/// MCP `ToolAnnotations`, from the hints the registry derived from what each call is granted.
pub fn annotations(tool: &ToolDef) -> Value {
    let h = &tool.hints;
    json!({
        "title": if tool.title.is_empty() { &tool.capability } else { &tool.title },
        "readOnlyHint": h.read_only,
        "destructiveHint": h.destructive,
        "idempotentHint": h.idempotent,
        "openWorldHint": h.open_world,
    })
}

fn has_object_root(schema: &Value) -> bool {
    schema.get("type").and_then(Value::as_str) == Some("object")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::approval::{PolicyDecision, PolicyVerdict};

    fn tool(effects: Value, output_schema: Option<Value>) -> ToolDef {
        let d: modproto::Descriptor = serde_json::from_value(json!({"id": "files", "version": "1",
            "roots": [{"name": "out", "kind": "artifacts"}, {"name": "workspace", "kind": "workspace", "access": "read-write"}, {"name": "docs", "kind": "workspace"}],
            "capabilities": []})).unwrap();
        let effects: modproto::Effects = serde_json::from_value(effects).unwrap();
        ToolDef {
            hints: super::super::Hints::derive(&d, &effects),
            name: "files__files_search".into(),
            module: "files".into(),
            capability: "files.search".into(),
            title: "Search".into(),
            description: "Search files.".into(),
            input_schema: json!({"type": "object", "properties": {"q": {"type": "string"}}, "required": ["q"]}),
            output_schema,
            effects,
            network: None,
            approval: PolicyDecision {
                verdict: PolicyVerdict::Allow,
                rule: "default: local".into(),
                from_rule: false,
            },
        }
    }

    fn export_one(tool: &ToolDef, format: Format) -> Value {
        export([tool], format, false).tools[0].clone()
    }

    #[test]
    fn provider_shapes_are_exact() {
        let t = tool(json!({"reads": ["workspace"]}), None);
        let schema = t.input_schema.clone();
        assert_eq!(
            export_one(&t, Format::OpenAiResponses),
            json!({"type": "function", "name": "files__files_search", "description": "Search files.", "parameters": schema, "strict": false})
        );
        assert_eq!(
            export_one(&t, Format::OpenAi),
            json!({"type": "function", "function": {"name": "files__files_search", "description": "Search files.", "parameters": schema}})
        );
        assert_eq!(
            export_one(&t, Format::Anthropic),
            json!({"name": "files__files_search", "description": "Search files.", "input_schema": schema})
        );
        assert_eq!(
            export_one(&t, Format::Mcp),
            json!({
                "name": "files__files_search", "title": "Search", "description": "Search files.",
                "inputSchema": schema,
                "annotations": {"title": "Search", "readOnlyHint": true, "destructiveHint": false,
                                "idempotentHint": true, "openWorldHint": false}
            })
        );
        let own = export_one(&t, Format::Json);
        assert_eq!(
            own["approval"],
            json!({"verdict": "allow", "rule": "default: local"})
        );
        assert_eq!(own["effects"]["reads"], json!(["workspace"]));
    }

    #[test]
    fn output_schema_only_with_an_object_root() {
        let t = tool(json!({}), Some(json!({"type": "object", "properties": {}})));
        assert!(mcp_tool(&t).get("outputSchema").is_some());
        let t = tool(json!({}), Some(json!({"type": "array"})));
        assert!(mcp_tool(&t).get("outputSchema").is_none());
    }

    #[test]
    fn annotations_follow_effects() {
        let a = annotations(&tool(
            json!({"writes": ["workspace"], "network": true}),
            None,
        ));
        assert_eq!(a["readOnlyHint"], json!(false));
        assert_eq!(a["destructiveHint"], json!(true));
        assert_eq!(a["idempotentHint"], json!(false));
        assert_eq!(a["openWorldHint"], json!(true));
        let a = annotations(&tool(json!({"writes": ["out"]}), None));
        assert_eq!(a["destructiveHint"], json!(false));
        // Annotations say what the call is granted: a write to a root
        // declared read-only is granted as a read, so the tool is read-only.
        let a = annotations(&tool(json!({"writes": ["docs"]}), None));
        assert_eq!(a["readOnlyHint"], json!(true));
        assert_eq!(a["destructiveHint"], json!(false));
    }

    #[test]
    fn a_tool_a_provider_rejects_is_left_out_of_that_export_only() {
        let mut bad = tool(json!({}), None);
        bad.name = "m__either".into();
        bad.input_schema =
            json!({"type": "object", "anyOf": [{"required": ["a"]}, {"required": ["b"]}]});
        let good = tool(json!({}), None);
        for format in [Format::OpenAi, Format::OpenAiResponses, Format::Anthropic] {
            let out = export([&bad, &good], format, false);
            assert_eq!(out.tools.as_array().unwrap().len(), 1, "{format:?}");
            assert_eq!(out.left_out[0].tool, "m__either");
            assert!(out.left_out[0].reason.contains("anyOf"));
        }
        for format in [Format::Mcp, Format::Json] {
            let out = export([&bad, &good], format, false);
            assert_eq!(out.tools.as_array().unwrap().len(), 2, "{format:?}");
            assert!(out.left_out.is_empty());
        }
    }

    #[test]
    fn strict_is_said_per_tool_and_the_others_are_reported() {
        let mut loose = tool(json!({}), None);
        loose.name = "m__loose".into();
        loose.input_schema =
            json!({"type": "object", "properties": {"n": {"type": "integer", "default": 3}}});
        let good = tool(json!({}), None);
        let out = export([&loose, &good], Format::OpenAiResponses, true);
        let tools = out.tools.as_array().unwrap();
        assert_eq!(tools[0]["strict"], json!(false));
        assert_eq!(
            tools[0]["parameters"], loose.input_schema,
            "exported as it was"
        );
        assert_eq!(tools[1]["strict"], json!(true));
        assert_eq!(tools[1]["parameters"]["additionalProperties"], json!(false));
        assert_eq!(out.not_strict.len(), 1);
        assert_eq!(out.not_strict[0].tool, "m__loose");
        let chat = export([&good], Format::OpenAi, true);
        assert_eq!(chat.tools[0]["function"]["strict"], json!(true));
    }

    #[test]
    fn mcp_schemas_lose_non_standard_formats_only() {
        let mut t = tool(
            json!({}),
            Some(
                json!({"type": "object", "properties": {"n": {"type": "integer", "format": "uint64", "minimum": 0}}}),
            ),
        );
        t.input_schema = json!({"type": "object", "properties": {"at": {"type": "string", "format": "date-time"}, "k": {"type": "integer", "format": "int32"}}});
        let listed = mcp_tool(&t);
        assert_eq!(
            listed["outputSchema"]["properties"]["n"],
            json!({"type": "integer", "minimum": 0})
        );
        assert_eq!(
            listed["inputSchema"]["properties"]["at"]["format"],
            json!("date-time")
        );
        assert!(
            listed["inputSchema"]["properties"]["k"]
                .get("format")
                .is_none()
        );
    }

    #[test]
    fn format_names_parse() {
        assert_eq!(
            "openai-responses".parse::<Format>(),
            Ok(Format::OpenAiResponses)
        );
        assert_eq!("openai".parse::<Format>(), Ok(Format::OpenAi));
        assert!("gpt".parse::<Format>().is_err());
    }
}

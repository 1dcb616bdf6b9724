//! Tool definitions in each provider's exact shape, ready to paste into a request.
//!
//! - OpenAI chat completions: `{"type": "function", "function": {"name", "description", "parameters"}}`
//! - Anthropic messages: `{"name", "description", "input_schema"}`
//! - MCP `tools/list` entries: `{"name", "title", "description", "inputSchema", "outputSchema"?, "annotations"}`
//! - `json`: modhost's own [`ToolDef`], with effects and the approval decision.
//!
//! MCP annotations come from [`super::Hints`], derived from the capability's
//! grant authority ([`crate::grants::authority`]).
//! `outputSchema` is given only for an object-rooted schema, as MCP requires.

use serde_json::{Map, Value, json};

use super::ToolDef;

/// An export format.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Format {
    Json,
    OpenAi,
    Anthropic,
    Mcp,
}

impl std::str::FromStr for Format {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s {
            "json" => Ok(Format::Json),
            "openai" => Ok(Format::OpenAi),
            "anthropic" => Ok(Format::Anthropic),
            "mcp" => Ok(Format::Mcp),
            other => Err(format!(
                "unknown format {other:?}: use json, openai, anthropic or mcp"
            )),
        }
    }
}

/// Every tool in `format`, as one JSON array.
pub fn export<'a>(tools: impl IntoIterator<Item = &'a ToolDef>, format: Format) -> Value {
    Value::Array(tools.into_iter().map(|t| export_one(t, format)).collect())
}

pub fn export_one(tool: &ToolDef, format: Format) -> Value {
    match format {
        Format::Json => serde_json::to_value(tool).unwrap_or(Value::Null),
        Format::OpenAi => json!({
            "type": "function",
            "function": {
                "name": tool.name,
                "description": tool.description,
                "parameters": tool.input_schema,
            }
        }),
        Format::Anthropic => json!({
            "name": tool.name,
            "description": tool.description,
            "input_schema": tool.input_schema,
        }),
        Format::Mcp => mcp_tool(tool),
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
    obj.insert("inputSchema".into(), tool.input_schema.clone());
    if let Some(schema) = tool.output_schema.as_ref().filter(|s| has_object_root(s)) {
        obj.insert("outputSchema".into(), schema.clone());
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
    use crate::approval::{Decision, Verdict};

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
            approval: Decision {
                verdict: Verdict::Allow,
                rule: "default: local".into(),
                from_rule: false,
            },
        }
    }

    #[test]
    fn provider_shapes_are_exact() {
        let t = tool(json!({"reads": ["workspace"]}), None);
        let schema = t.input_schema.clone();
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
    fn format_names_parse() {
        assert_eq!("openai".parse::<Format>(), Ok(Format::OpenAi));
        assert!("gpt".parse::<Format>().is_err());
    }
}

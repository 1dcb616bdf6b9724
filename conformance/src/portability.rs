//! Provider portability: which constructs of a capability's schemas which
//! provider or client rejects, named.
//!
//! Design decisions:
//!
//! - **One list of what each provider rejects.** The conformance warnings
//!   here and the host's provider exports (`modhost tools --format ...`,
//!   which transform or leave out a tool) read the same [`scan`], so a tool
//!   conformance passes is a tool every export takes whole, and a warning
//!   always names the provider whose request it would break.
//! - **Warnings, not errors.** Every construct here is valid JSON Schema the
//!   host itself validates correctly; only some provider or client refuses
//!   it. The module still works through `modhost invoke` and MCP.
//! - The root combinator (`anyOf`/`oneOf`/`allOf` at an input schema's root)
//!   is reported by `static_checks` as `portability.top_level_combinator`;
//!   [`scan`] finds it too, for the exports, but [`check_capability`] does
//!   not report it twice.

use modproto::Capability;
use serde_json::Value;

use crate::finding::Finding;

pub use modproto::schema_formats::STANDARD_FORMATS;

/// The meta-schema the host validates every schema as.
pub const DRAFT_2020_12: &str = "https://json-schema.org/draft/2020-12/schema";

/// Who rejects [`Construct::NonStandardFormat`].
pub const REJECTS_NON_STANDARD_FORMAT: &str = "Ajv-based MCP clients (the TypeScript SDK, the MCP Inspector) print \
     `unknown format ignored` on every tools/list and refuse the schema in Ajv strict mode";

/// Who rejects [`Construct::RootCombinator`] and [`Construct::RootKeyword`].
pub const REJECTS_ROOT_COMBINATOR: &str = "Anthropic's Messages API rejects the whole request \
     (\"input_schema does not support oneOf, allOf, or anyOf at the top level\") and OpenAI rejects the function";

/// Who rejects [`Construct::ForeignMetaSchema`].
pub const REJECTS_FOREIGN_META_SCHEMA: &str = "Ajv-based MCP clients refuse to compile a schema whose \
     $schema they have no meta-schema for, and providers read every schema as 2020-12";

/// A provider-hostile construct found in a schema.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Construct {
    /// `format` with a value JSON Schema 2020-12 does not define
    /// (`uint64`, `int32`, `double`: what schemars emits by default).
    NonStandardFormat { pointer: String, format: String },
    /// `anyOf`, `oneOf` or `allOf` at the root of an input schema.
    RootCombinator { keyword: &'static str },
    /// `enum` or `not` at the root of an input schema (OpenAI: "must have
    /// type 'object' and not have ... 'enum'/'not' at the top level").
    RootKeyword { keyword: &'static str },
    /// `$schema` naming another draft than 2020-12.
    ForeignMetaSchema {
        pointer: String,
        meta_schema: String,
    },
}

impl Construct {
    /// What it is, and who rejects it.
    pub fn reason(&self) -> String {
        match self {
            Construct::NonStandardFormat { pointer, format } => format!(
                "non-standard \"format\": {format:?} at {}: {REJECTS_NON_STANDARD_FORMAT}",
                show(pointer)
            ),
            Construct::RootCombinator { keyword } => {
                format!("{keyword:?} at the input schema's root: {REJECTS_ROOT_COMBINATOR}")
            }
            Construct::RootKeyword { keyword } => format!(
                "{keyword:?} at the input schema's root: OpenAI rejects the function (the root must be a plain object schema)"
            ),
            Construct::ForeignMetaSchema {
                pointer,
                meta_schema,
            } => format!(
                "\"$schema\": {meta_schema:?} at {}: {REJECTS_FOREIGN_META_SCHEMA}",
                show(pointer)
            ),
        }
    }
}

fn show(pointer: &str) -> &str {
    if pointer.is_empty() {
        "the root"
    } else {
        pointer
    }
}

/// Which schema of a capability is scanned: root rules apply to input only.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SchemaRole {
    Input,
    Output,
}

/// Every provider-hostile construct in `schema`, in document order.
pub fn scan(schema: &Value, role: SchemaRole) -> Vec<Construct> {
    let mut found = Vec::new();
    if role == SchemaRole::Input {
        for keyword in ["anyOf", "oneOf", "allOf"] {
            if schema.get(keyword).is_some() {
                found.push(Construct::RootCombinator { keyword });
            }
        }
        for keyword in ["enum", "not"] {
            if schema.get(keyword).is_some() {
                found.push(Construct::RootKeyword { keyword });
            }
        }
    }
    walk(schema, &mut String::new(), &mut found);
    found
}

/// Walk every subschema (and, harmlessly, every object under one: a
/// property named `format` is a key of `properties`, never a string value,
/// so it is not mistaken for the keyword).
fn walk(value: &Value, pointer: &mut String, found: &mut Vec<Construct>) {
    match value {
        Value::Object(map) => {
            if let Some(Value::String(format)) = map.get("format")
                && !STANDARD_FORMATS.contains(&format.as_str())
            {
                found.push(Construct::NonStandardFormat {
                    pointer: pointer.clone(),
                    format: format.clone(),
                });
            }
            if let Some(Value::String(meta)) = map.get("$schema")
                && meta.trim_end_matches('#') != DRAFT_2020_12
            {
                found.push(Construct::ForeignMetaSchema {
                    pointer: pointer.clone(),
                    meta_schema: meta.clone(),
                });
            }
            for (key, child) in map {
                // `enum`, `const`, `default` and `examples` hold instances,
                // not schemas: a value there is data.
                if matches!(key.as_str(), "enum" | "const" | "default" | "examples") {
                    continue;
                }
                let len = pointer.len();
                pointer.push('/');
                pointer.push_str(&key.replace('~', "~0").replace('/', "~1"));
                walk(child, pointer, found);
                pointer.truncate(len);
            }
        }
        Value::Array(items) => {
            for (i, child) in items.iter().enumerate() {
                let len = pointer.len();
                pointer.push('/');
                pointer.push_str(&i.to_string());
                walk(child, pointer, found);
                pointer.truncate(len);
            }
        }
        _ => {}
    }
}

/// Portability warnings for one capability's schemas, each naming who rejects it.
pub fn check_capability(capability: &Capability) -> Vec<Finding> {
    let cap = capability.id.as_str();
    let schemas = std::iter::once((SchemaRole::Input, &capability.input_schema)).chain(
        capability
            .output_schema
            .as_ref()
            .map(|s| (SchemaRole::Output, s)),
    );
    let mut findings = Vec::new();
    for (role, schema) in schemas {
        let which = match role {
            SchemaRole::Input => "input_schema",
            SchemaRole::Output => "output_schema",
        };
        for construct in scan(schema, role) {
            let (id, remedy) = match &construct {
                Construct::NonStandardFormat { .. } => (
                    "portability.non_standard_format",
                    "drop the format, or use one JSON Schema 2020-12 defines; for an unsigned integer say \
                     \"type\": \"integer\", \"minimum\": 0 (modsdk derives exactly that)",
                ),
                Construct::ForeignMetaSchema { .. } => (
                    "portability.foreign_meta_schema",
                    "write the schema in JSON Schema 2020-12 and drop \"$schema\"",
                ),
                Construct::RootKeyword { .. } => (
                    "portability.root_keyword",
                    "make the root a plain {\"type\": \"object\", \"properties\": ...} and move the constraint into a property",
                ),
                // Reported once, by static_checks.
                Construct::RootCombinator { .. } => continue,
            };
            findings.push(
                Finding::warning(
                    id,
                    format!(
                        "the {which} of capability {cap:?} has a {}",
                        construct.reason()
                    ),
                    remedy,
                )
                .on(cap),
            );
        }
    }
    findings
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn capability(input: &Value, output: Option<&Value>) -> Capability {
        serde_json::from_value(json!({
            "id": "m.c", "description": "d", "input_schema": input, "output_schema": output
        }))
        .unwrap()
    }

    #[test]
    fn a_schemars_default_uint_format_is_named_with_the_clients_that_reject_it() {
        let cap = capability(
            &json!({"type": "object", "properties": {"n": {"type": "integer", "format": "uint64", "minimum": 0}}}),
            Some(
                &json!({"type": "object", "properties": {"xs": {"type": "array", "items": {"type": "number", "format": "double"}}}}),
            ),
        );
        let findings = check_capability(&cap);
        assert_eq!(findings.len(), 2, "{findings:?}");
        assert!(
            findings
                .iter()
                .all(|f| f.id == "portability.non_standard_format" && !f.is_error())
        );
        assert!(findings[0].reason.contains("\"uint64\" at /properties/n"));
        assert!(findings[0].reason.contains("TypeScript SDK"));
        assert!(findings[1].reason.contains("output_schema"));
        assert!(findings[1].reason.contains("/properties/xs/items"));
    }

    #[test]
    fn standard_formats_data_and_property_names_are_not_findings() {
        let cap = capability(
            &json!({"type": "object", "properties": {
                "format": {"type": "string", "format": "date-time"},
                "mode": {"enum": [{"format": "uint64"}]},
                "at": {"type": "string", "default": "x", "format": "uuid"}
            }, "$schema": "https://json-schema.org/draft/2020-12/schema"}),
            None,
        );
        assert!(check_capability(&cap).is_empty());
    }

    #[test]
    fn root_constructs_are_found_for_input_only_and_a_combinator_is_not_reported_twice() {
        let schema =
            json!({"type": "object", "anyOf": [{"required": ["a"]}], "not": {"required": ["b"]}});
        assert_eq!(
            scan(&schema, SchemaRole::Input),
            vec![
                Construct::RootCombinator { keyword: "anyOf" },
                Construct::RootKeyword { keyword: "not" }
            ]
        );
        assert!(scan(&schema, SchemaRole::Output).is_empty());
        let ids: Vec<String> = check_capability(&capability(&schema, None))
            .into_iter()
            .map(|f| f.id)
            .collect();
        assert_eq!(ids, ["portability.root_keyword"]);
    }

    #[test]
    fn a_draft_07_meta_schema_is_named() {
        let cap = capability(
            &json!({"$schema": "http://json-schema.org/draft-07/schema#", "type": "object"}),
            None,
        );
        let findings = check_capability(&cap);
        assert_eq!(findings[0].id, "portability.foreign_meta_schema");
        assert!(findings[0].reason.contains("draft-07"));
    }
}

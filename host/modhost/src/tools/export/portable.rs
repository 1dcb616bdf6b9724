//! The input schema as OpenAI and Anthropic take it: the module's schema,
//! changed only where the change keeps its meaning.
//!
//! What is changed (each keeps exactly the set of accepted arguments):
//!
//! - the root `$schema` is dropped: providers read every schema as 2020-12,
//!   which is what the host validates against;
//! - a non-standard `format` is dropped: in 2020-12 `format` is an
//!   annotation, so no argument is accepted or refused because of it;
//! - a root `anyOf`/`oneOf`/`allOf` of one schema is merged into the root
//!   when no keyword of the two would interact (`R ∧ E` is `R ∪ E` then).
//!
//! What cannot be changed faithfully leaves the tool out of that export
//! with the reason ([`modconform::portability`] names the provider), so one
//! tool never breaks a whole request.

use modconform::portability::{self, Construct, SchemaRole};
use serde_json::{Map, Value};

/// Keywords whose meaning depends on a sibling keyword of the same schema
/// object: split across a root and a combinator element, merging them would
/// change what they mean.
const ADJACENT_GROUPS: &[&[&str]] = &[
    &[
        "properties",
        "patternProperties",
        "additionalProperties",
        "unevaluatedProperties",
    ],
    &[
        "prefixItems",
        "items",
        "unevaluatedItems",
        "contains",
        "minContains",
        "maxContains",
    ],
    &["if", "then", "else"],
    &["$defs", "definitions", "$id", "$anchor", "$dynamicAnchor"],
];

/// `schema` as an OpenAI or Anthropic tool's parameters, or why it cannot be.
pub(super) fn input_schema(schema: &Value) -> Result<Value, String> {
    let mut schema = schema.clone();
    let Some(root) = schema.as_object_mut() else {
        return Err("its input schema is not a JSON object".to_owned());
    };
    if root.get("type").and_then(Value::as_str) != Some("object") {
        return Err(
            "its input schema's root is not {\"type\": \"object\"}, which OpenAI and Anthropic require"
                .to_owned(),
        );
    }
    hoist_single_combinator(root);
    let is_2020_12 = |meta: &Value| {
        meta.as_str().map(|m| m.trim_end_matches('#')) == Some(portability::DRAFT_2020_12)
    };
    if root.get("$schema").is_some_and(is_2020_12) {
        root.remove("$schema");
    }
    for construct in portability::scan(&schema, SchemaRole::Input) {
        match construct {
            Construct::NonStandardFormat { pointer, .. } => drop_format(&mut schema, &pointer),
            other => return Err(other.reason()),
        }
    }
    Ok(schema)
}

/// A schema (input or output) with its non-standard formats dropped, for
/// clients that validate with Ajv (MCP).
pub(super) fn without_non_standard_formats(schema: &Value, role: SchemaRole) -> Value {
    let mut schema = schema.clone();
    for construct in portability::scan(&schema.clone(), role) {
        if let Construct::NonStandardFormat { pointer, .. } = construct {
            drop_format(&mut schema, &pointer);
        }
    }
    schema
}

fn drop_format(schema: &mut Value, pointer: &str) {
    if let Some(Value::Object(node)) = schema.pointer_mut(pointer) {
        node.remove("format");
    }
}

/// Merge a root combinator of exactly one schema into the root, when
/// faithful: no keyword in common, no adjacent group split between them.
fn hoist_single_combinator(root: &mut Map<String, Value>) {
    let combinators: Vec<&str> = ["anyOf", "oneOf", "allOf"]
        .into_iter()
        .filter(|k| root.contains_key(*k))
        .collect();
    let [keyword] = combinators[..] else { return };
    let Some(Value::Array(items)) = root.get(keyword) else {
        return;
    };
    let [Value::Object(element)] = &items[..] else {
        return;
    };
    let disjoint = element
        .keys()
        .all(|k| k == keyword || !root.contains_key(k));
    let split = ADJACENT_GROUPS.iter().any(|group| {
        group.iter().any(|k| root.contains_key(*k))
            && group.iter().any(|k| element.contains_key(*k))
    });
    if !disjoint || split || element.contains_key(keyword) {
        return;
    }
    let element = element.clone();
    root.remove(keyword);
    root.extend(element);
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn meta_schema_and_non_standard_formats_go_and_nothing_else_changes() {
        let schema = json!({
            "$schema": "https://json-schema.org/draft/2020-12/schema",
            "type": "object",
            "properties": {
                "n": {"type": ["integer", "null"], "format": "uint64", "minimum": 0},
                "at": {"type": "string", "format": "date-time"},
                "format": {"type": "string"}
            }
        });
        assert_eq!(
            input_schema(&schema).unwrap(),
            json!({
                "type": "object",
                "properties": {
                    "n": {"type": ["integer", "null"], "minimum": 0},
                    "at": {"type": "string", "format": "date-time"},
                    "format": {"type": "string"}
                }
            })
        );
    }

    #[test]
    fn a_root_alternative_that_cannot_be_merged_is_refused_naming_the_provider() {
        let either = json!({"type": "object", "properties": {"a": {}, "b": {}},
                            "anyOf": [{"required": ["a"]}, {"required": ["b"]}]});
        let reason = input_schema(&either).unwrap_err();
        assert!(
            reason.contains("anyOf") && reason.contains("Anthropic"),
            "{reason}"
        );
        // One alternative whose keywords interact with the root's: refused too.
        let split = json!({"type": "object", "properties": {"a": {}},
                           "allOf": [{"additionalProperties": false}]});
        assert!(input_schema(&split).is_err());
        let not_object = json!({"type": "array"});
        assert!(
            input_schema(&not_object)
                .unwrap_err()
                .contains("OpenAI and Anthropic require")
        );
    }

    #[test]
    fn a_single_independent_alternative_is_merged() {
        let one = json!({"type": "object", "allOf": [{"properties": {"a": {"type": "string"}}, "required": ["a"]}]});
        assert_eq!(
            input_schema(&one).unwrap(),
            json!({"type": "object", "properties": {"a": {"type": "string"}}, "required": ["a"]})
        );
    }

    #[test]
    fn another_draft_is_not_silently_reinterpreted() {
        let draft7 =
            json!({"$schema": "http://json-schema.org/draft-07/schema#", "type": "object"});
        assert!(input_schema(&draft7).unwrap_err().contains("draft-07"));
    }
}

//! JSON Schema facts the checks need: does a schema compile, which problems
//! does an instance have, where are remote references, and what input would
//! violate a schema.
//!
//! `jsonschema` is built without its HTTP and file retrievers, so a remote
//! `$ref` can never make the host fetch anything: it fails to compile, and
//! the portability check names it.

use jsonschema::Validator;
use serde_json::Value;

/// Why a schema cannot be used.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SchemaProblem {
    /// The schema breaks its meta-schema: every violation, located.
    Invalid(Vec<String>),
    /// It is valid JSON Schema, but a validator cannot be built from it (an
    /// unresolvable `$ref`, an unknown `$schema`, a bad regex).
    Unusable(String),
}

/// Check `schema` against its meta-schema and build a validator from it.
pub fn compile(schema: &Value) -> Result<Validator, SchemaProblem> {
    let meta = jsonschema::meta::validator_for(schema)
        .map_err(|e| SchemaProblem::Unusable(e.to_string()))?;
    let violations: Vec<String> = meta.iter_errors(schema).map(|e| located(&e)).collect();
    if !violations.is_empty() {
        return Err(SchemaProblem::Invalid(violations));
    }
    jsonschema::validator_for(schema).map_err(|e| SchemaProblem::Unusable(e.to_string()))
}

/// Every way `instance` violates the schema behind `validator`, as
/// `<json pointer>: <problem>` (`/` for the root). Empty when it is valid.
/// The host reports invalid input and output in the same words.
pub fn violations(validator: &Validator, instance: &Value) -> Vec<String> {
    validator
        .iter_errors(instance)
        .map(|e| located(&e))
        .collect()
}

fn located(error: &jsonschema::ValidationError<'_>) -> String {
    let path = error.instance_path().to_string();
    let at = if path.is_empty() { "/" } else { path.as_str() };
    format!("{at}: {error}")
}

/// The value of every `$ref` in `schema` that does not point inside the
/// document (does not start with `#`).
pub fn remote_refs(schema: &Value) -> Vec<String> {
    let mut found = Vec::new();
    collect_remote_refs(schema, &mut found);
    found
}

fn collect_remote_refs(value: &Value, found: &mut Vec<String>) {
    match value {
        Value::Object(map) => {
            for (key, child) in map {
                match child {
                    Value::String(target) if key == "$ref" && !target.starts_with('#') => {
                        found.push(target.clone());
                    }
                    _ => collect_remote_refs(child, found),
                }
            }
        }
        Value::Array(items) => items.iter().for_each(|v| collect_remote_refs(v, found)),
        _ => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn compile_separates_invalid_from_unusable() {
        assert!(compile(&json!({"type": "object"})).is_ok());
        match compile(&json!({"type": "no-such-type"})) {
            Err(SchemaProblem::Invalid(v)) => assert!(!v.is_empty()),
            other => panic!("{other:?}"),
        }
        match compile(&json!({"$ref": "https://example.com/s.json"})) {
            Err(SchemaProblem::Unusable(_)) => {}
            other => panic!("remote $ref must not resolve: {other:?}"),
        }
        // A custom meta-schema is never fetched either; bundled drafts work.
        match compile(&json!({"$schema": "https://example.com/meta", "type": "object"})) {
            Err(SchemaProblem::Unusable(_)) => {}
            other => panic!("custom $schema must not resolve: {other:?}"),
        }
        let draft7 =
            json!({"$schema": "http://json-schema.org/draft-07/schema#", "type": "object"});
        assert!(compile(&draft7).is_ok());
    }

    #[test]
    fn remote_refs_ignores_local_pointers_and_property_names() {
        let schema = json!({
            "type": "object",
            "properties": {
                "a": {"$ref": "#/$defs/a"},
                "b": {"items": {"$ref": "other.json#/x"}},
                "$ref": {"type": "string"}
            }
        });
        assert_eq!(remote_refs(&schema), vec!["other.json#/x".to_string()]);
    }
}

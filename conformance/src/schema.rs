//! JSON Schema facts the checks need: does a schema compile, which problems
//! does an instance have, where are remote references, and what input would
//! violate a schema.
//!
//! `jsonschema` is built without its HTTP and file retrievers, so a remote
//! `$ref` can never make the host fetch anything: it fails to compile, and
//! the portability check names it.

use jsonschema::Validator;
use serde_json::{Map, Value, json};

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

/// Input built to break a schema, and what it breaks.
#[derive(Debug, Clone, PartialEq)]
pub struct Violation {
    pub input: Value,
    /// What the input does wrong, for a person.
    pub what: String,
    /// The property a good error message should name, when there is one.
    pub property: Option<String>,
}

/// Build an input that `validator` rejects, from the shape of `schema`: an
/// empty object when properties are required, a wrong-typed value for a
/// typed property, an unknown property when extra ones are forbidden, a
/// non-object as a last resort. Every candidate is confirmed against the
/// validator, so a schema that accepts it anyway (through `anyOf`, say) is
/// never reported as mishandled. `None` when nothing was found.
pub fn violating_input(schema: &Value, validator: &Validator) -> Option<Violation> {
    candidates(schema)
        .into_iter()
        .find(|c| !validator.is_valid(&c.input))
}

fn candidates(schema: &Value) -> Vec<Violation> {
    let mut out = Vec::new();
    let Some(root) = schema.as_object() else {
        return out;
    };
    let properties = root.get("properties").and_then(Value::as_object);
    if let Some(first) = root
        .get("required")
        .and_then(Value::as_array)
        .and_then(|r| r.first())
        .and_then(Value::as_str)
    {
        out.push(Violation {
            input: json!({}),
            what: format!("an empty object, missing required property {first:?}"),
            property: Some(first.to_owned()),
        });
    }
    for (name, property) in properties.into_iter().flatten() {
        if let Some(wrong) = wrong_typed_value(property) {
            let mut input = Map::new();
            input.insert(name.clone(), wrong.clone());
            out.push(Violation {
                input: Value::Object(input),
                what: format!("property {name:?} set to {wrong}, which its declared type excludes"),
                property: Some(name.clone()),
            });
        }
    }
    if root.get("additionalProperties") == Some(&Value::Bool(false)) {
        let name = "modconform_unknown_property";
        out.push(Violation {
            input: json!({ name: true }),
            what: format!("an unknown property {name:?} where additionalProperties is false"),
            property: Some(name.to_owned()),
        });
    }
    out.push(Violation {
        input: json!(["modconform", "not an object"]),
        what: "an array where the input must be an object".into(),
        property: None,
    });
    out
}

/// A value whose JSON type the property's `type` excludes.
fn wrong_typed_value(property: &Value) -> Option<Value> {
    let allowed: Vec<&str> = match property.get("type")? {
        Value::String(t) => vec![t.as_str()],
        Value::Array(ts) => ts.iter().filter_map(Value::as_str).collect(),
        _ => return None,
    };
    let candidates = [
        ("string", json!("modconform: wrong type")),
        ("integer", json!(7)),
        ("boolean", json!(true)),
        ("array", json!([])),
        ("object", json!({})),
        ("null", Value::Null),
    ];
    candidates
        .into_iter()
        .find(|(kind, _)| {
            // An integer is also a number.
            let admitted =
                allowed.contains(kind) || (*kind == "integer" && allowed.contains(&"number"));
            !admitted
        })
        .map(|(_, value)| value)
}

#[cfg(test)]
mod tests {
    use super::*;

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

    #[test]
    fn violating_input_prefers_a_missing_required_property() {
        let schema = json!({"type": "object", "required": ["path"],
                            "properties": {"path": {"type": "string"}}});
        let v = violating_input(&schema, &compile(&schema).unwrap()).unwrap();
        assert_eq!(v.input, json!({}));
        assert_eq!(v.property.as_deref(), Some("path"));
    }

    #[test]
    fn violating_input_uses_a_wrong_type_when_nothing_is_required() {
        let schema = json!({"type": "object", "properties": {"n": {"type": ["number", "null"]}}});
        let v = violating_input(&schema, &compile(&schema).unwrap()).unwrap();
        assert_eq!(v.input, json!({"n": "modconform: wrong type"}));
        let schema = json!({"type": "object", "properties": {"s": {"type": "string"}}});
        let v = violating_input(&schema, &compile(&schema).unwrap()).unwrap();
        assert_eq!(v.input, json!({"s": 7}));
    }

    #[test]
    fn violating_input_is_none_when_the_schema_accepts_everything() {
        let schema = json!({});
        assert_eq!(violating_input(&schema, &compile(&schema).unwrap()), None);
    }
}

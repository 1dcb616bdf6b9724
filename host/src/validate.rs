//! JSON Schema checks of a call's input (before anything is spawned) and of
//! a module's output (before anything is passed on).
//!
//! `jsonschema` is built without its default features, so a `$ref` to a remote
//! document fails instead of making the host fetch it. Every violation is
//! reported, not only the first: an agent fixing its arguments should need one
//! round trip, not one per mistake.

use serde_json::Value;

/// Why a value was not accepted.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SchemaFailure {
    /// The schema itself does not compile (the module's fault).
    BadSchema(String),
    /// Each violation, as `<json pointer>: <problem>`.
    Violations(Vec<String>),
}

/// Check `instance` against `schema`.
pub fn check(schema: &Value, instance: &Value) -> Result<(), SchemaFailure> {
    let validator =
        jsonschema::validator_for(schema).map_err(|e| SchemaFailure::BadSchema(e.to_string()))?;
    let violations = modconform::schema::violations(&validator, instance);
    if violations.is_empty() {
        Ok(())
    } else {
        Err(SchemaFailure::Violations(violations))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn schema() -> Value {
        json!({
            "type": "object",
            "properties": {"pattern": {"type": "string"}, "max": {"type": "integer", "minimum": 1}},
            "required": ["pattern"],
            "additionalProperties": false
        })
    }

    #[test]
    fn valid_input_passes() {
        assert_eq!(check(&schema(), &json!({"pattern": "x", "max": 3})), Ok(()));
    }

    #[test]
    fn every_violation_is_listed() {
        let Err(SchemaFailure::Violations(problems)) =
            check(&schema(), &json!({"max": 0, "extra": true}))
        else {
            panic!("expected violations");
        };
        assert_eq!(problems.len(), 3, "{problems:?}");
        assert!(
            problems.iter().any(|p| p.starts_with("/max:")),
            "{problems:?}"
        );
        assert!(
            problems.iter().any(|p| p.contains("pattern")),
            "{problems:?}"
        );
    }

    #[test]
    fn broken_schema_is_reported_as_such() {
        let result = check(&json!({"type": 12}), &json!({}));
        assert!(
            matches!(result, Err(SchemaFailure::BadSchema(_))),
            "{result:?}"
        );
    }

    #[test]
    fn remote_refs_are_not_fetched() {
        let schema = json!({"$ref": "https://example.invalid/schema.json"});
        assert!(matches!(
            check(&schema, &json!({})),
            Err(SchemaFailure::BadSchema(_))
        ));
    }
}

//! JSON Schema checks of a call's input (before anything is spawned) and of
//! a module's output (before anything is passed on).
//!
//! `jsonschema` is built without its default features, so a `$ref` to a remote
//! document fails instead of making the host fetch it. Every violation is
//! reported, not only the first: an agent fixing its arguments should need one
//! round trip, not one per mistake.
//!
//! Compiling a schema costs more than checking a value against it (about a
//! tenth of a millisecond for a small one), and a host calls the same few
//! capabilities over and over, so [`Validators`] keeps each compiled schema,
//! keyed by the schema's own text: a module that changes its schema gets a
//! new entry, never a stale validator.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use serde_json::Value;

/// Why a value was not accepted.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SchemaFailure {
    /// The schema itself does not compile (the module's fault).
    BadSchema(String),
    /// Each violation, as `<json pointer>: <problem>`.
    Violations(Vec<String>),
}

fn compile(schema: &Value) -> Result<jsonschema::Validator, SchemaFailure> {
    jsonschema::validator_for(schema).map_err(|e| SchemaFailure::BadSchema(e.to_string()))
}

fn check_with(validator: &jsonschema::Validator, instance: &Value) -> Result<(), SchemaFailure> {
    let violations = modconform::schema::violations(validator, instance);
    if violations.is_empty() {
        Ok(())
    } else {
        Err(SchemaFailure::Violations(violations))
    }
}

/// Compiled schemas, shared by every call of a host.
#[derive(Debug, Default)]
pub struct Validators {
    compiled: Mutex<HashMap<String, Compiled>>,
}

/// A schema's validator, or why it does not compile (remembered too: a
/// broken schema stays broken until its text changes).
type Compiled = Arc<Result<jsonschema::Validator, SchemaFailure>>;

/// The most schemas kept; past it the cache starts over rather than grow
/// without bound in a host that sees ever-new schemas.
const MAX_COMPILED: usize = 512;

impl Validators {
    /// Check `instance` against `schema`, compiling it only the first time
    /// this text is seen.
    pub fn check(&self, schema: &Value, instance: &Value) -> Result<(), SchemaFailure> {
        match self.compiled(schema).as_ref() {
            Ok(validator) => check_with(validator, instance),
            Err(failure) => Err(failure.clone()),
        }
    }

    /// Compile `schema` now, so the first call checked against it does not
    /// pay for the compile (nor, for the host's first schema, for
    /// `jsonschema`'s own one-time set-up: its meta-schemas, about a
    /// megabyte of allocations). A broken schema is remembered as broken.
    pub fn prepare(&self, schema: &Value) {
        self.compiled(schema);
    }

    /// The compiled `schema`, compiled now if this text is new.
    fn compiled(&self, schema: &Value) -> Compiled {
        let key = schema.to_string();
        if let Some(compiled) = self.lock().get(&key) {
            return Arc::clone(compiled);
        }
        // Compiled outside the lock: concurrent first calls may both
        // compile, and either result is the same.
        let compiled = Arc::new(compile(schema));
        let mut map = self.lock();
        if map.len() >= MAX_COMPILED {
            map.clear();
        }
        map.insert(key, Arc::clone(&compiled));
        compiled
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<String, Compiled>> {
        self.compiled.lock().unwrap_or_else(|e| e.into_inner())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    /// One check with a schema compiled for it alone.
    fn check(schema: &Value, instance: &Value) -> Result<(), SchemaFailure> {
        Validators::default().check(schema, instance)
    }

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
    fn the_cache_answers_like_a_fresh_compile_and_keys_by_schema_text() {
        let validators = Validators::default();
        for _ in 0..2 {
            assert_eq!(
                validators.check(&schema(), &json!({"pattern": "x"})),
                Ok(())
            );
            assert_eq!(
                validators.check(&schema(), &json!({"max": 0})),
                check(&schema(), &json!({"max": 0}))
            );
        }
        // Same shape, other text: its own entry, not the first schema's.
        let stricter = json!({"type": "object", "required": ["other"]});
        assert!(matches!(
            validators.check(&stricter, &json!({"pattern": "x"})),
            Err(SchemaFailure::Violations(_))
        ));
        let broken = json!({"type": 12});
        for _ in 0..2 {
            assert!(matches!(
                validators.check(&broken, &json!({})),
                Err(SchemaFailure::BadSchema(_))
            ));
        }
        assert_eq!(validators.lock().len(), 3);
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

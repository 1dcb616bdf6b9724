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
//!
//! A call finds its compiled schema without writing the schema out as text
//! ([`Validators::check_in`]): by the address of the schema inside the
//! descriptor that owns it. A descriptor behind an `Arc` never changes
//! (`Arc::get_mut` fails while the entry's `Weak` exists, `make_mut` moves
//! the value), and the `Weak` keeps its allocation, so the address is never
//! another descriptor's while the entry lives: a rediscovered module is a
//! new descriptor and is looked up by its text again.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, Weak};

use modproto::Descriptor;
use serde_json::Value;

/// Why a value was not accepted.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum SchemaFailure {
    /// The schema itself does not compile (the module's fault).
    BadSchema(String),
    /// Each violation, as `<json pointer>: <problem>`.
    Violations(Vec<String>),
}

fn compile(schema: &Value) -> Result<jsonschema::Validator, SchemaFailure> {
    jsonschema::validator_for(schema).map_err(|e| SchemaFailure::BadSchema(e.to_string()))
}

fn check_with(validator: &jsonschema::Validator, instance: &Value) -> Result<(), SchemaFailure> {
    // The common case, a value that fits, without building an error list.
    if validator.is_valid(instance) {
        return Ok(());
    }
    let violations = modconform::schema::violations(validator, instance);
    if violations.is_empty() {
        Ok(())
    } else {
        Err(SchemaFailure::Violations(violations))
    }
}

/// Compiled schemas, shared by every call of a host.
#[derive(Debug, Default)]
pub(crate) struct Validators {
    compiled: Mutex<HashMap<String, Compiled>>,
    /// By (descriptor, schema) address: see the module docs.
    by_address: Mutex<HashMap<(usize, usize), Owned>>,
}

/// A compiled schema of one descriptor, found by address.
#[derive(Debug)]
struct Owned {
    /// Held so the descriptor's address is never reused while this lives.
    _owner: Weak<Descriptor>,
    compiled: Compiled,
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
    pub(crate) fn check(&self, schema: &Value, instance: &Value) -> Result<(), SchemaFailure> {
        match self.compiled(schema).as_ref() {
            Ok(validator) => check_with(validator, instance),
            Err(failure) => Err(failure.clone()),
        }
    }

    /// [`Validators::check`] of `schema`, one of `owner`'s capability
    /// schemas: found by address after the first time, not by its text. A
    /// schema that is not `owner`'s own is looked up by its text.
    pub(crate) fn check_in(
        &self,
        owner: &Arc<Descriptor>,
        schema: &Value,
        instance: &Value,
    ) -> Result<(), SchemaFailure> {
        let owned = owner.capabilities.iter().any(|c| {
            std::ptr::eq(&c.input_schema, schema)
                || c.output_schema
                    .as_ref()
                    .is_some_and(|s| std::ptr::eq(s, schema))
        });
        if !owned {
            return self.check(schema, instance);
        }
        match self.compiled_in(owner, schema).as_ref() {
            Ok(validator) => check_with(validator, instance),
            Err(failure) => Err(failure.clone()),
        }
    }

    /// The compiled `schema` of `owner`, by address.
    fn compiled_in(&self, owner: &Arc<Descriptor>, schema: &Value) -> Compiled {
        let key = (
            Arc::as_ptr(owner) as usize,
            std::ptr::from_ref(schema) as usize,
        );
        if let Some(owned) = lock(&self.by_address).get(&key) {
            return Arc::clone(&owned.compiled);
        }
        let compiled = self.compiled(schema);
        let mut by_address = lock(&self.by_address);
        if by_address.len() >= MAX_COMPILED {
            by_address.clear();
        }
        by_address.insert(
            key,
            Owned {
                _owner: Arc::downgrade(owner),
                compiled: Arc::clone(&compiled),
            },
        );
        compiled
    }

    /// Compile `schema` now, so the first call checked against it does not
    /// pay for the compile (nor, for the host's first schema, for
    /// `jsonschema`'s own one-time set-up: its meta-schemas, about a
    /// megabyte of allocations). A broken schema is remembered as broken.
    pub(crate) fn prepare(&self, schema: &Value) {
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
        lock(&self.compiled)
    }
}

fn lock<T>(mutex: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(|e| e.into_inner())
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

    fn descriptor(schema: &Value) -> Arc<Descriptor> {
        Arc::new(
            serde_json::from_value(json!({"id": "m", "version": "1.0.0", "capabilities": [
                {"id": "m.run", "description": "run", "input_schema": schema}
            ]}))
            .unwrap(),
        )
    }

    /// The attack on the look-up by address: a module rediscovered with a
    /// stricter schema (its old descriptor dropped, the new one possibly at
    /// the freed address) is checked against the stricter schema; a schema
    /// that is not the owner's own is checked by its text.
    #[test]
    fn a_schema_found_by_address_is_never_another_descriptors() {
        let validators = Validators::default();
        let loose = descriptor(&json!({"type": "object"}));
        let instance = json!({"pattern": "x"});
        for _ in 0..2 {
            let schema = &loose.capabilities[0].input_schema;
            assert_eq!(validators.check_in(&loose, schema, &instance), Ok(()));
        }
        drop(loose);
        for _ in 0..8 {
            let strict = descriptor(&json!({"type": "object", "required": ["other"]}));
            let schema = &strict.capabilities[0].input_schema;
            assert!(matches!(
                validators.check_in(&strict, schema, &instance),
                Err(SchemaFailure::Violations(_))
            ));
        }
        let owner = descriptor(&json!({"type": "object"}));
        let foreign = json!({"type": "string"});
        assert!(matches!(
            validators.check_in(&owner, &foreign, &instance),
            Err(SchemaFailure::Violations(_))
        ));
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

//! Checking a call's input against its capability's schema, cheaply.
//!
//! The host validates every input against the declared schema before the
//! call reaches the module (PROTOCOL.md), so the module's own check is a
//! second line, not the gate. By default the SDK checks by type: typed
//! deserialization enforces what the derived schema usually says (types,
//! required fields, no unknown fields, enum variants) and reports the first
//! problem. No JSON Schema validator is linked: one is about sixty crates,
//! megabytes of every module binary and component, and milliseconds of
//! start-up per call (a validator checks every schema against its
//! meta-schema, which it must compile first; inside a component that
//! start-up is paid on every call).
//!
//! A module that wants the schema itself enforced in-process enables the
//! `validate` cargo feature. Then:
//!
//! - a schema that asserts nothing beyond its type ([`asserts_beyond_type`])
//!   is still checked by deserialization alone, and compiled only when
//!   deserialization fails, to list every problem as the host would;
//! - any other schema (a pattern, a length, a range narrower than the
//!   integer type, unique items, ...) is compiled before the request is read
//!   and checked before deserialization.

#[cfg(feature = "validate")]
use std::cell::OnceCell;

use modproto::Descriptor;
#[cfg(feature = "validate")]
use modproto::ModuleErrorKind;
use serde_json::Value;

use crate::ModError;

/// The input check of each capability of a module.
pub(crate) struct InputChecks {
    checks: Vec<InputCheck>,
}

pub(crate) struct InputCheck {
    capability: String,
    #[cfg(feature = "validate")]
    schema: Value,
    #[cfg(feature = "validate")]
    asserts_beyond_type: bool,
    #[cfg(feature = "validate")]
    compiled: OnceCell<Result<jsonschema::Validator, String>>,
}

impl InputChecks {
    /// The checks of `descriptor`'s capabilities; with `validate`, those
    /// that need a compiled schema are compiled now.
    pub(crate) fn prepare(descriptor: &Descriptor) -> InputChecks {
        let checks = descriptor
            .capabilities
            .iter()
            .map(|c| InputCheck::new(&c.id, &c.input_schema))
            .collect();
        InputChecks { checks }
    }

    pub(crate) fn get(&self, capability: &str) -> Option<&InputCheck> {
        self.checks.iter().find(|c| c.capability == capability)
    }
}

#[cfg(not(feature = "validate"))]
impl InputCheck {
    fn new(capability: &str, _schema: &Value) -> InputCheck {
        InputCheck {
            capability: capability.to_owned(),
        }
    }

    /// Whether the schema must be checked before deserialization: never
    /// without `validate` (the host has checked it).
    pub(crate) fn asserts_beyond_type(&self) -> bool {
        false
    }

    /// Without a validator there is nothing to list beyond the problem
    /// deserialization found.
    #[allow(
        clippy::unused_self,
        clippy::unnecessary_wraps,
        reason = "the same signature as the validating build's"
    )]
    pub(crate) fn problems(&self, _input: &Value) -> Result<Vec<String>, ModError> {
        Ok(Vec::new())
    }
}

#[cfg(feature = "validate")]
impl InputCheck {
    fn new(capability: &str, schema: &Value) -> InputCheck {
        let check = InputCheck {
            capability: capability.to_owned(),
            asserts_beyond_type: asserts_beyond_type(schema),
            schema: schema.clone(),
            compiled: OnceCell::new(),
        };
        if check.asserts_beyond_type {
            check.validator();
        }
        check
    }

    /// Whether the schema must be checked before deserialization (it says
    /// more than the type).
    pub(crate) fn asserts_beyond_type(&self) -> bool {
        self.asserts_beyond_type
    }

    /// Every way `input` violates the schema, each as `<pointer>: <problem>`.
    pub(crate) fn problems(&self, input: &Value) -> Result<Vec<String>, ModError> {
        let validator = self.validator().as_ref().map_err(|e| {
            ModError::new(
                ModuleErrorKind::Internal,
                format!("the declared input schema does not compile: {e}"),
            )
            .with_remedy("this is a bug in the module; report it to its author")
        })?;
        Ok(validator
            .iter_errors(input)
            .map(|e| {
                let at = e.instance_path().to_string();
                let at = if at.is_empty() {
                    "input".to_owned()
                } else {
                    format!("input{at}")
                };
                format!("{at}: {e}")
            })
            .collect())
    }

    fn validator(&self) -> &Result<jsonschema::Validator, String> {
        self.compiled
            .get_or_init(|| jsonschema::validator_for(&self.schema).map_err(|e| e.to_string()))
    }
}

/// Whether `schema` asserts anything typed deserialization of the type it
/// was derived from would not: anything but structure (`type`,
/// `properties`, `required`, `additionalProperties`, `items`,
/// `prefixItems`, `enum`, `const`, `oneOf`, `anyOf`, references),
/// annotations, and the bounds an integer `format` implies (`uint8` is
/// 0..=255, which deserializing a `u8` enforces). Unknown keywords count as
/// assertions: when in doubt, the schema is compiled.
#[cfg(feature = "validate")]
pub fn asserts_beyond_type(schema: &Value) -> bool {
    let map = match schema {
        Value::Bool(_) => return false,
        Value::Object(map) => map,
        _ => return true,
    };
    let format = map.get("format").and_then(Value::as_str);
    map.iter().any(|(keyword, value)| match keyword.as_str() {
        "type" | "required" | "enum" | "const" | "$ref" | "$schema" | "$id" | "$comment"
        | "title" | "description" | "default" | "examples" | "deprecated" | "readOnly"
        | "writeOnly" | "format" | "nullable" => false,
        "properties" | "$defs" | "definitions" => value
            .as_object()
            .is_none_or(|subs| subs.values().any(asserts_beyond_type)),
        "oneOf" | "anyOf" | "prefixItems" => value
            .as_array()
            .is_none_or(|subs| subs.iter().any(asserts_beyond_type)),
        "items" | "additionalProperties" => asserts_beyond_type(value),
        "minimum" | "maximum" => !is_integer_format_bound(format, keyword, value),
        _ => true,
    })
}

/// Whether `value` is the `minimum`/`maximum` that the integer `format`
/// (as schemars names Rust's integer types) implies anyway.
#[cfg(feature = "validate")]
fn is_integer_format_bound(format: Option<&str>, keyword: &str, value: &Value) -> bool {
    let (min, max): (i128, i128) = match format {
        Some("int8") => (i8::MIN.into(), i8::MAX.into()),
        Some("int16") => (i16::MIN.into(), i16::MAX.into()),
        Some("int32") => (i32::MIN.into(), i32::MAX.into()),
        Some("int64" | "int") => (i64::MIN.into(), i64::MAX.into()),
        Some("uint8") => (0, u8::MAX.into()),
        Some("uint16") => (0, u16::MAX.into()),
        Some("uint32") => (0, u32::MAX.into()),
        Some("uint64" | "uint") => (0, u64::MAX.into()),
        _ => return false,
    };
    let bound = if keyword == "minimum" { min } else { max };
    let value = value
        .as_i64()
        .map(i128::from)
        .or_else(|| value.as_u64().map(i128::from));
    value == Some(bound)
}

#[cfg(all(test, feature = "validate"))]
mod tests {
    use schemars::JsonSchema;
    use serde::Deserialize;
    use serde_json::json;

    use super::*;

    fn schema_of<T: JsonSchema>() -> Value {
        schemars::schema_for!(T).to_value()
    }

    #[allow(dead_code, reason = "only the derived schema is used")]
    #[derive(Deserialize, JsonSchema)]
    #[serde(deny_unknown_fields)]
    struct Plain {
        /// Documented.
        name: String,
        count: u8,
        limit: Option<usize>,
        offset: i64,
        tags: Vec<String>,
        mode: Mode,
        nested: Option<Nested>,
    }

    #[allow(dead_code, reason = "only the derived schema is used")]
    #[derive(Deserialize, JsonSchema)]
    #[serde(rename_all = "snake_case")]
    enum Mode {
        Fast,
        Thorough { depth: u32 },
    }

    #[allow(dead_code, reason = "only the derived schema is used")]
    #[derive(Deserialize, JsonSchema)]
    struct Nested {
        flag: bool,
    }

    #[allow(dead_code, reason = "only the derived schema is used")]
    #[derive(Deserialize, JsonSchema)]
    struct Constrained {
        #[schemars(length(min = 1))]
        pattern: String,
    }

    #[allow(dead_code, reason = "only the derived schema is used")]
    #[derive(Deserialize, JsonSchema)]
    struct Ranged {
        #[schemars(range(min = 1, max = 100))]
        limit: u32,
    }

    #[allow(dead_code, reason = "only the derived schema is used")]
    #[derive(Deserialize, JsonSchema)]
    struct Unique {
        names: std::collections::BTreeSet<String>,
    }

    #[test]
    fn a_schema_derived_from_plain_types_asserts_nothing_beyond_them() {
        let schema = schema_of::<Plain>();
        assert!(!asserts_beyond_type(&schema), "{schema:#}");
    }

    #[test]
    fn constraints_the_type_does_not_carry_are_assertions() {
        for schema in [
            schema_of::<Constrained>(),
            schema_of::<Ranged>(),
            schema_of::<Unique>(),
            json!({"type": "string", "pattern": "^a"}),
            json!({"type": "integer", "format": "uint8", "minimum": 1}),
            json!({"type": "object", "properties": {"x": {"type": "string", "maxLength": 3}}}),
            json!({"allOf": [{"type": "object"}]}),
            json!({"x-unknown": true}),
        ] {
            assert!(asserts_beyond_type(&schema), "{schema:#}");
        }
    }
}

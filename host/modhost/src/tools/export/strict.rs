//! OpenAI strict mode (`"strict": true`): the model's arguments are
//! guaranteed to match the schema, but only for a subset of JSON Schema in
//! a fixed form: every object closed (`additionalProperties: false`), every
//! property listed in `required`, an optional one expressed as nullable.
//!
//! A tool is made strict only when that keeps its meaning; otherwise it is
//! exported without `strict` and the reason is reported:
//!
//! - closing an object that declares its properties only narrows what the
//!   model may send to what the module declared; an object with no declared
//!   properties (a free-form map) or an explicit open `additionalProperties`
//!   would lose every key, so it cannot be made strict;
//! - an optional property becomes required-but-nullable only when its schema
//!   already accepts `null` (an `Option` field): for any other, the model
//!   would send `null` where the module expects the key to be absent;
//! - a keyword strict mode does not support (`minLength`, `oneOf`,
//!   `patternProperties`, ...) cannot be dropped without accepting more, so
//!   it cannot be made strict; annotations (`default`, `examples`, a
//!   `format` strict mode does not know) are dropped, they accept nothing.

use serde_json::{Map, Value, json};

/// Keywords strict mode supports (OpenAI's "Supported schemas" for
/// Structured Outputs), kept as they are.
const SUPPORTED: &[&str] = &[
    "type",
    "properties",
    "required",
    "additionalProperties",
    "items",
    "enum",
    "const",
    "anyOf",
    "$ref",
    "$defs",
    "definitions",
    "description",
    "title",
    "pattern",
    "format",
    "minimum",
    "maximum",
    "exclusiveMinimum",
    "exclusiveMaximum",
    "multipleOf",
    "minItems",
    "maxItems",
];

/// Annotations: no argument is accepted or refused because of them.
const ANNOTATIONS: &[&str] = &[
    "default",
    "examples",
    "$comment",
    "deprecated",
    "readOnly",
    "writeOnly",
    "$schema",
    "contentMediaType",
    "contentEncoding",
];

/// The `format` values strict mode supports.
const STRICT_FORMATS: &[&str] = &[
    "date-time",
    "time",
    "date",
    "duration",
    "email",
    "hostname",
    "ipv4",
    "ipv6",
    "uuid",
];

/// `schema` (already [`super::portable::input_schema`]) in strict form, or
/// why it cannot be made strict without changing its meaning.
pub(super) fn strict_schema(schema: &Value) -> Result<Value, String> {
    let mut schema = schema.clone();
    let defs = definitions(&schema);
    make_strict(&mut schema, &mut String::new(), &defs)?;
    Ok(schema)
}

fn definitions(schema: &Value) -> Map<String, Value> {
    let mut all = Map::new();
    for key in ["$defs", "definitions"] {
        if let Some(Value::Object(defs)) = schema.get(key) {
            for (name, def) in defs {
                all.insert(format!("#/{key}/{name}"), def.clone());
            }
        }
    }
    all
}

fn at(pointer: &str) -> &str {
    if pointer.is_empty() {
        "the root"
    } else {
        pointer
    }
}

fn make_strict(
    node: &mut Value,
    pointer: &mut String,
    defs: &Map<String, Value>,
) -> Result<(), String> {
    let Value::Object(map) = node else {
        return Err(format!(
            "the schema at {} is {node}, which strict mode cannot express",
            at(pointer)
        ));
    };
    map.retain(|k, _| !ANNOTATIONS.contains(&k.as_str()));
    if let Some(unsupported) = map.keys().find(|k| !SUPPORTED.contains(&k.as_str())) {
        return Err(format!(
            "{unsupported:?} at {}, which strict mode does not support",
            at(pointer)
        ));
    }
    if map
        .get("format")
        .and_then(Value::as_str)
        .is_some_and(|f| !STRICT_FORMATS.contains(&f))
    {
        map.remove("format");
    }
    if is_object_schema(map) {
        close_object(map, pointer, defs)?;
    }
    for key in ["items", "additionalProperties"] {
        if let Some(child) = map.get_mut(key).filter(|c| c.is_object()) {
            descend(child, pointer, &[key], defs)?;
        }
    }
    if let Some(Value::Array(_)) = map.get("items") {
        return Err(format!(
            "a tuple \"items\" at {}, which strict mode does not support",
            at(pointer)
        ));
    }
    for key in ["properties", "$defs", "definitions"] {
        if let Some(Value::Object(children)) = map.get_mut(key) {
            for (name, child) in children.iter_mut() {
                descend(child, pointer, &[key, name], defs)?;
            }
        }
    }
    if let Some(Value::Array(branches)) = map.get_mut("anyOf") {
        for (i, branch) in branches.iter_mut().enumerate() {
            descend(branch, pointer, &["anyOf", &i.to_string()], defs)?;
        }
    }
    Ok(())
}

fn descend(
    child: &mut Value,
    pointer: &mut String,
    keys: &[&str],
    defs: &Map<String, Value>,
) -> Result<(), String> {
    let len = pointer.len();
    for key in keys {
        pointer.push('/');
        pointer.push_str(&key.replace('~', "~0").replace('/', "~1"));
    }
    let result = make_strict(child, pointer, defs);
    pointer.truncate(len);
    result
}

fn is_object_schema(map: &Map<String, Value>) -> bool {
    match map.get("type") {
        Some(Value::String(t)) => t == "object",
        Some(Value::Array(types)) => types.iter().any(|t| t == "object"),
        _ => map.contains_key("properties"),
    }
}

/// Every property required (optional ones only when they accept null), no
/// other property allowed.
fn close_object(
    map: &mut Map<String, Value>,
    pointer: &str,
    defs: &Map<String, Value>,
) -> Result<(), String> {
    let declared = map
        .get("properties")
        .and_then(Value::as_object)
        .map_or(0, Map::len);
    match map.get("additionalProperties") {
        None | Some(Value::Bool(false)) => {}
        Some(_) => {
            return Err(format!(
                "the object at {} allows properties it does not declare (additionalProperties), which strict mode forbids",
                at(pointer)
            ));
        }
    }
    // An object that declares nothing and does not close itself is a
    // free-form map (at the root: a capability taking any object, such as
    // an echo); a capability without input says `additionalProperties: false`.
    if declared == 0 && !map.contains_key("additionalProperties") {
        return Err(format!(
            "the object at {} declares no properties (a free-form map), which strict mode cannot express",
            at(pointer)
        ));
    }
    let required: Vec<String> = map
        .get("required")
        .and_then(Value::as_array)
        .map(|r| {
            r.iter()
                .filter_map(Value::as_str)
                .map(str::to_owned)
                .collect()
        })
        .unwrap_or_default();
    let mut all = Vec::new();
    if let Some(Value::Object(properties)) = map.get("properties") {
        for (name, property) in properties {
            if !required.contains(name) && !accepts_null(property, defs) {
                return Err(format!(
                    "optional property {name:?} at {} does not accept null: strict mode sends null for an omitted \
                     optional property, which the module would refuse",
                    at(pointer)
                ));
            }
            all.push(json!(name));
        }
    }
    map.insert("required".into(), Value::Array(all));
    map.insert("additionalProperties".into(), Value::Bool(false));
    map.entry("properties").or_insert_with(|| json!({}));
    Ok(())
}

/// Whether `schema` accepts `null` (conservatively: an unresolvable `$ref`
/// or an unknown shape does not).
fn accepts_null(schema: &Value, defs: &Map<String, Value>) -> bool {
    let Value::Object(map) = schema else {
        return schema == &Value::Bool(true);
    };
    if let Some(Value::String(target)) = map.get("$ref") {
        return defs.get(target).is_some_and(|d| accepts_null(d, defs));
    }
    let typed = match map.get("type") {
        Some(Value::String(t)) => t == "null",
        Some(Value::Array(types)) => types.iter().any(|t| t == "null"),
        Some(_) => false,
        None => true,
    };
    let listed = |key: &str| {
        map.get(key)
            .and_then(Value::as_array)
            .is_none_or(|values| values.contains(&Value::Null))
    };
    let alternatives = ["anyOf", "oneOf"].iter().all(|key| {
        map.get(*key)
            .and_then(Value::as_array)
            .is_none_or(|branches| branches.iter().any(|b| accepts_null(b, defs)))
    });
    typed
        && listed("enum")
        && map.get("const").is_none_or(Value::is_null)
        && alternatives
        && !map.contains_key("not")
        && !map.contains_key("allOf")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn option_fields_become_required_and_every_object_closed() {
        let schema = json!({"type": "object", "properties": {
            "path": {"type": ["string", "null"], "default": null},
            "q": {"type": "string", "minimum": 0},
            "inner": {"anyOf": [{"$ref": "#/$defs/Inner"}, {"type": "null"}]}
        }, "required": ["q"], "$defs": {"Inner": {"type": "object", "properties": {"n": {"type": "integer"}}, "required": ["n"]}}});
        let strict = strict_schema(&schema).unwrap();
        assert_eq!(strict["required"], json!(["inner", "path", "q"]));
        assert_eq!(strict["additionalProperties"], json!(false));
        assert!(strict["properties"]["path"].get("default").is_none());
        assert_eq!(
            strict["$defs"]["Inner"]["additionalProperties"],
            json!(false)
        );
    }

    #[test]
    fn an_optional_property_that_refuses_null_cannot_be_made_strict() {
        let schema =
            json!({"type": "object", "properties": {"max": {"type": "integer", "default": 50}}});
        let reason = strict_schema(&schema).unwrap_err();
        assert!(
            reason.contains("optional property \"max\"") && reason.contains("null"),
            "{reason}"
        );
    }

    #[test]
    fn meaning_changing_constructs_are_refused_with_where() {
        let cases = [
            (
                json!({"type": "object", "properties": {"s": {"type": "string", "minLength": 1}}, "required": ["s"]}),
                "minLength",
            ),
            (
                json!({"type": "object", "properties": {"m": {"type": "object"}}, "required": ["m"]}),
                "free-form",
            ),
            (
                json!({"type": "object", "additionalProperties": {"type": "string"}}),
                "additionalProperties",
            ),
            (
                json!({"type": "object", "properties": {"o": {"oneOf": [{"type": "string"}]}}, "required": ["o"]}),
                "oneOf",
            ),
        ];
        for (schema, expected) in cases {
            let reason = strict_schema(&schema).unwrap_err();
            assert!(reason.contains(expected), "{schema}: {reason}");
        }
    }

    #[test]
    fn no_input_is_a_closed_empty_object_and_any_object_is_not() {
        assert!(
            strict_schema(&json!({"type": "object"}))
                .unwrap_err()
                .contains("free-form")
        );
        assert_eq!(
            strict_schema(&json!({"type": "object", "additionalProperties": false})).unwrap(),
            json!({"type": "object", "properties": {}, "required": [], "additionalProperties": false})
        );
    }
}

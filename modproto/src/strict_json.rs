//! JSON text to a [`Value`], refusing duplicate object keys.
//!
//! RFC 8259 only says keys *should* be unique, and `serde_json` keeps the
//! last of two equal keys. For bytes from an untrusted module that is a
//! smuggling channel: `{"result": {...}, "result": {...}}` reads one way to a
//! tool that keeps the first and another to one that keeps the last. So every
//! protocol line is parsed here, and a repeated key at any depth is an error
//! naming the key, never a silent choice.
//!
//! The visitor builds the same [`Value`] `serde_json` would (numbers go
//! through the same `i64`/`u64`/`f64` paths) and inherits its recursion limit.

use serde::de::{self, Deserialize, DeserializeSeed, Deserializer, MapAccess, SeqAccess, Visitor};
use serde_json::{Map, Value};
use std::fmt;

/// Why a text is not strict JSON.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum StrictJsonError {
    /// Not JSON at all: the syntax error, with line and column.
    Syntax(String),
    /// JSON, but an object repeats a key.
    DuplicateKey(String),
}

impl fmt::Display for StrictJsonError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            StrictJsonError::Syntax(m) => f.write_str(m),
            StrictJsonError::DuplicateKey(m) => f.write_str(m),
        }
    }
}

impl std::error::Error for StrictJsonError {}

/// Parse `text` as one JSON value whose objects have unique keys.
pub fn from_str(text: &str) -> Result<Value, StrictJsonError> {
    serde_json::from_str::<UniqueKeys>(text)
        .map(|v| v.0)
        .map_err(|e| match e.classify() {
            // The visitor's own error is the only `Data` error a `Value`
            // parse can produce.
            serde_json::error::Category::Data => StrictJsonError::DuplicateKey(e.to_string()),
            _ => StrictJsonError::Syntax(e.to_string()),
        })
}

/// A [`Value`] deserialized with the duplicate-key check.
struct UniqueKeys(Value);

impl<'de> Deserialize<'de> for UniqueKeys {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        d.deserialize_any(UniqueVisitor).map(UniqueKeys)
    }
}

struct UniqueVisitor;

impl<'de> DeserializeSeed<'de> for UniqueVisitor {
    type Value = Value;

    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<Value, D::Error> {
        d.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for UniqueVisitor {
    type Value = Value;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("any JSON value")
    }

    fn visit_bool<E>(self, v: bool) -> Result<Value, E> {
        Ok(Value::Bool(v))
    }

    fn visit_i64<E>(self, v: i64) -> Result<Value, E> {
        Ok(Value::from(v))
    }

    fn visit_u64<E>(self, v: u64) -> Result<Value, E> {
        Ok(Value::from(v))
    }

    fn visit_f64<E>(self, v: f64) -> Result<Value, E> {
        // Non-finite floats cannot come out of JSON text; `Null` as serde_json does.
        Ok(serde_json::Number::from_f64(v).map_or(Value::Null, Value::Number))
    }

    fn visit_str<E>(self, v: &str) -> Result<Value, E> {
        Ok(Value::String(v.to_owned()))
    }

    fn visit_string<E>(self, v: String) -> Result<Value, E> {
        Ok(Value::String(v))
    }

    fn visit_unit<E>(self) -> Result<Value, E> {
        Ok(Value::Null)
    }

    fn visit_none<E>(self) -> Result<Value, E> {
        Ok(Value::Null)
    }

    fn visit_some<D: Deserializer<'de>>(self, d: D) -> Result<Value, D::Error> {
        d.deserialize_any(self)
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Value, A::Error> {
        let mut items = Vec::with_capacity(seq.size_hint().unwrap_or(0).min(1024));
        while let Some(item) = seq.next_element_seed(UniqueVisitor)? {
            items.push(item);
        }
        Ok(Value::Array(items))
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Value, A::Error> {
        let mut object = Map::new();
        while let Some(key) = map.next_key::<String>()? {
            if object.contains_key(&key) {
                return Err(de::Error::custom(format_args!(
                    "duplicate key {key:?} in one object"
                )));
            }
            let value = map.next_value_seed(UniqueVisitor)?;
            object.insert(key, value);
        }
        Ok(Value::Object(object))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn equal_to_serde_json_when_keys_are_unique() {
        for text in [
            r#"{"a":1,"b":[1,-2,3.5,"x",null,true,{"c":{}}],"d":18446744073709551615}"#,
            "[]",
            "\"s\"",
            "1e400",
        ] {
            let ours = from_str(text);
            let theirs = serde_json::from_str::<Value>(text).map_err(|e| e.to_string());
            match (ours, theirs) {
                (Ok(a), Ok(b)) => assert_eq!(a, b, "{text}"),
                (Err(_), Err(_)) => {}
                (a, b) => panic!("{text}: {a:?} vs {b:?}"),
            }
        }
    }

    #[test]
    fn a_repeated_key_at_any_depth_is_refused_by_name() {
        for (text, key) in [
            (r#"{"result":1,"result":2}"#, "result"),
            (r#"{"a":{"b":[{"x":1,"x":1}]}}"#, "x"),
        ] {
            match from_str(text) {
                Err(StrictJsonError::DuplicateKey(m)) => assert!(m.contains(key), "{m}"),
                other => panic!("{text}: {other:?}"),
            }
        }
        assert!(matches!(from_str("{"), Err(StrictJsonError::Syntax(_))));
    }
}

//! Building the invoke request from a caller's arguments.
//!
//! The caller's JSON goes into `input`. When the caller's object has an
//! explicit `"input"` key, that value is the input verbatim and its sibling
//! keys pass through at the request root (some modules read arguments beside
//! `input`). The host-owned keys ([`modproto::RESERVED_KEYS`]) are never taken
//! from the caller: the host writes them itself, so a caller can never widen
//! roots, forge a request id, extend a deadline or claim an approval.

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{SystemTime, UNIX_EPOCH};

use serde_json::{Map, Value};

/// The caller's arguments, split into what goes where.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct PlacedArguments {
    /// The value of `input`.
    pub input: Value,
    /// Keys that pass through at the request root.
    pub extra: Map<String, Value>,
    /// Reserved keys the caller tried to set (dropped).
    pub dropped: Vec<String>,
}

/// Split a caller's arguments into `input` and pass-through keys.
pub(crate) fn place_arguments(args: Value) -> PlacedArguments {
    let mut object = match args {
        Value::Object(object) if object.contains_key("input") => object,
        // No explicit input: the whole value is the input (a reserved name
        // inside it is the module's business, not a request key).
        Value::Null => {
            return PlacedArguments {
                input: Value::Object(Map::new()),
                extra: Map::new(),
                dropped: vec![],
            };
        }
        other => {
            return PlacedArguments {
                input: other,
                extra: Map::new(),
                dropped: vec![],
            };
        }
    };
    let input = object.remove("input").unwrap_or(Value::Null);
    let mut extra = Map::new();
    let mut dropped = Vec::new();
    for (key, value) in object {
        if modproto::RESERVED_KEYS.contains(&key.as_str()) {
            tracing::debug!("dropping the host-owned key {key:?} from caller arguments");
            dropped.push(key);
        } else {
            extra.insert(key, value);
        }
    }
    PlacedArguments {
        input,
        extra,
        dropped,
    }
}

/// A request id unique per call: the time of this process's first id, the
/// process and a counter, so two hosts on one machine (even one pid reused
/// later) and two calls in one nanosecond still differ. The prefix is
/// written once: the process id is a system call each time, and modhost
/// never forks without exec.
pub(crate) fn new_request_id() -> String {
    static COUNTER: AtomicU64 = AtomicU64::new(0);
    static PREFIX: std::sync::OnceLock<String> = std::sync::OnceLock::new();
    let prefix = PREFIX.get_or_init(|| {
        let nanos = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map(|d| d.as_nanos())
            .unwrap_or(0);
        format!("{nanos:x}-{:x}-", std::process::id())
    });
    let count = COUNTER.fetch_add(1, Ordering::Relaxed);
    format!("{prefix}{count}")
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn plain_object_is_the_input() {
        let placed = place_arguments(json!({"pattern": "x", "roots": "mine"}));
        assert_eq!(placed.input, json!({"pattern": "x", "roots": "mine"}));
        assert!(placed.extra.is_empty());
        assert!(placed.dropped.is_empty());
    }

    #[test]
    fn explicit_input_is_verbatim_with_siblings_at_the_root() {
        let placed = place_arguments(json!({"input": [1, 2], "mode": "fast"}));
        assert_eq!(placed.input, json!([1, 2]));
        assert_eq!(
            placed.extra,
            json!({"mode": "fast"}).as_object().unwrap().clone()
        );
    }

    #[test]
    fn reserved_siblings_are_dropped() {
        let placed = place_arguments(json!({
            "input": {},
            "roots": {"state": {"path": "/"}},
            "request_id": "forged",
            "deadline_ms": 999999999,
            "approval": {"by": "me"},
            "keep": true
        }));
        let mut dropped = placed.dropped.clone();
        dropped.sort();
        assert_eq!(dropped, ["approval", "deadline_ms", "request_id", "roots"]);
        assert_eq!(placed.extra.keys().collect::<Vec<_>>(), ["keep"]);
    }

    #[test]
    fn null_is_an_empty_object() {
        assert_eq!(place_arguments(Value::Null).input, json!({}));
    }

    #[test]
    fn request_ids_are_unique() {
        let a = new_request_id();
        let b = new_request_id();
        assert_ne!(a, b);
    }
}

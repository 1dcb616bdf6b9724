//! Property tests of the decoders the host runs on untrusted module output.
//!
//! Every decoder here sees bytes from a program the host does not trust, so
//! the properties are the ones that matter for that: no input panics, every
//! message the host or a module can produce survives `to_line` + `parse`
//! unchanged, anything `parse` accepts re-encodes to a line that parses to the
//! same value (so the host never forwards something it would itself reject),
//! and the path check never lets a path out of its root.
//!
//! Case counts are bounded so the whole file runs in a few seconds of
//! `cargo test -p modproto`; `PROPTEST_CASES=N` runs longer, and the
//! cargo-fuzz targets in `modproto/fuzz/` are for long runs. Failure persistence is off: a shrunk counterexample becomes
//! a named unit test at the bottom of this file instead of a regressions file.

use std::path::{Component, Path};
use std::sync::Arc;

use proptest::prelude::*;
use proptest::test_runner::Config;
use serde_json::{Map, Value, json};

use crate::contract::{self, ContractDecision};
use crate::invoke::is_clean_relative_path;
use crate::*;

/// `cases` per property, unless `PROPTEST_CASES` asks for a longer run.
fn config(cases: u32) -> Config {
    let cases = std::env::var("PROPTEST_CASES")
        .ok()
        .and_then(|n| n.parse().ok())
        .unwrap_or(cases);
    Config {
        cases,
        failure_persistence: None,
        ..Config::default()
    }
}

// ---------------------------------------------------------------- strategies

/// A JSON scalar in the canonical form `serde_json` parses it back to:
/// non-negative integers as unsigned, floats finite (JSON has no NaN).
fn json_leaf() -> impl Strategy<Value = Value> {
    prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::Bool),
        any::<i64>().prop_map(Value::from),
        any::<u64>().prop_map(Value::from),
        any::<f64>().prop_filter_map("JSON numbers are finite", |f| {
            serde_json::Number::from_f64(f).map(Value::Number)
        }),
        any::<String>().prop_map(Value::String),
    ]
}

fn json_object(values: impl Strategy<Value = Value>) -> impl Strategy<Value = Value> {
    prop::collection::btree_map(any::<String>(), values, 0..6)
        .prop_map(|m| Value::Object(m.into_iter().collect()))
}

/// Any JSON value, a few levels deep.
fn json_value() -> impl Strategy<Value = Value> {
    json_leaf().prop_recursive(4, 48, 6, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..6).prop_map(Value::Array),
            json_object(inner),
        ]
    })
}

fn request_id() -> impl Strategy<Value = Id> {
    prop_oneof![
        any::<i64>().prop_map(Id::Num),
        any::<String>().prop_map(Id::Str)
    ]
}

/// `params` as the protocol allows it: absent, an object or an array.
fn params() -> impl Strategy<Value = Option<Value>> {
    prop::option::of(prop_oneof![
        json_object(json_value()),
        prop::collection::vec(json_value(), 0..4).prop_map(Value::Array),
    ])
}

fn error_data() -> impl Strategy<Value = ErrorData> {
    (
        any::<String>(),
        prop::option::of(any::<String>()),
        prop::collection::vec(any::<String>(), 0..3),
        // `extra` holds the keys the struct does not name; a named key there
        // would be read back into its field, not into `extra`.
        prop::collection::btree_map(
            any::<String>().prop_filter("not a named field", |k| {
                !matches!(k.as_str(), "kind" | "remedy" | "problems")
            }),
            json_value(),
            0..3,
        ),
    )
        .prop_map(|(kind, remedy, problems, extra)| ErrorData {
            kind: crate::ErrorKind::from_wire(&kind),
            remedy,
            problems,
            extra: extra.into_iter().collect(),
        })
}

fn rpc_error() -> impl Strategy<Value = RpcError> {
    (
        any::<i64>(),
        any::<String>(),
        prop::option::of(error_data()),
    )
        .prop_map(|(code, message, data)| RpcError {
            code,
            message,
            data,
        })
}

/// Every message a conforming sender can produce.
fn valid_message() -> impl Strategy<Value = Message> {
    prop_oneof![
        (request_id(), any::<String>(), params())
            .prop_map(|(id, method, params)| Message::Request(Request::new(id, method, params))),
        (any::<String>(), params())
            .prop_map(|(method, params)| Message::Notification(Notification::new(method, params))),
        (request_id(), json_value())
            .prop_map(|(id, result)| Message::Response(Response::ok(id, result))),
        (prop_oneof![request_id(), Just(Id::Null)], rpc_error())
            .prop_map(|(id, error)| Message::Response(Response::err(id, error))),
    ]
}

/// Either a value from `likely` or any JSON at all.
fn mostly(likely: impl Strategy<Value = Value>) -> impl Strategy<Value = Value> {
    prop_oneof![3 => likely, 1 => json_value()]
}

/// An object built from the envelope's own keys, each present or not and
/// each usually plausible, so that the decoder's branches are all reached
/// (uniformly random JSON almost never gets past the `jsonrpc` check).
fn envelope_like() -> impl Strategy<Value = Value> {
    let error_like = (
        mostly(any::<i64>().prop_map(Value::from)),
        mostly(any::<String>().prop_map(Value::String)),
        prop::option::of(mostly(
            (
                mostly(any::<String>().prop_map(Value::String)),
                prop::option::of(mostly(any::<String>().prop_map(Value::String))),
                prop::option::of(mostly(Just(json!(["a problem"])))),
                json_object(json_value()),
            )
                .prop_map(|(kind, remedy, problems, extra)| {
                    let mut data = extra.as_object().cloned().unwrap_or_default();
                    data.insert("kind".into(), kind);
                    put(&mut data, "remedy", remedy);
                    put(&mut data, "problems", problems);
                    Value::Object(data)
                }),
        )),
    )
        .prop_map(|(code, message, data)| {
            let mut error = Map::new();
            error.insert("code".into(), code);
            error.insert("message".into(), message);
            put(&mut error, "data", data);
            Value::Object(error)
        });
    (
        prop::option::of(mostly(Just(json!("2.0")))),
        prop::option::of(mostly(prop_oneof![
            any::<i64>().prop_map(Value::from),
            any::<String>().prop_map(Value::String),
            Just(Value::Null),
        ])),
        prop::option::of(mostly(any::<String>().prop_map(Value::String))),
        prop::option::of(json_value()),
        prop::option::of(json_value()),
        prop::option::of(mostly(error_like)),
        json_object(json_leaf()),
    )
        .prop_map(|(jsonrpc, id, method, params, result, error, extra)| {
            let mut obj = extra.as_object().cloned().unwrap_or_default();
            put(&mut obj, "jsonrpc", jsonrpc);
            put(&mut obj, "id", id);
            put(&mut obj, "method", method);
            put(&mut obj, "params", params);
            put(&mut obj, "result", result);
            put(&mut obj, "error", error);
            Value::Object(obj)
        })
}

fn put(obj: &mut Map<String, Value>, key: &str, value: Option<Value>) {
    if let Some(value) = value {
        obj.insert(key.to_owned(), value);
    }
}

/// Strings a module might put in `contract_version`, valid or nearly so:
/// shorthand, full semver, huge numbers, tags, padding.
fn contract_version_like() -> impl Strategy<Value = String> {
    prop_oneof![
        "[0-9]{1,3}(\\.[0-9]{1,3}){0,3}",
        "(0|1|2|3|01)\\.(0|1|2|9|00)(\\.(0|1|99999999999999999999))?(-[a-z0-9.]{0,3})?(\\+[a-z0-9.]{0,3})?",
        "[0-9]{15,25}\\.[0-9]{1,25}",
        " ?[12]\\.[01] ?",
        any::<String>(),
    ]
}

fn root_name() -> impl Strategy<Value = String> {
    prop_oneof!["state|artifacts|workspace|transcripts", any::<String>()]
}

/// A descriptor-shaped object: close enough to real that most decode, with
/// arbitrary JSON mixed in wherever a field may be anything.
fn descriptor_like() -> impl Strategy<Value = Value> {
    let root = (
        root_name(),
        mostly(Just(json!("state"))),
        prop::option::of(mostly(prop_oneof![
            Just(json!("read")),
            Just(json!("read-write")),
            Just(json!("write")),
        ])),
    )
        .prop_map(|(name, kind, access)| {
            let mut root = Map::new();
            root.insert("name".into(), Value::String(name));
            root.insert("kind".into(), kind);
            put(&mut root, "access", access);
            Value::Object(root)
        });
    let names = || prop::collection::vec(root_name(), 0..3);
    let capability = (
        any::<String>(),
        json_value(),
        names(),
        names(),
        any::<bool>(),
    )
        .prop_map(|(id, input_schema, reads, writes, network)| {
            json!({
                "id": id, "input_schema": input_schema,
                "effects": {"reads": reads, "writes": writes, "network": network},
            })
        });
    let operation = (
        any::<String>(),
        any::<String>(),
        names(),
        names(),
        any::<bool>(),
    )
        .prop_map(|(id, capability, reads, mutates, external)| {
            json!({
                "id": id, "capability": capability,
                "semantics": {"reads": reads, "mutates": mutates, "external": external},
            })
        });
    (
        any::<String>(),
        any::<String>(),
        prop::option::of(mostly(contract_version_like().prop_map(Value::String))),
        prop::collection::vec(mostly(root), 0..3),
        prop::collection::vec(mostly(capability), 0..3),
        prop::option::of(prop::collection::vec(mostly(operation), 0..3)),
        json_object(json_leaf()),
    )
        .prop_map(
            |(id, version, contract_version, roots, capabilities, operations, extra)| {
                let mut obj = extra.as_object().cloned().unwrap_or_default();
                obj.insert("id".into(), Value::String(id));
                obj.insert("version".into(), Value::String(version));
                put(&mut obj, "contract_version", contract_version);
                obj.insert("roots".into(), Value::Array(roots));
                obj.insert("capabilities".into(), Value::Array(capabilities));
                put(&mut obj, "operations", operations.map(Value::Array));
                Value::Object(obj)
            },
        )
}

fn invoke_result_like() -> impl Strategy<Value = Value> {
    let artifact = (root_name(), any::<String>(), prop::option::of(any::<String>())).prop_map(
        |(root, path, media_type)| json!({"root": root, "path": path, "media_type": media_type}),
    );
    (
        json_value(),
        prop::option::of(mostly(any::<String>().prop_map(Value::String))),
        prop::option::of(prop::collection::vec(mostly(artifact), 0..3)),
        prop::option::of(mostly(Just(json!(["careful"])))),
    )
        .prop_map(|(output, text, artifacts, warnings)| {
            let mut obj = Map::new();
            obj.insert("output".into(), output);
            put(&mut obj, "text", text);
            put(&mut obj, "artifacts", artifacts.map(Value::Array));
            put(&mut obj, "warnings", warnings);
            Value::Object(obj)
        })
}

/// Paths made of the segments that matter to an escape check.
fn path_like() -> impl Strategy<Value = String> {
    let segment = prop_oneof![
        Just("..".to_owned()),
        Just(".".to_owned()),
        Just(String::new()),
        Just("...".to_owned()),
        Just("..\\x".to_owned()),
        Just("a\0b".to_owned()),
        "[a-z.]{1,3}",
        any::<String>(),
    ];
    (any::<bool>(), prop::collection::vec(segment, 0..5)).prop_map(|(absolute, segments)| {
        let joined = segments.join("/");
        if absolute {
            format!("/{joined}")
        } else {
            joined
        }
    })
}

// ---------------------------------------------------------------- checks

/// What the host relies on once `parse` said yes: the value re-encodes to a
/// line that parses to the same value, and that line is a single line.
fn assert_reencodes(message: &Message) -> Result<(), TestCaseError> {
    let line = message.to_line();
    prop_assert!(!line.contains('\n'), "to_line produced a newline: {line}");
    let again = Message::parse(&line);
    prop_assert_eq!(again.as_ref(), Ok(message), "line: {}", line);
    Ok(())
}

/// Decode as the host does, then pin. The decision must agree with itself.
fn check_descriptor(value: Value) -> Result<(), TestCaseError> {
    let Ok(descriptor) = serde_json::from_value::<Descriptor>(value) else {
        return Ok(());
    };
    let declared = descriptor.contract_version.clone();
    let operations = descriptor.operations.clone();
    let decision = contract::evaluate(Arc::new(descriptor));
    let pin = decision.pin();
    prop_assert_eq!(&pin.requested, &declared);
    prop_assert!(!pin.reason.is_empty());
    match &decision {
        ContractDecision::V1(pin) => {
            prop_assert!(
                pin.effective
                    .as_deref()
                    .is_some_and(|e| e.starts_with("1."))
            );
        }
        ContractDecision::V2(accepted) => {
            prop_assert_eq!(accepted.version().major, 2);
            // Not newer than the newest minor this host knows.
            let v = accepted.version();
            prop_assert!(semver::Version::new(v.major, v.minor, 0) <= contract::NEWEST_V2);
            prop_assert_eq!(accepted.operations(), operations.as_slice());
        }
        ContractDecision::Refused(pin) => {
            prop_assert!(
                declared.is_some(),
                "a descriptor without a version is contract 1"
            );
            prop_assert!(pin.effective.is_none());
            prop_assert!(!pin.remedy.is_empty());
        }
    }
    Ok(())
}

fn check_invoke_result(value: Value) -> Result<(), TestCaseError> {
    let Ok(result) = serde_json::from_value::<InvokeResult>(value) else {
        return Ok(());
    };
    let text = serde_json::to_string(&result).expect("an InvokeResult serializes");
    let back: InvokeResult = serde_json::from_str(&text).expect("re-encoded result decodes");
    prop_assert_eq!(back, result);
    Ok(())
}

/// Walk the path as a filesystem would, from inside its root.
fn stays_inside(path: &str) -> bool {
    let mut depth = 0usize;
    for component in Path::new(path).components() {
        match component {
            Component::Normal(_) => depth += 1,
            Component::CurDir => {}
            Component::ParentDir => match depth.checked_sub(1) {
                Some(d) => depth = d,
                None => return false,
            },
            Component::RootDir | Component::Prefix(_) => return false,
        }
    }
    true
}

// ---------------------------------------------------------------- properties

proptest! {
    #![proptest_config(config(256))]

    #[test]
    fn parse_never_panics_on_any_string(line in any::<String>()) {
        let _ = Message::parse(&line);
    }

    #[test]
    fn parse_never_panics_on_any_bytes(bytes in prop::collection::vec(any::<u8>(), 0..256)) {
        let _ = Message::parse(&String::from_utf8_lossy(&bytes));
    }

    #[test]
    fn valid_messages_round_trip(message in valid_message()) {
        assert_reencodes(&message)?;
    }

    /// Every finite float, drawn uniformly over its bit patterns (most of
    /// them have exponents `any::<f64>()` rarely picks), comes back from a
    /// line bit for bit. Without serde_json's `float_roundtrip` about a third
    /// of them came back one ULP off: the host would have altered numbers in
    /// a module's output.
    #[test]
    fn floats_survive_a_line(bits in any::<u64>()) {
        let float = f64::from_bits(bits);
        prop_assume!(float.is_finite());
        let message = Message::Response(Response::ok(Id::Num(1), json!({"x": float})));
        let Ok(Message::Response(back)) = Message::parse(&message.to_line()) else {
            return Err(TestCaseError::fail("a response line did not parse"));
        };
        let x = back.outcome.ok().and_then(|r| r["x"].as_f64());
        prop_assert_eq!(x.map(f64::to_bits), Some(bits), "{} came back as {:?}", float, x);
    }

    #[test]
    fn whatever_parse_accepts_reencodes(value in envelope_like()) {
        let line = value.to_string();
        if let Ok(message) = Message::parse(&line) {
            assert_reencodes(&message)?;
        }
    }

    #[test]
    fn whatever_parse_accepts_from_any_json_reencodes(value in json_value()) {
        if let Ok(message) = Message::parse(&value.to_string()) {
            assert_reencodes(&message)?;
        }
    }

    #[test]
    fn descriptor_decode_and_pin_never_panic(value in json_value()) {
        check_descriptor(value)?;
    }

    #[test]
    fn descriptor_like_decode_and_pin_agree(value in descriptor_like()) {
        check_descriptor(value)?;
    }

    #[test]
    fn contract_version_parse_never_panics(raw in contract_version_like()) {
        if let Ok(version) = contract::parse_contract_version(&raw) {
            prop_assert!(version.pre.is_empty() && version.build.is_empty());
        }
    }

    #[test]
    fn invoke_result_decode_never_panics(value in json_value()) {
        check_invoke_result(value)?;
    }

    #[test]
    fn invoke_result_like_round_trips(value in invoke_result_like()) {
        check_invoke_result(value)?;
    }

    #[test]
    fn clean_paths_never_escape(path in path_like()) {
        if is_clean_relative_path(&path) {
            prop_assert!(!path.is_empty());
            prop_assert!(stays_inside(&path), "accepted an escaping path: {path:?}");
            prop_assert!(!path.split('/').any(|s| s == ".."), "accepted a `..`: {path:?}");
        }
    }

    #[test]
    fn clean_paths_never_escape_any_string(path in any::<String>()) {
        if is_clean_relative_path(&path) {
            prop_assert!(stays_inside(&path), "accepted an escaping path: {path:?}");
        }
    }
}

// ---------------------------------------------------------------- sanity

/// The strategies must actually reach the interesting branches; a generator
/// that only ever produced rejected input would make the properties vacuous.
#[test]
fn strategies_reach_accepting_branches() {
    use proptest::strategy::ValueTree;
    use proptest::test_runner::TestRunner;

    let mut runner = TestRunner::deterministic();
    let mut draw = |strategy: &dyn Fn(&mut TestRunner) -> Value| -> Vec<Value> {
        (0..300).map(|_| strategy(&mut runner)).collect()
    };
    let envelopes = draw(&|r| envelope_like().new_tree(r).unwrap().current());
    let parsed: Vec<Message> = envelopes
        .iter()
        .filter_map(|v| Message::parse(&v.to_string()).ok())
        .collect();
    assert!(parsed.iter().any(|m| matches!(m, Message::Request(_))));
    assert!(parsed.iter().any(|m| matches!(m, Message::Notification(_))));
    assert!(
        parsed
            .iter()
            .any(|m| matches!(m, Message::Response(r) if r.outcome.is_ok()))
    );
    assert!(
        parsed
            .iter()
            .any(|m| matches!(m, Message::Response(r) if r.outcome.is_err()))
    );

    let decisions: Vec<&'static str> = draw(&|r| descriptor_like().new_tree(r).unwrap().current())
        .into_iter()
        .filter_map(|v| serde_json::from_value::<Descriptor>(v).ok())
        .map(|d| contract::evaluate(Arc::new(d)).label())
        .collect();
    for label in ["v1", "v2", "refused"] {
        assert!(
            decisions.contains(&label),
            "no descriptor was pinned {label}"
        );
    }

    let results = draw(&|r| invoke_result_like().new_tree(r).unwrap().current());
    assert!(
        results
            .into_iter()
            .any(|v| serde_json::from_value::<InvokeResult>(v).is_ok())
    );
}

#[test]
fn path_oracle_is_not_vacuous() {
    assert!(stays_inside("a/b/../c"));
    assert!(!stays_inside("a/../../b"));
    assert!(!stays_inside("/etc"));
    assert!(is_clean_relative_path("reports/2024/summary.md"));
    for escaping in [
        "..",
        "../x",
        "a/../../x",
        "/etc/passwd",
        "a/..",
        "a\\..\\..\\x",
        "",
    ] {
        assert!(!is_clean_relative_path(escaping), "{escaping:?} accepted");
    }
}

//! Typos are errors: a key the contract does not define, anywhere in a
//! descriptor's closed objects, is a finding with the known key it most
//! resembles.
//!
//! The descriptor parse ignores unknown keys (so a module built for a newer
//! contract minor still parses), which makes a typo silent: `"netwrk": true`
//! reads as `network: false`, an honesty declaration lost, and
//! `"outputschema"` is never enforced. This check runs on the raw describe
//! result, before any of that is lost:
//!
//! - under a contract this host knows (absent, `1.0`-`1.1`, `2.0`) an
//!   unknown key is an **error** (`descriptor.unknown_key`);
//! - under a newer contract than the host knows it is a **warning**: the
//!   key may be one the newer contract defines (forward compatibility; the
//!   pin refuses such a module anyway, with its own finding).
//!
//! The closed objects and their keys are [`CLOSED_OBJECTS`], which a test
//! holds equal to `modproto/descriptor.schema.json` (`additionalProperties:
//! false` there), so the schema, this check and PROTOCOL.md name the same
//! keys. Open values (`input_schema`, `output_schema`, example `input`) are
//! never inspected.

use modproto::contract::{NEWEST_V1, NEWEST_V2, parse_contract_version};
use serde_json::{Map, Value};

use crate::finding::Finding;

/// Keys of the descriptor object itself.
pub(crate) const DESCRIPTOR_KEYS: &[&str] = &[
    "id",
    "version",
    "contract_version",
    "title",
    "description",
    "roots",
    "binaries",
    "capabilities",
    "operations",
    "knowledge",
    "warnings",
];
pub(crate) const ROOT_KEYS: &[&str] = &["name", "kind", "description", "access"];
pub(crate) const BINARY_KEYS: &[&str] = &["name", "description"];
pub(crate) const CAPABILITY_KEYS: &[&str] = &[
    "id",
    "title",
    "description",
    "input_schema",
    "output_schema",
    "effects",
    "skills",
    "examples",
];
pub(crate) const EFFECTS_KEYS: &[&str] = &[
    "reads",
    "writes",
    "network",
    "spawns",
    "cost",
    "approval",
    "untrusted_output",
    "secrets",
];
pub(crate) const EXAMPLE_KEYS: &[&str] = &["description", "input"];
pub(crate) const OPERATION_KEYS: &[&str] = &["id", "capability", "semantics"];
pub(crate) const SEMANTICS_KEYS: &[&str] = &[
    "reads",
    "mutates",
    "external",
    "runs",
    "needs_approval",
    "untrusted_output",
    "secrets",
];
pub(crate) const KNOWLEDGE_KEYS: &[&str] = &["overlays", "skills"];
pub(crate) const DOCUMENT_KEYS: &[&str] = &["id", "title", "path", "sha256"];

/// Every closed object of a descriptor, by the name the schema gives it.
#[cfg(test)]
pub(crate) const CLOSED_OBJECTS: &[(&str, &[&str])] = &[
    ("descriptor", DESCRIPTOR_KEYS),
    ("root", ROOT_KEYS),
    ("binary", BINARY_KEYS),
    ("capability", CAPABILITY_KEYS),
    ("effects", EFFECTS_KEYS),
    ("example", EXAMPLE_KEYS),
    ("operation", OPERATION_KEYS),
    ("semantics", SEMANTICS_KEYS),
    ("knowledge", KNOWLEDGE_KEYS),
    ("document", DOCUMENT_KEYS),
];

/// Every unknown key in the raw describe result `described`, one finding
/// each, with a did-you-mean when a known key is close. Empty for a result
/// that is not an object (the parse reports that).
pub fn check_unknown_keys(described: &Value) -> Vec<Finding> {
    let Value::Object(descriptor) = described else {
        return Vec::new();
    };
    let newer = descriptor
        .get("contract_version")
        .and_then(Value::as_str)
        .is_some_and(newer_than_this_host);
    let mut check = Check {
        newer,
        findings: Vec::new(),
    };
    check.object("the descriptor", None, descriptor, DESCRIPTOR_KEYS);
    for (n, root) in objects(descriptor, "roots") {
        let name = label(root, "name", "roots", n);
        check.object(&format!("root {name}"), None, root, ROOT_KEYS);
    }
    for (n, binary) in objects(descriptor, "binaries") {
        let name = label(binary, "name", "binaries", n);
        check.object(&format!("binary {name}"), None, binary, BINARY_KEYS);
    }
    for (n, capability) in objects(descriptor, "capabilities") {
        let cap = capability.get("id").and_then(Value::as_str);
        let name = label(capability, "id", "capabilities", n);
        check.object(
            &format!("capability {name}"),
            cap,
            capability,
            CAPABILITY_KEYS,
        );
        if let Some(Value::Object(effects)) = capability.get("effects") {
            check.object(
                &format!("the effects of capability {name}"),
                cap,
                effects,
                EFFECTS_KEYS,
            );
        }
        for (e, example) in objects(capability, "examples") {
            check.object(
                &format!("example {e} of capability {name}"),
                cap,
                example,
                EXAMPLE_KEYS,
            );
        }
    }
    for (n, operation) in objects(descriptor, "operations") {
        let name = label(operation, "id", "operations", n);
        check.object(
            &format!("operation {name}"),
            None,
            operation,
            OPERATION_KEYS,
        );
        if let Some(Value::Object(semantics)) = operation.get("semantics") {
            check.object(
                &format!("the semantics of operation {name}"),
                None,
                semantics,
                SEMANTICS_KEYS,
            );
        }
    }
    if let Some(Value::Object(knowledge)) = descriptor.get("knowledge") {
        check.object("knowledge", None, knowledge, KNOWLEDGE_KEYS);
        for list in ["overlays", "skills"] {
            for (n, doc) in objects(knowledge, list) {
                let name = label(doc, "id", list, n);
                let kind = &list[..list.len() - 1];
                check.object(&format!("{kind} {name}"), None, doc, DOCUMENT_KEYS);
            }
        }
    }
    check.findings
}

/// Whether `raw` is a contract version newer than this host speaks (a
/// newer minor of a known major, or a newer major). Unparseable versions
/// are not "newer": their keys are judged by the contract the host knows.
fn newer_than_this_host(raw: &str) -> bool {
    let Ok(version) = parse_contract_version(raw) else {
        return false;
    };
    match version.major {
        1 => version.minor > NEWEST_V1.minor,
        2 => version.minor > NEWEST_V2.minor,
        major => major > NEWEST_V2.major,
    }
}

struct Check {
    newer: bool,
    findings: Vec<Finding>,
}

impl Check {
    fn object(
        &mut self,
        place: &str,
        capability: Option<&str>,
        object: &Map<String, Value>,
        known: &[&str],
    ) {
        for key in object.keys().filter(|k| !known.contains(&k.as_str())) {
            let reason = format!("{place} has unknown key {key:?}");
            let known_list = known.join(", ");
            let remedy = match did_you_mean(key, known) {
                Some(near) => {
                    format!(
                        "did you mean {near:?}? rename the key (the keys here are: {known_list})"
                    )
                }
                None => format!("remove the key or fix its name (the keys here are: {known_list})"),
            };
            let finding = if self.newer {
                Finding::warning(
                    "descriptor.unknown_key",
                    format!(
                        "{reason}; the module declares a newer contract than this host knows, which may define it"
                    ),
                    remedy,
                )
            } else {
                Finding::error("descriptor.unknown_key", reason, remedy)
            };
            self.findings.push(match capability {
                Some(cap) => finding.on(cap),
                None => finding,
            });
        }
    }
}

/// The objects in the array `key` of `parent`, with their index.
fn objects<'a>(
    parent: &'a Map<String, Value>,
    key: &str,
) -> impl Iterator<Item = (usize, &'a Map<String, Value>)> {
    parent
        .get(key)
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .enumerate()
        .filter_map(|(n, v)| v.as_object().map(|o| (n, o)))
}

/// `"name"` when the object has a string `field`, else `list[n]`.
fn label(object: &Map<String, Value>, field: &str, list: &str, n: usize) -> String {
    match object.get(field).and_then(Value::as_str) {
        Some(name) => format!("{name:?}"),
        None => format!("{list}[{n}]"),
    }
}

/// The known key closest to `key` by edit distance, when close enough to be
/// a typo: at most a third of the longer name, and at least 1 (or the same
/// key in another case or with `-` for `_`).
fn did_you_mean<'k>(key: &str, known: &[&'k str]) -> Option<&'k str> {
    let normalized = key.to_ascii_lowercase().replace('-', "_");
    known
        .iter()
        .map(|k| (edit_distance(&normalized, k), *k))
        .filter(|(distance, k)| *distance <= (k.len().max(key.len()) / 3).max(1))
        .min_by_key(|(distance, _)| *distance)
        .map(|(_, k)| k)
}

/// Levenshtein distance over chars.
fn edit_distance(a: &str, b: &str) -> usize {
    let b: Vec<char> = b.chars().collect();
    let mut previous: Vec<usize> = (0..=b.len()).collect();
    for (i, ca) in a.chars().enumerate() {
        let mut current = vec![i + 1; b.len() + 1];
        for (j, cb) in b.iter().enumerate() {
            let substitution = previous[j] + usize::from(ca != *cb);
            current[j + 1] = substitution.min(previous[j + 1] + 1).min(current[j] + 1);
        }
        previous = current;
    }
    previous[b.len()]
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn descriptor() -> Value {
        json!({
            "id": "m", "version": "1.0.0",
            "roots": [{"name": "state", "kind": "state"}],
            "capabilities": [{
                "id": "m.run", "input_schema": {"type": "object", "anything": {"goes": 1}},
                "output_schema": {"x-custom": true},
                "effects": {"reads": ["state"]},
                "examples": [{"input": {"free": "form"}}]
            }],
            "knowledge": {"skills": [{"id": "s", "path": "s.md", "sha256": "0"}]}
        })
    }

    #[test]
    fn a_clean_descriptor_has_no_unknown_keys_and_schemas_are_open() {
        assert!(check_unknown_keys(&descriptor()).is_empty());
    }

    #[test]
    fn a_typo_in_an_honesty_declaration_is_an_error_with_the_key_it_resembles() {
        let mut d = descriptor();
        d["capabilities"][0]["effects"]["netwrk"] = json!(true);
        d["capabilities"][0]["outputschema"] = json!({"type": "object"});
        let findings = check_unknown_keys(&d);
        assert_eq!(findings.len(), 2, "{findings:#?}");
        assert!(findings.iter().all(Finding::is_error));
        assert!(
            findings
                .iter()
                .all(|f| f.capability.as_deref() == Some("m.run"))
        );
        let netwrk = findings
            .iter()
            .find(|f| f.reason.contains("netwrk"))
            .unwrap();
        assert!(
            netwrk.remedy.contains("did you mean \"network\""),
            "{}",
            netwrk.remedy
        );
        assert!(netwrk.reason.contains("effects"), "{}", netwrk.reason);
        let output = findings
            .iter()
            .find(|f| f.reason.contains("outputschema"))
            .unwrap();
        assert!(
            output.remedy.contains("did you mean \"output_schema\""),
            "{}",
            output.remedy
        );
    }

    #[test]
    fn every_closed_object_is_checked() {
        let d = json!({
            "id": "m", "version": "1.0.0", "tittle": "x",
            "roots": [{"name": "r", "kind": "state", "acess": "read"}],
            "binaries": [{"name": "git", "desc": "x"}],
            "capabilities": [{"id": "c", "input_schema": {}, "examples": [{"input": {}, "expect": 1}]}],
            "operations": [{"id": "o", "capability": "c", "semantic": {},
                            "semantics": {"mutate": []}}],
            "knowledge": {"overlay": [], "skills": [{"id": "s", "path": "p", "sha256": "0", "sha": "1"}]}
        });
        let findings = check_unknown_keys(&d);
        let keys: Vec<&str> = [
            "tittle", "acess", "desc", "expect", "semantic", "mutate", "overlay", "sha",
        ]
        .into_iter()
        .filter(|k| {
            !findings
                .iter()
                .any(|f| f.reason.contains(&format!("{k:?}")))
        })
        .collect();
        assert!(keys.is_empty(), "not reported: {keys:?}; {findings:#?}");
        assert_eq!(findings.len(), 8, "{findings:#?}");
    }

    #[test]
    fn under_a_newer_contract_unknown_keys_are_warnings() {
        let mut d = descriptor();
        d["capabilities"][0]["effects"]["gpu"] = json!(true);
        for (version, error) in [
            ("1.0", true),
            ("2", true),
            ("2.0.3", true),
            ("1.9.0", false),
            ("2.1", false),
            ("3.0.0", false),
            ("banana", true),
        ] {
            d["contract_version"] = json!(version);
            let findings = check_unknown_keys(&d);
            assert_eq!(findings.len(), 1, "{version}");
            assert_eq!(findings[0].is_error(), error, "{version}");
        }
    }

    #[test]
    fn suggestions_only_when_close() {
        assert_eq!(did_you_mean("netwrk", EFFECTS_KEYS), Some("network"));
        assert_eq!(did_you_mean("Network", EFFECTS_KEYS), Some("network"));
        assert_eq!(
            did_you_mean("input-schema", CAPABILITY_KEYS),
            Some("input_schema")
        );
        assert_eq!(
            did_you_mean("needsApproval", SEMANTICS_KEYS),
            Some("needs_approval")
        );
        assert_eq!(did_you_mean("zzz", EFFECTS_KEYS), None);
    }

    #[test]
    fn the_json_schema_closes_the_same_objects_with_the_same_keys() {
        let schema: Value =
            serde_json::from_str(include_str!("../../modproto/descriptor.schema.json")).unwrap();
        let defs = &schema["$defs"];
        let properties = &schema["properties"];
        let in_schema = |object: &str| -> &Value {
            match object {
                "descriptor" => &schema,
                "binary" => &properties["binaries"]["items"],
                "knowledge" => &properties["knowledge"],
                "example" => &defs["capability"]["properties"]["examples"]["items"],
                "semantics" => &defs["operation"]["properties"]["semantics"],
                other => &defs[other],
            }
        };
        for (object, keys) in CLOSED_OBJECTS {
            let node = in_schema(object);
            assert_eq!(
                node["additionalProperties"],
                json!(false),
                "{object} is not closed in the schema"
            );
            let mut schema_keys: Vec<&str> = node["properties"]
                .as_object()
                .unwrap_or_else(|| panic!("{object} has no properties"))
                .keys()
                .map(String::as_str)
                .collect();
            let mut ours = keys.to_vec();
            schema_keys.sort_unstable();
            ours.sort_unstable();
            assert_eq!(schema_keys, ours, "{object}");
        }
    }

    #[test]
    fn the_protocol_document_names_every_key() {
        let doc = include_str!("../../modproto/PROTOCOL.md");
        for (object, keys) in CLOSED_OBJECTS {
            for key in *keys {
                assert!(
                    doc.contains(&format!("`{key}`")),
                    "PROTOCOL.md never names `{key}` ({object})"
                );
            }
        }
    }
}

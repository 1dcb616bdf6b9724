//! Static checks: everything that can be known about a module from its
//! descriptor (and, when given, the knowledge files beside it), without
//! running it.
//!
//! Every check runs; none stops another. A descriptor with ten defects yields
//! ten findings in one run.
//!
//! The only input besides the descriptor is a way to read knowledge files, so
//! their sha256 can be compared. [`check_descriptor_with`] takes it as a
//! closure and stays pure; [`check_descriptor`] is the convenience that reads
//! from a module folder.

use modproto::contract::{ContractDecision, evaluate};
use modproto::invoke::is_clean_relative_path;
use modproto::{Capability, Descriptor, KnowledgeDoc};
use serde_json::Value;
use sha2::{Digest, Sha256};
use std::collections::{BTreeMap, HashSet};
use std::io;
use std::path::Path;
use std::sync::Arc;

use crate::finding::Finding;
use crate::no_weakening::check_no_weakening;
use crate::schema::{SchemaProblem, compile, remote_refs, violations};
use crate::tool_name::{MAX_TOOL_NAME_LEN, raw_tool_name, tool_name};

/// Reads a knowledge file by its declared path, relative to the module
/// folder. Only called with clean relative paths.
pub type ReadKnowledge<'a> = &'a dyn Fn(&str) -> io::Result<Vec<u8>>;

/// Static checks, reading knowledge files from `module_dir` when given.
/// Without a folder the knowledge digests are not compared (their syntax
/// still is).
pub fn check_descriptor(descriptor: &Descriptor, module_dir: Option<&Path>) -> Vec<Finding> {
    match module_dir {
        Some(dir) => {
            let read = |relative: &str| {
                let path = dir.join(relative);
                std::fs::read(&path)
                    .map_err(|e| io::Error::new(e.kind(), format!("{}: {e}", path.display())))
            };
            check_descriptor_with(descriptor, Some(&read))
        }
        None => check_descriptor_with(descriptor, None),
    }
}

/// Static checks, reading knowledge files through `read` when given.
pub fn check_descriptor_with(
    descriptor: &Descriptor,
    read: Option<ReadKnowledge<'_>>,
) -> Vec<Finding> {
    let mut findings = Vec::new();
    check_identity(descriptor, &mut findings);
    check_contract(descriptor, &mut findings);
    check_unique_names(descriptor, &mut findings);
    for capability in &descriptor.capabilities {
        check_capability(descriptor, capability, &mut findings);
        findings.extend(crate::network::check_capability(capability));
        findings.extend(crate::secrets::check_capability(capability));
        findings.extend(crate::portability::check_capability(capability));
    }
    check_unnamed_roots(descriptor, &mut findings);
    check_tool_names(descriptor, &mut findings);
    check_knowledge(descriptor, read, &mut findings);
    findings
}

/// A declared root no capability names in its effects is never granted:
/// authority is per capability (PROTOCOL.md, "effects"). Only a warning,
/// since declaring more than is used is harmless, but it is usually a
/// capability that forgot to name a root it reads, and then fails
/// `root_missing` (or `EACCES`) at its first call.
fn check_unnamed_roots(d: &Descriptor, findings: &mut Vec<Finding>) {
    let mut reported = HashSet::new();
    for root in &d.roots {
        let named = d
            .capabilities
            .iter()
            .any(|c| c.effects.reads.contains(&root.name) || c.effects.writes.contains(&root.name));
        if !named && reported.insert(root.name.as_str()) {
            findings.push(Finding::warning(
                "root.never_granted",
                format!(
                    "root {:?} is named by no capability's effects.reads or effects.writes, so no call is ever granted it",
                    root.name
                ),
                format!(
                    "name {:?} in effects.reads (or writes) of each capability that uses it, or remove the declaration",
                    root.name
                ),
            ));
        }
    }
}

/// The syntax a module id must have: `^[a-z][a-z0-9_-]{0,63}$`.
pub fn is_valid_module_id(id: &str) -> bool {
    let mut chars = id.chars();
    chars.next().is_some_and(|c| c.is_ascii_lowercase())
        && chars.all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_' || c == '-')
        && id.len() <= 64
}

fn check_identity(d: &Descriptor, findings: &mut Vec<Finding>) {
    if !is_valid_module_id(&d.id) {
        findings.push(Finding::error(
            "descriptor.id_syntax",
            format!(
                "module id {:?} is not 1 to 64 lowercase ASCII letters, digits, '-' or '_' starting with a letter",
                d.id
            ),
            "rename the module, for example \"my-module\"",
        ));
    }
    if let Err(e) = semver::Version::parse(&d.version) {
        findings.push(Finding::error(
            "descriptor.version_not_semver",
            format!(
                "module version {:?} is not a semantic version: {e}",
                d.version
            ),
            "declare version as MAJOR.MINOR.PATCH, for example \"0.1.0\"",
        ));
    }
    if d.capabilities.is_empty() {
        findings.push(Finding::warning(
            "descriptor.no_capabilities",
            "the module declares no capabilities, so it contributes no tools",
            "declare at least one capability",
        ));
    }
}

fn check_contract(d: &Descriptor, findings: &mut Vec<Finding>) {
    match evaluate(Arc::new(d.clone())) {
        ContractDecision::Refused(pin) => {
            findings.push(Finding::error("contract.refused", pin.reason, pin.remedy));
        }
        ContractDecision::V2(accepted) => findings.extend(check_no_weakening(&accepted)),
        ContractDecision::V1(_) if !d.operations.is_empty() => findings.push(Finding::warning(
            "contract.operations_ignored",
            format!(
                "the module declares {} operation(s) but no contract_version 2, so the host ignores them",
                d.operations.len()
            ),
            "declare \"contract_version\": \"2.0.0\" to make operations binding, or remove them",
        )),
        ContractDecision::V1(_) => {}
    }
}

fn check_unique_names(d: &Descriptor, findings: &mut Vec<Finding>) {
    for id in duplicates(d.capabilities.iter().map(|c| c.id.as_str())) {
        findings.push(
            Finding::error(
                "capability.duplicate_id",
                format!("capability id {id:?} is declared more than once"),
                "give every capability a unique id",
            )
            .on(id),
        );
    }
    for name in duplicates(d.roots.iter().map(|r| r.name.as_str())) {
        findings.push(Finding::error(
            "root.duplicate_name",
            format!("root {name:?} is declared more than once"),
            "declare each root once, with one kind and access",
        ));
    }
    for name in duplicates(d.binaries.iter().map(|b| b.name.as_str())) {
        findings.push(Finding::error(
            "binary.duplicate_name",
            format!("binary {name:?} is declared more than once"),
            "declare each binary once",
        ));
    }
    let docs = d.knowledge.overlays.iter().chain(&d.knowledge.skills);
    for id in duplicates(docs.map(|k| k.id.as_str())) {
        findings.push(Finding::error(
            "knowledge.duplicate_id",
            format!("knowledge document id {id:?} is declared more than once"),
            "give every overlay and skill a unique id",
        ));
    }
}

/// Each value that occurs more than once, reported once, in first-seen order.
fn duplicates<'a>(items: impl Iterator<Item = &'a str>) -> Vec<&'a str> {
    let mut seen = HashSet::new();
    let mut reported = HashSet::new();
    items
        .filter(|item| !seen.insert(*item) && reported.insert(*item))
        .collect()
}

fn check_capability(d: &Descriptor, capability: &Capability, findings: &mut Vec<Finding>) {
    let cap = capability.id.as_str();
    let mut push = |finding: Finding| findings.push(finding.on(cap));
    if cap.is_empty() {
        // An error, not a portability nit: `MODULE.CAPABILITY` cannot
        // address it and its tool name says nothing.
        push(Finding::error(
            "capability.empty_id",
            "a capability has an empty id",
            "give the capability an id, conventionally \"<module>.<verb>\"",
        ));
    }
    if capability.description.trim().is_empty() {
        push(Finding::warning(
            "portability.empty_description",
            format!("capability {cap:?} has no description; an agent cannot tell when to use it"),
            "describe in one or two sentences what the capability does and when to use it",
        ));
    }

    let input = &capability.input_schema;
    match compile(input) {
        Ok(validator) => {
            for (n, example) in capability.examples.iter().enumerate() {
                let problems = violations(&validator, &example.input);
                if !problems.is_empty() {
                    push(Finding::error(
                        "schema.example_invalid",
                        format!(
                            "example {n} of capability {cap:?} does not fit its input_schema: {}",
                            problems.join("; ")
                        ),
                        "fix the example input or the input_schema so they agree",
                    ));
                }
            }
        }
        Err(problem) => push(schema_finding("input", cap, problem)),
    }
    if input.get("type").and_then(Value::as_str) != Some("object") {
        push(Finding::error(
            "schema.input_not_object",
            format!(
                "the input_schema of capability {cap:?} has root type {}, not \"object\"",
                input
                    .get("type")
                    .map_or_else(|| "(none)".to_owned(), Value::to_string)
            ),
            "make the input schema {\"type\": \"object\", \"properties\": {...}}: agents pass arguments as an object",
        ));
    }
    for keyword in ["oneOf", "anyOf", "allOf"] {
        if input.get(keyword).is_some() {
            push(Finding::warning(
                "portability.top_level_combinator",
                format!(
                    "the input_schema of capability {cap:?} uses {keyword:?} at its root: {}",
                    crate::portability::REJECTS_ROOT_COMBINATOR
                ),
                "move the alternatives into properties, or split the capability",
            ));
        }
    }
    let schemas = std::iter::once(("input", input))
        .chain(capability.output_schema.as_ref().map(|s| ("output", s)));
    for (which, schema) in schemas {
        for target in remote_refs(schema) {
            push(Finding::warning(
                "portability.remote_ref",
                format!(
                    "the {which}_schema of capability {cap:?} refers to {target:?}, which the host never fetches"
                ),
                "inline the referenced definition under \"$defs\" and refer to it as \"#/$defs/...\"",
            ));
        }
    }
    match &capability.output_schema {
        // PROTOCOL.md and the descriptor schema name an object here; a
        // boolean schema (`true` accepts every output) is a declaration
        // that says nothing, or (`false`) one no output can meet.
        Some(output) if !output.is_object() => push(Finding::error(
            "schema.output_not_object",
            format!(
                "the output_schema of capability {cap:?} is {output}, not a JSON Schema object"
            ),
            "declare output_schema as an object ({\"type\": \"object\", ...}), or leave it out when the output is free-form",
        )),
        Some(output) => {
            if let Err(problem) = compile(output) {
                push(schema_finding("output", cap, problem));
            }
        }
        None => {}
    }

    let effects = &capability.effects;
    for (verb, root) in effects
        .reads
        .iter()
        .map(|r| ("reads", r))
        .chain(effects.writes.iter().map(|w| ("writes", w)))
    {
        match d.root(root) {
            None => push(Finding::error(
                "effects.unknown_root",
                format!(
                    "capability {cap:?} {verb} root {root:?}, which the module does not declare, so no call of it is ever granted that root"
                ),
                format!(
                    "declare a root named {root:?} in roots (a call is granted only the declared roots its capability names), or fix the name in effects.{verb}"
                ),
            )),
            Some(decl) if verb == "writes" && !decl.effective_access().is_write() => {
                push(Finding::error(
                    "effects.write_to_read_only_root",
                    format!(
                        "capability {cap:?} writes root {root:?}, which is declared read-only ({} root)",
                        decl.kind.as_str()
                    ),
                    format!(
                        "declare root {root:?} with \"access\": \"read-write\" (source roots are always read-only), or stop writing it"
                    ),
                ))
            }
            Some(_) => {}
        }
    }
    for binary in &effects.spawns {
        if !d.binaries.iter().any(|b| &b.name == binary) {
            push(Finding::error(
                "effects.unknown_binary",
                format!(
                    "capability {cap:?} spawns binary {binary:?}, which the module does not declare"
                ),
                format!("declare a binary named {binary:?} in binaries, or fix effects.spawns"),
            ));
        }
    }
    for skill in &capability.skills {
        if !d.knowledge.skills.iter().any(|k| &k.id == skill) {
            push(Finding::error(
                "skill.unknown",
                format!(
                    "capability {cap:?} refers to skill {skill:?}, which knowledge.skills does not declare"
                ),
                format!(
                    "add a skill with id {skill:?} to knowledge.skills, or remove it from the capability"
                ),
            ));
        }
    }
}

fn schema_finding(which: &str, cap: &str, problem: SchemaProblem) -> Finding {
    match problem {
        SchemaProblem::Invalid(violations) => Finding::error(
            &format!("schema.{which}_invalid"),
            format!(
                "the {which}_schema of capability {cap:?} is not valid JSON Schema: {}",
                violations.join("; ")
            ),
            "fix the schema so it validates against its meta-schema (draft 2020-12 unless $schema says otherwise)",
        ),
        SchemaProblem::Unusable(message) => Finding::error(
            &format!("schema.{which}_unusable"),
            format!("the {which}_schema of capability {cap:?} cannot be compiled: {message}"),
            "keep the schema self-contained: local \"#/...\" references only, a standard $schema, valid regexes",
        ),
    }
}

fn check_tool_names(d: &Descriptor, findings: &mut Vec<Finding>) {
    let mut by_name: BTreeMap<String, Vec<&str>> = BTreeMap::new();
    for capability in &d.capabilities {
        let cap = capability.id.as_str();
        let name = tool_name(&d.id, cap);
        let raw = raw_tool_name(&d.id, cap);
        if raw.chars().count() > MAX_TOOL_NAME_LEN {
            findings.push(
                Finding::warning(
                    "portability.name_too_long",
                    format!(
                        "tool name {raw:?} is {} characters, over the {MAX_TOOL_NAME_LEN} providers accept; agents will see {name:?}",
                        raw.chars().count()
                    ),
                    "shorten the module or capability id",
                )
                .on(cap),
            );
        }
        by_name.entry(name).or_default().push(cap);
    }
    for (name, caps) in by_name {
        // Exact duplicate ids are already `capability.duplicate_id`.
        let distinct: HashSet<&str> = caps.iter().copied().collect();
        if distinct.len() > 1 {
            findings.push(Finding::error(
                "tool_name.collision",
                format!("capabilities {caps:?} all become tool name {name:?}"),
                "rename capabilities so they differ in letters, digits or '_', not only in other characters",
            ));
        }
    }
}

fn check_knowledge(d: &Descriptor, read: Option<ReadKnowledge<'_>>, findings: &mut Vec<Finding>) {
    let docs = d.knowledge.overlays.iter().map(|k| ("overlay", k));
    for (kind, doc) in docs.chain(d.knowledge.skills.iter().map(|k| ("skill", k))) {
        check_knowledge_doc(kind, doc, read, findings);
    }
}

fn check_knowledge_doc(
    kind: &str,
    doc: &KnowledgeDoc,
    read: Option<ReadKnowledge<'_>>,
    findings: &mut Vec<Finding>,
) {
    let KnowledgeDoc {
        id, path, sha256, ..
    } = doc;
    let digest_ok = sha256.len() == 64
        && sha256
            .bytes()
            .all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f'));
    if !digest_ok {
        findings.push(Finding::error(
            "knowledge.digest_malformed",
            format!("{kind} {id:?} declares sha256 {sha256:?}, not 64 lowercase hex digits"),
            format!(
                "declare the lowercase hex sha256 of {path:?} \
                 (for example the output of `sha256sum {path}`)"
            ),
        ));
    }
    if !is_clean_relative_path(path) {
        findings.push(Finding::error(
            "knowledge.path_unsafe",
            format!(
                "{kind} {id:?} has path {path:?}, \
                 which is not a relative path inside the module folder"
            ),
            "use a '/'-separated path relative to the module folder, without '..'",
        ));
        return;
    }
    let Some(read) = read else { return };
    match read(path) {
        Err(e) => findings.push(Finding::error(
            "knowledge.missing",
            format!("{kind} {id:?}: cannot read {path:?}: {e}"),
            format!("ship {path:?} beside the module, or remove the {kind} from knowledge"),
        )),
        Ok(bytes) => {
            let actual = hex(&Sha256::digest(&bytes));
            if digest_ok && &actual != sha256 {
                findings.push(Finding::error(
                    "knowledge.digest_mismatch",
                    format!(
                        "{kind} {id:?}: {path:?} has sha256 {actual}, \
                         the descriptor declares {sha256}"
                    ),
                    format!(
                        "update the declared sha256 of {path:?} to {actual}, \
                         or restore the file it was computed from"
                    ),
                ));
            }
        }
    }
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;
    use std::collections::HashMap;

    const INTRO: &[u8] = b"# Intro\n";

    fn sha256_hex(bytes: &[u8]) -> String {
        hex(&Sha256::digest(bytes))
    }

    /// A clean contract-1 module with knowledge on "disk".
    fn good() -> Value {
        json!({
            "id": "files", "version": "0.1.0",
            "roots": [{"name": "workspace", "kind": "workspace"},
                      {"name": "artifacts", "kind": "artifacts"}],
            "binaries": [{"name": "git"}],
            "capabilities": [{
                "id": "files.search", "description": "Search files by name.",
                "input_schema": {"type": "object", "required": ["pattern"],
                                 "properties": {"pattern": {"type": "string"}}},
                "output_schema": {"type": "object"},
                "effects": {"reads": ["workspace"], "writes": ["artifacts"], "spawns": ["git"]},
                "skills": ["search-guide"],
                "examples": [{"input": {"pattern": "*.rs"}}]
            }],
            "knowledge": {
                "overlays": [{"id": "intro", "path": "knowledge/intro.md", "sha256": sha256_hex(INTRO)}],
                "skills": [{"id": "search-guide", "path": "knowledge/search.md", "sha256": sha256_hex(b"guide")}]
            }
        })
    }

    fn files() -> HashMap<&'static str, &'static [u8]> {
        HashMap::from([
            ("knowledge/intro.md", INTRO),
            ("knowledge/search.md", &b"guide"[..]),
        ])
    }

    fn check(value: Value) -> Vec<Finding> {
        let descriptor: Descriptor = serde_json::from_value(value).unwrap();
        let files = files();
        let read = |path: &str| {
            files.get(path).map(|b| b.to_vec()).ok_or_else(|| {
                io::Error::new(io::ErrorKind::NotFound, format!("{path}: not found"))
            })
        };
        check_descriptor_with(&descriptor, Some(&read))
    }

    #[test]
    fn a_clean_descriptor_has_no_findings() {
        let findings = check(good());
        assert!(findings.is_empty(), "{findings:#?}");
    }

    #[test]
    fn a_root_named_by_no_capability_is_reported_as_never_granted() {
        let mut d = good();
        d["roots"]
            .as_array_mut()
            .unwrap()
            .push(json!({"name": "corpus", "kind": "source"}));
        let findings = check(d);
        assert_eq!(findings.len(), 1, "{findings:#?}");
        assert_eq!(findings[0].id, "root.never_granted");
        assert!(!findings[0].is_error());
        assert!(findings[0].remedy.contains("effects.reads"));
    }

    #[test]
    fn a_root_named_but_not_declared_is_an_error_with_a_remedy() {
        let mut d = good();
        d["capabilities"][0]["effects"]["reads"] = json!(["workspace", "ghost"]);
        let findings = check(d);
        assert_eq!(findings.len(), 1, "{findings:#?}");
        let f = &findings[0];
        assert_eq!(f.id, "effects.unknown_root");
        assert!(f.is_error());
        assert!(f.reason.contains("ever granted"), "{}", f.reason);
        assert!(
            f.remedy.contains("declare a root named \"ghost\""),
            "{}",
            f.remedy
        );
    }

    #[test]
    fn module_id_syntax() {
        for ok in ["a", "files", "my-mod_2", &"a".repeat(64)] {
            assert!(is_valid_module_id(ok), "{ok}");
        }
        for bad in [
            "",
            "Files",
            "1files",
            "-x",
            "a.b",
            "a b",
            &"a".repeat(65),
            "caf\u{e9}",
        ] {
            assert!(!is_valid_module_id(bad), "{bad}");
        }
    }

    #[test]
    fn a_broken_descriptor_yields_every_finding_in_one_run() {
        let long_cap = format!("files.{}", "very_long_capability_name_".repeat(3));
        let broken = json!({
            "id": "Bad.Module", "version": "one",
            "roots": [{"name": "src", "kind": "source"}, {"name": "src", "kind": "source"}],
            "binaries": [{"name": "git"}, {"name": "git"}],
            "capabilities": [
                {
                    "id": "a.search", "description": "",
                    "input_schema": {"type": "array", "anyOf": [{"minItems": 1}],
                                     "items": {"$ref": "https://example.com/item.json"}},
                    "output_schema": {"type": "not-a-type"},
                    "effects": {"reads": ["ghost"], "writes": ["src"], "spawns": ["curl"],
                                "network": ["https://x.example.org", "*.example.org", "a.example.org"]},
                    "skills": ["missing-skill"]
                },
                {
                    "id": "a-search", "description": "collides with a.search",
                    "input_schema": {"type": "object", "required": ["n"],
                                     "properties": {"n": {"type": "integer"}}},
                    "examples": [{"input": {"n": "not a number"}}]
                },
                {"id": "a-search", "description": "duplicate", "input_schema": {"type": "object"}},
                {"id": "", "description": "no id", "input_schema": {"type": "object"}},
                {"id": long_cap, "description": "long", "input_schema": {"type": "object"}}
            ],
            "operations": [{"id": "x", "capability": "a.search"}],
            "knowledge": {
                "overlays": [
                    {"id": "intro", "path": "knowledge/intro.md", "sha256": "0".repeat(64)},
                    {"id": "gone", "path": "knowledge/gone.md", "sha256": "0".repeat(64)},
                    {"id": "escape", "path": "../etc/passwd", "sha256": "0".repeat(64)}
                ],
                "skills": [{"id": "intro", "path": "knowledge/search.md", "sha256": "ABC"}]
            }
        });
        let findings = check(broken);
        let mut found: Vec<&str> = findings.iter().map(|f| f.id.as_str()).collect();
        found.sort_unstable();
        found.dedup();
        let expected = [
            "binary.duplicate_name",
            "capability.duplicate_id",
            "capability.empty_id",
            "contract.operations_ignored",
            "descriptor.id_syntax",
            "descriptor.version_not_semver",
            "effects.unknown_binary",
            "effects.unknown_root",
            "effects.write_to_read_only_root",
            "knowledge.digest_malformed",
            "knowledge.digest_mismatch",
            "knowledge.duplicate_id",
            "knowledge.missing",
            "knowledge.path_unsafe",
            "network.malformed_host",
            "network.redundant_host",
            "portability.empty_description",
            "portability.name_too_long",
            "portability.remote_ref",
            "portability.top_level_combinator",
            "root.duplicate_name",
            "schema.example_invalid",
            "schema.input_not_object",
            "schema.input_unusable",
            "schema.output_invalid",
            "skill.unknown",
            "tool_name.collision",
        ];
        assert_eq!(found, expected, "{findings:#?}");
        assert!(
            findings
                .iter()
                .all(|f| !f.reason.is_empty() && !f.remedy.is_empty())
        );
        let warning = |id: &str| {
            findings
                .iter()
                .filter(|f| f.id == id)
                .all(|f| !f.is_error())
        };
        for id in [
            "portability.empty_description",
            "portability.name_too_long",
            "portability.remote_ref",
            "portability.top_level_combinator",
            "contract.operations_ignored",
            "network.redundant_host",
        ] {
            assert!(warning(id), "{id} should be a warning");
        }
        let collision = findings
            .iter()
            .find(|f| f.id == "tool_name.collision")
            .unwrap();
        assert!(collision.reason.contains("a.search") && collision.reason.contains("a-search"));
    }

    #[test]
    fn a_boolean_output_schema_is_an_error() {
        for schema in [json!(true), json!(false)] {
            let mut d = good();
            d["capabilities"][0]["output_schema"] = schema.clone();
            let findings = check(d);
            let ids: Vec<&str> = findings.iter().map(|f| f.id.as_str()).collect();
            assert_eq!(ids, vec!["schema.output_not_object"], "{schema}");
        }
    }

    #[test]
    fn a_refused_contract_is_an_error_with_the_pins_reason_and_remedy() {
        let mut d = good();
        d["contract_version"] = json!("2.99.0");
        let findings = check(d);
        assert_eq!(findings.len(), 1, "{findings:#?}");
        assert_eq!(findings[0].id, "contract.refused");
        assert!(findings[0].is_error());
        assert!(findings[0].reason.contains("2.99"));
        assert!(findings[0].remedy.contains("upgrade modhost"));
    }

    #[test]
    fn a_v2_descriptor_includes_no_weakening_findings() {
        let mut d = good();
        d["contract_version"] = json!("2.0.0");
        d["operations"] = json!([{"id": "search", "capability": "files.search",
                                  "semantics": {"reads": ["workspace"], "external": true}}]);
        let findings = check(d);
        let ids: Vec<&str> = findings.iter().map(|f| f.id.as_str()).collect();
        assert_eq!(ids, vec!["weakening.external_without_network"]);
    }

    #[test]
    fn network_declarations_are_checked_on_every_capability() {
        let mut d = good();
        d["capabilities"][0]["effects"]["network"] = json!(["api.github.com/repos"]);
        let findings = check(d);
        assert_eq!(findings.len(), 1, "{findings:#?}");
        let f = &findings[0];
        assert_eq!(f.id, "network.malformed_host");
        assert!(f.is_error());
        assert_eq!(f.capability.as_deref(), Some("files.search"));
        assert!(
            f.reason.contains("\"api.github.com/repos\""),
            "{}",
            f.reason
        );

        let mut d = good();
        d["capabilities"][0]["effects"]["network"] = json!(true);
        let ids: Vec<String> = check(d).into_iter().map(|f| f.id).collect();
        assert_eq!(ids, vec!["network.any_public_host"]);

        let mut d = good();
        d["capabilities"][0]["effects"]["network"] = json!(["api.github.com:443"]);
        assert!(check(d).is_empty());
    }

    #[test]
    fn knowledge_is_read_from_the_module_folder() {
        let dir = std::env::temp_dir().join(format!("modconform-knowledge-{}", std::process::id()));
        std::fs::create_dir_all(dir.join("knowledge")).unwrap();
        std::fs::write(dir.join("knowledge/intro.md"), INTRO).unwrap();
        let descriptor: Descriptor = serde_json::from_value(good()).unwrap();
        let findings = check_descriptor(&descriptor, Some(&dir));
        std::fs::remove_dir_all(&dir).unwrap();
        // intro matches; search.md was not written.
        assert_eq!(findings.len(), 1, "{findings:#?}");
        assert_eq!(findings[0].id, "knowledge.missing");
        assert!(
            findings[0].reason.contains(&dir.display().to_string()),
            "{}",
            findings[0].reason
        );
        // Without a folder, digests are not compared.
        assert!(check_descriptor(&descriptor, None).is_empty());
    }
}

//! The server under a hostile or buggy client: each test is an attack on
//! one promise of `modhost mcp` (an `ask` tool runs only after the user's
//! yes, a `deny` tool is never listed or run, the workspace a client names
//! never reaches the host's own policy, the server cannot be knocked over),
//! with an assertion that the attack failed and nothing ran.

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde_json::{Value, json};

use super::Backend;
use super::elicitation::{ApprovalStates, MAX_ACCEPTED_STATES};
use super::list_changes::MAX_SUBSCRIPTIONS;
use super::protocol::{META_CLIENT_CAPABILITIES, META_PROTOCOL_VERSION};
use super::server::serve_with;
use super::signed::SigningKey;
use super::test_client::Client;
use modhost::tools::Refusal;
use modhost::tools::{CallError, ProgressSink, ToolOutcome};

const MODERN: &str = "2026-07-28";

/// Three tools as the host's gate treats them: `where` (allowed; says its
/// workspace), `guarded` (asks; records every run with its arguments) and
/// `forbidden` (denied: never listed, every call refused). Its protected
/// directory stands for the modhost home.
struct Vault {
    runs: Mutex<Vec<(String, Value)>>,
    home: PathBuf,
}

impl Vault {
    fn new(home: &Path) -> Arc<Vault> {
        Arc::new(Vault {
            runs: Mutex::default(),
            home: home.to_path_buf(),
        })
    }

    fn runs(&self) -> Vec<(String, Value)> {
        self.runs.lock().unwrap().clone()
    }
}

fn ok(text: String) -> ToolOutcome {
    ToolOutcome {
        is_error: false,
        text,
        structured: None,
        artifacts: vec![],
        network: None,
        enters_lockdown: None,
    }
}

impl Backend for Vault {
    fn list_tools(&self) -> Vec<Value> {
        ["where", "guarded"]
            .iter()
            .map(|n| json!({"name": n, "inputSchema": {"type": "object"}}))
            .collect()
    }

    async fn call_tool(
        &self,
        name: &str,
        arguments: Value,
        progress: Option<ProgressSink>,
    ) -> Result<ToolOutcome, CallError> {
        self.call_tool_in(
            name,
            arguments,
            progress,
            &modhost::CallWorkspace::Host,
            None,
        )
        .await
    }

    async fn call_tool_in(
        &self,
        name: &str,
        _arguments: Value,
        progress: Option<ProgressSink>,
        workspace: &modhost::CallWorkspace,
        _lockdown: Option<&modhost::tools::Lockdown>,
    ) -> Result<ToolOutcome, CallError> {
        match name {
            "where" => {
                if let Some(p) = progress {
                    let _ = p.try_send(modhost::tools::Progress {
                        progress: 1.0,
                        total: None,
                        message: None,
                    });
                }
                Ok(ok(format!("{workspace:?}")))
            }
            "guarded" => Err(CallError::Refused(Refusal::NeedsApproval {
                tool: name.into(),
                rule: "r".into(),
            })),
            "forbidden" => Err(CallError::Refused(Refusal::Denied {
                tool: name.into(),
                rule: "r".into(),
            })),
            other => Err(CallError::UnknownTool(other.into())),
        }
    }

    fn protected_dirs(&self) -> Vec<PathBuf> {
        vec![self.home.clone()]
    }

    fn approval_rule(
        &self,
        name: &str,
        _lockdown: Option<&modhost::tools::Lockdown>,
    ) -> Option<crate::ApprovalAsk> {
        (name == "guarded").then(|| crate::ApprovalAsk {
            rule: "r".to_owned(),
            lockdown: false,
        })
    }

    async fn call_tool_approved(
        &self,
        name: &str,
        arguments: Value,
        progress: Option<ProgressSink>,
        workspace: &modhost::CallWorkspace,
        lockdown: Option<&modhost::tools::Lockdown>,
    ) -> Result<ToolOutcome, CallError> {
        if name != "guarded" {
            // What the host's gate does: a yes never opens a deny.
            return self
                .call_tool_in(name, arguments, progress, workspace, lockdown)
                .await;
        }
        self.runs
            .lock()
            .unwrap()
            .push((name.to_owned(), arguments.clone()));
        Ok(ok("ran".into()))
    }
}

fn modern(capabilities: &Value) -> Value {
    json!({META_PROTOCOL_VERSION: MODERN, META_CLIENT_CAPABILITIES: capabilities})
}

async fn initialize(c: &mut Client, version: &str, capabilities: Value) {
    let init = c
        .ask(
            0,
            "initialize",
            json!({"protocolVersion": version, "capabilities": capabilities}),
        )
        .await;
    assert_eq!(init["result"]["protocolVersion"], json!(version), "{init}");
    c.send(json!({"jsonrpc": "2.0", "method": "notifications/initialized"}))
        .await;
}

/// A `file://` URI for `path`.
fn uri(path: &Path) -> String {
    format!("file://{}", path.display())
}

/// The server is still alive and reading: a `ping` gets its answer, after
/// nothing but errors earned by what was sent before it.
async fn still_reading(c: &mut Client, id: i64) {
    let mut line = c.ask(id, "ping", json!({})).await;
    while line["id"] != json!(id) {
        assert!(line.get("error").is_some(), "only errors before it: {line}");
        line = c.recv().await;
    }
}

#[tokio::test]
async fn a_client_root_of_slash_the_users_home_or_the_modhost_home_is_never_the_workspace() {
    let dir = tempfile::tempdir().unwrap();
    let modhost_home = dir.path().join("home/.local/share/modhost");
    let inside = modhost_home.join("modules/files");
    let project = dir.path().join("project");
    for d in [&inside, &project] {
        std::fs::create_dir_all(d).unwrap();
    }
    let user_home = std::env::var_os("HOME").map(PathBuf::from);
    let vault = Vault::new(&modhost_home);
    let mut c = Client::start(Arc::clone(&vault));
    initialize(&mut c, "2025-06-18", json!({"roots": {}})).await;
    let ask = c.recv().await;
    assert_eq!(ask["method"], json!("roots/list"), "{ask}");
    // Every root that would let a module write the policy or the modules:
    // the filesystem, the user's home, an ancestor of the modhost home, the
    // modhost home, a folder inside it.
    let mut hostile = vec![
        json!({"uri": "file:///"}),
        json!({"uri": uri(dir.path())}),
        json!({"uri": uri(&modhost_home)}),
        json!({"uri": uri(&inside)}),
    ];
    if let Some(h) = user_home.as_ref().filter(|h| h.is_dir()) {
        hostile.push(json!({"uri": uri(h)}));
    }
    c.send(json!({"jsonrpc": "2.0", "id": ask["id"], "result": {"roots": hostile}}))
        .await;
    let r = c.ask(1, "tools/call", json!({"name": "where"})).await;
    let text = r["result"]["content"][0]["text"]
        .as_str()
        .unwrap_or_default();
    assert!(
        text.starts_with("Withheld(") && text.contains("never granted"),
        "no hostile root became the workspace, nor the host's: {r}"
    );
    // Nor by switching to a stateless request on the same connection.
    let stateless = json!({"name": "where", "_meta": modern(&json!({}))});
    let r = c.ask(11, "tools/call", stateless).await;
    let text = r["result"]["content"][0]["text"]
        .as_str()
        .unwrap_or_default();
    assert!(text.starts_with("Withheld("), "a stateless request got {r}");
    // A project folder after them is taken.
    c.send(json!({"jsonrpc": "2.0", "method": "notifications/roots/list_changed"}))
        .await;
    let again = c.recv().await;
    hostile.push(json!({"uri": uri(&project)}));
    c.send(json!({"jsonrpc": "2.0", "id": again["id"], "result": {"roots": hostile}}))
        .await;
    let r = c.ask(2, "tools/call", json!({"name": "where"})).await;
    let project = std::fs::canonicalize(&project).unwrap();
    let expected = format!("{:?}", modhost::CallWorkspace::Given(project));
    assert_eq!(r["result"]["content"][0]["text"], json!(expected), "{r}");
    c.finish().await;
}

#[tokio::test]
async fn a_stateless_request_without_elicitation_gets_minus_32021_and_nothing_is_inferred() {
    let dir = tempfile::tempdir().unwrap();
    let vault = Vault::new(dir.path());
    let mut c = Client::start(Arc::clone(&vault));
    // The connection's handshake declared elicitation; the stateless request
    // does not. The server must not infer it (2026-07-28 basic/index).
    initialize(&mut c, "2025-06-18", json!({"elicitation": {}})).await;
    let r = c
        .ask(
            1,
            "tools/call",
            json!({"name": "guarded", "arguments": {}, "_meta": modern(&json!({}))}),
        )
        .await;
    assert_eq!(r["error"]["code"], json!(-32021), "{r}");
    assert_eq!(
        r["error"]["data"]["requiredCapabilities"],
        json!({"elicitation": {"form": {}}})
    );
    // URL-mode elicitation alone cannot answer a form either.
    let r = c
        .ask(
            2,
            "tools/call",
            json!({"name": "guarded", "_meta": modern(&json!({"elicitation": {"url": {}}}))}),
        )
        .await;
    assert_eq!(r["error"]["code"], json!(-32021), "{r}");
    assert!(vault.runs().is_empty());
    c.finish().await;
}

#[tokio::test]
async fn mixing_eras_never_runs_an_ask_tool_without_a_yes() {
    let dir = tempfile::tempdir().unwrap();
    let vault = Vault::new(dir.path());
    let mut c = Client::start(Arc::clone(&vault));
    let approve = json!({"approval": {"action": "accept", "content": {"approve": true}}});
    // A stateless state presented on a handshake-era call: ignored, asked.
    let asked = c
        .ask(
            1,
            "tools/call",
            json!({"name": "guarded", "arguments": {"a": 1},
                   "_meta": modern(&json!({"elicitation": {}}))}),
        )
        .await;
    let state = asked["result"]["requestState"].clone();
    assert_eq!(asked["result"]["resultType"], json!("input_required"));
    initialize(&mut c, "2025-11-25", json!({"elicitation": {}})).await;
    c.send(json!({"jsonrpc": "2.0", "id": 2, "method": "tools/call",
                  "params": {"name": "guarded", "arguments": {"a": 1},
                             "requestState": state, "inputResponses": approve}}))
        .await;
    let question = c.recv().await;
    assert_eq!(
        question["method"],
        json!("elicitation/create"),
        "{question}"
    );
    assert!(vault.runs().is_empty(), "a state never stands in for a yes");
    // The pending question, answered as if it were an input response (a
    // request, not a response), and with a near-miss yes: not run.
    c.send(
        json!({"jsonrpc": "2.0", "id": question["id"], "method": "elicitation/create",
                  "params": {"action": "accept", "content": {"approve": true}}}),
    )
    .await;
    c.send(json!({"jsonrpc": "2.0", "id": question["id"],
                  "result": {"action": "accept", "content": {"approve": "true", "extra": 1}}}))
        .await;
    let mut refused = c.recv().await;
    if refused["id"] != json!(2) {
        // The reply to the bogus request comes first.
        assert_eq!(refused["error"]["code"], json!(-32601), "{refused}");
        refused = c.recv().await;
    }
    assert_eq!(refused["id"], json!(2), "{refused}");
    assert_eq!(refused["result"]["isError"], json!(true), "{refused}");
    // The stateless state was spent neither by the handshake call nor by
    // anything else: it runs its own call once, after the yes it carries.
    let r = c
        .ask(
            3,
            "tools/call",
            json!({"name": "guarded", "arguments": {"a": 1}, "requestState": state,
                   "inputResponses": approve, "_meta": modern(&json!({"elicitation": {}}))}),
        )
        .await;
    assert_eq!(r["result"]["isError"], json!(false), "{r}");
    assert_eq!(vault.runs(), vec![("guarded".to_owned(), json!({"a": 1}))]);
    c.finish().await;
}

#[tokio::test]
async fn a_yes_for_one_pending_call_runs_that_call_only() {
    let dir = tempfile::tempdir().unwrap();
    let vault = Vault::new(dir.path());
    let mut c = Client::start(Arc::clone(&vault));
    initialize(&mut c, "2025-06-18", json!({"elicitation": {}})).await;
    let mut questions = Vec::new();
    for (id, n) in [(1, 1), (2, 2)] {
        c.send(json!({"jsonrpc": "2.0", "id": id, "method": "tools/call",
                      "params": {"name": "guarded", "arguments": {"n": n}}}))
            .await;
        questions.push(c.recv().await);
    }
    assert_ne!(questions[0]["id"], questions[1]["id"]);
    let yes = json!({"action": "accept", "content": {"approve": true}});
    // A yes to an id nobody asked (the next one, a number, a null).
    for id in [json!("modhost-elicit-99"), json!(1), Value::Null] {
        c.send(json!({"jsonrpc": "2.0", "id": id, "result": yes}))
            .await;
    }
    still_reading(&mut c, 50).await;
    assert!(vault.runs().is_empty());
    // Yes to the first, twice: the first call runs once, the second waits.
    for _ in 0..2 {
        c.send(json!({"jsonrpc": "2.0", "id": questions[0]["id"], "result": yes}))
            .await;
    }
    let r = c.recv().await;
    assert_eq!(r["id"], json!(1), "{r}");
    still_reading(&mut c, 51).await;
    assert_eq!(vault.runs(), vec![("guarded".to_owned(), json!({"n": 1}))]);
    // No to the second.
    c.send(json!({"jsonrpc": "2.0", "id": questions[1]["id"], "result": {"action": "decline"}}))
        .await;
    assert_eq!(c.recv().await["result"]["isError"], json!(true));
    assert_eq!(vault.runs().len(), 1);
    c.finish().await;
}

#[tokio::test]
async fn a_request_state_runs_only_its_own_tool_and_many_open_questions_evict_none() {
    let dir = tempfile::tempdir().unwrap();
    let vault = Vault::new(dir.path());
    let mut c = Client::start(Arc::clone(&vault));
    let caps = json!({"elicitation": {}});
    let approve = json!({"approval": {"action": "accept", "content": {"approve": true}}});
    let open = |id: i64| {
        json!({"jsonrpc": "2.0", "id": id, "method": "tools/call",
               "params": {"name": "guarded", "arguments": {"n": id}, "_meta": modern(&caps)}})
    };
    // More questions than the old per-connection table held (64).
    let mut states = Vec::new();
    for id in 0..=64 {
        c.send(open(id)).await;
        states.push(c.recv().await["result"]["requestState"].clone());
    }
    // A state holds its question itself: the server keeps nothing per open
    // question, so none is forgotten. The oldest runs its own call, once.
    let oldest = json!({"name": "guarded", "arguments": {"n": 0}, "requestState": states[0],
                        "inputResponses": approve, "_meta": modern(&caps)});
    let r = c.ask(100, "tools/call", oldest.clone()).await;
    assert_eq!(r["result"]["isError"], json!(false), "{r}");
    assert_eq!(vault.runs(), vec![("guarded".to_owned(), json!({"n": 0}))]);
    let r = c.ask(105, "tools/call", oldest).await;
    assert_eq!(r["error"]["code"], json!(-32602), "{r}");
    // Another tool (denied, allowed) with a live state: the state opens
    // nothing (it is read only for the tool it was issued for).
    for (id, tool) in [(101, "forbidden"), (102, "where")] {
        let r = c
            .ask(
                id,
                "tools/call",
                json!({"name": tool, "arguments": {"n": 1}, "requestState": states[1],
                       "inputResponses": approve, "_meta": modern(&caps)}),
            )
            .await;
        if tool == "forbidden" {
            assert_eq!(r["error"]["code"], json!(-32602), "{r}");
        }
    }
    // A state that is not a string, an object, a huge one: refused.
    for bogus in [
        json!(1),
        json!({"s": states[2]}),
        json!("a".repeat(1 << 16)),
    ] {
        let r = c
            .ask(
                103,
                "tools/call",
                json!({"name": "guarded", "arguments": {"n": 2}, "requestState": bogus,
                       "inputResponses": approve, "_meta": modern(&caps)}),
            )
            .await;
        assert_eq!(r["error"]["code"], json!(-32602), "{r}");
    }
    assert_eq!(vault.runs().len(), 1);
    // The newest works too, once.
    let last = 64;
    let r = c
        .ask(
            104,
            "tools/call",
            json!({"name": "guarded", "arguments": {"n": last}, "requestState": states[last as usize],
                   "inputResponses": approve, "_meta": modern(&caps)}),
        )
        .await;
    assert_eq!(r["result"]["isError"], json!(false), "{r}");
    assert_eq!(vault.runs().len(), 2);
    c.finish().await;
}

/// One replica of the server: a connection to `vault` served with
/// `approvals` (its key and its record of accepted states) for `principal`.
fn replica(vault: &Arc<Vault>, approvals: &ApprovalStates, principal: &str) -> Client {
    use tokio::io::{AsyncBufReadExt, BufReader};
    let (client_w, server_r) = tokio::io::duplex(64 * 1024);
    let (server_w, client_r) = tokio::io::duplex(64 * 1024);
    let server = tokio::spawn(serve_with(
        BufReader::new(server_r),
        server_w,
        Arc::clone(vault),
        std::future::pending(),
        approvals.clone(),
        principal.to_owned(),
    ));
    Client {
        to_server: Some(client_w),
        from_server: BufReader::new(client_r).lines(),
        server,
    }
}

/// The `requestState` of the question `c` is asked for `guarded` with `arguments`.
async fn state_for(c: &mut Client, id: i64, arguments: &Value) -> Value {
    let caps = json!({"elicitation": {}});
    let r = c
        .ask(
            id,
            "tools/call",
            json!({"name": "guarded", "arguments": arguments, "_meta": modern(&caps)}),
        )
        .await;
    assert_eq!(r["result"]["resultType"], json!("input_required"), "{r}");
    r["result"]["requestState"].clone()
}

/// `guarded` with `arguments` called on `c` with `state` and the user's yes.
async fn present(c: &mut Client, id: i64, arguments: &Value, state: &Value) -> Value {
    let caps = json!({"elicitation": {}});
    let yes = json!({"approval": {"action": "accept", "content": {"approve": true}}});
    c.ask(
        id,
        "tools/call",
        json!({"name": "guarded", "arguments": arguments, "requestState": state,
               "inputResponses": yes, "_meta": modern(&caps)}),
    )
    .await
}

/// `r` is a refusal of the state whose message says `why`.
fn refused_because(r: &Value, why: &str) {
    assert_eq!(r["error"]["code"], json!(-32602), "{r}");
    let message = r["error"]["message"].as_str().unwrap_or_default();
    assert!(message.contains(why), "{why:?} not in {r}");
}

#[tokio::test]
async fn a_state_from_one_replica_runs_once_on_another_and_at_most_once_on_each() {
    let dir = tempfile::tempdir().unwrap();
    let vault = Vault::new(dir.path());
    let key = Arc::new(SigningKey::ephemeral().unwrap());
    let (a, b) = (
        ApprovalStates::new(Arc::clone(&key)),
        ApprovalStates::new(Arc::clone(&key)),
    );
    let stranger = ApprovalStates::ephemeral().unwrap();
    let (mut on_a, mut on_b) = (replica(&vault, &a, "p"), replica(&vault, &b, "p"));
    let mut on_stranger = replica(&vault, &stranger, "p");
    let args = json!({"path": "notes.txt"});
    let state = state_for(&mut on_a, 1, &args).await;
    // Asked on A, answered on B: B runs it.
    let r = present(&mut on_b, 2, &args, &state).await;
    assert_eq!(r["result"]["isError"], json!(false), "{r}");
    assert_eq!(vault.runs().len(), 1);
    // B accepted it: again on B (another connection of B too) is refused.
    refused_because(&present(&mut on_b, 3, &args, &state).await, "already used");
    let mut on_b_again = replica(&vault, &b, "p");
    refused_because(
        &present(&mut on_b_again, 4, &args, &state).await,
        "already used",
    );
    assert_eq!(vault.runs().len(), 1);
    // A key of another deployment never opens it.
    refused_because(
        &present(&mut on_stranger, 5, &args, &state).await,
        "not one this server issued",
    );
    assert_eq!(vault.runs().len(), 1);
    // The documented bound with no shared store: A, which issued it but
    // never accepted it, runs it once (the same call, the same principal,
    // within its lifetime), and no more.
    let r = present(&mut on_a, 6, &args, &state).await;
    assert_eq!(r["result"]["isError"], json!(false), "{r}");
    assert_eq!(vault.runs().len(), 2);
    refused_because(&present(&mut on_a, 7, &args, &state).await, "already used");
    assert_eq!(
        vault.runs(),
        vec![("guarded".to_owned(), args.clone()); 2],
        "only the approved call, once per replica"
    );
    for c in [on_a, on_b, on_b_again, on_stranger] {
        c.finish().await;
    }
}

/// `token` with the character at `at` replaced by another of the alphabet.
fn edited(token: &str, at: usize) -> String {
    let mut bytes = token.as_bytes().to_vec();
    bytes[at] = if bytes[at] == b'A' { b'B' } else { b'A' };
    String::from_utf8(bytes).unwrap()
}

#[tokio::test]
async fn a_changed_cut_padded_oversized_or_session_state_runs_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let vault = Vault::new(dir.path());
    let key = Arc::new(SigningKey::ephemeral().unwrap());
    let a = ApprovalStates::new(Arc::clone(&key));
    let b = ApprovalStates::new(Arc::clone(&key));
    let (mut on_a, mut on_b) = (replica(&vault, &a, "p"), replica(&vault, &b, "p"));
    let args = json!({"n": 1});
    let state = state_for(&mut on_a, 1, &args).await;
    let token = state.as_str().unwrap().to_owned();
    let dot = token.find('.').unwrap();
    let mut attacks = Vec::new();
    for at in [0, dot / 2, dot - 1, dot, dot + 1, token.len() - 1] {
        attacks.push(edited(&token, at));
    }
    attacks.extend([
        token[..token.len() - 1].to_owned(),
        token[1..].to_owned(),
        token[..dot].to_owned(),
        format!("{token}="),
        format!("{token}=="),
        token.replacen('.', "=.", 1),
        format!("{token}{}", "A".repeat(8192)),
    ]);
    // A token the same key sealed for another purpose: a session id.
    let session = key
        .seal(
            "session",
            &json!({"principal": "p", "tool": "guarded"}),
            Duration::from_secs(60),
        )
        .unwrap();
    attacks.push(session);
    for (id, attack) in (10..).zip(&attacks) {
        let r = present(&mut on_b, id, &args, &json!(attack)).await;
        refused_because(&r, "not one this server issued");
    }
    assert!(vault.runs().is_empty(), "{:?}", vault.runs());
    // None of that spent the real state: it runs its call, once.
    let r = present(&mut on_b, 100, &args, &state).await;
    assert_eq!(r["result"]["isError"], json!(false), "{r}");
    assert_eq!(vault.runs().len(), 1);
    on_a.finish().await;
    on_b.finish().await;
}

#[tokio::test]
async fn an_expired_state_is_refused_on_every_replica() {
    let dir = tempfile::tempdir().unwrap();
    let vault = Vault::new(dir.path());
    let key = Arc::new(SigningKey::ephemeral().unwrap());
    let short_lived = ApprovalStates::new(Arc::clone(&key))
        .with_limits(Duration::from_millis(1), MAX_ACCEPTED_STATES);
    let b = ApprovalStates::new(Arc::clone(&key));
    let (mut on_a, mut on_b) = (replica(&vault, &short_lived, "p"), replica(&vault, &b, "p"));
    let args = json!({"n": 1});
    let state = state_for(&mut on_a, 1, &args).await;
    tokio::time::sleep(Duration::from_millis(20)).await;
    refused_because(&present(&mut on_b, 2, &args, &state).await, "expired");
    refused_because(&present(&mut on_a, 3, &args, &state).await, "expired");
    assert!(vault.runs().is_empty());
    on_a.finish().await;
    on_b.finish().await;
}

#[tokio::test]
async fn a_state_issued_to_one_principal_runs_nothing_for_another() {
    let dir = tempfile::tempdir().unwrap();
    let vault = Vault::new(dir.path());
    let key = Arc::new(SigningKey::ephemeral().unwrap());
    let a = ApprovalStates::new(Arc::clone(&key));
    let b = ApprovalStates::new(Arc::clone(&key));
    let (mut alice_on_a, mut mallory_on_b) =
        (replica(&vault, &a, "alice"), replica(&vault, &b, "mallory"));
    let args = json!({"n": 1});
    let state = state_for(&mut alice_on_a, 1, &args).await;
    let r = present(&mut mallory_on_b, 2, &args, &state).await;
    refused_because(&r, "issued to another caller");
    assert!(!r.to_string().contains("alice"), "names no one: {r}");
    // Mallory asking on A, where the state was issued, fares no better.
    let mut mallory_on_a = replica(&vault, &a, "mallory");
    refused_because(
        &present(&mut mallory_on_a, 3, &args, &state).await,
        "issued to another caller",
    );
    assert!(vault.runs().is_empty());
    for c in [alice_on_a, mallory_on_b, mallory_on_a] {
        c.finish().await;
    }
}

#[tokio::test]
async fn a_denied_tool_is_never_listed_or_run_in_any_era() {
    let dir = tempfile::tempdir().unwrap();
    let vault = Vault::new(dir.path());
    let listed = |r: &Value| {
        r["result"]["tools"]
            .as_array()
            .unwrap()
            .iter()
            .any(|t| t["name"] == json!("forbidden"))
    };
    for version in ["2025-11-25", "2025-06-18", "2025-03-26", "2024-11-05"] {
        let mut c = Client::start(Arc::clone(&vault));
        initialize(&mut c, version, json!({"elicitation": {}})).await;
        assert!(!listed(&c.ask(1, "tools/list", json!({})).await));
        let r = c
            .ask(
                2,
                "tools/call",
                json!({"name": "forbidden", "arguments": {}}),
            )
            .await;
        assert_eq!(r["error"]["code"], json!(-32602), "{version}: {r}");
        c.finish().await;
    }
    let mut c = Client::start(Arc::clone(&vault));
    let caps = json!({"elicitation": {}});
    let r = c
        .ask(1, "tools/list", json!({"_meta": modern(&caps)}))
        .await;
    assert!(!listed(&r));
    let r = c
        .ask(
            2,
            "tools/call",
            json!({"name": "forbidden", "_meta": modern(&caps),
                   "requestState": "00".repeat(16),
                   "inputResponses": {"approval": {"action": "accept", "content": {"approve": true}}}}),
        )
        .await;
    assert_eq!(r["error"]["code"], json!(-32602), "{r}");
    c.finish().await;
    assert!(vault.runs().is_empty());
}

#[tokio::test]
async fn malformed_meta_ids_and_stray_responses_never_knock_the_server_over() {
    let dir = tempfile::tempdir().unwrap();
    let mut c = Client::start(Vault::new(dir.path()));
    let bad_metas = [
        json!("2026-07-28"),
        json!([1, 2]),
        json!(null),
        json!({META_PROTOCOL_VERSION: 2026}),
        json!({META_PROTOCOL_VERSION: null}),
        json!({META_PROTOCOL_VERSION: {"v": MODERN}}),
        json!({META_PROTOCOL_VERSION: MODERN}),
        json!({META_PROTOCOL_VERSION: MODERN, META_CLIENT_CAPABILITIES: "all"}),
        json!({META_PROTOCOL_VERSION: MODERN, META_CLIENT_CAPABILITIES: null}),
        json!({META_PROTOCOL_VERSION: "x".repeat(100_000), META_CLIENT_CAPABILITIES: {}}),
    ];
    for (i, m) in bad_metas.iter().enumerate() {
        let id = i as i64 + 1;
        let r = c
            .ask(id, "tools/call", json!({"name": "guarded", "_meta": m}))
            .await;
        assert_eq!(r["id"], json!(id), "{m}: {r}");
        // Never an `input_required`, never a run.
        assert_ne!(r["result"]["isError"], json!(false), "{m}: {r}");
    }
    let unsupported = c
        .ask(
            20,
            "tools/list",
            json!({"_meta": {META_PROTOCOL_VERSION: "1900-01-01", META_CLIENT_CAPABILITIES: {}}}),
        )
        .await;
    assert_eq!(unsupported["error"]["code"], json!(-32022));
    assert_eq!(
        unsupported["error"]["data"]["requested"],
        json!("1900-01-01")
    );
    assert!(
        unsupported["error"]["data"]["supported"]
            .as_array()
            .unwrap()
            .contains(&json!(MODERN))
    );
    // Ids beyond i64, fractional, as objects; responses to nothing;
    // cancellations of nothing.
    for line in [
        json!({"jsonrpc": "2.0", "id": 1e300, "method": "ping"}),
        json!({"jsonrpc": "2.0", "id": 18_446_744_073_709_551_615u64, "method": "ping"}),
        json!({"jsonrpc": "2.0", "id": {"a": 1}, "method": "ping"}),
        json!({"jsonrpc": "2.0", "id": "modhost-roots-1", "result": {"roots": [{"uri": "file:///"}]}}),
        json!({"jsonrpc": "2.0", "id": "modhost-elicit-1", "result": {"action": "accept"}}),
        json!({"jsonrpc": "2.0", "id": 7, "error": {"code": 1, "message": "x"}}),
        json!({"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": 1e300}}),
        json!({"jsonrpc": "2.0", "method": "notifications/cancelled", "params": "x"}),
    ] {
        c.send(line).await;
    }
    // Whatever errors those earned come first; then the server still reads.
    c.send(
        json!({"jsonrpc": "2.0", "id": 99, "method": "tools/call", "params": {"name": "where"}}),
    )
    .await;
    loop {
        let r = c.recv().await;
        if r["id"] == json!(99) {
            assert_eq!(r["result"]["content"][0]["text"], json!("Host"), "{r}");
            break;
        }
        assert!(r.get("error").is_some(), "only errors before it: {r}");
    }
    c.finish().await;
}

#[tokio::test]
async fn subscriptions_beyond_the_cap_or_with_a_taken_id_are_refused() {
    let dir = tempfile::tempdir().unwrap();
    let mut c = Client::start(Vault::new(dir.path()));
    let listen = json!({"notifications": {"toolsListChanged": true}, "_meta": modern(&json!({}))});
    for id in 0..MAX_SUBSCRIPTIONS as i64 {
        let ack = c.ask(id, "subscriptions/listen", listen.clone()).await;
        assert_eq!(
            ack["method"],
            json!("notifications/subscriptions/acknowledged")
        );
    }
    let refused = c.ask(100, "subscriptions/listen", listen.clone()).await;
    assert_eq!(refused["error"]["code"], json!(-32600), "{refused}");
    c.send(
        json!({"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": 0}}),
    )
    .await;
    let taken = c.ask(1, "subscriptions/listen", listen.clone()).await;
    assert_eq!(taken["error"]["code"], json!(-32600), "{taken}");
    let reopened = c.ask(0, "subscriptions/listen", listen).await;
    assert_eq!(
        reopened["method"],
        json!("notifications/subscriptions/acknowledged")
    );
    let closing = c.finish().await;
    assert_eq!(
        closing.len(),
        MAX_SUBSCRIPTIONS,
        "each open stream closed once"
    );
}

#[tokio::test]
async fn a_progress_token_that_is_not_a_short_string_or_a_number_gets_no_progress() {
    let dir = tempfile::tempdir().unwrap();
    let mut c = Client::start(Vault::new(dir.path()));
    let huge = "t".repeat(1 << 20);
    for (id, token) in [
        (1, json!({"a": 1})),
        (2, json!([1, 2])),
        (3, json!(true)),
        (4, json!(huge)),
    ] {
        let r = c
            .ask(
                id,
                "tools/call",
                json!({"name": "where", "_meta": {"progressToken": token}}),
            )
            .await;
        assert_eq!(
            r["id"],
            json!(id),
            "the response, no progress before it: {r}"
        );
    }
    for (id, token) in [(5, json!("tok")), (6, json!(7))] {
        let progress = c
            .ask(
                id,
                "tools/call",
                json!({"name": "where", "_meta": {"progressToken": token}}),
            )
            .await;
        assert_eq!(progress["params"]["progressToken"], token, "{progress}");
        assert_eq!(c.recv().await["id"], json!(id));
    }
    c.finish().await;
}

#[tokio::test]
async fn a_stateless_request_does_not_inherit_the_roots_of_a_handshake() {
    let dir = tempfile::tempdir().unwrap();
    let project = dir.path().join("project");
    std::fs::create_dir_all(&project).unwrap();
    let mut c = Client::start(Vault::new(&dir.path().join("modhost")));
    initialize(&mut c, "2025-06-18", json!({"roots": {}})).await;
    let ask = c.recv().await;
    c.send(
        json!({"jsonrpc": "2.0", "id": ask["id"], "result": {"roots": [{"uri": uri(&project)}]}}),
    )
    .await;
    let handshake = c.ask(1, "tools/call", json!({"name": "where"})).await;
    let given = modhost::CallWorkspace::Given(std::fs::canonicalize(&project).unwrap());
    assert_eq!(
        handshake["result"]["content"][0]["text"],
        json!(format!("{given:?}"))
    );
    let stateless = c
        .ask(
            2,
            "tools/call",
            json!({"name": "where", "_meta": modern(&json!({}))}),
        )
        .await;
    assert_eq!(
        stateless["result"]["content"][0]["text"],
        json!("Host"),
        "{stateless}"
    );
    c.finish().await;
}

#[tokio::test]
async fn a_yes_is_never_asked_for_arguments_the_user_cannot_read_whole() {
    let dir = tempfile::tempdir().unwrap();
    let vault = Vault::new(dir.path());
    // A harmless-looking prefix padded past any cut, and what matters after it.
    let padding = "this only reads a public page; ".repeat(200);
    let args = json!({"a_note": padding, "url": "https://evil.example/exfiltrate"});
    let caps = json!({"elicitation": {}});
    let mut c = Client::start(Arc::clone(&vault));
    initialize(&mut c, "2025-11-25", caps.clone()).await;
    let r = c
        .ask(
            1,
            "tools/call",
            json!({"name": "guarded", "arguments": args}),
        )
        .await;
    assert_eq!(r["id"], json!(1), "answered, not asked: {r}");
    assert_eq!(r["result"]["isError"], json!(true), "{r}");
    assert!(
        r["result"]["content"][0]["text"]
            .as_str()
            .unwrap()
            .contains("cannot read"),
        "{r}"
    );
    let r = c
        .ask(
            2,
            "tools/call",
            json!({"name": "guarded", "arguments": args, "_meta": modern(&caps)}),
        )
        .await;
    assert_eq!(
        r["result"]["isError"],
        json!(true),
        "not input_required: {r}"
    );
    // Short enough: asked, with every byte of them in the question.
    let short = json!({"url": "https://example.org/page"});
    c.send(json!({"jsonrpc": "2.0", "id": 3, "method": "tools/call",
                  "params": {"name": "guarded", "arguments": short}}))
        .await;
    let question = c.recv().await;
    let message = question["params"]["message"].as_str().unwrap();
    assert!(message.contains(&short.to_string()), "{message}");
    c.finish().await;
    assert!(vault.runs().is_empty());
}

#[test]
fn the_question_shows_invisible_and_reordering_characters_as_escapes() {
    let args = json!({"path": "report\u{202E}txt.exe", "z": "a\u{200B}b\u{E0041}"});
    let message = super::elicitation::question(
        super::revision::find("2025-11-25").unwrap(),
        "t",
        "r",
        &args,
    )["message"]
        .as_str()
        .unwrap()
        .to_owned();
    for hidden in ['\u{202E}', '\u{200B}', '\u{E0041}'] {
        assert!(!message.contains(hidden), "{message:?}");
    }
    assert!(message.contains(r"report\u{202E}txt.exe"), "{message}");
    assert!(message.contains(r"a\u{200B}b\u{E0041}"), "{message}");
}

#[tokio::test]
async fn a_reused_request_id_cannot_leave_a_cancelled_call_waiting_for_a_yes() {
    let dir = tempfile::tempdir().unwrap();
    let vault = Vault::new(dir.path());
    let mut c = Client::start(Arc::clone(&vault));
    initialize(&mut c, "2025-06-18", json!({"elicitation": {}})).await;
    let call = json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call",
                      "params": {"name": "guarded", "arguments": {"n": 1}}});
    c.send(call.clone()).await;
    let question = c.recv().await;
    assert_eq!(question["method"], json!("elicitation/create"));
    // The same id again while the first call waits: refused.
    c.send(call).await;
    let refused = c.recv().await;
    assert_eq!(refused["id"], json!(1), "{refused}");
    assert_eq!(refused["error"]["code"], json!(-32600), "{refused}");
    // The client cancels request 1, then the user's late yes arrives.
    c.send(
        json!({"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": 1}}),
    )
    .await;
    still_reading(&mut c, 2).await;
    c.send(json!({"jsonrpc": "2.0", "id": question["id"],
                  "result": {"action": "accept", "content": {"approve": true}}}))
        .await;
    still_reading(&mut c, 3).await;
    assert!(
        c.finish().await.is_empty(),
        "no response to the cancelled call"
    );
    assert!(vault.runs().is_empty(), "the cancelled call never ran");
}

#[test]
fn no_folder_holding_the_users_home_or_overlapping_the_modhost_home_is_a_workspace() {
    use modhost::never_a_workspace;
    let dir = tempfile::tempdir().unwrap();
    let root = std::fs::canonicalize(dir.path()).unwrap();
    let user_home = root.join("home/alice");
    let modhost_home = root.join("srv/modhost");
    let project = root.join("home/alice/project");
    for d in [&user_home, &modhost_home, &project] {
        std::fs::create_dir_all(d).unwrap();
    }
    let protected = [modhost_home.clone()];
    let user_homes = [user_home.clone()];
    let refused = |p: &Path| never_a_workspace(p, &user_homes, &protected);
    for p in [
        Path::new("/"),
        root.as_path(),
        &root.join("home"),
        &user_home,
        &root.join("srv"),
        &modhost_home,
        &modhost_home.join("modules"),
        // The kernel's filesystems: processes, settings, devices.
        Path::new("/proc"),
        Path::new("/proc/self"),
        Path::new("/sys"),
        Path::new("/dev"),
        Path::new("/dev/pts"),
    ] {
        assert!(refused(p).is_some(), "{} was granted", p.display());
    }
    assert_eq!(refused(&project), None);
    assert_eq!(refused(&root.join("srv/other")), None);
}

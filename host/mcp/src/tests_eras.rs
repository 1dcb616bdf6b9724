//! The server in every revision it speaks, driven through `serve` on
//! in-memory pipes: the handshake or discovery, each result in the
//! revision's own shape (fields it does not define are absent), a call, an
//! error, the unsupported-version error; approval through elicitation
//! (approve, deny, unanswered, forged, no capability) with a tool that
//! records whether it ran; and tool-list changes announced per era.

use std::collections::BTreeSet;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use modproto::ArtifactRef;
use serde_json::{Value, json};
use tokio::sync::watch;

use super::Backend;
use super::protocol::{META_CLIENT_CAPABILITIES, META_PROTOCOL_VERSION, META_SUBSCRIPTION_ID};
use super::revision::REVISIONS;
use super::test_client::Client;
use modhost::tools::Refusal;
use modhost::tools::{CallError, ProgressSink, ToolArtifact, ToolOutcome};

const HANDSHAKE: [&str; 4] = ["2025-11-25", "2025-06-18", "2025-03-26", "2024-11-05"];
const MODERN: &str = "2026-07-28";
const RULE: &str = "default: reaches the network";

/// Two tools: `echo` (allowed; answers with its arguments as structure and
/// one artifact) and `guarded` (asks; counts its runs, approved or not).
struct Desk {
    /// Runs of `guarded` (the module executing).
    ran: Arc<AtomicUsize>,
    changes: Option<watch::Sender<u64>>,
}

impl Desk {
    fn new(live: bool) -> Desk {
        Desk {
            ran: Arc::default(),
            changes: live.then(|| watch::channel(0).0),
        }
    }

    fn bump(&self) {
        self.changes
            .as_ref()
            .expect("a live desk")
            .send_modify(|n| *n += 1);
    }
}

impl Backend for Desk {
    fn list_tools(&self) -> Vec<Value> {
        let everything = |name: &str| {
            json!({"name": name, "title": "Echo", "description": "d",
                "inputSchema": {"type": "object"}, "outputSchema": {"type": "object"},
                "annotations": {"title": "Echo", "readOnlyHint": true, "destructiveHint": false,
                                "idempotentHint": true, "openWorldHint": false},
                "icons": [{"src": "data:image/png;base64,AA=="}],
                "execution": {"taskSupport": "forbidden"}, "_meta": {"x.y/z": 1}})
        };
        vec![everything("echo"), everything("guarded")]
    }

    async fn call_tool(
        &self,
        name: &str,
        arguments: Value,
        progress: Option<ProgressSink>,
    ) -> Result<ToolOutcome, CallError> {
        match name {
            "report" => {
                if let Some(p) = progress {
                    let _ = p.try_send(modhost::tools::Progress {
                        progress: 1.0,
                        total: None,
                        message: Some("half".into()),
                    });
                }
                Ok(ToolOutcome::failure("reported"))
            }
            "echo" => Ok(ToolOutcome {
                is_error: false,
                text: arguments.to_string(),
                structured: Some(arguments),
                artifacts: vec![ToolArtifact {
                    module: "m".into(),
                    artifact: ArtifactRef {
                        root: "out".into(),
                        path: "a.txt".into(),
                        media_type: None,
                        title: Some("A".into()),
                    },
                    file: Some("/h/a.txt".into()),
                }],
                network: None,
                enters_lockdown: None,
            }),
            // What the host's gate does with an `ask` nobody approved.
            "guarded" => Err(CallError::Refused(Refusal::NeedsApproval {
                tool: name.into(),
                rule: RULE.into(),
            })),
            other => Err(CallError::UnknownTool(other.into())),
        }
    }

    fn tool_list_changes(&self) -> Option<watch::Receiver<u64>> {
        self.changes.as_ref().map(watch::Sender::subscribe)
    }

    fn approval_rule(
        &self,
        name: &str,
        _lockdown: Option<&modhost::tools::Lockdown>,
    ) -> Option<crate::ApprovalAsk> {
        (name == "guarded").then(|| crate::ApprovalAsk {
            rule: RULE.to_owned(),
            lockdown: false,
        })
    }

    async fn call_tool_approved(
        &self,
        name: &str,
        arguments: Value,
        progress: Option<ProgressSink>,
        _workspace: &modhost::CallWorkspace,
        _lockdown: Option<&modhost::tools::Lockdown>,
    ) -> Result<ToolOutcome, CallError> {
        if name != "guarded" {
            return self.call_tool(name, arguments, progress).await;
        }
        self.ran.fetch_add(1, Ordering::SeqCst);
        Ok(ToolOutcome {
            is_error: false,
            text: "ran, approved by the user".into(),
            structured: None,
            artifacts: vec![],
            network: None,
            enters_lockdown: None,
        })
    }
}

fn keys(v: &Value) -> BTreeSet<String> {
    v.as_object()
        .unwrap_or_else(|| panic!("an object: {v}"))
        .keys()
        .cloned()
        .collect()
}

fn set(names: &[&str]) -> BTreeSet<String> {
    names.iter().map(|s| (*s).to_owned()).collect()
}

fn meta(capabilities: &Value) -> Value {
    json!({META_PROTOCOL_VERSION: MODERN, META_CLIENT_CAPABILITIES: capabilities})
}

async fn handshake(c: &mut Client, version: &str, capabilities: Value) -> Value {
    let init = c
        .ask(
            0,
            "initialize",
            json!({"protocolVersion": version, "capabilities": capabilities,
                   "clientInfo": {"name": "t", "version": "0"}}),
        )
        .await;
    c.send(json!({"jsonrpc": "2.0", "method": "notifications/initialized"}))
        .await;
    init["result"].clone()
}

/// Long enough for the announcer to have acted on a bump.
async fn settle() {
    tokio::time::sleep(Duration::from_millis(50)).await;
}

fn text(result: &Value) -> &str {
    result["content"][0]["text"].as_str().unwrap_or_default()
}

#[tokio::test]
async fn every_handshake_revision_is_served_in_its_own_shapes() {
    // What each revision's schema.ts defines, written out here rather than
    // read from the table, so a wrong row fails.
    let tool_fields: [(&str, &[&str]); 4] = [
        (
            "2025-11-25",
            &[
                "name",
                "title",
                "description",
                "inputSchema",
                "outputSchema",
                "annotations",
                "icons",
                "execution",
                "_meta",
            ],
        ),
        (
            "2025-06-18",
            &[
                "name",
                "title",
                "description",
                "inputSchema",
                "outputSchema",
                "annotations",
                "_meta",
            ],
        ),
        (
            "2025-03-26",
            &["name", "description", "inputSchema", "annotations"],
        ),
        ("2024-11-05", &["name", "description", "inputSchema"]),
    ];
    for (version, fields) in tool_fields {
        let mut c = Client::start(Arc::new(Desk::new(false)));
        let init = handshake(&mut c, version, json!({})).await;
        assert_eq!(init["protocolVersion"], json!(version));
        assert_eq!(
            init["capabilities"],
            json!({"tools": {"listChanged": false}})
        );
        let info = keys(&init["serverInfo"]);
        let old = matches!(version, "2024-11-05" | "2025-03-26");
        assert_eq!(info.contains("title"), !old, "{version}: {info:?}");
        assert_eq!(info.contains("description"), version == "2025-11-25");
        assert!(init.get("resultType").is_none());

        let list = c.ask(1, "tools/list", json!({})).await["result"].clone();
        assert_eq!(keys(&list), set(&["tools"]), "{version}: no cache hints");
        assert_eq!(keys(&list["tools"][0]), set(fields), "{version}");
        if version == "2025-03-26" {
            assert!(
                list["tools"][0]["annotations"]
                    .get("readOnlyHint")
                    .is_some()
            );
        }

        let call = c
            .ask(
                2,
                "tools/call",
                json!({"name": "echo", "arguments": {"a": 1}}),
            )
            .await["result"]
            .clone();
        assert_eq!(text(&call), "{\"a\":1}");
        if old {
            assert_eq!(keys(&call), set(&["content", "isError"]), "{version}");
            assert_eq!(
                call["content"].as_array().unwrap().len(),
                1,
                "no resource_link"
            );
        } else {
            assert_eq!(call["structuredContent"], json!({"a": 1}));
            let link = &call["content"][1];
            assert_eq!(link["type"], json!("resource_link"));
            assert_eq!(link["title"], json!("A"));
        }
        let error = c.ask(3, "tools/call", json!({"name": "nope"})).await;
        assert_eq!(error["error"]["code"], json!(-32602), "{version}");
        assert_eq!(c.ask(4, "ping", json!({})).await["result"], json!({}));
        // The stateless era's method needs its `_meta`.
        let discover = c.ask(5, "server/discover", json!({})).await;
        assert_eq!(discover["error"]["code"], json!(-32602), "{discover}");
        assert!(c.finish().await.is_empty());
    }
}

#[tokio::test]
async fn progress_carries_a_message_only_where_the_revision_defines_one() {
    for (version, message) in [("2024-11-05", false), ("2025-03-26", true)] {
        let mut c = Client::start(Arc::new(Desk::new(false)));
        handshake(&mut c, version, json!({})).await;
        c.send(json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call",
                      "params": {"name": "report", "_meta": {"progressToken": 5}}}))
            .await;
        let progress = c.recv().await;
        assert_eq!(progress["method"], json!("notifications/progress"));
        assert_eq!(progress["params"]["progress"], json!(1.0));
        assert_eq!(
            progress["params"].get("message").is_some(),
            message,
            "{version}: {progress}"
        );
        assert_eq!(c.recv().await["id"], json!(1));
        c.finish().await;
    }
}

#[tokio::test]
async fn the_stateless_revision_needs_no_handshake_and_names_itself_in_every_request() {
    let mut c = Client::start(Arc::new(Desk::new(false)));
    let discover = c
        .ask(1, "server/discover", json!({"_meta": meta(&json!({}))}))
        .await["result"]
        .clone();
    assert_eq!(discover["resultType"], json!("complete"));
    let versions: Vec<&str> = REVISIONS.iter().map(|r| r.version).collect();
    assert_eq!(discover["supportedVersions"], json!(versions));
    assert_eq!(
        discover["capabilities"]["tools"],
        json!({"listChanged": false})
    );
    assert_eq!(discover["cacheScope"], json!("private"));
    assert!(discover["ttlMs"].as_u64().is_some());
    assert_eq!(
        discover["_meta"]["io.modelcontextprotocol/serverInfo"]["name"],
        json!("modhost")
    );

    let list = c
        .ask(2, "tools/list", json!({"_meta": meta(&json!({}))}))
        .await["result"]
        .clone();
    assert_eq!(list["resultType"], json!("complete"));
    assert_eq!(list["ttlMs"], json!(super::protocol::TTL_MS_FIXED));
    let tool = keys(&list["tools"][0]);
    assert!(
        !tool.contains("execution"),
        "tasks left the core in 2026-07-28"
    );
    assert!(tool.contains("icons") && tool.contains("outputSchema"));

    let call = c
        .ask(
            3,
            "tools/call",
            json!({"name": "echo", "arguments": {"b": 2}, "_meta": meta(&json!({}))}),
        )
        .await["result"]
        .clone();
    assert_eq!(call["resultType"], json!("complete"));
    assert_eq!(call["structuredContent"], json!({"b": 2}));

    // Removed in this revision.
    for (id, method) in [(4, "ping"), (5, "logging/setLevel")] {
        let r = c.ask(id, method, json!({"_meta": meta(&json!({}))})).await;
        assert_eq!(r["error"]["code"], json!(-32601), "{method}: {r}");
    }
    // A version this server does not speak, and a handshake version named
    // per request: UnsupportedProtocolVersionError with what it speaks.
    for (id, requested) in [(6, "2099-01-01"), (7, "2025-06-18")] {
        let r = c
            .ask(
                id,
                "tools/list",
                json!({"_meta": {META_PROTOCOL_VERSION: requested, META_CLIENT_CAPABILITIES: {}}}),
            )
            .await;
        assert_eq!(r["error"]["code"], json!(-32022), "{r}");
        assert_eq!(r["error"]["data"]["requested"], json!(requested));
        assert_eq!(r["error"]["data"]["supported"], json!(versions));
    }
    // The capabilities are required too.
    let r = c
        .ask(
            8,
            "tools/list",
            json!({"_meta": {META_PROTOCOL_VERSION: MODERN}}),
        )
        .await;
    assert_eq!(r["error"]["code"], json!(-32602));
    assert!(
        r["error"]["message"]
            .as_str()
            .unwrap()
            .contains(META_CLIENT_CAPABILITIES)
    );
    // `initialize` naming the stateless revision gets the newest handshake one.
    let init = c
        .ask(
            9,
            "initialize",
            json!({"protocolVersion": MODERN, "capabilities": {}}),
        )
        .await;
    assert_eq!(init["result"]["protocolVersion"], json!("2025-11-25"));
    assert!(c.finish().await.is_empty());
}

/// Start a handshake client of `version` that declares `capabilities`, call
/// `guarded`, and return the elicitation request the server sent.
async fn ask_guarded(desk: &Arc<Desk>, version: &str, capabilities: Value) -> (Client, Value) {
    let mut c = Client::start(Arc::clone(desk));
    handshake(&mut c, version, capabilities).await;
    c.send(json!({"jsonrpc": "2.0", "id": 10, "method": "tools/call",
                  "params": {"name": "guarded", "arguments": {"url": "https://example.org"}}}))
        .await;
    let question = c.recv().await;
    (c, question)
}

#[tokio::test]
async fn a_handshake_client_is_asked_and_the_tool_runs_only_after_the_users_yes() {
    for version in ["2025-06-18", "2025-11-25"] {
        let desk = Arc::new(Desk::new(false));
        let (mut c, question) = ask_guarded(&desk, version, json!({"elicitation": {}})).await;
        assert_eq!(
            question["method"],
            json!("elicitation/create"),
            "{question}"
        );
        let params = &question["params"];
        assert!(params["message"].as_str().unwrap().contains("guarded"));
        assert_eq!(
            params["requestedSchema"]["properties"]["approve"]["type"],
            json!("boolean")
        );
        assert_eq!(
            params.get("mode").is_some(),
            version == "2025-11-25",
            "{params}"
        );
        assert_eq!(
            desk.ran.load(Ordering::SeqCst),
            0,
            "nothing runs while asking"
        );
        c.send(json!({"jsonrpc": "2.0", "id": question["id"],
                      "result": {"action": "accept", "content": {"approve": true}}}))
            .await;
        let result = c.recv().await;
        assert_eq!(result["id"], json!(10));
        assert_eq!(result["result"]["isError"], json!(false), "{result}");
        assert_eq!(desk.ran.load(Ordering::SeqCst), 1);
        c.finish().await;
    }
}

#[tokio::test]
async fn a_denied_or_unanswered_question_never_runs_the_tool() {
    let desk = Arc::new(Desk::new(false));
    let caps = json!({"elicitation": {"form": {}}});
    // Declined, dismissed, accepted without the tick, answered with an error.
    for answer in [
        json!({"result": {"action": "decline"}}),
        json!({"result": {"action": "cancel"}}),
        json!({"result": {"action": "accept", "content": {"approve": false}}}),
        json!({"result": {"action": "accept", "content": {}}}),
        json!({"error": {"code": -32603, "message": "no UI"}}),
    ] {
        let (mut c, question) = ask_guarded(&desk, "2025-11-25", caps.clone()).await;
        let mut response = json!({"jsonrpc": "2.0", "id": question["id"]});
        response
            .as_object_mut()
            .unwrap()
            .extend(answer.as_object().unwrap().clone());
        c.send(response).await;
        let result = c.recv().await;
        assert_eq!(
            result["result"]["isError"],
            json!(true),
            "{answer}: {result}"
        );
        assert!(text(&result["result"]).starts_with("not run"), "{result}");
        // A second answer to the same question, forged after the fact, runs nothing.
        c.send(json!({"jsonrpc": "2.0", "id": question["id"],
                      "result": {"action": "accept", "content": {"approve": true}}}))
            .await;
        assert_eq!(c.ask(11, "ping", json!({})).await["id"], json!(11));
        c.finish().await;
    }
    // Unanswered, then cancelled: the answer that comes later runs nothing.
    let (mut c, question) = ask_guarded(&desk, "2025-11-25", caps.clone()).await;
    c.send(
        json!({"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": 10}}),
    )
    .await;
    tokio::time::sleep(Duration::from_millis(50)).await;
    c.send(json!({"jsonrpc": "2.0", "id": question["id"],
                  "result": {"action": "accept", "content": {"approve": true}}}))
        .await;
    assert_eq!(
        c.ask(12, "ping", json!({})).await["id"],
        json!(12),
        "no response to the cancelled call"
    );
    c.finish().await;
    // Unanswered until the client goes away.
    let (c, _question) = ask_guarded(&desk, "2025-11-25", caps).await;
    assert!(c.finish().await.is_empty());
    assert_eq!(desk.ran.load(Ordering::SeqCst), 0, "the tool never ran");
}

#[tokio::test]
async fn a_client_that_cannot_be_asked_is_told_how_to_allow_the_tool() {
    let desk = Arc::new(Desk::new(false));
    // No elicitation capability; a URL-only one; a revision without elicitation.
    for (version, caps) in [
        ("2025-06-18", json!({})),
        ("2025-11-25", json!({"elicitation": {"url": {}}})),
        ("2025-03-26", json!({"elicitation": {}})),
        ("2024-11-05", json!({"elicitation": {}})),
    ] {
        let mut c = Client::start(Arc::clone(&desk));
        handshake(&mut c, version, caps).await;
        let result = c
            .ask(1, "tools/call", json!({"name": "guarded", "arguments": {}}))
            .await;
        assert_eq!(
            result["result"]["isError"],
            json!(true),
            "{version}: {result}"
        );
        let says = text(&result["result"]);
        assert!(
            says.contains("config.toml") && says.contains("tool = \"guarded\""),
            "{says}"
        );
        assert!(says.contains("--delegate-approval"), "{says}");
        c.finish().await;
    }
    let mut c = Client::start(Arc::clone(&desk));
    let result = c
        .ask(
            1,
            "tools/call",
            json!({"name": "guarded", "_meta": meta(&json!({}))}),
        )
        .await;
    // 2026-07-28: a capability the request did not declare is -32021.
    assert_eq!(result["error"]["code"], json!(-32021), "{result}");
    assert!(
        result["error"]["data"]["remedy"]
            .as_str()
            .unwrap_or_default()
            .contains("--delegate-approval")
    );
    c.finish().await;
    assert_eq!(desk.ran.load(Ordering::SeqCst), 0);
}

#[tokio::test]
async fn the_stateless_revision_asks_with_input_required_and_a_state_that_cannot_be_forged() {
    let desk = Arc::new(Desk::new(false));
    let mut c = Client::start(Arc::clone(&desk));
    let caps = json!({"elicitation": {}});
    let args = json!({"url": "https://example.org"});
    let call = |id: i64, extra: Value| {
        let mut params = json!({"name": "guarded", "arguments": args, "_meta": meta(&caps)});
        params
            .as_object_mut()
            .unwrap()
            .extend(extra.as_object().unwrap().clone());
        (id, params)
    };
    let approve = json!({"approval": {"action": "accept", "content": {"approve": true}}});

    let (id, params) = call(1, json!({}));
    let asked = c.ask(id, "tools/call", params).await["result"].clone();
    assert_eq!(asked["resultType"], json!("input_required"), "{asked}");
    let question = &asked["inputRequests"]["approval"];
    assert_eq!(question["method"], json!("elicitation/create"));
    assert_eq!(question["params"]["mode"], json!("form"));
    let state = asked["requestState"].as_str().unwrap().to_owned();
    assert_eq!(desk.ran.load(Ordering::SeqCst), 0);

    // A made-up state, and the right state on other arguments: refused.
    let (id, params) = call(
        2,
        json!({"requestState": "00".repeat(16), "inputResponses": approve}),
    );
    assert_eq!(
        c.ask(id, "tools/call", params).await["error"]["code"],
        json!(-32602)
    );
    let (id, mut params) = call(3, json!({"requestState": state, "inputResponses": approve}));
    params["arguments"] = json!({"url": "https://evil.example"});
    assert_eq!(
        c.ask(id, "tools/call", params).await["error"]["code"],
        json!(-32602)
    );
    // That state was presented once, so it is spent even for the right call.
    let (id, params) = call(4, json!({"requestState": state, "inputResponses": approve}));
    assert_eq!(
        c.ask(id, "tools/call", params).await["error"]["code"],
        json!(-32602)
    );
    assert_eq!(desk.ran.load(Ordering::SeqCst), 0);

    // Asked again; a retry without the answer is asked once more.
    let (id, params) = call(5, json!({}));
    let state = c.ask(id, "tools/call", params).await["result"]["requestState"].clone();
    let (id, params) = call(6, json!({"requestState": state}));
    let again = c.ask(id, "tools/call", params).await["result"].clone();
    assert_eq!(again["resultType"], json!("input_required"));
    // Declined: not run.
    let (id, params) = call(
        7,
        json!({"requestState": again["requestState"], "inputResponses": {"approval": {"action": "decline"}}}),
    );
    let declined = c.ask(id, "tools/call", params).await["result"].clone();
    assert_eq!(declined["isError"], json!(true));
    assert_eq!(desk.ran.load(Ordering::SeqCst), 0);

    // Approved: runs once, and the same state cannot run it again.
    let (id, params) = call(8, json!({}));
    let state = c.ask(id, "tools/call", params).await["result"]["requestState"].clone();
    let (id, params) = call(9, json!({"requestState": state, "inputResponses": approve}));
    let ran = c.ask(id, "tools/call", params.clone()).await["result"].clone();
    assert_eq!(ran["isError"], json!(false), "{ran}");
    assert_eq!(ran["resultType"], json!("complete"));
    assert_eq!(desk.ran.load(Ordering::SeqCst), 1);
    let replayed = c.ask(10, "tools/call", params).await;
    assert_eq!(replayed["error"]["code"], json!(-32602), "{replayed}");
    assert_eq!(
        desk.ran.load(Ordering::SeqCst),
        1,
        "a replayed approval runs nothing"
    );
    c.finish().await;
}

#[tokio::test]
async fn a_handshake_client_hears_of_list_changes_after_its_handshake_only() {
    let quiet = Arc::new(Desk::new(false));
    let mut c = Client::start(quiet);
    let init = handshake(&mut c, "2025-06-18", json!({})).await;
    assert_eq!(init["capabilities"]["tools"]["listChanged"], json!(false));
    c.finish().await;

    for version in HANDSHAKE {
        let desk = Arc::new(Desk::new(true));
        let mut c = Client::start(Arc::clone(&desk));
        let init = c
            .ask(
                0,
                "initialize",
                json!({"protocolVersion": version, "capabilities": {}}),
            )
            .await;
        assert_eq!(
            init["result"]["capabilities"]["tools"]["listChanged"],
            json!(true)
        );
        // Not yet initialized: nothing is announced.
        desk.bump();
        settle().await;
        assert_eq!(
            c.ask(1, "ping", json!({})).await["id"],
            json!(1),
            "{version}"
        );
        c.send(json!({"jsonrpc": "2.0", "method": "notifications/initialized"}))
            .await;
        assert_eq!(c.ask(2, "ping", json!({})).await["id"], json!(2));
        desk.bump();
        assert_eq!(
            c.recv().await,
            json!({"jsonrpc": "2.0", "method": "notifications/tools/list_changed"}),
            "{version}"
        );
        c.finish().await;
    }
}

#[tokio::test]
async fn a_stateless_client_hears_of_list_changes_on_the_stream_it_opened() {
    let desk = Arc::new(Desk::new(true));
    let mut c = Client::start(Arc::clone(&desk));
    let discover = c
        .ask(1, "server/discover", json!({"_meta": meta(&json!({}))}))
        .await;
    assert_eq!(
        discover["result"]["capabilities"]["tools"]["listChanged"],
        json!(true)
    );
    let list = c
        .ask(2, "tools/list", json!({"_meta": meta(&json!({}))}))
        .await;
    assert_eq!(list["result"]["ttlMs"], json!(super::protocol::TTL_MS_LIVE));
    // A stateless client gets no unsolicited notification.
    desk.bump();
    settle().await;
    assert_eq!(
        c.ask(3, "tools/list", json!({"_meta": meta(&json!({}))}))
            .await["id"],
        json!(3)
    );

    let ack = c
        .ask(
            7,
            "subscriptions/listen",
            json!({"_meta": meta(&json!({})), "notifications": {"toolsListChanged": true, "promptsListChanged": true}}),
        )
        .await;
    assert_eq!(
        ack["method"],
        json!("notifications/subscriptions/acknowledged")
    );
    assert_eq!(ack["params"]["_meta"][META_SUBSCRIPTION_ID], json!(7));
    assert_eq!(
        ack["params"]["notifications"],
        json!({"toolsListChanged": true})
    );
    desk.bump();
    let changed = c.recv().await;
    assert_eq!(changed["method"], json!("notifications/tools/list_changed"));
    assert_eq!(changed["params"]["_meta"][META_SUBSCRIPTION_ID], json!(7));
    // A second stream that asked for nothing hears nothing; closing the
    // first ends its notifications.
    let quiet = c
        .ask(
            8,
            "subscriptions/listen",
            json!({"_meta": meta(&json!({})), "notifications": {}}),
        )
        .await;
    assert_eq!(quiet["params"]["notifications"], json!({}));
    c.send(
        json!({"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": 7}}),
    )
    .await;
    assert_eq!(
        c.ask(9, "tools/list", json!({"_meta": meta(&json!({}))}))
            .await["id"],
        json!(9)
    );
    desk.bump();
    settle().await;
    assert_eq!(
        c.ask(10, "tools/list", json!({"_meta": meta(&json!({}))}))
            .await["id"],
        json!(10)
    );
    // Stopping closes the open stream with its result.
    let rest = c.finish().await;
    assert_eq!(rest.len(), 1, "{rest:?}");
    assert_eq!(rest[0]["id"], json!(8));
    assert_eq!(rest[0]["result"]["resultType"], json!("complete"));
    assert_eq!(rest[0]["result"]["_meta"][META_SUBSCRIPTION_ID], json!(8));
}

/// A client that opened every stream it may, sent more than the server can
/// write, stopped reading and closed its input: the streams' closing results
/// cannot be queued, the server waits on them, and a stop (a termination
/// signal) still ends it.
#[tokio::test]
async fn a_stop_ends_a_server_still_closing_the_streams_of_a_client_that_stopped_reading() {
    use tokio::io::AsyncWriteExt;
    let (mut client_in, server_in) = tokio::io::duplex(1 << 20);
    // A pipe of a few bytes that nobody reads.
    let (server_out, _unread) = tokio::io::duplex(64);
    let mut lines = String::new();
    for id in 0..super::list_changes::MAX_SUBSCRIPTIONS {
        let listen = json!({"jsonrpc": "2.0", "id": format!("s{id}"), "method": "subscriptions/listen",
            "params": {"_meta": meta(&json!({})), "notifications": {"toolsListChanged": true}}});
        lines.push_str(&format!("{listen}\n"));
    }
    for id in 0..40 {
        let ping = json!({"jsonrpc": "2.0", "id": format!("p{id}"), "method": "ping",
            "params": {"_meta": meta(&json!({}))}});
        lines.push_str(&format!("{ping}\n"));
    }
    client_in.write_all(lines.as_bytes()).await.unwrap();
    drop(client_in);
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let server = tokio::spawn(super::serve_until(
        tokio::io::BufReader::new(server_in),
        server_out,
        Arc::new(Desk::new(true)),
        async {
            let _ = stopped.await;
        },
    ));
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert!(!server.is_finished(), "the server had room for everything");
    stop.send(()).unwrap();
    tokio::time::timeout(Duration::from_secs(10), server)
        .await
        .expect("the stop did not end the server")
        .unwrap()
        .unwrap();
}

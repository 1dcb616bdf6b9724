//! The server loop driven through the in-memory client ([`crate::test_client`]).

use super::*;
use crate::test_client::Client;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;
use tokio::io::AsyncWriteExt;

/// A backend with three tools: `echo` answers at once, `slow` reports
/// progress then waits forever, `bad` rejects its input.
#[derive(Default)]
struct Fake {
    /// How many `slow` calls were dropped (the cancellation path).
    dropped: Arc<AtomicUsize>,
}

struct DropCounter(Arc<AtomicUsize>);
impl Drop for DropCounter {
    fn drop(&mut self) {
        self.0.fetch_add(1, Ordering::SeqCst);
    }
}

impl Backend for Fake {
    fn list_tools(&self) -> Vec<Value> {
        vec![json!({"name": "echo", "inputSchema": {"type": "object"}})]
    }

    async fn call_tool_in(
        &self,
        name: &str,
        arguments: Value,
        progress: Option<modhost::tools::ProgressSink>,
        workspace: &modhost::CallWorkspace,
        _lockdown: Option<&Lockdown>,
    ) -> Result<ToolOutcome, CallError> {
        match name {
            "where" => Ok(ToolOutcome {
                is_error: false,
                text: format!("{workspace:?}"),
                structured: None,
                artifacts: vec![],
                network: None,
                enters_lockdown: None,
            }),
            other => self.call_tool(other, arguments, progress).await,
        }
    }

    async fn call_tool(
        &self,
        name: &str,
        arguments: Value,
        progress: Option<modhost::tools::ProgressSink>,
    ) -> Result<ToolOutcome, CallError> {
        match name {
            "echo" => Ok(ToolOutcome {
                is_error: false,
                text: arguments.to_string(),
                structured: Some(arguments),
                artifacts: vec![],
                network: None,
                enters_lockdown: None,
            }),
            "bad" => Ok(ToolOutcome::failure(
                "bad failed (invalid_input)\nProblems:\n- /x: required",
            )),
            "slow" => {
                let _guard = DropCounter(Arc::clone(&self.dropped));
                if let Some(p) = progress {
                    for i in [1.0, 1.0, 2.0] {
                        let _ = p.try_send(Progress {
                            progress: i,
                            total: Some(10.0),
                            message: None,
                        });
                    }
                }
                std::future::pending::<()>().await;
                unreachable!()
            }
            other => Err(CallError::UnknownTool(other.to_owned())),
        }
    }
}

#[tokio::test]
async fn lifecycle_list_call_and_unknown_method() {
    let mut c = Client::start(Arc::new(Fake::default()));
    c.send(json!({"jsonrpc": "2.0", "id": 1, "method": "initialize",
                  "params": {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "t", "version": "0"}}}))
        .await;
    let init = c.recv().await;
    assert_eq!(init["id"], json!(1));
    assert_eq!(init["result"]["protocolVersion"], json!("2025-06-18"));
    assert_eq!(
        init["result"]["capabilities"]["tools"],
        json!({"listChanged": false})
    );
    c.send(json!({"jsonrpc": "2.0", "method": "notifications/initialized"}))
        .await;
    c.send(json!({"jsonrpc": "2.0", "id": "p", "method": "ping"}))
        .await;
    assert_eq!(
        c.recv().await,
        json!({"jsonrpc": "2.0", "id": "p", "result": {}})
    );
    c.send(json!({"jsonrpc": "2.0", "id": 2, "method": "tools/list", "params": {}}))
        .await;
    assert_eq!(c.recv().await["result"]["tools"][0]["name"], json!("echo"));
    c.send(json!({"jsonrpc": "2.0", "id": 3, "method": "tools/call", "params": {"name": "echo", "arguments": {"a": 1}}}))
        .await;
    let r = c.recv().await;
    assert_eq!(r["result"]["structuredContent"], json!({"a": 1}));
    assert_eq!(
        r["result"]["content"][0],
        json!({"type": "text", "text": "{\"a\":1}"})
    );
    assert_eq!(r["result"]["isError"], json!(false));
    c.send(json!({"jsonrpc": "2.0", "id": 4, "method": "tools/call", "params": {"name": "bad", "arguments": {}}})).await;
    let r = c.recv().await;
    assert_eq!(r["result"]["isError"], json!(true));
    assert!(
        r["result"]["content"][0]["text"]
            .as_str()
            .unwrap()
            .contains("/x: required")
    );
    c.send(json!({"jsonrpc": "2.0", "id": 5, "method": "tools/call", "params": {"name": "nope"}}))
        .await;
    assert_eq!(c.recv().await["error"]["code"], json!(-32602));
    c.send(json!({"jsonrpc": "2.0", "id": 6, "method": "resources/list"}))
        .await;
    assert_eq!(c.recv().await["error"]["code"], json!(-32601));
    c.send(json!([1, 2])).await;
    assert_eq!(c.recv().await["error"]["code"], json!(-32600));
    c.to_server.take();
    c.server.await.unwrap().unwrap();
}

#[tokio::test]
async fn unsupported_version_gets_the_latest() {
    let mut c = Client::start(Arc::new(Fake::default()));
    c.send(json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {"protocolVersion": "2024-10-01"}})).await;
    assert_eq!(
        c.recv().await["result"]["protocolVersion"],
        json!(revision::latest_handshake().version)
    );
}

#[tokio::test]
async fn progress_is_forwarded_increasing_and_cancel_drops_the_call_without_a_response() {
    let fake = Arc::new(Fake::default());
    let dropped = Arc::clone(&fake.dropped);
    let mut c = Client::start(fake);
    c.send(json!({"jsonrpc": "2.0", "id": 7, "method": "tools/call",
                  "params": {"name": "slow", "arguments": {}, "_meta": {"progressToken": "tok"}}}))
        .await;
    let first = c.recv().await;
    assert_eq!(first["method"], json!("notifications/progress"));
    assert_eq!(
        first["params"],
        json!({"progressToken": "tok", "progress": 1.0, "total": 10.0})
    );
    // The repeated 1.0 is not forwarded; 2.0 is.
    assert_eq!(c.recv().await["params"]["progress"], json!(2.0));
    // While `slow` runs, the server still reads and answers.
    c.send(json!({"jsonrpc": "2.0", "id": 8, "method": "ping"}))
        .await;
    assert_eq!(c.recv().await["id"], json!(8));
    c.send(json!({"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": 7, "reason": "user"}}))
        .await;
    c.send(json!({"jsonrpc": "2.0", "id": 9, "method": "ping"}))
        .await;
    // The next line is the ping's answer: the cancelled call gets none.
    assert_eq!(c.recv().await["id"], json!(9));
    for _ in 0..100 {
        if dropped.load(Ordering::SeqCst) == 1 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    assert_eq!(
        dropped.load(Ordering::SeqCst),
        1,
        "the call's future was dropped"
    );
    c.to_server.take();
    c.server.await.unwrap().unwrap();
    assert!(
        c.from_server.next_line().await.unwrap().is_none(),
        "nothing after EOF"
    );
}

#[tokio::test]
async fn eof_stops_running_calls_before_returning() {
    let fake = Arc::new(Fake::default());
    let dropped = Arc::clone(&fake.dropped);
    let mut c = Client::start(fake);
    for id in [1, 2] {
        c.send(
            json!({"jsonrpc": "2.0", "id": id, "method": "tools/call", "params": {"name": "slow"}}),
        )
        .await;
    }
    c.send(json!({"jsonrpc": "2.0", "id": 3, "method": "ping"}))
        .await;
    assert_eq!(c.recv().await["id"], json!(3));
    c.to_server.take();
    tokio::time::timeout(Duration::from_secs(5), c.server)
        .await
        .expect("prompt exit")
        .unwrap()
        .unwrap();
    assert_eq!(dropped.load(Ordering::SeqCst), 2);
}

#[tokio::test]
async fn a_bad_line_is_answered_and_the_server_reads_on() {
    let mut c = Client::start(Arc::new(Fake::default()));
    let w = c.to_server.as_mut().unwrap();
    w.write_all(b"{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"\xff\xfe\"}\n")
        .await
        .unwrap();
    let r = c.recv().await;
    assert_eq!(r["error"]["code"], json!(-32700), "{r}");
    assert_eq!(r["id"], Value::Null);
    c.send(json!({"jsonrpc": "2.0", "id": 2, "method": "ping"}))
        .await;
    assert_eq!(c.recv().await["id"], json!(2));
}

#[tokio::test]
async fn calls_beyond_the_cap_are_refused_and_the_running_ones_go_on() {
    let fake = Arc::new(Fake::default());
    let dropped = Arc::clone(&fake.dropped);
    let mut c = Client::start(fake);
    for id in 0..MAX_CONCURRENT_CALLS as i64 {
        c.send(
            json!({"jsonrpc": "2.0", "id": id, "method": "tools/call", "params": {"name": "slow"}}),
        )
        .await;
    }
    c.send(
        json!({"jsonrpc": "2.0", "id": 100, "method": "tools/call", "params": {"name": "echo"}}),
    )
    .await;
    let refused = c.recv().await;
    assert_eq!(refused["id"], json!(100));
    assert_eq!(refused["result"]["isError"], json!(true));
    let text = refused["result"]["content"][0]["text"].as_str().unwrap();
    assert!(text.contains("16 calls"), "{text}");
    // Cancelling one frees a place.
    c.send(
        json!({"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": 0}}),
    )
    .await;
    for _ in 0..100 {
        if dropped.load(Ordering::SeqCst) == 1 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    c.send(json!({"jsonrpc": "2.0", "id": 101, "method": "tools/call", "params": {"name": "echo", "arguments": {"a": 1}}}))
        .await;
    let ran = c.recv().await;
    assert_eq!(ran["id"], json!(101));
    assert_eq!(ran["result"]["isError"], json!(false), "{ran}");
    c.to_server.take();
    c.server.await.unwrap().unwrap();
    assert_eq!(dropped.load(Ordering::SeqCst), MAX_CONCURRENT_CALLS);
}

#[tokio::test]
async fn the_clients_first_root_is_the_workspace_asked_after_the_handshake_and_on_change() {
    let dir = tempfile::tempdir().unwrap();
    let (first, second) = (dir.path().join("a b"), dir.path().join("second"));
    std::fs::create_dir_all(&first).unwrap();
    std::fs::create_dir_all(&second).unwrap();
    let mut c = Client::start(Arc::new(Fake::default()));
    c.send(json!({"jsonrpc": "2.0", "id": 1, "method": "initialize",
                  "params": {"protocolVersion": "2025-06-18", "capabilities": {"roots": {"listChanged": true}}}}))
        .await;
    c.recv().await;
    let where_am_i =
        json!({"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {"name": "where"}});
    c.send(where_am_i.clone()).await;
    assert_eq!(
        c.recv().await["result"]["content"][0]["text"],
        json!("Host")
    );
    c.send(json!({"jsonrpc": "2.0", "method": "notifications/initialized"}))
        .await;
    let ask = c.recv().await;
    assert_eq!(ask["method"], json!("roots/list"), "{ask}");
    c.send(
        json!({"jsonrpc": "2.0", "id": ask["id"], "result": {"roots": [
            {"uri": "file://".to_owned() + &first.display().to_string().replace(' ', "%20")},
            {"uri": format!("file://{}", second.display())},
        ]}}),
    )
    .await;
    c.send(where_am_i.clone()).await;
    let expected = format!(
        "{:?}",
        modhost::CallWorkspace::Given(std::fs::canonicalize(&first).unwrap())
    );
    assert_eq!(
        c.recv().await["result"]["content"][0]["text"],
        json!(expected)
    );
    // The roots change: asked again, and the new answer applies; a late
    // answer to the old question does not.
    c.send(json!({"jsonrpc": "2.0", "method": "notifications/roots/list_changed"}))
        .await;
    let again = c.recv().await;
    assert_ne!(again["id"], ask["id"]);
    c.send(
        json!({"jsonrpc": "2.0", "id": ask["id"], "result": {"roots": [
        {"uri": format!("file://{}", dir.path().display())}]}}),
    )
    .await;
    c.send(
        json!({"jsonrpc": "2.0", "id": again["id"], "result": {"roots": [
        {"uri": format!("file://{}", second.display())}]}}),
    )
    .await;
    c.send(where_am_i).await;
    let expected = format!(
        "{:?}",
        modhost::CallWorkspace::Given(std::fs::canonicalize(&second).unwrap())
    );
    assert_eq!(
        c.recv().await["result"]["content"][0]["text"],
        json!(expected)
    );
}

#[tokio::test]
async fn a_client_without_roots_is_never_asked() {
    let mut c = Client::start(Arc::new(Fake::default()));
    c.send(
        json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {"capabilities": {}}}),
    )
    .await;
    c.recv().await;
    c.send(json!({"jsonrpc": "2.0", "method": "notifications/initialized"}))
        .await;
    c.send(json!({"jsonrpc": "2.0", "id": 2, "method": "ping"}))
        .await;
    assert_eq!(
        c.recv().await["id"],
        json!(2),
        "no roots/list before the ping's answer"
    );
}

//! `modhost mcp --http` attacked by a reviewer who did not write it (issue
//! 35): callers that try to be someone else, to see what is hidden from
//! them, to reuse what another principal was given, or to run more than
//! the user approved; and `modhost token` leaking what it makes. Each test
//! is an attack against the real binary; it passes when the attack fails.
//!
//! `mcp_http_auth.rs` holds the authors' own attacks at the door (forged,
//! expired, foreign tokens); `host/mcp/src/http/auth/attack_tests.rs` the
//! reviewer's attacks on the authenticator and the signing key.

use std::io::Write;
use std::os::unix::fs::PermissionsExt;
use std::os::unix::process::CommandExt;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use crate::mcp_http::{HttpMcp, Reply, modern_headers, with_meta};
use crate::support::{Fixture, Home, binaries};

const ECHO: &str = "echo__echo_echo";
/// A client that can answer a form question (2026-07-28 `_meta`).
const CAN_ANSWER: &str = r#"{"elicitation": {"form": {}}}"#;
/// The uid another local account runs as (`nobody`).
const OTHER_UID: u32 = 65534;

fn can_answer() -> Value {
    serde_json::from_str(CAN_ANSWER).unwrap()
}

/// A static token for `principal`: the token and its `[[http.tokens]]` lines.
fn token_for(home: &Home, principal: &str) -> (String, String) {
    let made = home.run(&[
        "token",
        "new",
        "--principal",
        principal,
        "--scope",
        "mcp:tools",
        "--json",
    ]);
    made.expect_code(0);
    let made = made.json();
    (
        made["token"].as_str().unwrap().to_owned(),
        made["config_lines"].as_str().unwrap().to_owned(),
    )
}

/// A 2026-07-28 request as the holder of `token`.
fn modern_as(
    server: &HttpMcp,
    token: &str,
    id: i64,
    method: &str,
    params: Value,
    capabilities: &Value,
) -> Reply {
    let params = with_meta(params, capabilities);
    let body = json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params});
    let mut headers = modern_headers(method, &params);
    headers.push(("Authorization".into(), format!("Bearer {token}")));
    server.post(&headers, &body.to_string())
}

/// `initialize` (2025-11-25) and `notifications/initialized` as the holder
/// of `token`: the session id.
#[track_caller]
fn handshake_as(server: &HttpMcp, token: &str) -> String {
    let auth = ("Authorization".to_owned(), format!("Bearer {token}"));
    let init = json!({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
        "protocolVersion": "2025-11-25", "capabilities": {"elicitation": {}},
        "clientInfo": {"name": "attacks_http_auth", "version": "0"}}});
    let reply = server.post(std::slice::from_ref(&auth), &init.to_string());
    assert_eq!(reply.status, 200, "{reply:?}");
    let session = reply
        .header("mcp-session-id")
        .unwrap_or_else(|| panic!("no session id: {reply:?}"))
        .to_owned();
    let initialized = json!({"jsonrpc": "2.0", "method": "notifications/initialized"});
    let accepted = server.post(
        &session_headers(&session, Some(token)),
        &initialized.to_string(),
    );
    assert_eq!(accepted.status, 202, "{accepted:?}");
    session
}

fn session_headers(session: &str, token: Option<&str>) -> Vec<(String, String)> {
    let mut headers = vec![
        ("Mcp-Session-Id".to_owned(), session.to_owned()),
        ("MCP-Protocol-Version".to_owned(), "2025-11-25".to_owned()),
    ];
    if let Some(token) = token {
        headers.push(("Authorization".into(), format!("Bearer {token}")));
    }
    headers
}

/// A request in `session` as the holder of `token`.
fn in_session_as(
    server: &HttpMcp,
    token: &str,
    session: &str,
    id: i64,
    method: &str,
    params: &Value,
) -> Reply {
    let body = json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params});
    server.post(&session_headers(session, Some(token)), &body.to_string())
}

/// Every audit record, once at least `least` of them satisfy `enough` (the
/// writer appends off the call's path), or after 30 s.
fn audit_records(home: &Home, least: usize, enough: impl Fn(&Value) -> bool) -> Vec<Value> {
    let started = Instant::now();
    loop {
        let run = home.run(&["audit", "show", "--json"]);
        run.expect_code(0);
        let records = run.json().as_array().cloned().unwrap_or_default();
        if records.iter().filter(|r| enough(r)).count() >= least
            || started.elapsed() > Duration::from_secs(30)
        {
            return records;
        }
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// The `requestState` of an `input_required` answer.
#[track_caller]
fn request_state(reply: &Reply) -> String {
    let message = reply.json();
    message["result"]["requestState"]
        .as_str()
        .unwrap_or_else(|| panic!("no requestState (not asked?): {message}"))
        .to_owned()
}

/// `params` of a call of `ECHO` with `arguments`, retried with `state`
/// and the user's yes.
fn approved_retry(arguments: &Value, state: &str) -> Value {
    json!({
        "name": ECHO, "arguments": arguments, "requestState": state,
        "inputResponses": {"approval": {"action": "accept", "content": {"approve": true}}},
    })
}

/// sha256 of `bytes` through coreutils (no hashing crate in the tests).
fn sha256_hex(bytes: &[u8]) -> String {
    let mut child = Command::new("sha256sum")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .expect("run sha256sum");
    child.stdin.take().unwrap().write_all(bytes).unwrap();
    let output = child.wait_with_output().expect("sha256sum output");
    String::from_utf8_lossy(&output.stdout)
        .split_whitespace()
        .next()
        .unwrap_or_default()
        .to_owned()
}

/// A module (a shell script) `id` with one capability `<id>.noop` and a
/// guide whose text is `guide`, pinned.
fn install_guided_module(home: &Home, id: &str, guide: &str) {
    let folder = home.modules().join(id);
    std::fs::create_dir_all(folder.join("knowledge")).expect("module folder");
    std::fs::write(folder.join("knowledge/intro.md"), guide).expect("guide");
    let descriptor = json!({
        "id": id, "version": "1.0.0",
        "capabilities": [{"id": format!("{id}.noop"), "description": "does nothing",
                          "input_schema": {"type": "object"}}],
        "knowledge": {
            "overlays": [{"id": "intro", "path": "knowledge/intro.md",
                          "sha256": sha256_hex(guide.as_bytes())}],
        }
    });
    let script = format!(
        "#!/bin/sh\nIFS= read -r line\nid=${{line#*\\\"id\\\":}}\nid=${{id%%,*}}\nprintf '%s\\n' '{{\"jsonrpc\":\"2.0\",\"id\":'\"$id\"',\"result\":{descriptor}}}'\n"
    );
    let path = folder.join(id);
    std::fs::write(&path, script).expect("module script");
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).expect("chmod");
    home.run(&["pin", id]).expect_code(0);
}

// ---------------------------------------------------------------------
// Findings: these fail until the server changes.
// ---------------------------------------------------------------------

/// FINDING (medium). Without `[[http.tokens]]` or `[http.oauth]` the
/// server listens on the loopback and treats every request as the local
/// user, `local:<operator>`, with the operator's rules and quotas. Any
/// other account on the machine (or any container sharing the pod's
/// network namespace) reaches 127.0.0.1 too: it runs the operator's tools
/// as the operator, and the audit log and the result say the operator did.
/// Over stdio only the operator's own client could. A request from another
/// account must not be served as the operator (refuse it, or name it as
/// someone else: the peer's uid is knowable on the loopback).
#[test]
fn another_local_account_is_not_the_operator_on_an_open_loopback_server() {
    let home = Home::new();
    home.install(Fixture::Echo, "echo");
    let server = HttpMcp::start(&home, |_| {});
    // The operator's own call, to learn its principal.
    let own = server
        .modern(
            1,
            "tools/call",
            json!({"name": ECHO, "arguments": {}}),
            &json!({}),
        )
        .json();
    let operator = own["result"]["_meta"]["dev.modhost/principal"]
        .as_str()
        .unwrap_or_else(|| panic!("no principal in {own}"))
        .to_owned();
    assert!(operator.starts_with("local:"), "{operator}");
    assert_eq!(home.invocations("echo", "echo.echo"), 1);

    let params = with_meta(json!({"name": ECHO, "arguments": {}}), &json!({}));
    let body = json!({"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": params});
    let mut curl = Command::new("curl");
    curl.args(["-s", "-o", "-", "-w", "\n%{http_code}"])
        .arg(server.url("/mcp"))
        .args(["-H", "Content-Type: application/json"])
        .args(["-H", "Accept: application/json"]);
    for (name, value) in modern_headers("tools/call", &params) {
        curl.args(["-H", &format!("{name}: {value}")]);
    }
    curl.args(["--data-binary", &body.to_string()])
        .uid(OTHER_UID)
        .gid(OTHER_UID)
        .env_clear()
        .current_dir("/");
    let output = curl.output().unwrap_or_else(|e| {
        panic!("this test needs curl, run as another user (uid {OTHER_UID}): {e}")
    });
    let said = String::from_utf8_lossy(&output.stdout).into_owned();
    let (answer, status) = said.rsplit_once('\n').unwrap_or((&said, ""));
    assert!(
        !status.is_empty() && status != "000",
        "curl as uid {OTHER_UID} reached no server: {output:?}"
    );
    let answer: Value = serde_json::from_str(answer).unwrap_or(Value::Null);
    let named = answer["result"]["_meta"]["dev.modhost/principal"].as_str();
    let ran = home.invocations("echo", "echo.echo") - 1;
    assert_ne!(
        named,
        Some(operator.as_str()),
        "uid {OTHER_UID} ran {ECHO} as the operator (HTTP {status}, ran {ran} time(s)): {answer}"
    );
    let records = audit_records(&home, 1 + ran, |r| r["tool"] == ECHO);
    let as_operator = records
        .iter()
        .filter(|r| r["tool"] == ECHO && r["principal"] == json!(operator))
        .count();
    assert_eq!(
        as_operator, 1,
        "the audit log says the operator made another account's call: {records:#?}"
    );
}

/// FINDING (low). A caller to whom every tool of a module is denied is
/// not offered them, and the knowledge tool refuses that module's guides;
/// yet the knowledge tool's own schema, listed to that caller, names the
/// module (its `module` enum lists every module with guides as the local
/// user sees them). `tools/list` then tells a caller what the operator
/// hid from it. The enum a caller sees should list only the modules whose
/// guides it may read.
#[test]
fn the_knowledge_tool_names_no_module_hidden_from_the_caller() {
    let home = Home::new();
    install_guided_module(&home, "handbook", "How to use the handbook.\n");
    install_guided_module(&home, "payroll", "Payroll: the launch codes are 0000.\n");
    let (ci, ci_lines) = token_for(&home, "ci-bot");
    home.write_config(&format!(
        "{ci_lines}\n[[approval.rules]]\nname = \"ci never sees payroll\"\nprincipal = \"ci-*\"\n\
         module = \"payroll\"\ndecision = \"deny\"\n"
    ));
    let server = HttpMcp::start(&home, |_| {});
    let listed = modern_as(&server, &ci, 1, "tools/list", json!({}), &json!({})).json();
    let tools = listed["result"]["tools"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    let names: Vec<&str> = tools.iter().filter_map(|t| t["name"].as_str()).collect();
    assert!(names.contains(&"modhost__knowledge"), "{names:?}");
    assert!(names.contains(&"handbook__handbook_noop"), "{names:?}");
    assert!(!names.contains(&"payroll__payroll_noop"), "{names:?}");
    // Held: the guide itself is not served to the caller.
    let read = modern_as(
        &server,
        &ci,
        2,
        "tools/call",
        json!({"name": "modhost__knowledge", "arguments": {"module": "payroll"}}),
        &json!({}),
    )
    .json();
    assert!(!read.to_string().contains("launch codes"), "{read}");
    // The finding: the list names the hidden module.
    let knowledge = tools
        .iter()
        .find(|t| t["name"] == "modhost__knowledge")
        .unwrap();
    assert!(
        !knowledge.to_string().contains("payroll"),
        "tools/list names the module hidden from ci-bot: {}",
        knowledge["inputSchema"]
    );
}

/// FINDING (low). A tool denied to a caller is hidden from its
/// `tools/list`, but calling it by name answers "denied by rule <name>"
/// while a name that is no tool answers `not_found`: the caller learns
/// which hidden tools exist (by guessing names) and the operator's rule
/// names, which often say what is being kept from whom. To a caller the
/// tool is hidden from, it should answer as for a tool that does not
/// exist (the audit record keeps the real reason).
#[test]
fn a_tool_hidden_from_a_caller_answers_as_one_that_does_not_exist() {
    let home = Home::new();
    home.install(Fixture::Echo, "echo");
    let (ci, ci_lines) = token_for(&home, "ci-bot");
    home.write_config(&format!(
        "{ci_lines}\n[[approval.rules]]\nname = \"contractors must not echo\"\nprincipal = \"ci-*\"\n\
         capability = \"echo.echo\"\ndecision = \"deny\"\n"
    ));
    let server = HttpMcp::start(&home, |_| {});
    let call = |id: i64, name: &str| {
        modern_as(
            &server,
            &ci,
            id,
            "tools/call",
            json!({"name": name, "arguments": {}}),
            &json!({}),
        )
        .json()
    };
    let hidden = call(1, ECHO);
    let missing = call(2, "echo__echo_nothing_here");
    assert_eq!(home.invocations("echo", "echo.echo"), 0, "the module ran");
    assert!(
        !hidden.to_string().contains("contractors must not echo"),
        "the refusal names the operator's rule to the caller it hides the tool from: {hidden}"
    );
    assert_eq!(
        hidden["error"]["data"]["kind"], missing["error"]["data"]["kind"],
        "a hidden tool answers unlike a missing one:\nhidden: {hidden}\nmissing: {missing}"
    );
}

/// FINDING (low, a deny that denies no one). An OAuth caller's principal
/// is `oauth:<issuer>#<subject>` with the issuer exactly as `[http.oauth]
/// issuer` spells it, and many authorization servers' issuers end with a
/// slash (`https://tenant.auth0.com/`). A rule written for those callers
/// without it (`principal = "oauth:https://auth.example.test#*"`) matches
/// none of them: a deny rule is then silently inert, and the server
/// starts without a word. A `principal` glob that starts with `oauth:` but
/// cannot match `oauth:<issuer>#…` of the configured issuer should stop
/// the host (or at least warn), naming the rule and the issuer's spelling.
#[test]
fn a_principal_rule_that_can_match_no_oauth_caller_is_not_silently_accepted() {
    let home = Home::new();
    home.install(Fixture::Echo, "echo");
    home.write_config(
        "[http]\ncanonical_url = \"https://mcp.example.test/mcp\"\n\n\
         [http.oauth]\nissuer = \"https://auth.example.test/\"\n\
         jwks_uri = \"https://127.0.0.1:9/jwks.json\"\n\n\
         [[approval.rules]]\nname = \"no oauth writes\"\n\
         principal = \"oauth:https://auth.example.test#*\"\neffect = \"writes\"\ndecision = \"deny\"\n",
    );
    let said = match HttpMcp::try_start(&home, |_| {}) {
        Ok(server) => {
            std::thread::sleep(Duration::from_millis(300));
            server.stderr()
        }
        Err(said) => said,
    };
    assert!(
        said.contains("no oauth writes") || said.contains("oauth:https://auth.example.test#*"),
        "a rule that matches no OAuth caller of issuer https://auth.example.test/ was accepted \
         without a word:\n{said}"
    );
}

// ---------------------------------------------------------------------
// Held: attacks that fail today (kept so they keep failing).
// ---------------------------------------------------------------------

/// A caller from whom a tool is hidden tries every other spelling the
/// host knows for it (`modhost invoke` accepts several: the capability id,
/// `module capability`, another case) and look-alikes of its name: the
/// server knows a tool by its one name only, nothing runs, and each
/// refusal is recorded for that caller, not the local user.
#[test]
fn every_other_spelling_of_a_hidden_tool_is_refused_for_its_caller() {
    let home = Home::new();
    home.install(Fixture::Echo, "echo");
    let (ci, ci_lines) = token_for(&home, "ci-bot");
    home.write_config(&format!(
        "{ci_lines}\n[[approval.rules]]\nname = \"no ci echo\"\nprincipal = \"ci-*\"\n\
         capability = \"echo.echo\"\ndecision = \"deny\"\n"
    ));
    let server = HttpMcp::start(&home, |_| {});
    let session = handshake_as(&server, &ci);
    let spellings = [
        ECHO,
        "echo.echo",
        "echo echo",
        "echo",
        "ECHO__ECHO_ECHO",
        "echo__Echo_echo",
        "echo__echo_echo\u{200B}",
        "\u{FF45}cho__echo_echo",
        "echo__echo_echo\u{0}",
        " echo__echo_echo",
        "echo/echo",
    ];
    for (id, name) in (10..).zip(spellings) {
        let reply = in_session_as(
            &server,
            &ci,
            &session,
            id,
            "tools/call",
            &json!({"name": name, "arguments": {}}),
        );
        let message = reply.json();
        assert!(
            message.get("error").is_some() || message["result"]["isError"] == json!(true),
            "{name:?} was not refused: {message}"
        );
    }
    assert_eq!(home.invocations("echo", "echo.echo"), 0, "the module ran");
    let records = audit_records(&home, spellings.len(), |r| r["outcome"] == "refused");
    let refused: Vec<&Value> = records
        .iter()
        .filter(|r| r["outcome"] == "refused")
        .collect();
    assert_eq!(refused.len(), spellings.len(), "{records:#?}");
    for record in refused {
        assert_eq!(record["principal"], "ci-bot", "{record:#}");
    }
}

/// What one principal was given is nothing to another: a session id
/// presented with another principal's token is an unknown session (404),
/// an approval state presented by another principal runs nothing, and a
/// session id is no approval state nor an approval state a session id.
#[test]
fn sessions_and_states_of_one_principal_are_nothing_to_another() {
    let home = Home::new();
    home.install(Fixture::Echo, "echo");
    let (alice, alice_lines) = token_for(&home, "alice");
    let (bob, bob_lines) = token_for(&home, "bob");
    home.write_config(&format!(
        "{alice_lines}\n{bob_lines}\n[[approval.rules]]\nname = \"echo asks\"\n\
         capability = \"echo.echo\"\ndecision = \"ask\"\n"
    ));
    let server = HttpMcp::start(&home, |_| {});
    let session = handshake_as(&server, &alice);
    let listed = in_session_as(&server, &bob, &session, 1, "tools/list", &json!({}));
    assert_eq!(listed.status, 404, "{listed:?}");
    assert!(!listed.body.contains("alice"), "{listed:?}");
    assert_eq!(
        in_session_as(&server, &alice, &session, 2, "tools/list", &json!({})).status,
        200
    );

    let arguments = json!({"say": "hi"});
    let asked = modern_as(
        &server,
        &alice,
        3,
        "tools/call",
        json!({"name": ECHO, "arguments": arguments}),
        &can_answer(),
    );
    let state = request_state(&asked);
    let stolen = modern_as(
        &server,
        &bob,
        4,
        "tools/call",
        approved_retry(&arguments, &state),
        &can_answer(),
    )
    .json();
    assert!(stolen.get("error").is_some(), "{stolen}");
    assert!(!stolen.to_string().contains("alice"), "{stolen}");
    // A session id as a state, a state as a session id.
    let as_state = modern_as(
        &server,
        &alice,
        5,
        "tools/call",
        approved_retry(&arguments, &session),
        &can_answer(),
    )
    .json();
    assert!(as_state.get("error").is_some(), "{as_state}");
    let fresh = request_state(&modern_as(
        &server,
        &alice,
        6,
        "tools/call",
        json!({"name": ECHO, "arguments": arguments}),
        &can_answer(),
    ));
    let as_session = in_session_as(&server, &alice, &fresh, 7, "tools/list", &json!({}));
    assert_eq!(as_session.status, 404, "{as_session:?}");
    assert_eq!(home.invocations("echo", "echo.echo"), 0, "the module ran");
}

/// A yes runs the call the user was shown, once on this replica: the same
/// arguments written another way (keys reordered, a `\u` escape) are the
/// same call, and the question showed them as they run; another number
/// form or one more key is another call; and the state, presented again
/// on a new connection, runs nothing.
#[test]
fn an_approval_runs_the_call_shown_once_whatever_the_connection() {
    let home = Home::new();
    home.install(Fixture::Echo, "echo");
    let (alice, alice_lines) = token_for(&home, "alice");
    home.write_config(&format!(
        "{alice_lines}\n[[approval.rules]]\nname = \"echo asks\"\ncapability = \"echo.echo\"\n\
         decision = \"ask\"\n"
    ));
    let server = HttpMcp::start(&home, |_| {});
    let ask = |id: i64, arguments: &Value| {
        modern_as(
            &server,
            &alice,
            id,
            "tools/call",
            json!({"name": ECHO, "arguments": arguments}),
            &can_answer(),
        )
    };
    // Raw bodies: the retry's arguments exactly as written here.
    let retry_raw = |id: i64, arguments: &str, state: &str| {
        let params = with_meta(approved_retry(&json!("ARGS"), state), &can_answer());
        let body = json!({"jsonrpc": "2.0", "id": id, "method": "tools/call", "params": params})
            .to_string()
            .replace("\"ARGS\"", arguments);
        let mut headers = modern_headers("tools/call", &params);
        headers.push(("Authorization".into(), format!("Bearer {alice}")));
        server.post(&headers, &body).json()
    };
    let ran = |message: &Value| message["result"]["isError"] == json!(false);

    let asked = ask(1, &json!({"b": 2, "a": "A"}));
    let shown = asked.json()["result"]["inputRequests"]["approval"]["params"]["message"]
        .as_str()
        .unwrap_or_default()
        .to_owned();
    assert!(shown.contains(r#"{"a":"A","b":2}"#), "{shown}");
    let state = request_state(&asked);
    let reordered = retry_raw(2, r#"{"a":"\u0041","b":2}"#, &state);
    assert!(ran(&reordered), "{reordered}");
    assert_eq!(home.invocations("echo", "echo.echo"), 1);
    // Again, on a new connection of the same replica.
    let replayed = retry_raw(3, r#"{"a":"A","b":2}"#, &state);
    assert!(!ran(&replayed), "{replayed}");

    for (id, asked_for, retried) in [
        (10, json!({"n": 1}), r#"{"n":1.0}"#),
        (20, json!({"n": 1}), r#"{"n":1,"more":true}"#),
        (30, json!({"n": 1}), r#"{"n":10e-1}"#),
        (40, json!({"s": "x"}), r#"{"s":"x\u200b"}"#),
    ] {
        let state = request_state(&ask(id, &asked_for));
        let other = retry_raw(id + 1, retried, &state);
        assert!(!ran(&other), "{asked_for} approved, {retried} ran: {other}");
    }
    assert_eq!(
        home.invocations("echo", "echo.echo"),
        1,
        "an unshown call ran"
    );
}

/// Approval questions are counted per principal: one caller that spends
/// its budget is asked no more, and another is still asked.
#[test]
fn questions_are_counted_per_principal_over_http() {
    let home = Home::new();
    home.install(Fixture::Echo, "echo");
    let (alice, alice_lines) = token_for(&home, "alice");
    let (bob, bob_lines) = token_for(&home, "bob");
    home.write_config(&format!(
        "{alice_lines}\n{bob_lines}\n[quotas]\nelicitations_per_minute = 2\n\n\
         [[approval.rules]]\nname = \"echo asks\"\ncapability = \"echo.echo\"\ndecision = \"ask\"\n"
    ));
    let server = HttpMcp::start(&home, |_| {});
    let ask = |token: &str, id: i64| {
        modern_as(
            &server,
            token,
            id,
            "tools/call",
            json!({"name": ECHO, "arguments": {"id": id}}),
            &can_answer(),
        )
        .json()
    };
    let asked = |message: &Value| message["result"]["requestState"].is_string();
    assert!(asked(&ask(&alice, 1)));
    assert!(asked(&ask(&alice, 2)));
    let third = ask(&alice, 3);
    assert!(!asked(&third), "a third question in a minute: {third}");
    let bobs = ask(&bob, 4);
    assert!(asked(&bobs), "alice's questions spent bob's budget: {bobs}");
    assert_eq!(home.invocations("echo", "echo.echo"), 0, "the module ran");
}

/// `modhost token` keeps the token where only the operator reads it: no
/// argument carries it (so no process listing or shell history), `new`
/// writes it to stdout alone and never to stderr (which service managers
/// and CI logs keep), `hash` reads it from stdin and writes it nowhere,
/// and a refused token is not echoed back.
#[test]
fn modhost_token_keeps_the_token_out_of_arguments_and_stderr() {
    let home = Home::new();
    let made = home.run(&[
        "token",
        "new",
        "--principal",
        "ci-bot",
        "--scope",
        "mcp:tools",
    ]);
    made.expect_code(0);
    let token = made.stdout.trim().to_owned();
    assert!(
        token.starts_with("mht_") && !token.contains(char::is_whitespace),
        "{made:?}"
    );
    assert_eq!(
        made.stdout,
        format!("{token}\n"),
        "stdout is the token alone"
    );
    assert!(
        !made.stderr.contains(&token),
        "the token is on stderr: {made:?}"
    );
    assert!(
        made.stderr.contains(&sha256_hex(token.as_bytes())),
        "{made:?}"
    );

    let hash = |input: &str| {
        let mut child = Command::new(&binaries().modhost)
            .arg("--home")
            .arg(home.path())
            .args(["token", "hash", "--principal", "ci-bot"])
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("start modhost token hash");
        child
            .stdin
            .take()
            .unwrap()
            .write_all(input.as_bytes())
            .unwrap();
        child.wait_with_output().expect("modhost token hash")
    };
    let own = "s3cr3t-from-the-vault-0123456789abcdefXYZ";
    let hashed = hash(&format!("{own}\n"));
    assert!(hashed.status.success(), "{hashed:?}");
    let (out, err) = (
        String::from_utf8_lossy(&hashed.stdout),
        String::from_utf8_lossy(&hashed.stderr),
    );
    assert!(out.contains(&sha256_hex(own.as_bytes())), "{out}");
    assert!(!out.contains(own) && !err.contains(own), "{out}{err}");
    let short = "tooshort-secret";
    let refused = hash(short);
    assert!(!refused.status.success());
    let said = format!(
        "{}{}",
        String::from_utf8_lossy(&refused.stdout),
        String::from_utf8_lossy(&refused.stderr)
    );
    assert!(!said.contains(short), "{said}");
    let spaced = "a secret with spaces that is long enough to be hashed";
    let refused = hash(spaced);
    assert!(!refused.status.success());
    let said = String::from_utf8_lossy(&refused.stderr).into_owned();
    assert!(!said.contains(spaced), "{said}");
}

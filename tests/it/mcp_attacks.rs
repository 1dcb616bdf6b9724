//! The real `modhost mcp` under a hostile client: the workspace it names
//! through its roots never reaches the host's own files.
//!
//! The in-process attacks on approval, eras and robustness are in
//! `host/mcp/src/tests_attacks.rs`; this one needs the real module and home.

use std::path::Path;
use std::process::Stdio;
use std::time::Duration;

use serde_json::json;

use crate::mcp_stdio::McpStdio;
use crate::support::{Home, write_file};

const ANSWER: Duration = Duration::from_secs(30);

/// The policy the client tries to read through a root that holds the home.
const SECRET_RULE: &str = "# the operator's policy, not the client's to read\n";

/// `modhost mcp` on `home`, started in `/` as MCP clients start servers
/// (so no default workspace), with `$HOME` set to `user_home` or unset.
fn started_in_the_root(home: &Home, user_home: Option<&Path>) -> McpStdio {
    McpStdio::spawn(home, None, |command| {
        command.current_dir("/").stderr(Stdio::inherit());
        match user_home {
            Some(user_home) => command.env("HOME", user_home),
            None => command.env_remove("HOME"),
        };
    })
    .answering_within(ANSWER)
}

#[test]
fn a_client_root_holding_the_modhost_home_is_never_the_workspace() {
    let home = Home::new();
    home.install_files();
    home.write_config(SECRET_RULE);
    let ws = home.workspace();
    write_file(&ws, "note.txt", "the project's note");
    let user_home = home.outside();
    let above_home = home.path().parent().expect("the home's parent").to_owned();
    let mut server = started_in_the_root(&home, Some(&user_home));
    server.initialize(&json!({"roots": {"listChanged": true}}));
    let ask = server.next_message(ANSWER);
    assert_eq!(ask["method"], json!("roots/list"), "{ask}");
    let uri = |p: &Path| json!({"uri": format!("file://{}", p.display())});
    // The filesystem, the user's home, the folder holding the modhost home,
    // the modhost home itself.
    server.send(
        &json!({"jsonrpc": "2.0", "id": ask["id"], "result": {"roots": [
            {"uri": "file:///"}, uri(&user_home), uri(&above_home), uri(&home.path()),
        ]}}),
    );
    let read = server.tool_named("files", "read");
    // Relative to each of those roots in turn.
    let config = home.path().join("config.toml");
    let from_slash = config.strip_prefix("/").expect("absolute").to_owned();
    let from_above = config.strip_prefix(&above_home).expect("inside").to_owned();
    for path in [
        from_slash.as_path(),
        from_above.as_path(),
        Path::new("config.toml"),
    ] {
        let r = server.request(
            "tools/call",
            &json!({"name": read, "arguments": {"path": path}}),
        );
        assert!(
            !r.to_string().contains("operator's policy"),
            "the client read the host's policy through its root: {r}"
        );
        assert_ne!(r["result"]["isError"], json!(false), "{r}");
    }
    // A project root after them is granted.
    server.send(&json!({"jsonrpc": "2.0", "method": "notifications/roots/list_changed"}));
    let again = server.next_message(ANSWER);
    server.send(
        &json!({"jsonrpc": "2.0", "id": again["id"], "result": {"roots": [
            {"uri": "file:///"}, uri(&above_home), uri(&ws),
        ]}}),
    );
    let r = server.request(
        "tools/call",
        &json!({"name": read, "arguments": {"path": "note.txt"}}),
    );
    assert_eq!(
        r["result"]["structuredContent"]["content"],
        json!("the project's note"),
        "{r}"
    );
    server.finish();
}

/// A client whose roots are all refused gets no workspace, not the host's:
/// its calls would otherwise read or change a folder it never named (here
/// the server's own `--workspace`). Roots that change to refused ones do
/// not leave the previous root granted either; a client listing no roots
/// names no folder and keeps the host's.
#[test]
fn a_client_whose_roots_are_all_refused_gets_no_workspace_not_the_hosts() {
    let home = Home::new();
    home.install_files();
    let host_ws = home.workspace();
    write_file(&host_ws, "note.txt", "the host's note");
    let project = home.outside();
    write_file(&project, "note.txt", "the project's note");
    let mut server = McpStdio::spawn(&home, Some(&host_ws), |command| {
        command.stderr(Stdio::inherit());
    })
    .answering_within(ANSWER);
    server.initialize(&json!({"roots": {"listChanged": true}}));
    let uri = |p: &Path| json!({"uri": format!("file://{}", p.display())});
    let refused = json!([{"uri": "file:///"}, uri(&home.path())]);
    server.answer_roots(&refused);
    let read = server.tool_named("files", "read");
    let read_note = |server: &mut McpStdio| {
        server.request(
            "tools/call",
            &json!({"name": read, "arguments": {"path": "note.txt"}}),
        )
    };
    let assert_refused = |r: &serde_json::Value| {
        assert_eq!(r["result"]["isError"], json!(true), "{r}");
        let text = r.to_string();
        assert!(!text.contains("note\""), "a note was read: {r}");
        assert!(
            text.contains("none of the client's roots may be the workspace"),
            "the refusal does not say why: {r}"
        );
    };
    assert_refused(&read_note(&mut server));
    // A usable root is granted; refused ones after it withdraw it.
    let change = json!({"jsonrpc": "2.0", "method": "notifications/roots/list_changed"});
    for (roots, expected) in [
        (json!([uri(&project)]), Some("the project's note")),
        (refused.clone(), None),
        (json!([]), Some("the host's note")),
    ] {
        server.send(&change);
        server.answer_roots(&roots);
        let r = read_note(&mut server);
        match expected {
            Some(note) => assert_eq!(
                r["result"]["structuredContent"]["content"],
                json!(note),
                "roots {roots}: {r}"
            ),
            None => assert_refused(&r),
        }
    }
    server.finish();
}

/// The attack after the check: a client's root accepted as a plain folder
/// is then swapped for a link to the user's home (here the server's
/// `$HOME`, whose secret no call may read). Each call checks the root again
/// as it resolves then: refused, and the secret is not read.
#[test]
fn a_client_root_swapped_for_a_link_to_the_users_home_is_refused_at_the_call() {
    let home = Home::new();
    home.install_files();
    let user_home = home.outside();
    write_file(&user_home, "note.txt", "the user's secret");
    let root = home.workspace();
    write_file(&root, "note.txt", "the project's note");
    let mut server = started_in_the_root(&home, Some(&user_home));
    server.initialize(&json!({"roots": {}}));
    server.answer_roots(&json!([{"uri": format!("file://{}", root.display())}]));
    let read = server.tool_named("files", "read");
    let call = json!({"name": read, "arguments": {"path": "note.txt"}});
    let r = server.request("tools/call", &call);
    assert_eq!(
        r["result"]["structuredContent"]["content"],
        json!("the project's note"),
        "{r}"
    );
    std::fs::rename(&root, home.outside().with_file_name("moved")).expect("move the root");
    std::os::unix::fs::symlink(&user_home, &root).expect("link the root to the home");
    let r = server.request("tools/call", &call);
    assert!(
        !r.to_string().contains("secret"),
        "the user's home was read: {r}"
    );
    assert_eq!(r["result"]["isError"], json!(true), "{r}");
    assert!(r.to_string().contains("user's home"), "{r}");
    server.finish();
}

/// A server started without `$HOME` (as some clients and service managers
/// start theirs) still knows the user's home from the password database: a
/// client root there is refused, not granted.
#[test]
fn without_home_set_the_accounts_home_is_still_never_the_workspace() {
    use std::os::unix::fs::MetadataExt;
    let uid = std::fs::metadata("/proc/self").expect("/proc/self").uid();
    let passwd = std::fs::read_to_string("/etc/passwd").expect("/etc/passwd");
    let account_home = passwd
        .lines()
        .map(|line| line.split(':').collect::<Vec<_>>())
        .find(|fields| fields.len() > 5 && fields[2] == uid.to_string())
        .map(|fields| fields[5].to_owned())
        .expect("this user's entry in /etc/passwd");
    let home = Home::new();
    home.install_files();
    let mut server = started_in_the_root(&home, None);
    server.initialize(&json!({"roots": {}}));
    server.answer_roots(&json!([{"uri": format!("file://{account_home}")}]));
    let list = server.tool_named("files", "list");
    let r = server.request("tools/call", &json!({"name": list, "arguments": {}}));
    // A listing of the home is long: its start says enough.
    let shown: String = r.to_string().chars().take(400).collect();
    assert_eq!(
        r["result"]["isError"],
        json!(true),
        "{account_home} was granted: {shown}"
    );
    assert!(r.to_string().contains("user's home"), "{shown}");
    server.finish();
}

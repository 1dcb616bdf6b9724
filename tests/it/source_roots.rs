//! `--source-root NAME=PATH` on every command that runs module code:
//! `invoke`, `conformance`, `tools` and `mcp`. A name
//! the module does not declare is an error listing the declared ones (it
//! was ignored silently, and the call ran without the root), and the host's
//! diagnosis of a root it could not grant stays on the call's error even
//! when the module fails closed with its own `root_missing`.

use serde_json::json;

use crate::mcp_stdio::McpStdio;
use crate::support::{Fixture, Home};

fn echo_home() -> Home {
    let home = Home::new();
    home.install(Fixture::Echo, "echo");
    home
}

#[test]
fn a_mistyped_root_name_is_an_error_listing_the_declared_ones_on_every_command() {
    let home = echo_home();
    let corpus = home.outside();
    let typo = format!("transcript={}", corpus.display());
    let echo = home.module_path("echo", crate::support::Layout::Folder);
    for args in [
        vec![
            "invoke",
            "echo",
            "read_corpus",
            "--json",
            "--source-root",
            &typo,
        ],
        vec!["conformance", "echo", "--source-root", &typo],
        vec![
            "conformance",
            echo.to_str().unwrap(),
            "--source-root",
            &typo,
        ],
        vec!["tools", "--source-root", &typo],
        vec!["mcp", "--source-root", &typo],
    ] {
        let run = home.run(&args);
        run.expect_code(2);
        let said = format!("{}{}", run.stdout, run.stderr);
        assert!(
            said.contains("transcript") && said.contains("corpus"),
            "{args:?}: the error must name the typo and the declared root: {run:#?}"
        );
    }
    assert_eq!(
        home.invocations("echo", "echo.read_corpus"),
        0,
        "a call with a mistyped root ran"
    );
}

#[test]
fn the_hosts_diagnosis_stays_on_the_error_when_the_module_fails_closed() {
    let home = echo_home();
    let missing = home.outside().join("no-such-corpus");
    let flag = format!("corpus={}", missing.display());
    let error = home
        .invoke(
            "echo",
            "echo.read_corpus",
            &json!({}),
            &["--source-root", &flag],
        )
        .invoke_error();
    assert_eq!(error["kind"], "root_missing", "{error:#}");
    let message = error["message"].as_str().unwrap();
    assert!(
        message.contains("does not resolve") && message.contains("no-such-corpus"),
        "the host's diagnosis is lost: {error:#}"
    );
}

#[test]
fn conformance_tools_and_mcp_grant_the_source_root_given_on_the_command_line() {
    let home = echo_home();
    let corpus = home.outside().join("corpus");
    std::fs::create_dir_all(&corpus).unwrap();
    std::fs::write(corpus.join("a.txt"), "from the corpus").unwrap();
    let flag = format!("corpus={}", corpus.display());

    // Accepted by conformance and tools (declared, and the path resolves).
    let run = home.run(&["conformance", "echo", "--json", "--source-root", &flag]);
    assert!(!run.stderr.contains("declares no source root"), "{run:#?}");
    home.run(&["tools", "--source-root", &flag]).expect_code(0);

    // Through MCP, a call reads the root given to `modhost mcp`.
    let mut server = McpStdio::start(&home, Some(&home.workspace()), |command| {
        command.arg("--source-root").arg(&flag);
    });
    let tools = server.request("tools/list", &json!({}));
    let tool = tools["result"]["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["name"].as_str().unwrap().to_owned())
        .find(|name| name.contains("read_corpus"))
        .expect("a read_corpus tool");
    let answer = server.request(
        "tools/call",
        &json!({"name": tool, "arguments": {"name": "a.txt"}}),
    );
    assert!(
        answer.to_string().contains("from the corpus"),
        "the MCP call was not granted the root: {answer:#}"
    );
}

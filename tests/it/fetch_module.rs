//! End to end with the real `fetch` module: pages fetched through the
//! host's egress proxy from test hosts (`net_lab`), and what the operator's
//! grant in `config.toml` lets through.
//!
//! The module declares any public host; each test narrows it as an
//! operator would, in a home whose `config.toml` counts the lab's range as
//! public (`net_lab::LAB_CONFIG`). A granted page comes back as text; a host not granted,
//! and a redirect to the host's own loopback, fail with the proxy's reason
//! in a module error that says what the operator would add; the size cap
//! holds on a large page. Nothing leaves the machine.

use std::io::{Read, Write};
use std::net::TcpListener;

use serde_json::{Value, json};

use crate::net_lab::{LAB_CONFIG, LoopbackService, TestHost};
use crate::support::{Home, Run};

/// The capability's section in `config.toml`.
const SECTION: &str = "[capabilities.\"fetch.fetch.get\"]";

/// A home with `fetch` installed, whose `config.toml` makes the test hosts'
/// range public (as the operator of such a lab would) and adds `config`.
fn fetch_home(config: &str) -> Home {
    let home = Home::new();
    home.install_module("fetch");
    home.write_config(&format!("{LAB_CONFIG}{config}"));
    home
}

/// A home whose operator grants `fetch.get` exactly `hosts`.
fn granting(hosts: &[String]) -> Home {
    let list = hosts
        .iter()
        .map(|h| format!("{h:?}"))
        .collect::<Vec<_>>()
        .join(", ");
    fetch_home(&format!("{SECTION}\nnetwork = [{list}]\n"))
}

/// One `fetch.get`. Network calls ask for approval by default; the
/// operator gives it here.
fn fetch(home: &Home, input: &Value) -> Run {
    let run = home.invoke("fetch", "fetch.get", input, &["--approve"]);
    home.assert_no_module_processes();
    run
}

/// The module error of a refused fetch: kind `denied`, the proxy's reason
/// and the host in the message, the operator's line in the remedy.
#[track_caller]
fn assert_refused(run: &Run, target: &str, why: &str) -> Value {
    let error = run.invoke_error();
    assert_eq!(error["kind"], "denied", "{error:#}");
    let message = error["message"].as_str().unwrap_or_default();
    assert!(
        message.contains(&format!("egress proxy refused {target}")) && message.contains(why),
        "the message does not name {target} and the proxy's reason {why:?}: {error:#}"
    );
    let remedy = error["remedy"].as_str().unwrap_or_default();
    for expected in [
        &format!("{target:?}"),
        "network = [",
        SECTION,
        "config.toml",
    ] {
        assert!(
            remedy.contains(expected),
            "the remedy does not say {expected:?}: {error:#}"
        );
    }
    // The failed call's outcome names the refusal too, as data.
    let refused = error["network"]["refused"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    assert!(
        refused
            .iter()
            .any(|r| r["host"] == target && r["reason"].as_str().is_some_and(|r| r.contains(why))),
        "the error's network does not name {target}: {error:#}"
    );
    error
}

#[test]
fn a_granted_host_s_page_comes_back_as_text() {
    let web = TestHost::start();
    let home = granting(&[web.entry()]);
    let run = fetch(&home, &json!({"url": web.url("/hello")}));
    let outcome = run.invoke_result();
    let output = &outcome["output"];
    assert_eq!(
        output["text"],
        format!("hello from {}", web.address),
        "{outcome:#}"
    );
    assert_eq!(output["url"], web.url("/hello"), "{outcome:#}");
    assert_eq!(output["status"], 200, "{outcome:#}");
    assert_eq!(output["truncated"], false, "{outcome:#}");
    assert_eq!(
        outcome["network"]["contacted"],
        json!([web.entry()]),
        "{outcome:#}"
    );
    assert_eq!(outcome["network"]["refused"], json!([]), "{outcome:#}");
}

#[test]
fn a_host_the_operator_did_not_grant_is_refused_with_the_proxy_s_reason() {
    let (web, other) = (TestHost::start(), TestHost::start());
    let home = granting(&[web.entry()]);
    let run = fetch(&home, &json!({"url": other.url("/hello")}));
    assert_refused(
        &run,
        &other.entry(),
        &format!("is not granted to this call (it may reach {})", web.entry()),
    );
    // The granted host still answers in the same home.
    let run = fetch(&home, &json!({"url": web.url("/hello")}));
    assert_eq!(run.invoke_result()["output"]["status"], 200);
}

#[test]
fn the_size_cap_holds_on_a_large_page() {
    let web = TestHost::start();
    let home = granting(&[web.entry()]);
    let run = fetch(
        &home,
        &json!({"url": web.url("/bytes?n=5000000"), "max_bytes": 4096}),
    );
    let outcome = run.invoke_result();
    let output = &outcome["output"];
    assert_eq!(output["text"], "x".repeat(4096), "{:#}", output["note"]);
    assert_eq!(output["truncated"], true);
    let note = output["note"].as_str().unwrap_or_default();
    assert!(
        note.contains("cut at 4096 bytes") && note.contains("of a 5000000-byte page"),
        "{note}"
    );
    // The page's rest was never asked for: the answer is the text, not 5 MB.
    assert!(run.stdout.len() < 64 * 1024, "{} bytes", run.stdout.len());

    // The default cap, on a page under it: all of it.
    let run = fetch(&home, &json!({"url": web.url("/bytes?n=50000")}));
    let output = run.invoke_result()["output"].clone();
    assert_eq!(
        (output["text"].as_str().map(str::len), &output["truncated"]),
        (Some(50000), &json!(false))
    );
}

/// A redirect from a granted host to the host's loopback: refused on the
/// second request, which the proxy checks like the first, whether the
/// operator listed hosts (not granted) or left the declaration's "any
/// public host" (the loopback is not public).
#[test]
fn a_redirect_to_the_host_s_loopback_is_refused() {
    let web = TestHost::start();
    let local = LoopbackService::start();
    let target = format!("127.0.0.1:{}", local.port);
    let redirect = web.url(&format!("/redirect?to={}", local.url("/")));

    let home = granting(&[web.entry()]);
    let run = fetch(&home, &json!({"url": redirect}));
    let error = assert_refused(&run, &target, "is not granted to this call");
    let message = error["message"].as_str().unwrap_or_default();
    assert!(
        message.contains(&format!("(the redirect from {redirect})")),
        "{error:#}"
    );

    let home = fetch_home("");
    let run = fetch(&home, &json!({"url": redirect}));
    let error = assert_refused(&run, &target, "is a loopback address");
    assert!(
        error["remedy"]
            .as_str()
            .unwrap_or_default()
            .contains("allow_private"),
        "{error:#}"
    );
    assert_eq!(local.hits(), 0, "the loopback service was reached");
}

/// A web server on the loopback that serves one HTML page to anyone: the
/// operator's own service, which a grant names in `allow_private`.
fn html_server() -> u16 {
    let listener = TcpListener::bind(("127.0.0.1", 0)).unwrap();
    let port = listener.local_addr().unwrap().port();
    std::thread::spawn(move || {
        for mut stream in listener.incoming().flatten() {
            let mut request = [0u8; 4096];
            let _ = stream.read(&mut request);
            let body = "<!doctype html><html><head><title>Status</title><style>p{color:red}</style></head>\
                <body><h1>Build status</h1><p>All <b>green</b>. See the <a href=\"/log\">log</a>.</p>\
                <script>document.write('hidden')</script></body></html>";
            let _ = write!(
                stream,
                "HTTP/1.1 200 OK\r\nContent-Type: text/html; charset=utf-8\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
                body.len()
            );
        }
    });
    port
}

/// HTML turned into text end to end, from a loopback address the operator
/// granted outright (`allow_private`).
#[test]
fn an_html_page_on_a_privately_granted_address_comes_back_as_text() {
    let port = html_server();
    let entry = format!("127.0.0.1:{port}");
    let home = fetch_home(&format!(
        "{SECTION}\nnetwork = [{entry:?}]\nallow_private = [{entry:?}]\n"
    ));
    let url = format!("http://{entry}/status");
    let outcome = fetch(&home, &json!({"url": url})).invoke_result();
    let output = &outcome["output"];
    let text = output["text"].as_str().unwrap_or_default();
    for expected in [
        "# Build status",
        "All **green**.",
        &format!("[1]: http://{entry}/log"),
    ] {
        assert!(
            text.contains(expected),
            "{expected:?} missing from:\n{text}"
        );
    }
    for hidden in ["<p>", "color:red", "hidden", "Status"] {
        assert!(!text.contains(hidden), "{hidden:?} shows in:\n{text}");
    }
    assert_eq!(output["content_type"], "text/html; charset=utf-8");
    assert_eq!(
        outcome["network"]["contacted"],
        json!([entry]),
        "{outcome:#}"
    );
}

#[test]
fn a_bad_url_is_refused_before_any_connection() {
    let home = fetch_home("");
    for (url, expected) in [
        ("file:///etc/passwd", "file: URL"),
        ("example.org/page", "no scheme"),
    ] {
        let run = fetch(&home, &json!({"url": url}));
        let error = run.invoke_error();
        assert_eq!(error["kind"], "invalid_input", "{url}: {error:#}");
        assert!(
            error["message"]
                .as_str()
                .unwrap_or_default()
                .contains(expected),
            "{url}: {error:#}"
        );
    }
}

/// The grant the README shows is accepted as it stands, and is what a
/// call would get.
#[test]
fn the_readme_grant_is_what_describe_shows() {
    let readme = std::fs::read_to_string(crate::support::tests_dir().join("../README.md"))
        .expect("read README.md");
    let section = &readme[readme.find("- `fetch`:").expect("README.md lists fetch")..];
    let block: String = section
        .split("```toml\n")
        .nth(1)
        .and_then(|rest| rest.split("```").next())
        .expect("the fetch entry has a ```toml block")
        .lines()
        .map(|line| format!("{}\n", line.trim_start()))
        .collect();
    let home = fetch_home(&block);
    let json = home
        .run(&["describe", "fetch", "--json"])
        .expect_code(0)
        .json();
    assert_eq!(
        json["grants"]["fetch.get"]["network"]["hosts"],
        json!(["docs.rs:443", "*.wikipedia.org:443"]),
        "{json:#}"
    );
}

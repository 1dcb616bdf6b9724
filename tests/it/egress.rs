//! Network authority, tried as the attacks it prevents: a module granted
//! one host reaches it through the host's egress proxy and nothing else.
//!
//! The "internet" is test hosts in network namespaces the tests make
//! (`net_lab`), at documentation addresses the proxy counts as public; the
//! operator's own services are servers on the host's loopback. Nothing
//! leaves the machine. The module (`tests/fixtures/netclient.py`) makes one
//! attempt per call and reports what happened, as data.

use serde_json::{Value, json};

use crate::net_lab::{LAB_CONFIG, LoopbackService, TEST_PORT, TestHost};
use crate::python_attacker::{Attacker, EACCES, EPERM, assert_refused};
use crate::support::Home;

const NET: Attacker = Attacker {
    id: "net",
    script: "netclient.py",
};

/// A home with the `net` module, its `net.any` capability (declared "any
/// public host") narrowed by the operator to `hosts`, plus `extra` config.
fn home_granting(hosts: &[String], extra: &str) -> Home {
    let home = NET.install();
    let list = hosts
        .iter()
        .map(|h| format!("{h:?}"))
        .collect::<Vec<_>>()
        .join(", ");
    home.write_config(&format!(
        "{LAB_CONFIG}[capabilities.\"net.net.any\"]\nnetwork = [{list}]\n{extra}"
    ));
    home
}

/// One attempt of `net.any`: the module's report, and the call's whole
/// `--json` outcome (with its `network` member).
#[track_caller]
fn attempt(home: &Home, input: &Value) -> (Value, Value) {
    // Network calls need the operator's approval by default; the
    // operator gives it here (what is tested is what the call then gets).
    let run = home.invoke("net", "net.any", input, &["--approve"]);
    let outcome = run.invoke_result();
    home.assert_no_module_processes();
    (outcome["output"].clone(), outcome)
}

/// The proxy said no: a 403 naming why, never a hang or a silent success.
#[track_caller]
fn assert_proxy_refused(report: &Value, why: &str, what: &str) {
    assert_eq!(report["ok"], false, "{what} succeeded: {report:#}");
    assert_eq!(report["status"], 403, "{what}: {report:#}");
    let reason = report["refused"].as_str().unwrap_or_default();
    assert!(
        reason.contains(why),
        "{what}: the refusal {reason:?} does not say {why:?}: {report:#}"
    );
}

#[test]
fn a_granted_host_is_reached_through_the_proxy_and_named_in_the_outcome() {
    let web = TestHost::start();
    let home = home_granting(&[web.entry()], "");
    let (report, outcome) = attempt(&home, &json!({"attempt": "get", "url": web.url("/hello")}));
    assert_eq!(report["ok"], true, "{report:#}");
    assert_eq!(
        report["body"],
        format!("hello from {}", web.address),
        "{report:#}"
    );
    assert_eq!(
        outcome["network"]["contacted"],
        json!([web.entry()]),
        "{outcome:#}"
    );
    assert_eq!(outcome["network"]["refused"], json!([]), "{outcome:#}");

    // What the module was given: the proxy, in every spelling clients read.
    let (env, _) = attempt(&home, &json!({"attempt": "env"}));
    for name in [
        "HTTPS_PROXY",
        "HTTP_PROXY",
        "ALL_PROXY",
        "https_proxy",
        "http_proxy",
        "all_proxy",
    ] {
        let value = env["env"][name].as_str().unwrap_or_default();
        assert!(
            value.starts_with("http://modhost:") && value.contains("@127.0.0.1:"),
            "{name}: {env:#}"
        );
    }
    assert!(env["env"].get("NO_PROXY").is_none() && env["env"].get("no_proxy").is_none());
}

/// The attacks through the proxy: another port, another name, another
/// public host, the host's loopback by address, by IPv6 and by a name that
/// resolves to it, and a redirect from the granted host to the loopback.
/// Each is a 403 with the reason; the loopback service sees no one.
#[test]
fn everything_but_the_granted_host_is_refused_by_the_proxy() {
    let (web, other) = (TestHost::start(), TestHost::start());
    let local = LoopbackService::start();
    let home = home_granting(&[web.entry()], "");
    let port = local.port;
    for (url, why, what) in [
        (
            format!("http://{}:{}/hello", web.address, TEST_PORT + 1),
            "not granted",
            "another port",
        ),
        (other.url("/hello"), "not granted", "another public host"),
        (
            "http://www.example.com:8080/".to_owned(),
            "not granted",
            "another name",
        ),
        (local.url("/"), "not granted", "the host's loopback"),
        (
            format!("http://[::1]:{port}/"),
            "not granted",
            "IPv6 loopback",
        ),
        (
            format!("http://localhost:{port}/"),
            "not granted",
            "localhost",
        ),
        (
            web.url(&format!("/redirect?to=http://127.0.0.1:{port}/")),
            "not granted",
            "a redirect to the loopback",
        ),
    ] {
        let (report, outcome) = attempt(&home, &json!({"attempt": "get", "url": url}));
        assert_proxy_refused(&report, why, what);
        let refused = outcome["network"]["refused"]
            .as_array()
            .cloned()
            .unwrap_or_default();
        assert!(
            refused
                .iter()
                .any(|r| r["reason"].as_str().is_some_and(|r| r.contains(why))),
            "{what}: the outcome does not name the refusal: {outcome:#}"
        );
    }
    assert_eq!(local.hits(), 0, "the loopback service was reached");
}

/// The attacks around the proxy: a socket of the module's own to the
/// granted host (TCP, over IPv4 and IPv6), UDP (its own DNS), a name looked
/// up without the proxy, io_uring, and the proxy variables ignored. Each
/// fails in the kernel; the test host and the loopback see nothing.
#[test]
fn every_way_around_the_proxy_fails_in_the_kernel() {
    let web = TestHost::start();
    let local = LoopbackService::start();
    let home = home_granting(&[web.entry()], "");
    let address = web.address.to_string();
    for (input, errnos, what) in [
        (
            json!({"attempt": "tcp", "host": address, "port": TEST_PORT}),
            &[EACCES][..],
            "a TCP connect to the granted host",
        ),
        (
            json!({"attempt": "tcp", "host": "127.0.0.1", "port": local.port}),
            &[EACCES][..],
            "a TCP connect to the loopback",
        ),
        (
            json!({"attempt": "tcp6", "host": "::1", "port": local.port}),
            &[EACCES][..],
            "a TCP connect to IPv6 loopback",
        ),
        (
            json!({"attempt": "udp", "host": address, "port": 53}),
            &[EACCES][..],
            "UDP to the test host",
        ),
        (
            json!({"attempt": "udp", "host": "127.0.0.53", "port": 53}),
            &[EACCES][..],
            "UDP to a local resolver",
        ),
        (json!({"attempt": "io_uring"}), &[EPERM][..], "io_uring"),
    ] {
        let (report, _) = attempt(&home, &input);
        assert_refused(&report, errnos, what);
    }
    let (report, _) = attempt(
        &home,
        &json!({"attempt": "get", "url": web.url("/hello"), "proxy": false}),
    );
    assert_eq!(
        report["ok"], false,
        "a GET ignoring the proxy variables succeeded: {report:#}"
    );
    let (report, _) = attempt(&home, &json!({"attempt": "resolve", "name": "example.com"}));
    assert_eq!(
        report["ok"], false,
        "the module resolved a name itself: {report:#}"
    );
    assert_eq!(local.hits(), 0, "the loopback service was reached");
}

/// Nothing non-public is reachable without a line naming it, and with the
/// line exactly that address and port is.
#[test]
fn a_private_address_is_reached_only_when_the_operator_grants_it() {
    let local = LoopbackService::start();
    let other = LoopbackService::start();
    let entry = format!("127.0.0.1:{}", local.port);
    let home = home_granting(
        std::slice::from_ref(&entry),
        &format!("allow_private = [{entry:?}]\n"),
    );
    let (report, outcome) = attempt(&home, &json!({"attempt": "get", "url": local.url("/")}));
    assert_eq!(report["ok"], true, "{report:#}");
    assert_eq!(report["body"], "loopback data\n");
    assert_eq!(outcome["network"]["contacted"], json!([entry]));
    assert_eq!(local.hits(), 1);

    let (report, _) = attempt(&home, &json!({"attempt": "get", "url": other.url("/")}));
    assert_proxy_refused(&report, "not granted", "another loopback port");
    assert_eq!(other.hits(), 0);
}

/// A name that is granted but resolves to the loopback (DNS rebinding's
/// end state) is refused on the address, naming it.
#[test]
fn a_granted_name_that_resolves_to_the_loopback_is_refused_on_its_address() {
    let local = LoopbackService::start();
    let home = home_granting(&[format!("localhost:{}", local.port)], "");
    let (report, _) = attempt(
        &home,
        &json!({"attempt": "get", "url": format!("http://localhost:{}/", local.port)}),
    );
    assert_proxy_refused(&report, "loopback", "a granted name resolving to 127.0.0.1");
    assert_eq!(local.hits(), 0);
}

/// `config.toml` can only narrow: a line that names a host the capability
/// does not declare stops the host before any call, naming the line.
#[test]
fn a_config_line_that_widens_a_declaration_is_refused() {
    let home = NET.install();
    home.write_config("[capabilities.\"net.net.named\"]\nnetwork = [\"evil.example:443\"]\n");
    let run = home.run(&["tools", "--json"]);
    assert_ne!(run.code, 0, "{run:#?}");
    assert!(
        run.stderr
            .contains("\"evil.example:443\" is not among the hosts")
            || run
                .stdout
                .contains("\"evil.example:443\" is not among the hosts"),
        "{run:#?}"
    );
}

/// `describe` shows what a call would get: the declaration, and the hosts
/// after the operator's narrowing.
#[test]
fn describe_shows_the_hosts_a_call_would_get() {
    let web = TestHost::start();
    let home = home_granting(&[web.entry()], "");
    let run = home.run(&["describe", "net", "--json"]);
    run.expect_code(0);
    let json = run.json();
    assert_eq!(
        json["grants"]["net.any"]["network"]["hosts"],
        json!([web.entry()]),
        "{json:#}"
    );
    assert_eq!(
        json["grants"]["net.none"]["network"],
        Value::Null,
        "{json:#}"
    );
    let text = home.run(&["describe", "net"]);
    assert!(
        text.stdout
            .contains(&format!("connects to: {}", web.entry())),
        "{}",
        text.stdout
    );
}

/// A capability that declares no network gets none: no proxy variables,
/// and its own sockets fail.
#[test]
fn a_capability_without_network_gets_no_proxy_and_no_socket() {
    let web = TestHost::start();
    let home = NET.install();
    let run = home.invoke("net", "net.none", &json!({"attempt": "env"}), &[]);
    let env = run.invoke_result()["output"].clone();
    assert_eq!(env["env"], json!({}), "{env:#}");
    assert!(run.json().get("network").is_none());
    let run = home.invoke(
        "net",
        "net.none",
        &json!({"attempt": "tcp", "host": web.address.to_string(), "port": TEST_PORT}),
        &[],
    );
    assert_refused(
        &run.invoke_result()["output"],
        &[EACCES],
        "a TCP connect without network",
    );
}

/// A component reaches the network only through `wasi:http`, and its
/// requests go through the same proxy under the same grant: the granted
/// host answers and is named in the outcome; another host, the host's
/// loopback and `localhost` (over http and over an https tunnel) are 403s
/// with the reason; its own sockets are denied; a capability without
/// network gets no request out at all.
#[test]
fn a_component_reaches_a_granted_host_through_wasi_http_and_nothing_else() {
    let (web, other) = (TestHost::start(), TestHost::start());
    let local = LoopbackService::start();
    let home = Home::new();
    home.install_component("network");
    home.write_config(&format!(
        "{LAB_CONFIG}[capabilities.\"network.network.run\"]\nnetwork = [{:?}]\n",
        web.entry()
    ));
    let call = |capability: &str, input: Value| {
        home.invoke("network", capability, &input, &["--approve"])
            .invoke_result()
    };
    let outcome = call("network.run", json!({"get": web.url("/hello")}));
    let report = &outcome["output"];
    assert_eq!(report["status"], 200, "{outcome:#}");
    assert_eq!(
        report["body"],
        format!("hello from {}", web.address),
        "{outcome:#}"
    );
    assert_eq!(
        outcome["network"]["contacted"],
        json!([web.entry()]),
        "{outcome:#}"
    );

    for (url, what) in [
        (other.url("/hello"), "another public host"),
        (local.url("/"), "the host's loopback"),
        (format!("http://localhost:{}/", local.port), "localhost"),
        (
            format!("https://{}:443/", other.address),
            "another host over https",
        ),
    ] {
        let outcome = call("network.run", json!({"get": url}));
        assert_proxy_refused(&outcome["output"], "not granted", what);
        assert!(
            outcome["network"]["refused"]
                .as_array()
                .is_some_and(|r| !r.is_empty()),
            "{what}: the outcome does not name the refusal: {outcome:#}"
        );
    }
    let outcome = call(
        "network.run",
        json!({"tcp": format!("{}:{TEST_PORT}", web.address)}),
    );
    assert_eq!(
        outcome["output"]["ok"], false,
        "wasi:sockets connected: {outcome:#}"
    );
    let outcome = call("network.none", json!({"get": web.url("/hello")}));
    assert_eq!(outcome["output"]["ok"], false, "{outcome:#}");
    assert!(
        outcome["output"]["error"]
            .as_str()
            .is_some_and(|e| e.contains("HttpRequestDenied")),
        "a capability without network sent a request: {outcome:#}"
    );
    assert!(outcome.get("network").is_none(), "{outcome:#}");
    assert_eq!(local.hits(), 0, "the loopback service was reached");
}

/// The attack: a capability granted any public host reaches the operator's
/// services through one of the machine's own non-loopback addresses (a
/// service bound to `0.0.0.0` answers there too), even where that address
/// lies in a range the operator declared public. Refused on the address.
#[test]
fn an_address_of_this_machine_is_refused_whatever_its_range() {
    let web = TestHost::start();
    let service = LoopbackService::on_every_address();
    let home = NET.install();
    home.write_config(LAB_CONFIG);
    let url = format!("http://{}:{}/", web.host_side, service.port);
    let run = home.invoke(
        "net",
        "net.any",
        &json!({"attempt": "get", "url": url}),
        &["--approve"],
    );
    let outcome = run.invoke_result();
    assert_proxy_refused(
        &outcome["output"],
        "an address of this machine",
        "the host's own address",
    );
    assert_eq!(service.hits(), 0, "the host's own service was reached");
}

/// Without the operator's `public_ranges`, the lab is a documentation range
/// like any other: not public, so not reached.
#[test]
fn a_documentation_address_is_not_public_unless_the_operator_says_so() {
    let web = TestHost::start();
    let home = NET.install();
    let run = home.invoke(
        "net",
        "net.any",
        &json!({"attempt": "get", "url": web.url("/hello")}),
        &["--approve"],
    );
    assert_proxy_refused(
        &run.invoke_result()["output"],
        "documentation address",
        "a documentation address",
    );
}

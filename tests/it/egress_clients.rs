//! Network authority with the clients modules really use: curl run by a
//! shell script (`tests/fixtures/curlclient.sh`) and Node's `fetch` with
//! undici's `EnvHttpProxyAgent` as its global dispatcher
//! (`tests/fixtures/nodefetch.js`), each in a confined module that knows
//! nothing of modhost but the proxy variables every such client reads.
//! (Python's `urllib` is `egress.rs`'s client.)
//!
//! Each reaches a granted test host through the host's egress proxy, over
//! plain `http://` (curl and undici's absolute-URI form, undici's default
//! tunnel) and over `https://` through a `CONNECT` tunnel to a TLS server
//! on the host's loopback that the operator's `allow_private` line opens;
//! and each is refused, with a 403 whose reason the call's outcome names,
//! for a host that is not granted. Nothing leaves the machine: the test
//! hosts are `net_lab`'s.
//!
//! undici is installed by `tests/setup` (`npm ci` in `tests/egress-node`,
//! from its committed lock file; `.ci/run` runs it) and copied into the
//! Node module's folder, as a module ships its dependencies. A missing
//! install is a failure with the remedy, never a skip.

use std::io::{BufRead, BufReader};
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};

use serde_json::{Value, json};

use crate::net_lab::{LAB_CONFIG, TestHost};
use crate::support::Home;

/// A TLS web server on the host's loopback: `GET` anything answers
/// "hello over tls from 127.0.0.1". Its certificate names the address.
const TLS_SERVER: &str = r#"
import http.server, ssl, sys
class Handler(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        body = b"hello over tls from 127.0.0.1"
        self.send_response(200)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)
    def log_message(self, *args):
        pass
server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
context.load_cert_chain(sys.argv[1], sys.argv[2])
server.socket = context.wrap_socket(server.socket, server_side=True)
print(server.server_address[1], flush=True)
server.serve_forever()
"#;

/// A TLS server on 127.0.0.1 with a self-signed certificate made for the
/// test, which the modules are given as their CA (`ca.pem`).
struct TlsService {
    port: u16,
    certificate: PathBuf,
    server: Child,
    _dir: tempfile::TempDir,
}

impl TlsService {
    fn start() -> TlsService {
        let dir = tempfile::tempdir().expect("a folder for the certificate");
        let (certificate, key) = (dir.path().join("cert.pem"), dir.path().join("key.pem"));
        let made = Command::new("openssl")
            .args(["req", "-x509", "-nodes", "-days", "2"])
            .args(["-subj", "/CN=127.0.0.1"])
            .args(["-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1"])
            .args(["-addext", "subjectAltName=IP:127.0.0.1"])
            .arg("-keyout")
            .arg(&key)
            .arg("-out")
            .arg(&certificate)
            .output()
            .expect("run openssl (it is on every machine of this project)");
        assert!(made.status.success(), "openssl: {made:?}");
        let mut server = Command::new("python3")
            .args(["-c", TLS_SERVER])
            .arg(&certificate)
            .arg(&key)
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .expect("start the TLS server");
        let mut port = String::new();
        BufReader::new(server.stdout.take().expect("its stdout"))
            .read_line(&mut port)
            .expect("the TLS server's port");
        let port = port
            .trim()
            .parse()
            .unwrap_or_else(|_| panic!("the TLS server did not start: {port:?}"));
        TlsService {
            port,
            certificate,
            server,
            _dir: dir,
        }
    }

    /// `127.0.0.1:PORT`, as a host entry and an `allow_private` line.
    fn entry(&self) -> String {
        format!("127.0.0.1:{}", self.port)
    }

    fn url(&self, path: &str) -> String {
        format!("https://{}{path}", self.entry())
    }
}

impl Drop for TlsService {
    fn drop(&mut self) {
        let _ = self.server.kill();
        let _ = self.server.wait();
    }
}

/// Where `tests/setup` installs undici. Never a skip: without it the
/// client is not tested, so the test fails with the remedy.
fn undici_modules() -> PathBuf {
    let modules = crate::support::tests_dir().join("egress-node/node_modules");
    if !modules.join("undici/package.json").is_file() {
        let remedy = "run `tests/setup` (it runs `npm ci` in tests/egress-node; Node 20 with npm)";
        if std::env::var("CI").is_ok_and(|v| v == "true") {
            panic!(
                "CI: undici is missing ({} has no undici): .ci/run should have installed it; {remedy}",
                modules.display()
            );
        }
        panic!(
            "undici is not installed here ({} has no undici); {remedy}",
            modules.display()
        );
    }
    modules
}

fn copy_tree(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).expect("create a folder");
    for entry in std::fs::read_dir(from).expect("read a folder") {
        let entry = entry.expect("a folder entry");
        let target = to.join(entry.file_name());
        if entry.file_type().expect("its type").is_dir() {
            copy_tree(&entry.path(), &target);
        } else {
            std::fs::copy(entry.path(), &target).expect("copy a file");
        }
    }
}

/// A home with the fixture `script` installed as the folder module `id`
/// (with `ca.pem`, and `node_modules` when given), pinned, on a machine
/// that confines; `config` as its config.toml.
fn install(
    script: &str,
    id: &str,
    tls: &TlsService,
    node_modules: Option<&Path>,
    config: &str,
) -> Home {
    let home = Home::new();
    let folder = home.modules().join(id);
    std::fs::create_dir_all(&folder).expect("module folder");
    let program = folder.join(id);
    std::fs::copy(
        crate::support::tests_dir().join("fixtures").join(script),
        &program,
    )
    .expect("copy the fixture");
    std::fs::set_permissions(&program, std::fs::Permissions::from_mode(0o755)).expect("chmod");
    std::fs::copy(&tls.certificate, folder.join("ca.pem")).expect("copy the certificate");
    if let Some(modules) = node_modules {
        copy_tree(modules, &folder.join("node_modules"));
    }
    home.write_config(config);
    home.run(&["pin", id]).expect_code(0);
    home.require_landlock();
    home
}

/// The lab's ranges counted public ([`LAB_CONFIG`]), and
/// `[capabilities."ID.CAP"]` granting `web` and the TLS service.
fn grant(capability: &str, web: &TestHost, tls: &TlsService) -> String {
    format!(
        "{LAB_CONFIG}[capabilities.\"{capability}\"]\nnetwork = [{:?}, {:?}]\nallow_private = [{:?}]\n",
        web.entry(),
        tls.entry(),
        tls.entry()
    )
}

/// One call: the module's report and the call's whole `--json` outcome.
#[track_caller]
fn call(home: &Home, module: &str, capability: &str, input: &Value) -> (Value, Value) {
    // Network calls need the operator's approval by default; the operator
    // gives it here (what is tested is what the call then gets).
    let run = home.invoke(module, capability, input, &["--approve"]);
    let outcome = run.invoke_result();
    home.assert_no_module_processes();
    (outcome["output"].clone(), outcome)
}

/// The call's outcome names exactly `entry` as contacted and nothing refused.
#[track_caller]
fn assert_contacted(outcome: &Value, entry: &str) {
    assert_eq!(
        outcome["network"]["contacted"],
        json!([entry]),
        "{outcome:#}"
    );
    assert_eq!(outcome["network"]["refused"], json!([]), "{outcome:#}");
}

/// The call's outcome names `entry` as refused, for not being granted.
#[track_caller]
fn assert_refused_in_outcome(outcome: &Value, entry: &str) {
    assert_eq!(outcome["network"]["contacted"], json!([]), "{outcome:#}");
    let refused = &outcome["network"]["refused"];
    assert_eq!(refused[0]["host"], entry, "{outcome:#}");
    assert!(
        refused[0]["reason"]
            .as_str()
            .is_some_and(|r| r.contains("is not granted")),
        "{outcome:#}"
    );
}

/// curl's account of one transfer: the response's status, the CONNECT's,
/// its exit code, and the proxy's refusal header (when there was one).
fn curl_report(report: &Value) -> (i64, i64, i64, String) {
    let curl = &report["report"]["curl"];
    let refused = report["report"]["headers"]["x-modhost-refused"][0]
        .as_str()
        .unwrap_or_default()
        .to_owned();
    (
        curl["http_code"].as_i64().unwrap_or(-1),
        curl["http_connect"].as_i64().unwrap_or(-1),
        curl["exitcode"].as_i64().unwrap_or(-1),
        refused,
    )
}

const CURL: &str = "curlnet";
const CURL_GET: &str = "curlnet.get";

fn curl_home(web: &TestHost, tls: &TlsService) -> Home {
    let config = format!(
        "{}\n[binaries]\ncurl = \"/usr/bin/curl\"\n",
        grant("curlnet.curlnet.get", web, tls)
    );
    install("curlclient.sh", CURL, tls, None, &config)
}

/// curl's plain-HTTP request (an absolute URI to the proxy) reaches the
/// granted host; for another host curl gets the proxy's 403, with the
/// reason in `X-Modhost-Refused`, and the test host sees no one.
#[test]
fn curl_in_a_shell_module_reaches_the_granted_host_over_http_and_is_refused_another() {
    let (web, other) = (TestHost::start(), TestHost::start());
    let tls = TlsService::start();
    let home = curl_home(&web, &tls);

    let (report, outcome) = call(&home, CURL, CURL_GET, &json!({"url": web.url("/hello")}));
    assert_eq!(curl_report(&report).0, 200, "{report:#}");
    assert_eq!(
        report["body"],
        format!("hello from {}", web.address),
        "{report:#}"
    );
    assert_contacted(&outcome, &web.entry());

    let (report, outcome) = call(&home, CURL, CURL_GET, &json!({"url": other.url("/hello")}));
    let (status, _, _, refused) = curl_report(&report);
    assert_eq!(status, 403, "{report:#}");
    assert!(
        refused.contains(&format!("{} is not granted", other.entry())),
        "the 403 does not say why: {report:#}"
    );
    assert!(
        report["body"]
            .as_str()
            .is_some_and(|b| b.contains("refused")),
        "{report:#}"
    );
    assert_refused_in_outcome(&outcome, &other.entry());
}

/// curl's `https://` goes through a CONNECT tunnel, and TLS is end to end:
/// curl checks the server's certificate itself. A tunnel to a host not
/// granted is refused with a 403 to the CONNECT.
#[test]
fn curl_in_a_shell_module_reaches_a_granted_https_host_through_a_tunnel() {
    let (web, other) = (TestHost::start(), TestHost::start());
    let tls = TlsService::start();
    let home = curl_home(&web, &tls);

    let (report, outcome) = call(&home, CURL, CURL_GET, &json!({"url": tls.url("/")}));
    let (status, connect, exit, _) = curl_report(&report);
    assert_eq!((status, connect, exit), (200, 200, 0), "{report:#}");
    assert_eq!(
        report["body"], "hello over tls from 127.0.0.1",
        "{report:#}"
    );
    assert_contacted(&outcome, &tls.entry());

    let url = format!("https://{}/", other.entry());
    let (report, outcome) = call(&home, CURL, CURL_GET, &json!({"url": url}));
    let (status, connect, exit, _) = curl_report(&report);
    assert_eq!(connect, 403, "{report:#}");
    assert_ne!(
        exit, 0,
        "curl called a refused tunnel a success: {report:#}"
    );
    assert_ne!(status, 200, "{report:#}");
    assert_refused_in_outcome(&outcome, &other.entry());
}

const NODE: &str = "nodefetch";
const NODE_GET: &str = "nodefetch.get";

fn node_home(web: &TestHost, tls: &TlsService) -> Home {
    let modules = undici_modules();
    install(
        "nodefetch.js",
        NODE,
        tls,
        Some(&modules),
        &grant("nodefetch.nodefetch.get", web, tls),
    )
}

/// Node's fetch reaches the granted host over plain HTTP both ways undici
/// proxies it (its default CONNECT tunnel, and absolute-URI requests); for
/// another host it gets the proxy's 403: the status and the reason as an
/// answer when undici forwards, the status in its error when it tunnels.
#[test]
fn node_fetch_in_a_module_reaches_the_granted_host_over_http_and_is_refused_another() {
    let (web, other) = (TestHost::start(), TestHost::start());
    let tls = TlsService::start();
    let home = node_home(&web, &tls);

    for tunnel in [true, false] {
        let (report, outcome) = call(
            &home,
            NODE,
            NODE_GET,
            &json!({"url": web.url("/hello"), "tunnel": tunnel}),
        );
        assert_eq!(report["status"], 200, "tunnel {tunnel}: {report:#}");
        assert_eq!(
            report["body"],
            format!("hello from {}", web.address),
            "tunnel {tunnel}: {report:#}"
        );
        assert_contacted(&outcome, &web.entry());
    }

    let (report, outcome) = call(
        &home,
        NODE,
        NODE_GET,
        &json!({"url": other.url("/hello"), "tunnel": false}),
    );
    assert_eq!(report["status"], 403, "{report:#}");
    assert!(
        report["refused"]
            .as_str()
            .is_some_and(|r| r.contains(&format!("{} is not granted", other.entry()))),
        "the 403 does not say why: {report:#}"
    );
    assert_refused_in_outcome(&outcome, &other.entry());

    let (report, outcome) = call(&home, NODE, NODE_GET, &json!({"url": other.url("/hello")}));
    assert_eq!(report["ok"], false, "{report:#}");
    assert!(
        report["error"].as_str().is_some_and(|e| e.contains("403")),
        "the refused tunnel is not a 403: {report:#}"
    );
    assert_refused_in_outcome(&outcome, &other.entry());
}

/// Node's fetch of an `https://` URL goes through a CONNECT tunnel with TLS
/// end to end (undici checks the certificate against the module's CA); a
/// tunnel to a host not granted fails with the proxy's 403.
#[test]
fn node_fetch_in_a_module_reaches_a_granted_https_host_through_a_tunnel() {
    let (web, other) = (TestHost::start(), TestHost::start());
    let tls = TlsService::start();
    let home = node_home(&web, &tls);

    let (report, outcome) = call(&home, NODE, NODE_GET, &json!({"url": tls.url("/")}));
    assert_eq!(report["status"], 200, "{report:#}");
    assert_eq!(
        report["body"], "hello over tls from 127.0.0.1",
        "{report:#}"
    );
    assert_contacted(&outcome, &tls.entry());

    let url = format!("https://{}/", other.entry());
    let (report, outcome) = call(&home, NODE, NODE_GET, &json!({"url": url}));
    assert_eq!(report["ok"], false, "{report:#}");
    assert!(
        report["error"].as_str().is_some_and(|e| e.contains("403")),
        "the refused tunnel is not a 403: {report:#}"
    );
    assert_refused_in_outcome(&outcome, &other.entry());
}

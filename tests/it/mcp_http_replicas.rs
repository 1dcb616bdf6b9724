//! Two `modhost mcp --http` replicas behind nginx, round-robin with no
//! affinity: any replica serves any request of any client, with no shared
//! store, only a shared home and one signing key.
//!
//! The attacks and failures: 32 clients hammering the pair (a call lost,
//! run twice, or answered with another call's result); an `ask` approval
//! asked on one replica and answered on the other (refused as foreign, run
//! twice, or replayed on the replica that ran it); one replica SIGKILLed in
//! the middle of a run (a call answered with a wrong result, a call after
//! the kill failing, a call the proxy passed on to the survivor after the
//! victim had run it, so it ran twice). Every call carries a token of its
//! own; the module the load calls (`install_recording_module`) appends the
//! token to a file in its state root the moment it runs, so each call's
//! runs are counted, whatever its answer said.
//!
//! Not covered, by design (`host/mcp/src/elicitation.rs`): a state
//! answered on one replica and replayed to the other runs again there, once
//! per replica within the state's lifetime; closing that needs a shared
//! store.
//!
//! Design decisions:
//!
//! - **nginx from Debian, started by the test** (`tests/setup` installs
//!   it): a configuration written into the test's own folder, `daemon off`
//!   and `master_process off` (one process: killing it leaves no worker
//!   behind), its own pid and log files, loopback ports only. A missing
//!   nginx fails the test with the command that installs it, never a skip.
//!   nginx adds the upstream it used to every answer
//!   (`X-Modhost-Upstream: $upstream_addr`), so each call is attributed to
//!   a replica; the replicas' own `/metrics` must agree.
//! - **What nginx may retry.** `proxy_next_upstream error timeout` without
//!   `non_idempotent`: nginx passes a POST to the other replica only when
//!   the first could not be reached (connection refused or timed out
//!   before the request was sent), never once the request went out. A
//!   `tools/call` is not idempotent: the replica that died may already have
//!   run the module (written its state, sent a request to the world) before
//!   it died, and a retry would run it a second time. So a call in flight
//!   on a replica that dies fails, visibly (nginx's 502, or the stream cut
//!   off), and the client decides, as MCP leaves retries to the client; a
//!   call that reaches no replica is retried on the other one, which is
//!   safe because nothing ran. `max_fails=1` keeps the dead replica out of
//!   the rotation after its first refused connection. (With
//!   `non_idempotent` added, the kill test sees calls that the victim ran
//!   run a second time on the survivor: it was tried.)
//! - **No keep-alive between nginx and the replicas** (a fresh upstream
//!   connection per request). An idle kept-alive connection to a replica
//!   that just died, if nginx has not yet seen it close, is found dead only
//!   by the next request sent on it, after it was sent, so that request
//!   would fail rather than be passed on: with fresh connections, every
//!   call that starts after the replica is gone finds its port closed and
//!   goes to the survivor, which this test asserts. A deployment that keeps
//!   upstream connections alive trades that for fewer connects, and its
//!   clients may see such a call fail like one in flight.
//! - **The client is plain std** (one keep-alive connection to nginx per
//!   client thread, HTTP/1.1 written and parsed here), so a transport
//!   failure is seen as exactly what it is: a status, or a connection
//!   closed before the end of the answer. A call counts as answered only
//!   when its answer carries its own token back.
//! - **Revision 2026-07-28, stateless:** every POST carries `_meta` (the
//!   protocol version, client info and capabilities) and the headers the
//!   transport requires (`MCP-Protocol-Version`, `Mcp-Method`, `Mcp-Name`).

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::Mutex;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use crate::support::{Home, binaries};
use crate::warm_approval::{SETTLE, executions, install_counting_module};

/// Concurrent clients of a run.
const CLIENTS: usize = 32;

/// Calls of a run.
const CALLS: usize = 2_000;

/// How long a replica or nginx may take to start listening.
const START_WITHIN: Duration = Duration::from_secs(60);

/// How long one answer may take.
const ANSWER_WITHIN: Duration = Duration::from_secs(60);

/// The header nginx adds to every answer: the upstream(s) it tried.
const UPSTREAM_HEADER: &str = "x-modhost-upstream";

#[test]
fn two_replicas_behind_round_robin_nginx_serve_2000_calls_from_32_clients_with_none_failed() {
    let cluster = Cluster::start(|home| install_recording_module(home, RECORDER));
    let tool = cluster.tool(RECORDER);
    let records = drive(cluster.nginx.addr, &tool, |_| {});
    let failed: Vec<&CallRecord> = records.iter().filter(|r| !r.outcome.is_ok()).collect();
    assert!(
        failed.is_empty(),
        "{} of {CALLS} calls failed; the first: {}",
        failed.len(),
        failed[0].outcome
    );
    // Both replicas served, as nginx says…
    let by_header: Vec<usize> = cluster
        .replicas
        .iter()
        .map(|replica| {
            records
                .iter()
                .filter(|r| r.outcome.served_by() == Some(replica.addr))
                .count()
        })
        .collect();
    assert_eq!(by_header.iter().sum::<usize>(), CALLS, "{by_header:?}");
    for (replica, served) in cluster.replicas.iter().zip(&by_header) {
        assert!(
            *served >= CALLS / 4,
            "round-robin left replica {} with {served} of {CALLS} calls: {by_header:?}",
            replica.addr
        );
    }
    eprintln!("calls served by each replica, as nginx says: {by_header:?}");
    // …and as each replica counts itself.
    let by_metrics: Vec<u64> = cluster
        .replicas
        .iter()
        .map(|replica| replica.calls_counted())
        .collect();
    for ((replica, served), counted) in cluster.replicas.iter().zip(&by_header).zip(&by_metrics) {
        assert_eq!(
            *counted, *served as u64,
            "replica {} counts {counted} calls answered in /metrics, nginx sent it {served}",
            replica.addr
        );
    }
    // Every call ran its module exactly once: none lost, none run twice.
    std::thread::sleep(SETTLE);
    let runs = runs(&cluster.home, RECORDER);
    for call in &records {
        assert_eq!(runs.get(&call.token), Some(&1), "{call:?}");
    }
    assert_eq!(runs.len(), CALLS, "runs of calls nobody made");
    // Two hosts on one home keep one audit chain, a record per call.
    cluster.audit_is_intact_with(CALLS as u64);
}

#[test]
fn an_approval_asked_on_one_replica_and_answered_on_the_other_runs_exactly_once() {
    let cluster = Cluster::start(|home| {
        install_counting_module(
            home,
            "asker",
            &json!({"writes": ["state"], "approval": true}),
        );
    });
    let tool = cluster.tool("asker__");
    let (a, b) = (cluster.replicas[0].addr, cluster.replicas[1].addr);
    let caps = json!({"elicitation": {}});
    let yes = json!({"approval": {"action": "accept", "content": {"approve": true}}});
    let call = |extra: Value| {
        let mut params = json!({"name": tool, "arguments": {}});
        params
            .as_object_mut()
            .expect("object")
            .extend(extra.as_object().expect("object").clone());
        params
    };

    // Forced across: asked on A, answered straight to B's port.
    let (asked, _) = request(a, "tools/call", &call(json!({})), &caps);
    let asked = result_of(&asked);
    assert_eq!(asked["resultType"], json!("input_required"), "{asked}");
    assert_eq!(executions(&cluster.home, "asker"), 0, "ran before the yes");
    let retry = call(json!({"requestState": asked["requestState"], "inputResponses": yes}));
    let (ran, _) = request(b, "tools/call", &retry, &caps);
    let ran = result_of(&ran);
    assert_eq!(ran["isError"], json!(false), "{ran}");
    std::thread::sleep(SETTLE);
    assert_eq!(executions(&cluster.home, "asker"), 1);
    // Replayed on the replica that ran it: refused, nothing runs.
    let (replayed, _) = request(b, "tools/call", &retry, &caps);
    assert_eq!(replayed["error"]["code"], json!(-32602), "{replayed}");
    std::thread::sleep(SETTLE);
    assert_eq!(
        executions(&cluster.home, "asker"),
        1,
        "a replayed approval ran"
    );

    // Through nginx: round-robin with no affinity sends the retry to the
    // replica that did not ask.
    let nginx = cluster.nginx.addr;
    let (asked, asked_on) = request(nginx, "tools/call", &call(json!({})), &caps);
    let asked = result_of(&asked);
    assert_eq!(asked["resultType"], json!("input_required"), "{asked}");
    let retry = call(json!({"requestState": asked["requestState"], "inputResponses": yes}));
    let (ran, ran_on) = request(nginx, "tools/call", &retry, &caps);
    let ran = result_of(&ran);
    assert_eq!(ran["isError"], json!(false), "{ran}");
    assert!(
        asked_on.is_some() && ran_on.is_some() && asked_on != ran_on,
        "nginx sent the question to {asked_on:?} and the answer to {ran_on:?}: not across"
    );
    std::thread::sleep(SETTLE);
    assert_eq!(
        executions(&cluster.home, "asker"),
        2,
        "the approval completed on the other replica ran once"
    );
}

#[test]
fn a_replica_killed_mid_run_loses_only_its_calls_in_flight_which_fail_cleanly() {
    let cluster = Cluster::start(|home| install_recording_module(home, RECORDER));
    let tool = cluster.tool(RECORDER);
    let victim = cluster.replicas[0].addr;
    let survivor = cluster.replicas[1].addr;
    let replicas = Mutex::new(cluster.replicas);
    let mut killed_at = None;
    let records = drive(cluster.nginx.addr, &tool, |done| {
        // A third of the way in, every client busy: SIGKILL, then reap, so
        // every socket of the victim is closed when `dead` is taken.
        let started = Instant::now();
        while done.load(Ordering::SeqCst) < CALLS / 3 {
            assert!(started.elapsed() < ANSWER_WITHIN * 2, "the run stalled");
            std::thread::sleep(Duration::from_millis(1));
        }
        let kill = Instant::now();
        replicas.lock().expect("replicas")[0].kill();
        killed_at = Some((kill, Instant::now()));
    });
    let (kill, dead) = killed_at.expect("the victim was killed");

    let wrong: Vec<&CallRecord> = records
        .iter()
        .filter(|r| matches!(r.outcome, Outcome::Wrong(_)))
        .collect();
    assert!(
        wrong.is_empty(),
        "{} wrong answers; the first: {}",
        wrong.len(),
        wrong[0].outcome
    );
    let failed: Vec<&CallRecord> = records
        .iter()
        .filter(|r| matches!(r.outcome, Outcome::Failed { .. }))
        .collect();
    for call in &failed {
        assert!(
            call.started < dead && call.finished >= kill,
            "a call not in flight when the replica died {}: {call:?} (killed {:?} after the \
             first call started)",
            call.outcome,
            kill - records.iter().map(|r| r.started).min().expect("calls")
        );
        if let Outcome::Failed {
            upstream: Some(upstream),
            ..
        } = &call.outcome
        {
            assert!(
                upstream.contains(&victim.to_string()),
                "a call failed on {upstream}, not on the killed replica {victim}: {call:?}"
            );
        }
    }
    eprintln!(
        "killed {victim} after {} calls had started: {} calls failed ({:?}), {} started after \
         it was gone",
        records.iter().filter(|r| r.started < kill).count(),
        failed.len(),
        failed
            .iter()
            .map(|c| c.outcome.to_string())
            .collect::<std::collections::BTreeSet<_>>(),
        records.iter().filter(|r| r.started >= dead).count()
    );
    assert!(
        failed.len() <= CLIENTS,
        "{} calls failed, more than were in flight",
        failed.len()
    );
    let after: Vec<&CallRecord> = records.iter().filter(|r| r.started >= dead).collect();
    assert!(
        after.len() >= CALLS / 2,
        "only {} calls ran after the kill: the kill came too late to show anything",
        after.len()
    );
    for call in &after {
        assert_eq!(
            call.outcome.served_by(),
            Some(survivor),
            "a call after the kill was not served by the survivor: {call:?}"
        );
    }
    // No call ran twice (nginx passed none that had reached the victim on
    // to the survivor), every answered call ran once, a failed one at most
    // once (the victim may have run it before it died).
    std::thread::sleep(SETTLE);
    let runs = runs(&cluster.home, RECORDER);
    for call in &records {
        let ran = runs.get(&call.token).copied().unwrap_or(0);
        match call.outcome {
            Outcome::Ok { .. } => assert_eq!(ran, 1, "{call:?}"),
            _ => assert!(ran <= 1, "a failed call ran {ran} times: {call:?}"),
        }
    }
    assert!(runs.len() <= CALLS, "runs of calls nobody made");
    // The survivor counts every call nginx says it answered.
    let survivor_calls = replicas.lock().expect("replicas")[1].calls_counted();
    let survived = records
        .iter()
        .filter(|r| r.outcome.served_by() == Some(survivor))
        .count();
    assert_eq!(survivor_calls, survived as u64);
}

/// The module the load calls.
const RECORDER: &str = "recorder";

/// Install a script module `id` whose one capability `<id>.run` takes
/// `{"token": "..."}`, appends the token to `tokens` in its state root the
/// moment it runs, and answers `{"token": ...}`; pinned. Shell builtins
/// only (a capability granted no executables starts nothing), and the
/// schema keeps the token to `[a-z0-9-]`, so it is copied into the answer
/// as it is.
fn install_recording_module(home: &Home, id: &str) {
    use std::os::unix::fs::PermissionsExt;
    let folder = home.modules().join(id);
    std::fs::create_dir_all(&folder).expect("module folder");
    let descriptor = json!({
        "id": id, "version": "1.0.0",
        "roots": [{"name": "state", "kind": "state", "description": "the tokens of its runs"}],
        "capabilities": [{
            "id": format!("{id}.run"), "description": "records its token and answers it",
            "input_schema": {"type": "object", "required": ["token"], "additionalProperties": false,
                             "properties": {"token": {"type": "string", "pattern": "^[a-z0-9-]{1,64}$"}}},
            "effects": {"writes": ["state"]}
        }]
    });
    let tokens = tokens_file(home, id);
    let script = format!(
        r#"#!/bin/sh
IFS= read -r line
case "$line" in
  *'"method":"invoke"'*)
    rest=${{line#*'"token":"'}}
    token=${{rest%%'"'*}}
    echo "$token" >> '{}'
    printf '{{"jsonrpc":"2.0","id":1,"result":{{"output":{{"token":"%s"}}}}}}\n' "$token" ;;
  *) printf '%s\n' '{{"jsonrpc":"2.0","id":1,"result":{descriptor}}}' ;;
esac
"#,
        tokens.display()
    );
    let path = folder.join(id);
    std::fs::write(&path, script).expect("module script");
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).expect("chmod");
    home.run(&["pin", id]).expect_code(0);
}

fn tokens_file(home: &Home, id: &str) -> PathBuf {
    home.path().join("state").join(id).join("tokens")
}

/// How many times the recording module `id` ran with each token.
fn runs(home: &Home, id: &str) -> std::collections::HashMap<String, usize> {
    let mut runs = std::collections::HashMap::new();
    for token in std::fs::read_to_string(tokens_file(home, id))
        .unwrap_or_default()
        .lines()
    {
        *runs.entry(token.to_owned()).or_insert(0) += 1;
    }
    runs
}

/// `CALLS` calls of `tool` through `nginx` from `CLIENTS` clients, while
/// `during` runs on this thread with the count of calls answered so far.
fn drive(nginx: SocketAddr, tool: &str, during: impl FnOnce(&AtomicUsize)) -> Vec<CallRecord> {
    let next = AtomicUsize::new(0);
    let done = AtomicUsize::new(0);
    let records: Vec<CallRecord> = std::thread::scope(|scope| {
        let clients: Vec<_> = (0..CLIENTS)
            .map(|index| {
                let (next, done) = (&next, &done);
                scope.spawn(move || client_loop(nginx, tool, index, next, done))
            })
            .collect();
        during(&done);
        clients
            .into_iter()
            .flat_map(|c| c.join().expect("client thread"))
            .collect()
    });
    assert_eq!(records.len(), CALLS);
    records
}

/// What became of one call.
#[derive(Debug)]
enum Outcome {
    /// Its own token came back, from this upstream.
    Ok { upstream: Option<SocketAddr> },
    /// A clean failure: an HTTP error status, or the connection closed
    /// before the answer ended. Never a result.
    Failed {
        why: String,
        upstream: Option<String>,
    },
    /// An answer that is not this call's result: another call's, a JSON-RPC
    /// error, an answer the transport does not define.
    Wrong(String),
}

impl Outcome {
    fn is_ok(&self) -> bool {
        matches!(self, Outcome::Ok { .. })
    }

    fn served_by(&self) -> Option<SocketAddr> {
        match self {
            Outcome::Ok { upstream } => *upstream,
            _ => None,
        }
    }
}

impl std::fmt::Display for Outcome {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Outcome::Ok { upstream } => write!(f, "answered by {upstream:?}"),
            Outcome::Failed { why, upstream } => {
                write!(f, "failed cleanly ({why}, upstream {upstream:?})")
            }
            Outcome::Wrong(what) => write!(f, "WRONG: {what}"),
        }
    }
}

#[derive(Debug)]
struct CallRecord {
    token: String,
    started: Instant,
    finished: Instant,
    outcome: Outcome,
}

/// One client: a keep-alive connection to `nginx`, calling `tool` with a
/// token of its own until `CALLS` calls have been taken by all clients.
fn client_loop(
    nginx: SocketAddr,
    tool: &str,
    index: usize,
    next: &AtomicUsize,
    done: &AtomicUsize,
) -> Vec<CallRecord> {
    let mut client = http::Client::new(nginx);
    let mut records = Vec::new();
    loop {
        let number = next.fetch_add(1, Ordering::SeqCst);
        if number >= CALLS {
            return records;
        }
        let token = format!("call-{number}-client-{index}");
        let params = json!({"name": tool, "arguments": {"token": token}});
        let started = Instant::now();
        let answer = client.post(
            "/mcp",
            &mcp_headers("tools/call", Some(tool)),
            &body(number as u64, "tools/call", &params, &json!({})),
        );
        let finished = Instant::now();
        let outcome = judge(answer, number as u64, &token);
        records.push(CallRecord {
            token,
            started,
            finished,
            outcome,
        });
        done.fetch_add(1, Ordering::SeqCst);
    }
}

/// What a call's answer was (see [`Outcome`]).
fn judge(answer: Result<http::Response, String>, id: u64, token: &str) -> Outcome {
    let response = match answer {
        Ok(response) => response,
        Err(why) => {
            return Outcome::Failed {
                why,
                upstream: None,
            };
        }
    };
    let upstream = response.header(UPSTREAM_HEADER).map(str::to_owned);
    if response.status >= 500 {
        return Outcome::Failed {
            why: format!("HTTP {}", response.status),
            upstream,
        };
    }
    if response.status != 200 {
        return Outcome::Wrong(format!(
            "HTTP {}: {}",
            response.status,
            String::from_utf8_lossy(&response.body)
        ));
    }
    let message = match response.message() {
        Ok(message) => message,
        Err(why) => return Outcome::Wrong(why),
    };
    let result = &message["result"];
    if message["id"] != json!(id)
        || result["isError"] != json!(false)
        || !result.to_string().contains(token)
    {
        return Outcome::Wrong(format!("call {id} with {token} got {message}"));
    }
    Outcome::Ok {
        upstream: upstream.as_deref().and_then(last_upstream),
    }
}

/// The upstream that answered, from nginx's `$upstream_addr` (the list of
/// those tried, the last one answering).
fn last_upstream(header: &str) -> Option<SocketAddr> {
    header.rsplit(',').next()?.trim().parse().ok()
}

/// The headers revision 2026-07-28 requires on a POST.
fn mcp_headers(method: &str, name: Option<&str>) -> Vec<(String, String)> {
    let mut headers = vec![
        ("Content-Type".to_owned(), "application/json".to_owned()),
        (
            "Accept".to_owned(),
            "application/json, text/event-stream".to_owned(),
        ),
        ("MCP-Protocol-Version".to_owned(), "2026-07-28".to_owned()),
        ("Mcp-Method".to_owned(), method.to_owned()),
    ];
    if let Some(name) = name {
        headers.push(("Mcp-Name".to_owned(), name.to_owned()));
    }
    headers
}

/// A 2026-07-28 request: `params` with `_meta` declaring `capabilities`.
fn body(id: u64, method: &str, params: &Value, capabilities: &Value) -> Vec<u8> {
    let mut params = params.clone();
    params["_meta"] = json!({
        "io.modelcontextprotocol/protocolVersion": "2026-07-28",
        "io.modelcontextprotocol/clientInfo": {"name": "modhost-it-replicas", "version": "0"},
        "io.modelcontextprotocol/clientCapabilities": capabilities,
    });
    serde_json::to_vec(&json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params}))
        .expect("JSON")
}

/// One request to `addr` on a fresh connection, which must be answered:
/// the JSON-RPC message, and the upstream nginx says served it (`None`
/// straight to a replica).
#[track_caller]
fn request(
    addr: SocketAddr,
    method: &str,
    params: &Value,
    capabilities: &Value,
) -> (Value, Option<SocketAddr>) {
    let name = params["name"].as_str();
    let response = http::Client::new(addr)
        .post(
            "/mcp",
            &mcp_headers(method, name),
            &body(1, method, params, capabilities),
        )
        .unwrap_or_else(|e| panic!("{method} to {addr}: {e}"));
    let message = response
        .message()
        .unwrap_or_else(|e| panic!("{method} to {addr}: HTTP {}: {e}", response.status));
    let upstream = response.header(UPSTREAM_HEADER).and_then(last_upstream);
    (message, upstream)
}

/// The `result` of a message that must have one.
#[track_caller]
fn result_of(message: &Value) -> Value {
    message
        .get("result")
        .cloned()
        .unwrap_or_else(|| panic!("not a result: {message:#}"))
}

/// A home, two replicas on it sharing a signing key, and nginx in front.
/// (Fields drop in this order: nginx and the replicas are gone before
/// their folder is.)
struct Cluster {
    nginx: Nginx,
    replicas: Vec<Replica>,
    home: Home,
}

impl Cluster {
    /// `install` puts the modules in the home (pinned); then the key, the
    /// replicas and nginx.
    fn start(install: impl FnOnce(&Home)) -> Cluster {
        let home = Home::new();
        install(&home);
        let key = home.outside().join("signing-key");
        write_signing_key(&key);
        home.write_config(&format!(
            "[http]\nsigning_key_file = {:?}\n",
            key.to_str().expect("a UTF-8 path")
        ));
        let replicas = vec![Replica::start(&home, "a"), Replica::start(&home, "b")];
        let upstreams: Vec<SocketAddr> = replicas.iter().map(|r| r.addr).collect();
        let nginx = Nginx::start(&home.outside().join("nginx"), &upstreams);
        Cluster {
            nginx,
            replicas,
            home,
        }
    }

    /// The name of the tool starting with `prefix`, as both replicas list it.
    #[track_caller]
    fn tool(&self, prefix: &str) -> String {
        let names: Vec<Vec<String>> = self
            .replicas
            .iter()
            .map(|replica| {
                let (listed, _) = request(replica.addr, "tools/list", &json!({}), &json!({}));
                result_of(&listed)["tools"]
                    .as_array()
                    .unwrap_or_else(|| panic!("no tools in {listed}"))
                    .iter()
                    .filter_map(|t| t["name"].as_str().map(str::to_owned))
                    .collect()
            })
            .collect();
        assert_eq!(names[0], names[1], "the replicas list different tools");
        names[0]
            .iter()
            .find(|n| n.starts_with(prefix))
            .unwrap_or_else(|| panic!("no tool {prefix}… in {:?}", names[0]))
            .clone()
    }

    /// The audit log of the shared home is intact and holds `records`
    /// records, once the replicas' writers caught up.
    #[track_caller]
    fn audit_is_intact_with(&self, records: u64) {
        let started = Instant::now();
        loop {
            let run = self.home.run(&["audit", "verify", "--json"]);
            let report = run.json();
            let intact = run.code == 0 && report["verdict"]["status"] == "intact";
            if intact && report["records"] == json!(records) {
                return;
            }
            let behind = intact && report["records"].as_u64() < Some(records);
            assert!(
                behind && started.elapsed() < Duration::from_secs(10),
                "the audit log of the shared home is not intact with {records} records: {report:#}"
            );
            std::thread::sleep(Duration::from_millis(100));
        }
    }
}

/// A signing key file as an operator makes one (`openssl rand -hex 32`):
/// a line of 64 characters, mode 0600.
fn write_signing_key(path: &Path) {
    use std::os::unix::fs::OpenOptionsExt;
    let mut bytes = [0u8; 32];
    std::fs::File::open("/dev/urandom")
        .and_then(|mut f| f.read_exact(&mut bytes))
        .expect("random bytes");
    let hex: String = bytes.iter().map(|b| format!("{b:02x}")).collect();
    std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .open(path)
        .and_then(|mut f| writeln!(f, "{hex}"))
        .expect("write the signing key");
}

/// A running `modhost mcp --http 127.0.0.1:0`.
struct Replica {
    child: Child,
    addr: SocketAddr,
    stderr: PathBuf,
}

impl Replica {
    /// Start a replica on `home` and wait for the line naming its address.
    fn start(home: &Home, name: &str) -> Replica {
        let stderr = home.outside().join(format!("replica-{name}.stderr"));
        let mut command = Command::new(&binaries().modhost);
        command
            .arg("--home")
            .arg(home.path())
            .arg("--workspace")
            .arg(home.workspace())
            .args(["mcp", "--http", "127.0.0.1:0"])
            .current_dir(home.workspace())
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(std::fs::File::create(&stderr).expect("stderr file"));
        for (key, _) in std::env::vars_os() {
            let key = key.to_string_lossy();
            if key.starts_with("MODHOST_") || key == "RUST_LOG" {
                command.env_remove(key.as_ref());
            }
        }
        let mut child = command.spawn().expect("start modhost mcp --http");
        let started = Instant::now();
        let addr = loop {
            let said = std::fs::read_to_string(&stderr).unwrap_or_default();
            if let Some(addr) = said.lines().find_map(|line| {
                let url = line.split("serving MCP over HTTP at http://").nth(1)?;
                url.strip_suffix("/mcp")?.parse::<SocketAddr>().ok()
            }) {
                break addr;
            }
            if let Some(status) = child.try_wait().expect("wait for modhost") {
                panic!("modhost mcp --http exited ({status}) before serving:\n{said}");
            }
            if started.elapsed() > START_WITHIN {
                let _ = child.kill();
                let _ = child.wait();
                panic!("modhost mcp --http did not say it serves within {START_WITHIN:?}:\n{said}");
            }
            std::thread::sleep(Duration::from_millis(20));
        };
        Replica {
            child,
            addr,
            stderr,
        }
    }

    /// SIGKILL, and reap: when this returns, the process and its sockets
    /// are gone.
    fn kill(&mut self) {
        self.child.kill().expect("SIGKILL the replica");
        self.child.wait().expect("reap the replica");
    }

    /// How many `tools/call`s this replica answered with a result, as its
    /// `/metrics` counts them.
    #[track_caller]
    fn calls_counted(&self) -> u64 {
        let response = http::Client::new(self.addr)
            .get("/metrics")
            .unwrap_or_else(|e| panic!("GET /metrics of {}: {e}", self.addr));
        assert_eq!(response.status, 200, "GET /metrics of {}", self.addr);
        let text = String::from_utf8_lossy(&response.body).into_owned();
        metrics::calls_ok(&text).unwrap_or_else(|| {
            panic!(
                "no counter of calls answered in /metrics of {}:\n{text}\nstderr:\n{}",
                self.addr,
                std::fs::read_to_string(&self.stderr).unwrap_or_default()
            )
        })
    }
}

impl Drop for Replica {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// The Prometheus text `/metrics` serves, read as far as this test needs.
mod metrics {
    /// The `tools/call`s answered with a result (`modhost_mcp_calls_total`
    /// with `result="ok"`), or `None` when there is no such sample. The
    /// counter has no tool label (labels come from closed sets only).
    pub fn calls_ok(text: &str) -> Option<u64> {
        text.lines()
            .filter(|l| !l.starts_with('#'))
            .find_map(|line| {
                let (series, value) = line.rsplit_once(' ')?;
                let ok = series == "modhost_mcp_calls_total{result=\"ok\"}";
                ok.then(|| value.parse::<f64>().ok().map(|v| v as u64))?
            })
    }
}

/// nginx, one process, round-robin over the replicas.
struct Nginx {
    child: Child,
    addr: SocketAddr,
}

impl Nginx {
    fn start(dir: &Path, upstreams: &[SocketAddr]) -> Nginx {
        let binary = nginx_binary();
        std::fs::create_dir_all(dir).expect("nginx folder");
        let port = free_port();
        let addr: SocketAddr = format!("127.0.0.1:{port}").parse().expect("address");
        let servers: String = upstreams
            .iter()
            .map(|u| format!("        server {u} max_fails=1 fail_timeout=60s;\n"))
            .collect();
        let d = dir.display();
        let config = format!(
            "daemon off;\n\
             master_process off;\n\
             worker_processes 1;\n\
             pid {d}/nginx.pid;\n\
             error_log {d}/error.log info;\n\
             events {{ worker_connections 1024; }}\n\
             http {{\n\
             \x20   access_log {d}/access.log;\n\
             \x20   client_body_temp_path {d}/client_body;\n\
             \x20   proxy_temp_path {d}/proxy;\n\
             \x20   fastcgi_temp_path {d}/fastcgi;\n\
             \x20   uwsgi_temp_path {d}/uwsgi;\n\
             \x20   scgi_temp_path {d}/scgi;\n\
             \x20   upstream modhost {{\n\
             {servers}\
             \x20   }}\n\
             \x20   server {{\n\
             \x20       listen {addr};\n\
             \x20       location / {{\n\
             \x20           proxy_pass http://modhost;\n\
             \x20           proxy_http_version 1.1;\n\
             \x20           proxy_set_header Host $http_host;\n\
             \x20           proxy_set_header Connection \"\";\n\
             \x20           proxy_buffering off;\n\
             \x20           proxy_connect_timeout 5s;\n\
             \x20           proxy_read_timeout 120s;\n\
             \x20           proxy_next_upstream error timeout;\n\
             \x20           proxy_next_upstream_tries 2;\n\
             \x20           add_header X-Modhost-Upstream $upstream_addr always;\n\
             \x20       }}\n\
             \x20   }}\n\
             }}\n"
        );
        let conf = dir.join("nginx.conf");
        std::fs::write(&conf, config).expect("nginx.conf");
        let log = dir.join("nginx.out");
        let mut child = Command::new(&binary)
            .arg("-p")
            .arg(dir)
            .arg("-c")
            .arg(&conf)
            .arg("-e")
            .arg(dir.join("error.log"))
            .stdin(Stdio::null())
            .stdout(std::fs::File::create(&log).expect("nginx output"))
            .stderr(std::fs::File::create(dir.join("nginx.err")).expect("nginx errors"))
            .spawn()
            .unwrap_or_else(|e| panic!("start {}: {e}", binary.display()));
        let started = Instant::now();
        while TcpStream::connect(addr).is_err() {
            if let Some(status) = child.try_wait().expect("wait for nginx") {
                panic!(
                    "nginx exited ({status}) before listening:\n{}\n{}",
                    std::fs::read_to_string(dir.join("nginx.err")).unwrap_or_default(),
                    std::fs::read_to_string(dir.join("error.log")).unwrap_or_default()
                );
            }
            assert!(
                started.elapsed() < START_WITHIN,
                "nginx did not listen on {addr} within {START_WITHIN:?}"
            );
            std::thread::sleep(Duration::from_millis(20));
        }
        Nginx { child, addr }
    }
}

impl Drop for Nginx {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// The nginx executable: on `PATH` or where Debian puts it.
fn nginx_binary() -> PathBuf {
    let path = std::env::var_os("PATH").unwrap_or_default();
    std::env::split_paths(&path)
        .chain([PathBuf::from("/usr/sbin")])
        .map(|dir| dir.join("nginx"))
        .find(|candidate| candidate.is_file())
        .unwrap_or_else(|| {
            panic!(
                "nginx is not installed, and this test puts it in front of the replicas. \
                 Install it with `apt-get install -y nginx` (tests/setup does)"
            )
        })
}

/// A loopback port nothing listens on now.
fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .expect("a free port")
        .port()
}

/// HTTP/1.1 over a plain socket, as far as these tests need.
mod http {
    use super::*;

    /// A client with one keep-alive connection, opened when needed.
    pub struct Client {
        addr: SocketAddr,
        connection: Option<BufReader<TcpStream>>,
    }

    /// A whole answer.
    #[derive(Debug)]
    pub struct Response {
        pub status: u16,
        /// Names lowercased.
        pub headers: Vec<(String, String)>,
        pub body: Vec<u8>,
    }

    impl Response {
        pub fn header(&self, name: &str) -> Option<&str> {
            self.headers
                .iter()
                .find(|(n, _)| n == name)
                .map(|(_, v)| v.as_str())
        }

        /// The JSON-RPC message answering the request: the body, or the
        /// event of an SSE stream that carries an `id`.
        pub fn message(&self) -> Result<Value, String> {
            let text =
                std::str::from_utf8(&self.body).map_err(|_| "a body not UTF-8".to_owned())?;
            let sse = self
                .header("content-type")
                .is_some_and(|t| t.starts_with("text/event-stream"));
            if !sse {
                return serde_json::from_str(text).map_err(|e| format!("not JSON ({e}): {text}"));
            }
            text.split("\n\n")
                .filter_map(|event| {
                    let data: Vec<&str> = event
                        .lines()
                        .filter_map(|l| l.strip_prefix("data:"))
                        .map(str::trim_start)
                        .collect();
                    serde_json::from_str::<Value>(&data.join("\n")).ok()
                })
                .find(|message| message.get("id").is_some())
                .ok_or_else(|| format!("no response in the event stream: {text}"))
        }
    }

    impl Client {
        pub fn new(addr: SocketAddr) -> Client {
            Client {
                addr,
                connection: None,
            }
        }

        pub fn post(
            &mut self,
            path: &str,
            headers: &[(String, String)],
            body: &[u8],
        ) -> Result<Response, String> {
            self.send("POST", path, headers, body)
        }

        pub fn get(&mut self, path: &str) -> Result<Response, String> {
            self.send("GET", path, &[], &[])
        }

        /// One exchange; any failure closes the connection (a closed or
        /// reset connection is a failed call, never retried here).
        fn send(
            &mut self,
            method: &str,
            path: &str,
            headers: &[(String, String)],
            body: &[u8],
        ) -> Result<Response, String> {
            let mut request = format!(
                "{method} {path} HTTP/1.1\r\nHost: {}\r\nContent-Length: {}\r\n",
                self.addr,
                body.len()
            );
            for (name, value) in headers {
                request.push_str(&format!("{name}: {value}\r\n"));
            }
            request.push_str("\r\n");
            let mut bytes = request.into_bytes();
            bytes.extend_from_slice(body);
            let outcome = self.exchange(&bytes);
            match outcome {
                Ok((response, keep)) => {
                    if !keep {
                        self.connection = None;
                    }
                    Ok(response)
                }
                Err(e) => {
                    self.connection = None;
                    Err(e)
                }
            }
        }

        fn exchange(&mut self, bytes: &[u8]) -> Result<(Response, bool), String> {
            if self.connection.is_none() {
                let stream = TcpStream::connect(self.addr)
                    .map_err(|e| format!("connect to {}: {e}", self.addr))?;
                stream.set_nodelay(true).map_err(|e| e.to_string())?;
                stream
                    .set_read_timeout(Some(ANSWER_WITHIN))
                    .map_err(|e| e.to_string())?;
                self.connection = Some(BufReader::new(stream));
            }
            let reader = self.connection.as_mut().expect("connected");
            reader
                .get_mut()
                .write_all(bytes)
                .map_err(|e| format!("send: {e}"))?;
            read_response(reader).map_err(|e| format!("the answer broke off: {e}"))
        }
    }

    fn broken(what: String) -> std::io::Error {
        std::io::Error::new(std::io::ErrorKind::UnexpectedEof, what)
    }

    /// One response and whether the connection stays open.
    fn read_response(reader: &mut BufReader<TcpStream>) -> std::io::Result<(Response, bool)> {
        let mut line = String::new();
        if reader.read_line(&mut line)? == 0 {
            return Err(broken("closed before a status line".into()));
        }
        let status = line
            .split_whitespace()
            .nth(1)
            .and_then(|s| s.parse().ok())
            .ok_or_else(|| broken(format!("not a status line: {line:?}")))?;
        let mut headers = Vec::new();
        loop {
            line.clear();
            if reader.read_line(&mut line)? == 0 {
                return Err(broken("closed in the headers".into()));
            }
            let header = line.trim_end();
            if header.is_empty() {
                break;
            }
            if let Some((name, value)) = header.split_once(':') {
                headers.push((name.trim().to_ascii_lowercase(), value.trim().to_owned()));
            }
        }
        let find = |name: &str| {
            headers
                .iter()
                .find(|(n, _)| n == name)
                .map(|(_, v): &(String, String)| v.clone())
        };
        let mut keep = !find("connection").is_some_and(|c| c.eq_ignore_ascii_case("close"));
        let mut body = Vec::new();
        if find("transfer-encoding").is_some_and(|t| t.eq_ignore_ascii_case("chunked")) {
            loop {
                line.clear();
                if reader.read_line(&mut line)? == 0 {
                    return Err(broken("closed inside a chunked body".into()));
                }
                let size = usize::from_str_radix(line.trim().split(';').next().unwrap_or(""), 16)
                    .map_err(|_| broken(format!("not a chunk size: {line:?}")))?;
                if size == 0 {
                    loop {
                        line.clear();
                        if reader.read_line(&mut line)? == 0 || line.trim().is_empty() {
                            break;
                        }
                    }
                    break;
                }
                let start = body.len();
                body.resize(start + size, 0);
                reader.read_exact(&mut body[start..])?;
                line.clear();
                reader.read_line(&mut line)?;
            }
        } else if let Some(length) = find("content-length") {
            let length: usize = length
                .parse()
                .map_err(|_| broken(format!("bad content-length {length:?}")))?;
            body.resize(length, 0);
            reader.read_exact(&mut body)?;
        } else if (100..200).contains(&status) || status == 204 || status == 304 {
        } else {
            reader.read_to_end(&mut body)?;
            keep = false;
        }
        Ok((
            Response {
                status,
                headers,
                body,
            },
            keep,
        ))
    }
}

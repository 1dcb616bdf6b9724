//! Session lifetime: one server serving call after call, for a module whose
//! manifest says `[server] lifetime = "session"`.
//!
//! The host keeps such a module's bridge process for one client connection
//! (`modhost mcp` over stdio) and writes one `invoke` line per call on the
//! same stdin; the bridge answers each with one response line and reads
//! the next. Run per call (`modhost invoke`, HTTP), stdin ends after the
//! first request, and the bridge ends the server and exits as after any
//! call.
//!
//! Design decisions:
//!
//! - **The server starts at the session's first call** with the roots of
//!   that request, which in a session are the union of every tool's
//!   (the host's key): they are its MCP roots, its `{roots}` arguments
//!   and, the first of them, its working folder, for the whole session. A
//!   later request whose roots or binaries differ (never sent by a host
//!   that keys its sessions by them) ends the server and starts another
//!   with the new ones.
//! - **`tools/list` is compared with the pin on every call,** as per call:
//!   a server that changes its tools mid-session runs nothing more.
//! - **A server that failed is not reused:** any error but the tool's own
//!   answer (`isError`, invalid arguments, an error to `tools/call`) ends
//!   it; the next call starts another.
//! - **Nothing the server writes between calls is taken as an answer.**
//!   Before a call is sent, anything the server wrote since its last
//!   answer (looked at without waiting) ends it, and the call starts a new
//!   one, as the host does with the bridge one level up. What it writes in
//!   the moment after that look cannot answer the call either: a kept
//!   server's request ids are a keyed hash ([`Session::use_unpredictable_ids`]),
//!   so it cannot know them before they are sent, and an answer to an id
//!   the bridge did not send is `mcp_bad_message`.
//! - **The server ends with the session, and so does all it started:** at
//!   stdin's end the bridge closes the
//!   server's stdin, kills and reaps it, and, its last act, kills its own
//!   process group, so a child the server left running goes too; a
//!   watcher forked at the session's start does the same when the bridge
//!   itself is killed with the host (`session_group.rs`).

use std::collections::BTreeMap;
use std::io::{BufRead, Write};
use std::path::Path;
use std::process::ChildStdin;

use modproto::{GrantedRoot, InvokeParams, Message, ModuleErrorKind, Request, Response};
use serde_json::Value;

use crate::error::{BridgeError, Kind};
use crate::invoke::{Relayed, answered, check_pinned, tool_of};
use crate::manifest::{Lifetime, Manifest};
use crate::pinned::PinnedTools;
use crate::server::{CallRoot, Server, ServerSpec, with_exit};
use crate::session::Session;

/// Serve the session that `first` (the first request line) opens, when it
/// is an `invoke` of a module marked `session`: every request up to the
/// end of `input`. `None` when it is not (the line is answered as ever).
pub(crate) fn serve_if_session(
    first: &str,
    input: &mut dyn BufRead,
    out: &mut dyn Write,
) -> Option<i32> {
    if !is_invoke(first) {
        return None;
    }
    let folder = crate::request::folder().ok()?;
    let (manifest, pinned) = session_module(&folder)?;
    // Before any server starts, while the bridge has one thread.
    let watcher = crate::session_group::watch_own_group();
    let status = serve_session(&folder, &manifest, &pinned, first, input, out);
    // Every response was written and flushed by now.
    crate::session_group::end_own_group();
    drop(watcher);
    Some(status)
}

/// The manifest and pinned tools of the module in `folder`, when it is
/// marked `session`.
fn session_module(folder: &Path) -> Option<(Manifest, PinnedTools)> {
    let (manifest, pinned) = crate::describe::load(folder).ok()?;
    (manifest.server.lifetime == Lifetime::Session).then_some((manifest, pinned))
}

/// [`serve_if_session`] for the module in `folder`, without the group's
/// watcher and end (a test's process is no bridge's group).
#[cfg(test)]
fn serve_session_in(
    folder: &Path,
    first: &str,
    input: &mut dyn BufRead,
    out: &mut dyn Write,
) -> Option<i32> {
    let (manifest, pinned) = session_module(folder)?;
    Some(serve_session(folder, &manifest, &pinned, first, input, out))
}

/// Serve every request of the session of the `session` module in
/// `folder`, from `first` to the end of `input`; the exit status.
fn serve_session(
    folder: &Path,
    manifest: &Manifest,
    pinned: &PinnedTools,
    first: &str,
    input: &mut dyn BufRead,
    out: &mut dyn Write,
) -> i32 {
    let mut resident = ResidentServer {
        folder,
        manifest,
        pinned,
        running: None,
    };
    let mut line = first.to_owned();
    loop {
        let response = if is_invoke(&line) {
            resident.answer(&line, out)
        } else {
            crate::request::answer(&line, out)
        };
        let written =
            writeln!(out, "{}", Message::Response(response).to_line()).and_then(|()| out.flush());
        if let Err(e) = written {
            eprintln!("mcp_bridge: writing the response failed: {e}");
            resident.end();
            return 1;
        }
        line = match crate::request::read_request(&mut *input) {
            Ok(Some(next)) => next,
            Ok(None) => break,
            Err(response) => {
                // A line the bridge cannot read: said, and the session ends.
                let _ = writeln!(out, "{}", Message::Response(response).to_line())
                    .and_then(|()| out.flush());
                break;
            }
        };
    }
    resident.end();
    0
}

fn is_invoke(line: &str) -> bool {
    matches!(Message::parse(line), Ok(Message::Request(request)) if request.method == modproto::METHOD_INVOKE)
}

/// The session's server, once started.
struct Running {
    server: Server,
    session: Session<ChildStdin>,
    spec: ServerSpec,
    /// What it was started for: later requests must say the same.
    roots: BTreeMap<String, GrantedRoot>,
    binaries: BTreeMap<String, String>,
}

struct ResidentServer<'a> {
    folder: &'a Path,
    manifest: &'a Manifest,
    pinned: &'a PinnedTools,
    running: Option<Running>,
}

impl ResidentServer<'_> {
    /// Answer one `invoke` line.
    fn answer(&mut self, line: &str, out: &mut dyn Write) -> Response {
        let Ok(Message::Request(Request { id, params, .. })) = Message::parse(line) else {
            // `is_invoke` said it is one.
            return crate::request::answer(line, out);
        };
        let params = match serde_json::from_value::<InvokeParams>(params.unwrap_or(Value::Null)) {
            Ok(params) => params,
            Err(e) => {
                return Response::err(id, crate::request::invalid_params("invoke", &e).to_rpc());
            }
        };
        let outcome = self
            .call(&params, out)
            .and_then(|result| crate::request::to_value(&result));
        match outcome {
            Ok(result) => Response::ok(id, result),
            Err(error) => Response::err(id, error.to_rpc()),
        }
    }

    fn call(
        &mut self,
        params: &InvokeParams,
        out: &mut dyn Write,
    ) -> Result<modproto::InvokeResult, BridgeError> {
        let tool = tool_of(self.manifest, self.pinned, &params.capability)?;
        if self
            .running
            .as_ref()
            .is_some_and(|r| r.roots != params.roots || r.binaries != params.binaries)
        {
            self.end();
        }
        if self
            .running
            .as_ref()
            .is_some_and(|r| r.session.wrote_unasked())
        {
            // Output between calls (an answer written before it was asked,
            // a late notification, its output closed): never taken as this
            // call's answer. The server ends; this call gets a new one.
            eprintln!(
                "mcp_bridge: the MCP server wrote between calls; it was ended and a new one started for this call"
            );
            self.end();
        }
        let mut relay = Relayed { out };
        if self.running.is_none() {
            self.running = Some(self.start(params, &mut relay)?);
        }
        let Some(running) = self.running.as_mut() else {
            unreachable!("started just above");
        };
        let outcome = (|| {
            check_pinned(
                &mut running.session,
                self.manifest,
                self.pinned,
                &tool,
                &mut relay,
            )?;
            running
                .session
                .call_tool(&tool, &params.input, &params.request_id, &mut relay)
        })();
        let outcome = match outcome {
            Ok(outcome) => outcome,
            Err(e) => {
                let e = with_exit(e, &mut running.server);
                self.end();
                return Err(e);
            }
        };
        let result = answered(outcome, &running.spec.roots);
        if let Err(e) = &result
            && !matches!(
                e.kind,
                Kind::Protocol(ModuleErrorKind::Failed | ModuleErrorKind::InvalidInput)
                    | Kind::Bridge(crate::error::BridgeKind::ServerError)
            )
        {
            // A result the bridge could not read: the server is not trusted
            // with the next call.
            self.end();
        }
        result
    }

    /// Start the server for the session, with every root of `params` (the
    /// union the host granted), in the order the tools name them.
    fn start(
        &self,
        params: &InvokeParams,
        relay: &mut Relayed<'_>,
    ) -> Result<Running, BridgeError> {
        let mut order: Vec<String> = Vec::new();
        for name in self.pinned.names() {
            for root in self.manifest.grant(name).root_order() {
                if !order.iter().any(|known| known == root) {
                    order.push(root.to_owned());
                }
            }
        }
        let roots: Vec<CallRoot> = order
            .into_iter()
            .filter_map(|name| {
                let root = params.roots.get(&name)?.clone();
                Some(CallRoot { name, root })
            })
            .collect();
        let spec = ServerSpec::new(self.manifest, self.folder, &params.binaries, roots)?;
        let (mut server, mut session) = Server::start(&spec, params.max_output_bytes)?;
        session.use_unpredictable_ids();
        if let Err(e) = session.initialize(relay) {
            let e = with_exit(e, &mut server);
            server.end(session);
            return Err(e);
        }
        Ok(Running {
            server,
            session,
            spec,
            roots: params.roots.clone(),
            binaries: params.binaries.clone(),
        })
    }

    /// End the server, if one runs.
    fn end(&mut self) {
        if let Some(running) = self.running.take() {
            running.server.end(running.session);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    /// A module folder whose server (a POSIX sh script) answers every
    /// request by its method, for as long as its stdin is open: each
    /// `tools/call` with its pid and how many calls it has answered.
    fn session_module(dir: &Path, lifetime: &str) {
        let manifest = format!(
            "id = \"demo\"\nversion = \"1.0.0\"\n\n[server]\ncommand = \"sh\"\nargs = [\"{{module}}/server.sh\"]\n{lifetime}\n[roots.workspace]\nkind = \"workspace\"\naccess = \"read\"\n\n[tools.echo]\nreads = [\"workspace\"]\n"
        );
        std::fs::write(dir.join(crate::manifest::FILE), manifest).unwrap();
        let tool = json!({"name": "echo", "description": "Echo.",
                          "inputSchema": {"type": "object", "properties": {"text": {"type": "string"}}}});
        let pinned = json!({"protocolVersion": "2025-06-18",
                            "serverInfo": {"name": "demo", "version": "1.0.0"}, "tools": [tool]});
        std::fs::write(dir.join(crate::pinned::FILE), pinned.to_string()).unwrap();
        let script = format!(
            r#"TOOL='{tool}'
n=0
while read -r line; do
  id=$(printf '%s' "$line" | sed -n 's/.*"id":\([0-9]*\).*/\1/p')
  case "$line" in
    *'"initialize"'*) printf '%s\n' "{{\"jsonrpc\":\"2.0\",\"id\":$id,\"result\":{{\"protocolVersion\":\"2025-06-18\",\"serverInfo\":{{\"name\":\"demo\",\"version\":\"1.0.0\"}}}}}}" ;;
    *'"tools/list"'*) printf '%s\n' "{{\"jsonrpc\":\"2.0\",\"id\":$id,\"result\":{{\"tools\":[$TOOL]}}}}" ;;
    *'"tools/call"'*) n=$((n+1)); printf '%s\n' "{{\"jsonrpc\":\"2.0\",\"id\":$id,\"result\":{{\"content\":[{{\"type\":\"text\",\"text\":\"$$ $n $(pwd)\"}}]}}}}" ;;
  esac
done
"#
        );
        std::fs::write(dir.join("server.sh"), script).unwrap();
    }

    fn invoke_line(root: &Path) -> String {
        json!({"jsonrpc": "2.0", "id": 1, "method": "invoke", "params": {
            "protocol": "1.0", "contract_version": "1.0", "request_id": "r-1",
            "capability": "demo.echo", "input": {"text": "hi"},
            "roots": {"workspace": {"path": root.display().to_string(), "kind": "workspace", "access": "read"}},
            "binaries": {"sh": "/bin/sh"},
            "deadline_ms": 10000, "max_output_bytes": 1048576,
        }})
        .to_string()
    }

    /// Each call's `pid count cwd`, from the bridge's response lines.
    fn answers(out: &[u8]) -> Vec<(String, u32, String)> {
        String::from_utf8_lossy(out)
            .lines()
            .map(|line| {
                let message: Value = serde_json::from_str(line).unwrap();
                let text = message["result"]["text"]
                    .as_str()
                    .unwrap_or_else(|| panic!("not a result: {line}"));
                let mut words = text.split(' ');
                let pid = words.next().unwrap().to_owned();
                let count = words.next().unwrap().parse().unwrap();
                (pid, count, words.collect::<Vec<_>>().join(" "))
            })
            .collect()
    }

    fn gone(pid: &str) -> bool {
        for _ in 0..200 {
            let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
            if stat.is_empty() || stat.contains(") Z ") {
                return true;
            }
            std::thread::sleep(std::time::Duration::from_millis(10));
        }
        false
    }

    #[test]
    fn a_session_module_serves_every_call_of_its_stdin_on_one_server_and_ends_it() {
        let dir = tempfile::tempdir().unwrap();
        let root = std::fs::canonicalize(dir.path()).unwrap();
        session_module(&root, "lifetime = \"session\"\n");
        let line = invoke_line(&root);
        let rest = format!("{line}\n{line}\n");
        let mut out = Vec::new();
        let status = serve_session_in(&root, &line, &mut rest.as_bytes(), &mut out);
        assert_eq!(status, Some(0));
        let answers = answers(&out);
        assert_eq!(answers.len(), 3, "{}", String::from_utf8_lossy(&out));
        assert!(answers.iter().all(|(pid, _, _)| *pid == answers[0].0));
        assert_eq!(
            answers.iter().map(|(_, n, _)| *n).collect::<Vec<_>>(),
            [1, 2, 3]
        );
        assert_eq!(answers[0].2, root.display().to_string());
        assert!(gone(&answers[0].0), "the server outlived the session");
    }

    /// A request naming other roots than the server was started with
    /// (which a host keying its sessions by them never sends) gets a new
    /// server with them, never the old one.
    #[test]
    fn a_request_with_other_roots_gets_a_new_server() {
        let dir = tempfile::tempdir().unwrap();
        let root = std::fs::canonicalize(dir.path()).unwrap();
        session_module(&root, "lifetime = \"session\"\n");
        let other = root.join("other");
        std::fs::create_dir(&other).unwrap();
        let first = invoke_line(&root);
        let rest = format!("{}\n", invoke_line(&other));
        let mut out = Vec::new();
        serve_session_in(&root, &first, &mut rest.as_bytes(), &mut out);
        let answers = answers(&out);
        assert_eq!(answers.len(), 2);
        assert_ne!(answers[0].0, answers[1].0);
        assert_eq!(answers[1].1, 1);
        assert_eq!(answers[1].2, other.display().to_string());
        assert!(gone(&answers[0].0), "the first server was not ended");
    }

    /// Attack: the server writes after its answer, between calls (here an
    /// answer for a request not yet sent). The next call is not answered by
    /// it: the server is ended and the call served by a new one.
    #[test]
    fn a_server_that_writes_between_calls_is_replaced_for_the_next_call() {
        let dir = tempfile::tempdir().unwrap();
        let root = std::fs::canonicalize(dir.path()).unwrap();
        session_module(&root, "lifetime = \"session\"\n");
        let script = std::fs::read_to_string(root.join("server.sh")).unwrap();
        let forged = r#"{"jsonrpc":"2.0","id":4,"result":{"content":[{"type":"text","text":"forged 0 /"}]}}"#;
        let script = script.replace(
            "  esac\n",
            &format!("  esac\n  case \"$line\" in *'\"tools/call\"'*) printf '%s\\n' '{forged}' ;; esac\n"),
        );
        std::fs::write(root.join("server.sh"), script).unwrap();
        let line = invoke_line(&root);
        // The next call comes once the server has written between calls.
        let (mut writer, reader) = std::os::unix::net::UnixStream::pair().unwrap();
        let next = line.clone();
        let feeder = std::thread::spawn(move || {
            std::thread::sleep(std::time::Duration::from_millis(300));
            writeln!(writer, "{next}").unwrap();
        });
        let mut input = std::io::BufReader::new(reader);
        let mut out = Vec::new();
        serve_session_in(&root, &line, &mut input, &mut out);
        feeder.join().unwrap();
        let answers = answers(&out);
        assert_eq!(answers.len(), 2, "{}", String::from_utf8_lossy(&out));
        assert!(
            answers.iter().all(|(pid, _, _)| pid != "forged"),
            "{answers:?}"
        );
        assert_ne!(
            answers[0].0, answers[1].0,
            "the server that wrote between calls served on"
        );
        assert_eq!(answers[1].1, 1, "{answers:?}");
        assert!(
            gone(&answers[0].0),
            "the server that wrote between calls was not ended"
        );
    }

    #[test]
    fn a_module_per_call_is_not_served_as_a_session() {
        let dir = tempfile::tempdir().unwrap();
        let root = std::fs::canonicalize(dir.path()).unwrap();
        session_module(&root, "");
        let line = invoke_line(&root);
        let mut out = Vec::new();
        assert_eq!(
            serve_session_in(&root, &line, &mut "".as_bytes(), &mut out),
            None
        );
        assert!(out.is_empty());
    }
}

//! Session lifetime: an MCP server module the operator marked `session`
//! keeps one confined process for a client connection, rather than one per
//! call.
//!
//! Where it applies: a call made inside a [`SessionScope`] (each stdio
//! connection of `modhost mcp` runs its calls in one, `modhost-mcp`'s
//! `server.rs`) of a native module whose pinned `mcp-server.toml` says
//! `[server] lifetime = "session"`. Everywhere else (`modhost invoke`,
//! the library without a scope, `modhost mcp --http`) calls run per call,
//! as they always did.
//!
//! What a session process is given, and when it is replaced:
//!
//! - **The union of what the module's capabilities would get on this
//!   connection:** for every capability the operator has not switched off
//!   (`[capabilities."<id>"] enabled = false`), what `Host::grants_in` gives it
//!   (roots with the wider access of the two when two tools name a root
//!   differently, binaries), its network as the operator narrowed it (and
//!   the connection's lockdown), and the secrets granted to it. A grant a
//!   capability cannot get now (a secret without a value) is left out of
//!   the union, not added.
//! - **Keyed by that union, exactly.** Each call computes it again; when
//!   it differs from the running process's (the client's roots changed,
//!   lockdown narrowed the network, the operator changed config.toml or
//!   secrets, the module was re-pinned: its snapshot path moves), the old
//!   process is ended and a new one started. A process whose confinement a
//!   start now would not prepare the same, which wrote between calls, or
//!   whose leader died, is replaced too
//!   (`modhost_runner::native::resident::Resident::usable`).
//! - **Started through the same confined spawn** as a per-call process
//!   (landlock, seccomp, process group, memory cgroup, environment rules,
//!   secrets as variables), and run one exchange per call under that call's
//!   deadline and output cap; any failure (timeout, cap, bad frame,
//!   cancellation) kills its group and the next call starts another.
//! - **One call at a time.** A call that finds the session's process busy
//!   with another call of the same connection runs per call (its own
//!   grants, its own process) rather than waiting.
//! - **Everything else stays per call,** in the pipeline around this:
//!   approval, policy, quotas, schema checks, audit records, masking (with
//!   every value the module's capabilities were granted, a superset of the
//!   process's), artifacts checked against the call's own roots.
//!
//! Design decisions:
//!
//! - **The host reads the lifetime from the pinned manifest** of the
//!   module's snapshot (only `[server] lifetime`), as it reads `id` and
//!   `[server] command` at install: no change to the descriptor, so no
//!   change to the wire contract, and the pin covers the file. The flag is
//!   therefore as much the operator's decision as the grants in that file.
//! - **A task-local scope,** entered by the connection around each call
//!   task ([`SessionScope::run`]), reaches the pipeline without a new
//!   argument on every `Backend`, `Toolbox` and `Invoker` method.
//! - **Ending is explicit and by drop:** [`SessionScope::end`] kills every
//!   idle process and keeps a busy one from being kept; dropping the last
//!   handle kills whatever is left (each process's group dies with it).
//! - **The hosts a session call reached are not reported per call:** the
//!   process's egress proxy lives as long as the process, so what it
//!   reached belongs to the session, not to a call (the pipeline's per-call
//!   ticket stays unused and reports nothing).

use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, MutexGuard};

use modhost_egress::{CallGrant, HostGrant, Ticket};
use modhost_runner::native::resident::Resident;
use modhost_runner::{Call, CallNetwork, CallSecret, Exchange, NotificationSink, RunError};
use modproto::{Access, Descriptor, InvokeParams, RootKind};

use crate::discovery::InstalledModule;
use crate::host::Host;

/// The manifest's file name beside an MCP server module's program (the
/// bridge's `manifest::FILE`; `install --mcp` writes it).
const MANIFEST_FILE: &str = "mcp-server.toml";

tokio::task_local! {
    static SCOPE: SessionScope;
}

/// The session of one client connection: the processes of its `session`
/// MCP server modules, at most one per module. Cheap to clone (clones
/// share the processes); [`SessionScope::end`] or dropping the last clone
/// kills them all.
#[derive(Clone, Default)]
pub struct SessionScope {
    inner: Arc<Mutex<Sessions>>,
}

impl std::fmt::Debug for SessionScope {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let sessions = lock(&self.inner);
        f.debug_struct("SessionScope")
            .field("modules", &sessions.slots.keys().collect::<Vec<_>>())
            .field("ended", &sessions.ended)
            .finish()
    }
}

#[derive(Default)]
struct Sessions {
    ended: bool,
    slots: HashMap<String, Slot>,
    /// Whether the manifest beside a snapshot's program says `session`,
    /// by program path (a snapshot never changes under its path).
    lifetimes: HashMap<PathBuf, bool>,
    next_token: u64,
}

enum Slot {
    Idle(Box<Live>),
    /// A call holds the process; the token says which.
    Busy(u64),
}

/// A session's process and what it was started with.
struct Live {
    key: SessionKey,
    resident: Resident,
    /// The process's egress proxy, open as long as it lives.
    _egress: Option<Ticket>,
}

/// Everything a session process's confinement is made from: a call whose
/// union differs in any of it gets a new process.
#[derive(Debug, Clone, PartialEq)]
struct SessionKey {
    program: PathBuf,
    digest: Option<String>,
    roots: Vec<modhost_runner::Grant>,
    kinds: BTreeMap<String, RootKind>,
    binaries: BTreeMap<String, PathBuf>,
    network: Option<CallGrant>,
    secrets: Vec<CallSecret>,
    module_writes: Vec<PathBuf>,
    confinement: String,
    memory_bytes: u64,
}

fn lock(sessions: &Mutex<Sessions>) -> MutexGuard<'_, Sessions> {
    sessions
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}

impl SessionScope {
    /// A scope with no process yet.
    pub fn new() -> SessionScope {
        SessionScope::default()
    }

    /// Run `call` (one call task of the connection) in this scope: a
    /// `session` module's call inside it uses the scope's process.
    pub async fn run<F: Future>(&self, call: F) -> F::Output {
        SCOPE.scope(self.clone(), call).await
    }

    /// End the session: every idle process is killed now, a busy one when
    /// its call ends, and no call of this scope starts another.
    pub fn end(&self) {
        let slots = {
            let mut sessions = lock(&self.inner);
            sessions.ended = true;
            std::mem::take(&mut sessions.slots)
        };
        // Dropped outside the lock: each drop kills a process group.
        drop(slots);
    }

    /// End every process of the scope now, but not the scope: its next
    /// calls start new processes under the grants they compute then. The
    /// connection entered lockdown: a process started before it holds a
    /// network (and a union) the lockdown no longer allows, and an idle
    /// one can act between calls, so it goes at once rather than at the
    /// module's next call (which lockdown may refuse outright, leaving it
    /// running until the connection ends). A process a call holds now is
    /// not put back when that call ends.
    pub fn retire_processes(&self) {
        let slots = std::mem::take(&mut lock(&self.inner).slots);
        // Dropped outside the lock: each drop kills a process group.
        drop(slots);
    }

    /// End `module`'s process in the scope the current call task runs
    /// in, if any: the host refused the module itself (disabled, unpinned,
    /// changed, broken, removed since the connection began), so no process
    /// of it may go on running with its grants until the connection ends.
    /// A process a call holds now is not put back when that call ends.
    pub(crate) fn end_module_in_current(module: &str) {
        let Some(scope) = SessionScope::current() else {
            return;
        };
        let slot = lock(&scope.inner).slots.remove(module);
        drop(slot);
    }

    /// The scope the current call task runs in, if any.
    pub(crate) fn current() -> Option<SessionScope> {
        SCOPE.try_with(SessionScope::clone).ok()
    }

    /// Whether `program`'s manifest marks it `session`, read once per
    /// program path: a snapshot never changes under its path (under
    /// `pins = "off"` a module runs from its own folder, and an edit of the
    /// line reaches the next connection).
    fn is_session(&self, program: &Path) -> bool {
        if let Some(known) = lock(&self.inner).lifetimes.get(program) {
            return *known;
        }
        let session = program
            .parent()
            .map(|folder| folder.join(MANIFEST_FILE))
            .and_then(|path| std::fs::read_to_string(path).ok())
            .is_some_and(|text| manifest_says_session(&text));
        lock(&self.inner)
            .lifetimes
            .insert(program.to_path_buf(), session);
        session
    }
}

/// Whether a manifest's text says `[server] lifetime = "session"`; any
/// other value, or a text that does not parse, is per call.
pub(crate) fn manifest_says_session(text: &str) -> bool {
    text.parse::<toml::Table>().ok().is_some_and(|table| {
        table
            .get("server")
            .and_then(|server| server.get("lifetime"))
            .and_then(toml::Value::as_str)
            == Some("session")
    })
}

/// A call held on a session's slot: dropped (the call ended, failed or was
/// cancelled), it frees the slot unless the process was put back.
struct Held {
    scope: SessionScope,
    module: String,
    token: u64,
    /// Set once the process was put back in the slot.
    kept: bool,
}

impl Drop for Held {
    fn drop(&mut self) {
        if self.kept {
            return;
        }
        let mut sessions = lock(&self.scope.inner);
        if matches!(sessions.slots.get(&self.module), Some(Slot::Busy(t)) if *t == self.token) {
            sessions.slots.remove(&self.module);
        }
    }
}

impl Held {
    /// Put `live` back for the next call, unless the scope ended meanwhile.
    fn put_back(mut self, live: Live) {
        let mut sessions = lock(&self.scope.inner);
        let ours =
            matches!(sessions.slots.get(&self.module), Some(Slot::Busy(t)) if *t == self.token);
        if sessions.ended || !ours {
            drop(sessions);
            drop(live);
            return;
        }
        sessions
            .slots
            .insert(self.module.clone(), Slot::Idle(Box::new(live)));
        self.kept = true;
    }
}

/// A call run on its connection's session process: its outcome, and what
/// that process holds (the union), which is what the call's audit record
/// must name, not the call's own narrower plan.
pub(crate) struct SessionRun {
    pub(crate) ran: Result<Exchange, RunError>,
    pub(crate) held: SessionGrants,
}

/// The grants a session process holds: the union its key was made from.
pub(crate) struct SessionGrants {
    pub(crate) roots: Vec<modhost_runner::Grant>,
    pub(crate) binaries: BTreeMap<String, PathBuf>,
    pub(crate) network: Option<CallGrant>,
    pub(crate) secrets: Vec<String>,
}

impl SessionGrants {
    fn of(key: &SessionKey) -> SessionGrants {
        SessionGrants {
            roots: key.roots.clone(),
            binaries: key.binaries.clone(),
            network: key.network.clone(),
            secrets: key.secrets.iter().map(|s| s.name().to_owned()).collect(),
        }
    }
}

/// What the pipeline has decided about one call, for its session.
pub(crate) struct SessionCall<'a> {
    pub(crate) scope: &'a SessionScope,
    pub(crate) module: &'a InstalledModule,
    pub(crate) descriptor: &'a Descriptor,
    pub(crate) source_roots: &'a BTreeMap<String, PathBuf>,
    pub(crate) workspace: Option<&'a Path>,
    pub(crate) lockdown: Option<&'a crate::lockdown::CallLockdown>,
    /// The call's own request (its roots and binaries are replaced by the
    /// session's union).
    pub(crate) params: &'a InvokeParams,
    /// The call as it would run per call: its limits and `module_writes`
    /// are the session's too.
    pub(crate) call: &'a Call<'a>,
}

impl Host {
    /// Run the call on its connection's session process when its module is
    /// a `session` MCP server and the process is free: `None` when the call
    /// is to run per call instead.
    pub(crate) async fn run_in_session(
        &self,
        session: SessionCall<'_>,
        notifications: Option<&NotificationSink>,
    ) -> Option<SessionRun> {
        let SessionCall {
            scope,
            module,
            descriptor,
            source_roots,
            workspace,
            lockdown,
            params,
            call,
        } = session;
        if module.transport != modhost_runner::Transport::Native
            || !scope.is_session(&module.program)
        {
            return None;
        }
        let key = match self.session_union(module, descriptor, source_roots, workspace, lockdown) {
            Ok(union) => union.key(module, call),
            Err(e) => {
                // No union can be computed now (a root the call cannot be
                // granted): this call runs per call, and a process started
                // under an earlier union does not live on beside it.
                tracing::debug!("module {} runs per call: {e}", module.id);
                let stale = lock(&scope.inner).slots.remove(&module.id);
                drop(stale);
                return None;
            }
        };
        // Take the slot: a free process with this very key, else a new one.
        let (held, kept) = {
            let mut sessions = lock(&scope.inner);
            if sessions.ended {
                return None;
            }
            if matches!(sessions.slots.get(&module.id), Some(Slot::Busy(_))) {
                return None;
            }
            sessions.next_token += 1;
            let token = sessions.next_token;
            let previous = sessions.slots.insert(module.id.clone(), Slot::Busy(token));
            let held = Held {
                scope: scope.clone(),
                module: module.id.clone(),
                token,
                kept: false,
            };
            (held, previous)
        };
        // Dropped (killed) outside the lock when it cannot serve this call.
        let kept = match kept {
            Some(Slot::Idle(mut live)) if live.key == key => live.resident.usable().then_some(live),
            _ => None,
        };
        let mut union_params = params.clone();
        union_params.roots = key.request_roots();
        union_params.binaries = key
            .binaries
            .iter()
            .map(|(name, path)| (name.clone(), path.to_string_lossy().into_owned()))
            .collect();
        let line = serde_json::json!({
            "jsonrpc": modproto::jsonrpc::JSONRPC_VERSION,
            "id": modhost_runner::native::REQUEST_ID,
            "method": modproto::METHOD_INVOKE,
            "params": union_params,
        })
        .to_string();
        let executables: Vec<PathBuf> = key.binaries.values().cloned().collect();
        let live = match kept {
            Some(live) => *live,
            None => {
                let egress = match &key.network {
                    Some(grant) => match crate::call_network::open(
                        self,
                        grant.clone(),
                        module.transport,
                        call.limits.confinement,
                    ) {
                        Ok(opened) => Some(opened),
                        Err(e) => {
                            tracing::debug!("module {} runs per call: {e}", module.id);
                            return None;
                        }
                    },
                    None => None,
                };
                let network: Option<&CallNetwork> = egress.as_ref().map(|(_, n)| n);
                let start = Call {
                    request_line: &line,
                    limits: call.limits,
                    grants: &key.roots,
                    executables: &executables,
                    module_writes: &key.module_writes,
                    network,
                    start_ahead: false,
                    secrets: &key.secrets,
                };
                let resident = match Resident::start(&module.program, &start).await {
                    Ok(resident) => resident,
                    Err(e) => {
                        return Some(SessionRun {
                            held: SessionGrants::of(&key),
                            ran: Err(e),
                        });
                    }
                };
                Live {
                    key,
                    resident,
                    _egress: egress.map(|(ticket, _)| ticket),
                }
            }
        };
        let Live {
            key,
            resident,
            _egress,
        } = live;
        let warnings = resident.host_warnings().to_vec();
        let held_grants = SessionGrants::of(&key);
        let this = Call {
            request_line: &line,
            limits: call.limits,
            grants: &key.roots,
            executables: &executables,
            module_writes: &key.module_writes,
            network: None,
            start_ahead: false,
            secrets: &key.secrets,
        };
        let (ran, back) = resident.exchange(&this, notifications).await;
        if let Some(resident) = back {
            held.put_back(Live {
                key,
                resident,
                _egress,
            });
        }
        Some(SessionRun {
            ran: ran.map(|mut exchange| {
                exchange.host_warnings.extend(warnings);
                exchange
            }),
            held: held_grants,
        })
    }

    /// The union of what every capability of `module` would be granted on
    /// this connection.
    fn session_union(
        &self,
        module: &InstalledModule,
        descriptor: &Descriptor,
        source_roots: &BTreeMap<String, PathBuf>,
        workspace: Option<&Path>,
        lockdown: Option<&crate::lockdown::CallLockdown>,
    ) -> Result<Union, crate::host::HostError> {
        let mut union = Union::default();
        for capability in &descriptor.capabilities {
            let over = crate::overrides::find_override(
                &self.config().capabilities,
                &module.id,
                &capability.id,
            );
            // A capability the operator switched off gives nothing.
            if over.and_then(|o| o.enabled) == Some(false) {
                continue;
            }
            let plan = self.grants_in(module, capability, source_roots, workspace, true)?;
            for grant in plan.roots {
                match union.roots.iter_mut().find(|g| g.name == grant.name) {
                    Some(known) if known.host == grant.host => {
                        if grant.access == Access::ReadWrite {
                            known.access = Access::ReadWrite;
                        }
                    }
                    // Two paths under one name cannot be one root: the
                    // call runs per call.
                    Some(_) => {
                        return Err(crate::host::HostError::Refused(format!(
                            "root {:?} resolves to two paths across the module's tools",
                            grant.name
                        )));
                    }
                    None => union.roots.push(grant),
                }
            }
            union.kinds.extend(plan.kinds);
            union.binaries.extend(plan.binaries);
            let granted =
                crate::network_grant::call_grant(capability, crate::overrides::network_lines(over));
            if let Some(granted) = granted {
                let granted = match lockdown {
                    Some(lockdown) => lockdown.narrow(&granted),
                    None => granted,
                };
                union.network = Some(match union.network.take() {
                    None => granted,
                    Some(known) => widen(known, granted),
                });
            }
            if let Ok(secrets) = self.call_secrets(module, capability) {
                for secret in secrets {
                    if !union.secrets.iter().any(|s| s.name() == secret.name()) {
                        union.secrets.push(secret);
                    }
                }
            }
        }
        union.roots.sort_by(|a, b| a.name.cmp(&b.name));
        union.secrets.sort_by(|a, b| a.name().cmp(b.name()));
        Ok(union)
    }
}

/// What the module's capabilities get together.
#[derive(Debug, Default)]
struct Union {
    roots: Vec<modhost_runner::Grant>,
    kinds: BTreeMap<String, RootKind>,
    binaries: BTreeMap<String, PathBuf>,
    network: Option<CallGrant>,
    secrets: Vec<CallSecret>,
}

impl Union {
    fn key(self, module: &InstalledModule, call: &Call<'_>) -> SessionKey {
        SessionKey {
            program: module.program.clone(),
            digest: module.digest.clone(),
            roots: self.roots,
            kinds: self.kinds,
            binaries: self.binaries,
            network: self.network,
            secrets: self.secrets,
            module_writes: call.module_writes.to_vec(),
            confinement: format!("{:?}", call.limits.confinement),
            memory_bytes: call.limits.native_memory_bytes,
        }
    }
}

impl SessionKey {
    /// The `roots` member of the session's requests: every root of the
    /// union.
    fn request_roots(&self) -> BTreeMap<String, modproto::GrantedRoot> {
        self.roots
            .iter()
            .map(|g| {
                let kind = self.kinds.get(&g.name).copied().unwrap_or(RootKind::Source);
                (
                    g.name.clone(),
                    modproto::GrantedRoot {
                        path: g.guest.clone(),
                        kind,
                        access: g.access,
                    },
                )
            })
            .collect()
    }
}

/// The network of two grants together: any public host when either has
/// it, else both lists of hosts; both lists of private addresses.
fn widen(a: CallGrant, b: CallGrant) -> CallGrant {
    let hosts = match (a.hosts, b.hosts) {
        (HostGrant::AnyPublic, _) | (_, HostGrant::AnyPublic) => HostGrant::AnyPublic,
        (HostGrant::Only(mut a), HostGrant::Only(b)) => {
            for pattern in b {
                if !a.contains(&pattern) {
                    a.push(pattern);
                }
            }
            HostGrant::Only(a)
        }
    };
    let mut private = a.private;
    for address in b.private {
        if !private.contains(&address) {
            private.push(address);
        }
    }
    CallGrant { hosts, private }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_an_exact_session_lifetime_is_a_session() {
        assert!(manifest_says_session(
            "[server]\ncommand = \"node\"\nlifetime = \"session\"\n"
        ));
        for text in [
            "[server]\ncommand = \"node\"\n",
            "[server]\ncommand = \"node\"\nlifetime = \"call\"\n",
            "[server]\nlifetime = \"Session\"\n",
            "lifetime = \"session\"\n",
            "[server\nlifetime = \"session\"\n",
            "[tools.x]\nlifetime = \"session\"\n",
        ] {
            assert!(!manifest_says_session(text), "{text}");
        }
    }

    #[test]
    fn widening_keeps_every_host_of_both() {
        let only = |hosts: &[&str]| CallGrant {
            hosts: HostGrant::Only(
                hosts
                    .iter()
                    .map(|h| modproto::HostPattern::parse(h).unwrap())
                    .collect(),
            ),
            private: Vec::new(),
        };
        let both = widen(
            only(&["a.example:443"]),
            only(&["b.example:443", "a.example:443"]),
        );
        assert_eq!(both, only(&["a.example:443", "b.example:443"]));
        let any = CallGrant {
            hosts: HostGrant::AnyPublic,
            private: Vec::new(),
        };
        assert_eq!(
            widen(only(&["a.example:443"]), any.clone()).hosts,
            any.hosts
        );
    }
}

//! The behavioural battery: what a live module does with the requests the
//! protocol says it must handle.
//!
//! The module is reached through [`ModuleCaller`], one fresh process (or
//! component instance) per call, exactly as the host runs it: write the
//! stdin bytes, close stdin, collect stdout until the module exits or the
//! timeout passes. The crate starts nothing itself; the host supplies the
//! native caller (and the wasm one), tests supply an in-memory fake.
//!
//! The checks:
//!
//! - `describe` twice gives the same JSON (the host caches it by digest),
//!   and it has no unknown keys ([`crate::check_unknown_keys`]);
//! - an unknown method gives -32601, a malformed line -32700;
//! - empty stdin ends the process promptly (the host closes stdin after one
//!   line; a module that waits for more never ends);
//! - every declared example succeeds, and its output fits `output_schema`
//!   (a capability that needs secrets has its examples reported as not
//!   run: the kit never holds the operator's credentials);
//! - a module that answers and then exits non-zero is warned about once.
//!
//! Every stdout is decoded as the host decodes it
//! ([`modproto::framing::Transcript`]). No input violating a schema is ever
//! sent: the host validates input before a module runs, and a module may
//! rely on that (PROTOCOL.md section 4).

use modproto::contract::evaluate;
use modproto::framing::Transcript;
use modproto::{
    Approval, Capability, Descriptor, ErrorCode, GrantedRoot, Id, InvokeParams, InvokeResult,
    Message, PROTOCOL_VERSION, Request, Response, RpcError,
};
use serde_json::{Map, Value};
use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use crate::finding::Finding;
use crate::schema::{compile, violations};
use crate::unknown_keys::check_unknown_keys;

/// Runs one call of a module.
pub trait ModuleCaller {
    /// Start the module fresh, write `stdin`, close it, and collect what it
    /// writes to stdout until it exits or `timeout` passes (then stop it).
    fn call(&mut self, stdin: &[u8], timeout: Duration) -> Result<RawCall, CallerError>;

    /// What an `invoke` of `capability` is granted: the roots (paths as the
    /// module sees them), binaries and approval. The caller owns authority;
    /// the battery only builds the request. The default grants nothing, which
    /// suits modules whose examples need no roots.
    fn grants(&mut self, capability: &Capability) -> Grants {
        let _ = capability;
        Grants::default()
    }
}

/// What one call produced.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct RawCall {
    pub stdout: Vec<u8>,
    /// A bounded tail of stderr is enough; it is quoted in findings.
    pub stderr: Vec<u8>,
    /// The process ended on its own within the timeout.
    pub exited: bool,
    /// How it ended, for people (`"exit status: 0"`, `"signal 9"`).
    pub exit_status: Option<String>,
    pub elapsed: Duration,
}

/// Why a call could not be made at all (as opposed to a module that answered
/// badly, which is a finding).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum CallerError {
    /// The module could not be started: a missing or non-executable file, a
    /// component that does not instantiate.
    #[error("cannot start the module: {0}")]
    Start(String),
    /// It started, but its stdin or stdout failed.
    #[error("cannot talk to the module: {0}")]
    Io(String),
}

/// The authority one `invoke` is granted.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Grants {
    pub roots: BTreeMap<String, GrantedRoot>,
    pub binaries: BTreeMap<String, String>,
    pub approval: Option<Approval>,
}

/// Bounds of the battery.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BatteryOptions {
    /// How long one call may take.
    pub timeout: Duration,
    /// How long a module may take to exit after reading empty stdin.
    pub empty_stdin_timeout: Duration,
    /// Sent as `max_output_bytes` in invoke requests.
    pub max_output_bytes: u64,
}

impl Default for BatteryOptions {
    fn default() -> Self {
        BatteryOptions {
            timeout: Duration::from_secs(10),
            empty_stdin_timeout: Duration::from_secs(3),
            max_output_bytes: 4 << 20,
        }
    }
}

/// Run the battery with default bounds.
pub fn run_battery(caller: &mut dyn ModuleCaller, descriptor: &Descriptor) -> Vec<Finding> {
    run_battery_with(caller, descriptor, &BatteryOptions::default())
}

/// Run every behavioural check against the module behind `caller`, whose
/// description is `descriptor`.
pub fn run_battery_with(
    caller: &mut dyn ModuleCaller,
    descriptor: &Descriptor,
    options: &BatteryOptions,
) -> Vec<Finding> {
    let mut run = Run {
        caller,
        options,
        findings: Vec::new(),
        next_id: 1,
        lingered: 0,
        failing_exits: 0,
        calls: 0,
    };
    check_describe(&mut run, descriptor);
    check_unknown_method(&mut run);
    check_malformed_line(&mut run);
    check_empty_stdin(&mut run);
    let contract_version = evaluate(Arc::new(descriptor.clone()))
        .pin()
        .effective
        .clone()
        .unwrap_or_else(|| "1.0".to_owned());
    // No invalid-input case: the host validates every input against the
    // capability's input_schema before the module runs (PROTOCOL.md
    // section 4), so a module may rely on its input and is not failed for
    // trusting it.
    for capability in &descriptor.capabilities {
        check_examples(&mut run, capability, &contract_version);
    }
    if run.failing_exits > 0 {
        run.findings.push(Finding::warning(
            "battery.exit_status",
            format!(
                "the module answered, then exited with a non-zero status, in {} of {} calls",
                run.failing_exits, run.calls
            ),
            "exit with status 0 after writing the one response; the host adds a warning to every such call",
        ));
    }
    if run.lingered > 0 {
        run.findings.push(Finding::warning(
            "battery.no_exit",
            format!(
                "the module answered but kept running past the {:?} timeout in {} of {} calls",
                options.timeout, run.lingered, run.calls
            ),
            "exit after writing the one response: the host closes stdin after one request",
        ));
    }
    run.findings
}

/// The state of one battery run: the caller, and what was found so far.
struct Run<'a> {
    caller: &'a mut dyn ModuleCaller,
    options: &'a BatteryOptions,
    findings: Vec<Finding>,
    next_id: i64,
    /// Calls that answered but did not exit in time; reported once.
    lingered: usize,
    /// Calls that answered, then exited with a non-zero status; reported once.
    failing_exits: usize,
    calls: usize,
}

impl Run<'_> {
    fn id(&mut self) -> Id {
        let id = Id::Num(self.next_id);
        self.next_id += 1;
        id
    }

    /// Send one request and read its one response. `Err` says, for a person,
    /// why there is no usable response.
    fn request(&mut self, method: &str, params: Option<Value>) -> Result<Response, String> {
        let id = self.id();
        let line = request_line(&Request::new(id.clone(), method, params));
        self.exchange(line.as_bytes(), Some(&id))
    }

    fn exchange(&mut self, stdin: &[u8], expected_id: Option<&Id>) -> Result<Response, String> {
        self.calls += 1;
        let raw = self
            .caller
            .call(stdin, self.options.timeout)
            .map_err(|e| e.to_string())?;
        let response = read_response(&raw, expected_id);
        match &response {
            Ok(_) if !raw.exited => self.lingered += 1,
            Ok(_) if failed_exit(raw.exit_status.as_deref()) => self.failing_exits += 1,
            Err(_) if !raw.exited => {
                return Err(format!(
                    "no response within {:?}; the call was stopped{}",
                    self.options.timeout,
                    stderr_tail(&raw)
                ));
            }
            _ => {}
        }
        response.map_err(|problem| {
            let status = raw
                .exit_status
                .as_deref()
                .map(|s| format!(" ({s})"))
                .unwrap_or_default();
            format!("{problem}{status}{}", stderr_tail(&raw))
        })
    }

    fn invoke(
        &mut self,
        capability: &Capability,
        input: Value,
        contract_version: &str,
    ) -> Result<Response, String> {
        let grants = self.caller.grants(capability);
        let n = self.next_id;
        let params = InvokeParams {
            protocol: PROTOCOL_VERSION.to_owned(),
            contract_version: contract_version.to_owned(),
            request_id: format!("modconform-{n}"),
            capability: capability.id.clone(),
            input,
            roots: grants.roots,
            binaries: grants.binaries,
            deadline_ms: u64::try_from(self.options.timeout.as_millis()).unwrap_or(u64::MAX),
            max_output_bytes: self.options.max_output_bytes,
            approval: grants.approval,
            extra: Map::new(),
        };
        // Serializing InvokeParams cannot fail: every map key is a string.
        let params = serde_json::to_value(params).unwrap_or_default();
        self.request(modproto::METHOD_INVOKE, Some(params))
    }
}

/// Whether a call's exit status is a non-zero exit code (a signal is how
/// the caller stops a call, not the module's answer). Callers spell it the
/// way `std::process::ExitStatus` displays: `exit status: N`.
fn failed_exit(status: Option<&str>) -> bool {
    status
        .and_then(|s| s.strip_prefix("exit status: "))
        .is_some_and(|code| code.trim() != "0")
}

fn request_line(request: &Request) -> String {
    let mut line = Message::Request(request.clone()).to_line();
    line.push('\n');
    line
}

/// The one response in a call's stdout, after any notifications.
fn read_response(raw: &RawCall, expected_id: Option<&Id>) -> Result<Response, String> {
    // Decoded exactly as the host decodes it (modproto::framing): one
    // response and nothing after it, unique keys, well-formed progress and
    // log, unknown notifications ignored.
    let mut transcript = Transcript::new(expected_id.cloned());
    let mut lines = raw.stdout.split(|b| *b == b'\n').peekable();
    while let Some(line) = lines.next() {
        if lines.peek().is_none() && line.is_empty() {
            break;
        }
        transcript.line(line)?;
    }
    let response = transcript
        .finish()
        .map(|answer| answer.response)
        .ok_or_else(|| "no response on stdout".to_owned())?;
    // As the host reads it: an error naming a kind only the host decides
    // is not a valid response (`bad_response`).
    if let Err(error) = &response.outcome
        && let Some(Err(claimed)) = error.kind().map(modproto::ErrorKind::as_module)
    {
        return Err(format!(
            "answered error {error}, but {claimed}; the host reports it as bad_response"
        ));
    }
    Ok(response)
}

/// The stderr tail a finding quotes: all of it, up to the host's bound of
/// 8 KiB (PROTOCOL.md section 1), never only its last line.
fn stderr_tail(raw: &RawCall) -> String {
    const MAX_BYTES: usize = 8 * 1024;
    let start = raw.stderr.len().saturating_sub(MAX_BYTES);
    let text = String::from_utf8_lossy(&raw.stderr[start..]);
    let text = text.trim();
    if text.is_empty() {
        return String::new();
    }
    format!("; stderr: {text}")
}

fn check_describe(run: &mut Run<'_>, descriptor: &Descriptor) {
    let mut results = Vec::new();
    for attempt in ["first", "second"] {
        match run.request(modproto::METHOD_DESCRIBE, None) {
            Ok(Response {
                outcome: Ok(result),
                ..
            }) => results.push(result),
            Ok(Response {
                outcome: Err(error),
                ..
            }) => run.findings.push(Finding::error(
                "battery.describe_failed",
                format!("the {attempt} describe answered an error: {error}"),
                "answer describe with the descriptor, whatever the environment",
            )),
            Err(problem) => run.findings.push(Finding::error(
                "battery.describe_failed",
                format!("the {attempt} describe failed: {problem}"),
                "answer a describe request with exactly one response line, then exit",
            )),
        }
    }
    let [first, second] = results.as_slice() else {
        return;
    };
    run.findings.extend(check_unknown_keys(first));
    if first != second {
        run.findings.push(Finding::error(
            "battery.describe_nondeterministic",
            format!(
                "two describe calls gave different descriptors (differing: {})",
                differing_keys(first, second)
            ),
            "make describe a pure function of the module's build: \
             no timestamps, random ids or environment-dependent fields",
        ));
    }
    match serde_json::from_value::<Descriptor>(first.clone()) {
        Err(e) => run.findings.push(Finding::error(
            "battery.describe_malformed",
            format!("the describe result is not a descriptor: {e}"),
            "return the descriptor object as the describe result",
        )),
        Ok(described) if &described != descriptor => run.findings.push(Finding::warning(
            "battery.describe_differs",
            "the module describes itself differently from the descriptor under test",
            "check the battery against the module's own describe output",
        )),
        Ok(_) => {}
    }
}

/// The top-level keys on which two describe results differ, for a person.
fn differing_keys(a: &Value, b: &Value) -> String {
    let (Value::Object(a), Value::Object(b)) = (a, b) else {
        return "the whole result".to_owned();
    };
    let mut keys: Vec<&str> = a
        .iter()
        .filter(|(k, v)| b.get(*k) != Some(*v))
        .map(|(k, _)| k.as_str())
        .chain(b.keys().filter(|k| !a.contains_key(*k)).map(String::as_str))
        .collect();
    keys.sort_unstable();
    keys.dedup();
    keys.join(", ")
}

/// Whether `outcome` is an error with `code`; otherwise a description of what it was.
fn expect_code(outcome: &Result<Response, String>, code: ErrorCode) -> Result<RpcError, String> {
    match outcome {
        Ok(Response {
            outcome: Err(error),
            ..
        }) if error.code == code.code() => Ok(error.clone()),
        Ok(Response {
            outcome: Err(error),
            ..
        }) => Err(format!("answered error {error}")),
        Ok(Response { outcome: Ok(_), .. }) => Err("answered a result".to_owned()),
        Err(problem) => Err(problem.clone()),
    }
}

fn check_unknown_method(run: &mut Run<'_>) {
    let method = "modconform.no_such_method";
    let outcome = run.request(method, None);
    if let Err(what) = expect_code(&outcome, ErrorCode::MethodNotFound) {
        run.findings.push(Finding::error(
            "battery.unknown_method",
            format!("a request for unknown method {method:?} {what}, not error -32601"),
            "answer any method other than describe and invoke with error -32601 (method not found)",
        ));
    }
}

fn check_malformed_line(run: &mut Run<'_>) {
    // Truncated JSON: what a host crash mid-write or a framing bug looks like.
    let line = b"{\"jsonrpc\": \"2.0\", \"id\": 1, \"method\": \n";
    let outcome = run.exchange(line, None);
    if let Err(what) = expect_code(&outcome, ErrorCode::ParseError) {
        run.findings.push(Finding::error(
            "battery.malformed_line",
            format!("a line that is not JSON {what}, not error -32700"),
            "answer a line that does not parse as JSON with error -32700 (parse error) and id null",
        ));
    }
}

fn check_empty_stdin(run: &mut Run<'_>) {
    let timeout = run.options.empty_stdin_timeout;
    match run.caller.call(b"", timeout) {
        Err(e) => run.findings.push(Finding::error(
            "battery.empty_stdin",
            format!("a call with empty stdin failed: {e}"),
            "make sure the module can be started",
        )),
        Ok(raw) if !raw.exited => run.findings.push(Finding::error(
            "battery.empty_stdin",
            format!("with stdin closed and empty, the module did not exit within {timeout:?}"),
            "exit when stdin reaches end of file without a request (an error response on stdout is fine)",
        )),
        Ok(_) => {}
    }
}

fn check_examples(run: &mut Run<'_>, capability: &Capability, contract_version: &str) {
    let cap = capability.id.as_str();
    // The kit never holds an operator's credentials, and a call of a
    // capability that declares secrets is refused without them: its
    // examples are not run, and the report says so rather than skip quietly.
    if !capability.effects.secrets.is_empty() && !capability.examples.is_empty() {
        run.findings.push(
            Finding::warning(
                "battery.example_needs_secrets",
                format!(
                    "the examples of {cap:?} were not run: it needs secrets ({}), which the conformance kit never holds",
                    capability.effects.secrets.join(", ")
                ),
                format!(
                    "grant the secrets to {cap:?} in config.toml and try an example with `modhost invoke`"
                ),
            )
            .on(cap),
        );
        return;
    }
    let output_validator = capability
        .output_schema
        .as_ref()
        .and_then(|s| compile(s).ok());
    for (n, example) in capability.examples.iter().enumerate() {
        let label = if example.description.is_empty() {
            format!("example {n}")
        } else {
            format!("example {n} ({:?})", example.description)
        };
        let result = match run.invoke(capability, example.input.clone(), contract_version) {
            Ok(Response {
                outcome: Ok(result),
                ..
            }) => result,
            Ok(Response {
                outcome: Err(error),
                ..
            }) => {
                let remedy = if error.code == ErrorCode::RootMissing.code() {
                    "the example needs a root the conformance run did not grant: grant it through the caller, or make the example need none"
                } else {
                    "make the example succeed, or fix its input"
                };
                run.findings.push(
                    Finding::error(
                        "battery.example_failed",
                        format!("{label} of {cap:?} answered error {error}"),
                        remedy,
                    )
                    .on(cap),
                );
                continue;
            }
            Err(problem) => {
                run.findings.push(
                    Finding::error(
                        "battery.example_failed",
                        format!("{label} of {cap:?} failed: {problem}"),
                        "make the example succeed with exactly one response line",
                    )
                    .on(cap),
                );
                continue;
            }
        };
        let result = match serde_json::from_value::<InvokeResult>(result) {
            Ok(result) => result,
            Err(e) => {
                run.findings.push(
                    Finding::error(
                        "battery.bad_result",
                        format!(
                            "{label} of {cap:?} returned a result that is not an invoke result: {e}"
                        ),
                        "return {\"output\": ...} with optional text, artifacts and warnings",
                    )
                    .on(cap),
                );
                continue;
            }
        };
        if let Some(validator) = &output_validator {
            let problems = violations(validator, &result.output);
            if !problems.is_empty() {
                run.findings.push(
                    Finding::error(
                        "battery.example_output_invalid",
                        format!(
                            "the output of {label} of {cap:?} does not fit output_schema: {}",
                            problems.join("; ")
                        ),
                        "make the output match the output_schema, or correct the schema",
                    )
                    .on(cap),
                );
            }
        }
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use modproto::jsonrpc::{DecodeError, decode_error_response};
    use modproto::{Access, RootKind};
    use serde_json::json;

    /// What the fake module gets wrong.
    #[derive(Default, Clone, Copy)]
    pub(crate) struct Flaws {
        pub(crate) nondeterministic_describe: bool,
        pub(crate) unknown_method_is_internal: bool,
        pub(crate) silent_on_malformed: bool,
        pub(crate) hangs_on_empty_stdin: bool,
        pub(crate) output_off_schema: bool,
        /// Describes `"netwrk": true` in its effects.
        pub(crate) typo_in_effects: bool,
        /// Exits with status 1 after every answer.
        pub(crate) exits_nonzero: bool,
        /// Its capability declares a secret (`effects.secrets`).
        pub(crate) needs_secret: bool,
    }

    /// An in-memory module with one capability, `files.search`, that needs
    /// the `workspace` root granted. It trusts its input, as PROTOCOL.md
    /// allows: it validates nothing.
    pub(crate) struct FakeModule {
        flaws: Flaws,
        grant_workspace: bool,
        describes: usize,
        seen: Vec<Value>,
    }

    impl FakeModule {
        pub(crate) fn new(flaws: Flaws) -> Self {
            FakeModule {
                flaws,
                grant_workspace: true,
                describes: 0,
                seen: Vec::new(),
            }
        }

        pub(crate) fn descriptor() -> Value {
            json!({
                "id": "files", "version": "0.1.0",
                "roots": [{"name": "workspace", "kind": "workspace"}],
                "capabilities": [{
                    "id": "files.search", "description": "Search files.",
                    "input_schema": {"type": "object", "required": ["pattern"],
                                     "properties": {"pattern": {"type": "string"}}},
                    "output_schema": {"type": "object", "required": ["matches"],
                                      "properties": {"matches": {"type": "array"}}},
                    "effects": {"reads": ["workspace"]},
                    "examples": [{"description": "rust files", "input": {"pattern": "*.rs"}}]
                }]
            })
        }

        fn answer(&mut self, line: &str) -> Option<Response> {
            let request = match Message::parse(line) {
                Ok(Message::Request(r)) => r,
                Ok(_) => return None,
                Err(e @ DecodeError::Parse(_)) if !self.flaws.silent_on_malformed => {
                    return Some(decode_error_response(&e));
                }
                Err(_) => return None,
            };
            let id = request.id.clone();
            let fail = |code, message: String, data| {
                let mut error = RpcError::new(code, message);
                error.data = data;
                Some(Response::err(id.clone(), error))
            };
            match request.method.as_str() {
                "describe" => {
                    self.describes += 1;
                    let mut d = Self::descriptor();
                    if self.flaws.nondeterministic_describe {
                        d["title"] = json!(format!("described {} times", self.describes));
                    }
                    if self.flaws.typo_in_effects {
                        d["capabilities"][0]["effects"]["netwrk"] = json!(true);
                    }
                    if self.flaws.needs_secret {
                        d["capabilities"][0]["effects"]["secrets"] = json!(["FILES_TOKEN"]);
                    }
                    Some(Response::ok(id, d))
                }
                "invoke" => {
                    let params: InvokeParams =
                        serde_json::from_value(request.params.clone().unwrap()).unwrap();
                    self.seen.push(serde_json::to_value(&params).unwrap());
                    if !params.roots.contains_key("workspace") {
                        return fail(
                            ErrorCode::RootMissing,
                            "root workspace not granted".into(),
                            None,
                        );
                    }
                    let output = if self.flaws.output_off_schema {
                        json!({"matches": "not an array"})
                    } else {
                        json!({"matches": [params.input["pattern"]]})
                    };
                    Some(Response::ok(id, json!({"output": output, "text": "found"})))
                }
                _ if self.flaws.unknown_method_is_internal => {
                    fail(ErrorCode::InternalError, "unexpected".into(), None)
                }
                other => fail(
                    ErrorCode::MethodNotFound,
                    format!("no method {other:?}"),
                    None,
                ),
            }
        }
    }

    impl ModuleCaller for FakeModule {
        fn call(&mut self, stdin: &[u8], _timeout: Duration) -> Result<RawCall, CallerError> {
            let line = std::str::from_utf8(stdin).unwrap().trim_end();
            if line.is_empty() {
                return Ok(RawCall {
                    exited: !self.flaws.hangs_on_empty_stdin,
                    ..RawCall::default()
                });
            }
            let mut stdout =
                br#"{"jsonrpc":"2.0","method":"log","params":{"level":"info","message":"hi"}}"#
                    .to_vec();
            stdout.push(b'\n');
            if let Some(response) = self.answer(line) {
                stdout.extend(Message::Response(response).to_line().as_bytes());
                stdout.push(b'\n');
            }
            Ok(RawCall {
                stdout,
                stderr: b"fake module diagnostics".to_vec(),
                exited: true,
                exit_status: Some(
                    if self.flaws.exits_nonzero {
                        "exit status: 1"
                    } else {
                        "exit status: 0"
                    }
                    .into(),
                ),
                elapsed: Duration::from_millis(1),
            })
        }

        fn grants(&mut self, _capability: &Capability) -> Grants {
            let mut grants = Grants::default();
            if self.grant_workspace {
                grants.roots.insert(
                    "workspace".into(),
                    GrantedRoot {
                        path: "/tmp/ws".into(),
                        kind: RootKind::Workspace,
                        access: Access::Read,
                    },
                );
            }
            grants
        }
    }

    fn descriptor() -> Descriptor {
        serde_json::from_value(FakeModule::descriptor()).unwrap()
    }

    fn ids(findings: &[Finding]) -> Vec<&str> {
        let mut ids: Vec<&str> = findings.iter().map(|f| f.id.as_str()).collect();
        ids.sort_unstable();
        ids
    }

    #[test]
    fn a_good_module_passes() {
        let mut module = FakeModule::new(Flaws::default());
        let findings = run_battery(&mut module, &descriptor());
        assert!(findings.is_empty(), "{findings:#?}");
        // The invoke requests carried the caller's grants and host-owned keys.
        let example = module
            .seen
            .iter()
            .find(|p| p["input"] == json!({"pattern": "*.rs"}))
            .unwrap();
        assert_eq!(example["roots"]["workspace"]["path"], "/tmp/ws");
        assert_eq!(example["capability"], "files.search");
        assert_eq!(example["contract_version"], "1.0");
        assert_eq!(example["protocol"], PROTOCOL_VERSION);
    }

    #[test]
    fn a_module_that_trusts_its_input_is_never_sent_invalid_input() {
        // The host validates input before a module runs; the battery must
        // not fail a module for relying on that.
        let mut module = FakeModule::new(Flaws::default());
        let findings = run_battery(&mut module, &descriptor());
        assert!(findings.is_empty(), "{findings:#?}");
        let schema = FakeModule::descriptor()["capabilities"][0]["input_schema"].clone();
        let validator = compile(&schema).unwrap();
        assert!(!module.seen.is_empty());
        for params in &module.seen {
            assert!(
                violations(&validator, &params["input"]).is_empty(),
                "the battery sent invalid input {}",
                params["input"]
            );
        }
    }

    #[test]
    fn anything_after_the_response_is_refused_as_the_host_refuses_it() {
        let raw = |stdout: &str| RawCall {
            stdout: stdout.as_bytes().to_vec(),
            exited: true,
            ..RawCall::default()
        };
        let ok = r#"{"jsonrpc":"2.0","id":1,"result":1}"#;
        let log = r#"{"jsonrpc":"2.0","method":"log","params":{"level":"info","message":"x"}}"#;
        assert!(read_response(&raw(&format!("{log}\n{ok}\n\n")), None).is_ok());
        let second = read_response(&raw(&format!("{ok}\n{ok}\n")), None).unwrap_err();
        assert!(second.contains("second response"), "{second}");
        let late = read_response(&raw(&format!("{ok}\n{log}\n")), None).unwrap_err();
        assert!(late.contains("after its response"), "{late}");
        let bad_log = r#"{"jsonrpc":"2.0","method":"log","params":{"message":"x"}}"#;
        let bad_log = read_response(&raw(&format!("{bad_log}\n{ok}\n")), None).unwrap_err();
        assert!(bad_log.contains("malformed log"), "{bad_log}");
        let unknown = r#"{"jsonrpc":"2.0","method":"bogus"}"#;
        assert!(read_response(&raw(&format!("{unknown}\n{ok}\n")), None).is_ok());
        let dup = r#"{"jsonrpc":"2.0","id":1,"result":1,"result":2}"#;
        let dup = read_response(&raw(dup), None).unwrap_err();
        assert!(dup.contains("duplicate key"), "{dup}");
    }

    #[test]
    fn an_error_in_the_hosts_words_is_refused_as_the_host_refuses_it() {
        let raw = |kind: &str| {
            RawCall {
            stdout: format!(
                r#"{{"jsonrpc":"2.0","id":1,"error":{{"code":-32000,"message":"m","data":{{"kind":"{kind}"}}}}}}"#
            )
            .into_bytes(),
            exited: true,
            ..RawCall::default()
        }
        };
        for kind in ["approval_required", "unpinned", "timeout"] {
            let refused = read_response(&raw(kind), None).unwrap_err();
            assert!(refused.contains("bad_response"), "{kind}: {refused}");
        }
        // A module's own kind is an answer like any other.
        assert!(read_response(&raw("too_busy"), None).is_ok());
    }

    #[test]
    fn a_failing_exit_after_answering_is_one_warning() {
        let flaws = Flaws {
            exits_nonzero: true,
            ..Flaws::default()
        };
        let findings = run_battery(&mut FakeModule::new(flaws), &descriptor());
        assert_eq!(ids(&findings), vec!["battery.exit_status"], "{findings:#?}");
        assert!(!findings[0].is_error());
        assert!(failed_exit(Some("exit status: 3")));
        assert!(!failed_exit(Some("exit status: 0")));
        assert!(!failed_exit(Some("signal: 9 (SIGKILL)")));
        assert!(!failed_exit(None));
    }

    #[test]
    fn a_typo_in_the_described_effects_is_an_error_naming_the_key_it_resembles() {
        let flaws = Flaws {
            typo_in_effects: true,
            ..Flaws::default()
        };
        let findings = run_battery(&mut FakeModule::new(flaws), &descriptor());
        let typo = findings
            .iter()
            .find(|f| f.id == "descriptor.unknown_key")
            .unwrap_or_else(|| panic!("{findings:#?}"));
        assert!(typo.is_error());
        assert!(
            typo.remedy.contains("did you mean \"network\""),
            "{}",
            typo.remedy
        );
    }

    #[test]
    fn a_bad_module_yields_every_expected_finding() {
        let flaws = Flaws {
            nondeterministic_describe: true,
            unknown_method_is_internal: true,
            silent_on_malformed: true,
            hangs_on_empty_stdin: true,
            output_off_schema: true,
            typo_in_effects: false,
            exits_nonzero: false,
            needs_secret: false,
        };
        let findings = run_battery(&mut FakeModule::new(flaws), &descriptor());
        assert_eq!(
            ids(&findings),
            vec![
                "battery.describe_differs",
                "battery.describe_nondeterministic",
                "battery.empty_stdin",
                "battery.example_output_invalid",
                "battery.malformed_line",
                "battery.unknown_method",
            ],
            "{findings:#?}"
        );
        let nondeterministic = findings
            .iter()
            .find(|f| f.id == "battery.describe_nondeterministic")
            .unwrap();
        assert!(
            nondeterministic.reason.contains("title"),
            "{}",
            nondeterministic.reason
        );
        let malformed = findings
            .iter()
            .find(|f| f.id == "battery.malformed_line")
            .unwrap();
        assert!(
            malformed.reason.contains("no response"),
            "{}",
            malformed.reason
        );
        let output = findings
            .iter()
            .find(|f| f.id == "battery.example_output_invalid")
            .unwrap();
        assert_eq!(output.capability.as_deref(), Some("files.search"));
        assert!(output.reason.contains("/matches"), "{}", output.reason);
    }

    #[test]
    fn an_example_that_needs_an_ungranted_root_fails_and_says_so() {
        let mut module = FakeModule::new(Flaws::default());
        module.grant_workspace = false;
        let findings = run_battery(&mut module, &descriptor());
        assert_eq!(ids(&findings), vec!["battery.example_failed"]);
        assert!(findings[0].reason.contains("rust files"));
        assert!(
            findings[0].remedy.contains("grant"),
            "{}",
            findings[0].remedy
        );
    }

    #[test]
    fn the_examples_of_a_capability_that_needs_secrets_are_reported_not_run() {
        let flaws = Flaws {
            needs_secret: true,
            ..Flaws::default()
        };
        let mut module = FakeModule::new(flaws);
        let mut described = FakeModule::descriptor();
        described["capabilities"][0]["effects"]["secrets"] = json!(["FILES_TOKEN"]);
        let described: Descriptor = serde_json::from_value(described).unwrap();
        let findings = run_battery(&mut module, &described);
        assert_eq!(ids(&findings), vec!["battery.example_needs_secrets"]);
        assert_eq!(findings[0].severity, crate::Severity::Warning);
        assert!(
            findings[0].reason.contains("FILES_TOKEN"),
            "{}",
            findings[0]
        );
        assert!(module.seen.is_empty(), "an example ran: {:?}", module.seen);
    }

    #[test]
    fn a_module_that_cannot_start_is_reported_not_a_panic() {
        #[derive(Debug)]
        struct Missing;
        impl ModuleCaller for Missing {
            fn call(&mut self, _: &[u8], _: Duration) -> Result<RawCall, CallerError> {
                Err(CallerError::Start(
                    "/nowhere/files: No such file or directory".into(),
                ))
            }
        }
        let findings = run_battery(&mut Missing, &descriptor());
        assert!(findings.iter().all(Finding::is_error));
        let describe = findings
            .iter()
            .find(|f| f.id == "battery.describe_failed")
            .unwrap();
        assert!(
            describe.reason.contains("/nowhere/files"),
            "{}",
            describe.reason
        );
    }

    #[test]
    fn read_response_skips_notifications_and_rejects_extra_responses() {
        let id = Id::Num(1);
        let ok = |stdout: &str| RawCall {
            stdout: stdout.into(),
            exited: true,
            ..RawCall::default()
        };
        let two = "{\"jsonrpc\":\"2.0\",\"id\":1,\"result\":{}}\n{\"jsonrpc\":\"2.0\",\"id\":1,\"result\":{}}\n";
        assert!(
            read_response(&ok(two), Some(&id))
                .unwrap_err()
                .contains("second response")
        );
        let wrong_id = "{\"jsonrpc\":\"2.0\",\"id\":2,\"result\":{}}\n";
        assert!(
            read_response(&ok(wrong_id), Some(&id))
                .unwrap_err()
                .contains("id 2")
        );
        let garbage = "hello\n";
        assert!(
            read_response(&ok(garbage), Some(&id))
                .unwrap_err()
                .contains("line 1")
        );
        let crlf = "{\"jsonrpc\":\"2.0\",\"method\":\"log\",\"params\":{\"level\":\"info\",\"message\":\"m\"}}\r\n{\"jsonrpc\":\"2.0\",\"id\":1,\"result\":7}\r\n";
        assert_eq!(
            read_response(&ok(crlf), Some(&id)).unwrap().outcome,
            Ok(json!(7))
        );
    }
}

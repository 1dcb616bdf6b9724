//! What every end-to-end test needs: the binaries, a fresh host home, a way
//! to run `modhost` against it, and a view of the process table.
//!
//! Design decisions:
//!
//! - **The tests build what they run.** Cargo builds only this package's own
//!   binaries (the fixtures) for its integration tests, so `modhost` and
//!   `files` are built once per test process by running cargo itself, into
//!   the same target directory. Nothing depends on a developer having built
//!   anything first.
//! - **`modhost` runs with a scrubbed environment**: no inherited `MODHOST_*`
//!   or `RUST_LOG`, an explicit `--home` and `--workspace`, and a watchdog so
//!   a hung host fails the test instead of hanging the suite. Its stdout and
//!   stderr go to files, not pipes, so a leaked descendant holding a pipe can
//!   never block the test either.
//! - **Process checks read `/proc`.** Every fixture runs from inside its test's
//!   temporary home, so "a process whose command line mentions the home" is
//!   exactly "something this test's modules started".

use std::ffi::OsStr;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

use serde_json::Value;
use tempfile::TempDir;

/// How long any single `modhost` run may take before the test calls it hung.
const HOST_WATCHDOG: Duration = Duration::from_secs(60);

/// The fixture binaries, built by cargo for this test.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Fixture {
    Crash,
    Hang,
    Garbage,
    Huge,
    Grandchild,
    SlowDescribe,
    Echo,
    /// Contract-2 modules, faithful or weakened, and a nonconformant one,
    /// chosen by the installed id (see `tests/fixtures/contract.rs`).
    Contract,
}

impl Fixture {
    pub fn path(self) -> &'static str {
        match self {
            Fixture::Crash => env!("CARGO_BIN_EXE_fixture_crash"),
            Fixture::Hang => env!("CARGO_BIN_EXE_fixture_hang"),
            Fixture::Garbage => env!("CARGO_BIN_EXE_fixture_garbage"),
            Fixture::Huge => env!("CARGO_BIN_EXE_fixture_huge"),
            Fixture::Grandchild => env!("CARGO_BIN_EXE_fixture_grandchild"),
            Fixture::SlowDescribe => env!("CARGO_BIN_EXE_fixture_slow_describe"),
            Fixture::Echo => env!("CARGO_BIN_EXE_fixture_echo"),
            Fixture::Contract => env!("CARGO_BIN_EXE_fixture_contract"),
        }
    }
}

/// Paths of the binaries built from other packages of the workspace.
#[derive(Debug)]
pub struct Binaries {
    pub modhost: PathBuf,
    pub files: PathBuf,
}

/// Build `modhost` and `files` once per test process and return their paths.
pub fn binaries() -> &'static Binaries {
    static BINARIES: OnceLock<Binaries> = OnceLock::new();
    BINARIES.get_or_init(build_binaries)
}

fn build_binaries() -> Binaries {
    // This test runs as …/<target>/<profile>/deps/it-<hash>; the binaries land
    // in …/<target>/<profile>/.
    let exe = std::env::current_exe().expect("current_exe of the test binary");
    let profile_dir = exe
        .parent()
        .and_then(Path::parent)
        .unwrap_or_else(|| {
            panic!(
                "test binary {} is not in <target>/<profile>/deps",
                exe.display()
            )
        })
        .to_path_buf();
    let target_dir = std::env::var_os("CARGO_TARGET_DIR")
        .map(PathBuf::from)
        .or_else(|| profile_dir.parent().map(Path::to_path_buf))
        .expect("a target directory");
    let cargo = std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
    let workspace_root = crate::support::tests_dir()
        .parent()
        .expect("tests/ lives in the workspace root")
        .to_path_buf()
        .to_path_buf();
    let mut command = Command::new(&cargo);
    command
        .current_dir(&workspace_root)
        .args([
            "build",
            "--quiet",
            "-p",
            "modhost-cli",
            "-p",
            "files",
            "--bins",
        ])
        .env("CARGO_TARGET_DIR", &target_dir)
        .stdin(Stdio::null());
    if profile_dir.file_name() == Some(OsStr::new("release")) {
        command.arg("--release");
    }
    let output = command
        .output()
        .unwrap_or_else(|e| panic!("could not run {:?} to build modhost and files: {e}", cargo));
    assert!(
        output.status.success(),
        "`cargo build -p modhost-cli -p files --bins` in {} failed ({}):\n{}",
        workspace_root.display(),
        output.status,
        String::from_utf8_lossy(&output.stderr)
    );
    let binaries = Binaries {
        modhost: profile_dir.join("modhost"),
        files: profile_dir.join("files"),
    };
    for path in [&binaries.modhost, &binaries.files] {
        assert!(
            path.is_file(),
            "cargo built, but {} is not there",
            path.display()
        );
    }
    binaries
}

/// How a module sits in `modules/`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Layout {
    /// `modules/<id>/<id>`
    Folder,
    /// `modules/<id>`
    Bare,
}

/// The outcome of one `modhost` run.
#[derive(Debug)]
pub struct Run {
    pub args: Vec<String>,
    pub code: i32,
    pub stdout: String,
    pub stderr: String,
}

impl Run {
    /// The whole stdout as JSON; fails the test with the run's context otherwise.
    pub fn json(&self) -> Value {
        serde_json::from_str(&self.stdout)
            .unwrap_or_else(|e| panic!("stdout of {self:?} is not JSON: {e}"))
    }

    /// Assert the exit code, with the run's context on failure.
    #[track_caller]
    pub fn expect_code(&self, code: i32) -> &Self {
        assert_eq!(
            self.code, code,
            "unexpected exit code from modhost {:?}:\n{self:#?}",
            self.args
        );
        self
    }

    /// For `invoke --json` that failed: the `error` object, after checking
    /// exit code 1 and that it carries a kind, a message and a remedy.
    #[track_caller]
    pub fn invoke_error(&self) -> Value {
        self.expect_code(1);
        let json = self.json();
        let error = json
            .get("error")
            .cloned()
            .unwrap_or_else(|| panic!("no \"error\" in {json:#}"));
        for key in ["kind", "message", "remedy"] {
            assert!(
                error.get(key).is_some_and(Value::is_string),
                "error lacks a string {key:?}: {error:#}"
            );
        }
        assert!(
            !error["message"].as_str().unwrap_or_default().is_empty(),
            "empty message: {error:#}"
        );
        error
    }

    /// For an `invoke --json` refused before the capability ran (exit 2,
    /// whatever refused it): the error kind.
    #[track_caller]
    pub fn refused_kind(&self) -> String {
        self.expect_code(2);
        self.error_kind()
    }

    /// For `invoke --json` that did not succeed, whether the host refused
    /// (exit 2) or the module ran and failed (exit 1): the error's kind. For
    /// input a module checks beyond its schema, where either side may say no.
    #[track_caller]
    pub fn unsuccessful_kind(&self) -> String {
        assert!(
            self.code == 1 || self.code == 2,
            "expected exit 1 or 2: {self:#?}"
        );
        self.error_kind()
    }

    #[track_caller]
    fn error_kind(&self) -> String {
        let json = self.json();
        json["error"]["kind"]
            .as_str()
            .unwrap_or_else(|| panic!("no error kind in {json:#}"))
            .to_owned()
    }

    /// For `invoke --json` that succeeded: the result, after checking exit 0.
    #[track_caller]
    pub fn invoke_result(&self) -> Value {
        self.expect_code(0);
        let json = self.json();
        assert!(
            json.get("output").is_some(),
            "no \"output\" in the invoke result: {json:#}"
        );
        json
    }
}

/// A fresh host home and workspace in a temporary directory.
#[derive(Debug)]
pub struct Home {
    dir: TempDir,
}

impl Home {
    pub fn new() -> Home {
        let dir = tempfile::Builder::new()
            .prefix("modhost-it-")
            .tempdir()
            .expect("temp dir");
        let home = Home { dir };
        std::fs::create_dir_all(home.path().join("modules")).expect("modules dir");
        std::fs::create_dir_all(home.workspace()).expect("workspace dir");
        home
    }

    /// The host home (`--home`).
    pub fn path(&self) -> PathBuf {
        self.dir.path().join("home")
    }

    /// The workspace (`--workspace`), beside the home.
    pub fn workspace(&self) -> PathBuf {
        self.dir.path().join("workspace")
    }

    /// A scratch directory beside home and workspace (outside both).
    pub fn outside(&self) -> PathBuf {
        let path = self.dir.path().join("outside");
        std::fs::create_dir_all(&path).expect("outside dir");
        path
    }

    pub fn modules(&self) -> PathBuf {
        self.path().join("modules")
    }

    /// Where a module installed with `layout` lives.
    pub fn module_path(&self, id: &str, layout: Layout) -> PathBuf {
        match layout {
            Layout::Folder => self.modules().join(id).join(id),
            Layout::Bare => self.modules().join(id),
        }
    }

    /// Copy an executable into `modules/` under the id `id`, then pin it
    /// (`modhost pin ID`), as an operator approves a module installed by hand.
    ///
    /// A module that cannot be pinned (a fixture installed to break at
    /// describe, a contract the host refuses) stays unpinned: refusing the pin
    /// is the host's job, and such a module is not invoked by these tests.
    pub fn install_binary(&self, binary: &Path, id: &str, layout: Layout) -> PathBuf {
        let target = self.install_binary_unpinned(binary, id, layout);
        self.run(&["pin", id]);
        target
    }

    /// Copy an executable into `modules/` under the id `id`, without pinning.
    ///
    /// The host caches descriptors by the digest of the executable's bytes,
    /// and a fixture names itself after its file, so each installed copy gets
    /// a trailer naming its id (an ELF runs fine with trailing bytes): two ids
    /// are two digests, as two different real modules would be.
    pub fn install_binary_unpinned(&self, binary: &Path, id: &str, layout: Layout) -> PathBuf {
        let target = self.module_path(id, layout);
        std::fs::create_dir_all(target.parent().expect("module parent")).expect("module dir");
        std::fs::copy(binary, &target)
            .unwrap_or_else(|e| panic!("copy {} to {}: {e}", binary.display(), target.display()));
        let mut file = std::fs::OpenOptions::new()
            .append(true)
            .open(&target)
            .expect("open installed module");
        write!(file, "\nmodhost-test-id={id}\n").expect("append id trailer");
        target
    }

    /// Install a fixture under `id` in its own folder.
    pub fn install(&self, fixture: Fixture, id: &str) -> PathBuf {
        self.install_binary(Path::new(fixture.path()), id, Layout::Folder)
    }

    /// Install the real `files` module in its own folder.
    pub fn install_files(&self) -> PathBuf {
        self.install_binary(&binaries().files, "files", Layout::Folder)
    }

    pub fn write_config(&self, toml: &str) {
        std::fs::write(self.path().join("config.toml"), toml).expect("write config.toml");
    }

    /// Run `modhost --home H --workspace W <args>`.
    pub fn run<S: AsRef<str>>(&self, args: &[S]) -> Run {
        let args: Vec<String> = args.iter().map(|a| a.as_ref().to_owned()).collect();
        run_modhost(self, &args, &[])
    }

    /// Like [`Home::run`] with extra environment for this one run.
    pub fn run_with_env<S: AsRef<str>>(&self, args: &[S], env: &[(&str, &str)]) -> Run {
        let args: Vec<String> = args.iter().map(|a| a.as_ref().to_owned()).collect();
        run_modhost(self, &args, env)
    }

    /// How many times the echo fixture installed as `id` ran `capability`,
    /// from the log it keeps in its state root.
    pub fn invocations(&self, id: &str, capability: &str) -> usize {
        let log = self.path().join("state").join(id).join(".invocations");
        std::fs::read_to_string(log)
            .unwrap_or_default()
            .lines()
            .filter(|l| *l == capability)
            .count()
    }

    /// The nonce the echo fixture installed as `id` put in the descriptor
    /// `describe --json` shows: it changes exactly when the module is run.
    #[track_caller]
    pub fn describe_nonce(&self, id: &str) -> String {
        let json = self.run(&["describe", id, "--json"]).expect_code(0).json();
        let description = json["descriptor"]["description"]
            .as_str()
            .unwrap_or_default();
        description
            .split_once("Described by run ")
            .map(|(_, nonce)| nonce.to_owned())
            .unwrap_or_else(|| panic!("no nonce in the description of {id}: {json:#}"))
    }

    /// `modhost list --json`, checked to be an array.
    pub fn list(&self) -> Vec<Value> {
        let run = self.run(&["list", "--json"]);
        run.expect_code(0);
        match run.json() {
            Value::Array(entries) => entries,
            other => panic!("list --json is not an array: {other:#}"),
        }
    }

    /// Fails the test unless `doctor` reports landlock: the guarantee a
    /// test checks is enforced by it, so it must never pass without it.
    #[track_caller]
    pub fn require_landlock(&self) {
        let doctor = self.run(&["doctor", "--json"]).json();
        assert!(
            doctor["confinement"]["landlock_abi"].as_u64().is_some(),
            "this test needs landlock (the guarantee is enforced by it): {doctor:#}"
        );
    }

    /// The `list --json` entry of `id`.
    #[track_caller]
    pub fn entry(&self, id: &str) -> Value {
        let entries = self.list();
        entries
            .iter()
            .find(|e| e["id"] == id)
            .cloned()
            .unwrap_or_else(|| panic!("no module {id:?} in list: {entries:#?}"))
    }

    /// `modhost invoke MODULE CAPABILITY --json --input INPUT [extra...]`.
    pub fn invoke(&self, module: &str, capability: &str, input: &Value, extra: &[&str]) -> Run {
        let mut args = vec![
            "invoke".to_owned(),
            module.to_owned(),
            capability.to_owned(),
            "--json".to_owned(),
        ];
        args.push("--input".to_owned());
        args.push(input.to_string());
        args.extend(extra.iter().map(|s| (*s).to_owned()));
        run_modhost(self, &args, &[])
    }

    /// [`Home::invoke`] with `workspace` as `--workspace` (and the current
    /// directory) instead of [`Home::workspace`].
    pub fn invoke_in(
        &self,
        workspace: &Path,
        module: &str,
        capability: &str,
        input: &Value,
        extra: &[&str],
    ) -> Run {
        let mut args = vec![
            "invoke".to_owned(),
            module.to_owned(),
            capability.to_owned(),
            "--json".to_owned(),
            "--input".to_owned(),
            input.to_string(),
        ];
        args.extend(extra.iter().map(|s| (*s).to_owned()));
        run_modhost_in(self, workspace, &args, &[])
    }

    /// Processes still alive (not zombies) whose command line mentions this
    /// test's temporary directory, other than `modhost` itself.
    pub fn live_module_processes(&self) -> Vec<ProcessInfo> {
        let marker = self.dir.path().to_string_lossy().into_owned();
        processes()
            .into_iter()
            .filter(|p| {
                p.state != 'Z' && p.cmdline.contains(&marker) && !p.cmdline.contains("--home")
            })
            .collect()
    }

    /// Assert that nothing this test's modules started is still alive. A
    /// process killed a moment ago may take a little while to disappear from
    /// `/proc`, so this waits briefly before failing.
    #[track_caller]
    pub fn assert_no_module_processes(&self) {
        let left = wait_until_empty(|| self.live_module_processes());
        assert!(
            left.is_empty(),
            "module processes survived the call: {left:#?}"
        );
    }
}

fn run_modhost(home: &Home, args: &[String], env: &[(&str, &str)]) -> Run {
    run_modhost_in(home, &home.workspace(), args, env)
}

fn run_modhost_in(home: &Home, workspace: &Path, args: &[String], env: &[(&str, &str)]) -> Run {
    let binaries = binaries();
    let out_dir = tempfile::tempdir().expect("temp dir for output");
    let stdout_path = out_dir.path().join("stdout");
    let stderr_path = out_dir.path().join("stderr");
    let mut command = Command::new(&binaries.modhost);
    command
        .arg("--home")
        .arg(home.path())
        .arg("--workspace")
        .arg(workspace)
        .args(args)
        .current_dir(workspace)
        .stdin(Stdio::null())
        .stdout(std::fs::File::create(&stdout_path).expect("stdout file"))
        .stderr(std::fs::File::create(&stderr_path).expect("stderr file"));
    for (key, _) in std::env::vars_os() {
        let key = key.to_string_lossy();
        if key.starts_with("MODHOST_") || key == "RUST_LOG" {
            command.env_remove(key.as_ref());
        }
    }
    command.envs(env.iter().copied());
    let mut child = command.spawn().expect("spawn modhost");
    let started = Instant::now();
    let status = loop {
        if let Some(status) = child.try_wait().expect("wait for modhost") {
            break status;
        }
        if started.elapsed() > HOST_WATCHDOG {
            let _ = child.kill();
            let _ = child.wait();
            panic!(
                "modhost {args:?} did not finish within {HOST_WATCHDOG:?}; stderr:\n{}",
                std::fs::read_to_string(&stderr_path).unwrap_or_default()
            );
        }
        std::thread::sleep(Duration::from_millis(5));
    };
    Run {
        args: args.to_vec(),
        // A host killed by a signal has no code; -1 never matches an expectation.
        code: status.code().unwrap_or(-1),
        stdout: String::from_utf8_lossy(&std::fs::read(&stdout_path).unwrap_or_default())
            .into_owned(),
        stderr: String::from_utf8_lossy(&std::fs::read(&stderr_path).unwrap_or_default())
            .into_owned(),
    }
}

/// One line of the process table.
#[derive(Debug, Clone)]
pub struct ProcessInfo {
    pub pid: u32,
    pub state: char,
    pub pgid: u32,
    pub cmdline: String,
}

/// Every process visible in `/proc`.
pub fn processes() -> Vec<ProcessInfo> {
    let Ok(entries) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    entries
        .flatten()
        .filter_map(|entry| {
            let pid: u32 = entry.file_name().to_str()?.parse().ok()?;
            let stat = std::fs::read_to_string(entry.path().join("stat")).ok()?;
            // `pid (comm) state ppid pgrp ...`; comm may contain spaces and
            // parentheses, so split after the last `)`.
            let rest = &stat[stat.rfind(')')? + 1..];
            let mut fields = rest.split_whitespace();
            let state = fields.next()?.chars().next()?;
            let _ppid = fields.next()?;
            let pgid: u32 = fields.next()?.parse().ok()?;
            let cmdline = std::fs::read(entry.path().join("cmdline"))
                .map(|raw| String::from_utf8_lossy(&raw).replace('\0', " "))
                .unwrap_or_default();
            Some(ProcessInfo {
                pid,
                state,
                pgid,
                cmdline,
            })
        })
        .collect()
}

/// Live (non-zombie) processes in process group `pgid`.
pub fn live_group_members(pgid: u32) -> Vec<ProcessInfo> {
    processes()
        .into_iter()
        .filter(|p| p.pgid == pgid && p.state != 'Z')
        .collect()
}

/// Whether `pid` is alive and not a zombie.
pub fn is_alive(pid: u32) -> bool {
    processes()
        .into_iter()
        .any(|p| p.pid == pid && p.state != 'Z')
}

/// Poll `probe` until it returns nothing or a grace period passes; return
/// what it last returned. SIGKILLed processes need a moment to be reaped.
pub fn wait_until_empty<T>(probe: impl Fn() -> Vec<T>) -> Vec<T> {
    let started = Instant::now();
    loop {
        let found = probe();
        if found.is_empty() || started.elapsed() > Duration::from_secs(3) {
            return found;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Write `content` to `root/rel`, creating parent directories.
pub fn write_file(root: &Path, rel: &str, content: impl AsRef<[u8]>) {
    let path = root.join(rel);
    std::fs::create_dir_all(path.parent().expect("parent")).expect("create parent dirs");
    std::fs::write(&path, content).unwrap_or_else(|e| panic!("write {}: {e}", path.display()));
}

/// The strings of a JSON array field (empty when absent or not an array).
pub fn strings(value: &Value) -> Vec<String> {
    value
        .as_array()
        .map(|items| {
            items
                .iter()
                .filter_map(|v| v.as_str().map(str::to_owned))
                .collect()
        })
        .unwrap_or_default()
}

/// The WebAssembly components the tests run (`files` and the wasm runner's
/// guests), built for `wasm32-wasip2` once per test process.
#[derive(Debug)]
pub struct Components {
    dir: PathBuf,
}

impl Components {
    /// `<name>.wasm`, as built.
    pub fn path(&self, name: &str) -> PathBuf {
        self.dir.join(format!("{name}.wasm"))
    }
}

/// Build the components once per test process: a nested
/// `$CARGO build --target wasm32-wasip2 --profile wasm-test -p files -p
/// modhost-guests` into the same target directory. A failure (most often the
/// target not being installed) fails the test with how to fix it; a missing
/// component is never a skip.
pub fn components() -> &'static Components {
    static COMPONENTS: OnceLock<Components> = OnceLock::new();
    COMPONENTS.get_or_init(build_components)
}

/// The cargo profile components are built with (root `Cargo.toml`): small
/// and quick for wasmtime to compile.
const COMPONENT_PROFILE: &str = "wasm-test";

fn build_components() -> Components {
    let exe = std::env::current_exe().expect("current_exe of the test binary");
    let target_dir = std::env::var_os("CARGO_TARGET_DIR")
        .map(PathBuf::from)
        .or_else(|| exe.ancestors().nth(3).map(Path::to_path_buf))
        .expect("a target directory");
    let cargo = std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
    let workspace_root = crate::support::tests_dir()
        .parent()
        .expect("tests/ lives in the workspace root")
        .to_path_buf()
        .to_path_buf();
    let args = [
        "build",
        "--quiet",
        "--target",
        "wasm32-wasip2",
        "--profile",
        COMPONENT_PROFILE,
        "-p",
        "files",
        "-p",
        "modhost-guests",
        "--bins",
    ];
    let output = Command::new(&cargo)
        .current_dir(&workspace_root)
        .args(args)
        .env("CARGO_TARGET_DIR", &target_dir)
        .stdin(Stdio::null())
        .output()
        .unwrap_or_else(|e| panic!("could not run {cargo:?} to build the components: {e}"));
    assert!(
        output.status.success(),
        "building the test components failed ({}): `cargo {}` in {}\n\
         If the wasm32-wasip2 target is missing, install it with\n  \
         rustup target add wasm32-wasip2\n\
         (.ci/run does this). cargo said:\n{}",
        output.status,
        args.join(" "),
        workspace_root.display(),
        String::from_utf8_lossy(&output.stderr)
    );
    let components = Components {
        dir: target_dir.join("wasm32-wasip2").join(COMPONENT_PROFILE),
    };
    for name in ["files", "echo"] {
        let path = components.path(name);
        assert!(
            path.is_file(),
            "cargo built, but {} is not there",
            path.display()
        );
    }
    components
}

impl Home {
    /// Copy the component `name` into `modules/<name>/<name>.wasm` and pin
    /// it. Unlike [`Home::install_binary`] no trailer is appended (a
    /// component with trailing bytes does not parse), so each component is
    /// installed under its own name: a guest names itself after its file, and
    /// one set of bytes has one cached descriptor.
    pub fn install_component(&self, name: &str) -> PathBuf {
        let target = self.modules().join(name).join(format!("{name}.wasm"));
        std::fs::create_dir_all(target.parent().expect("module parent")).expect("module dir");
        let source = components().path(name);
        std::fs::copy(&source, &target)
            .unwrap_or_else(|e| panic!("copy {} to {}: {e}", source.display(), target.display()));
        self.run(&["pin", name]).expect_code(0);
        target
    }
}

/// The binaries of `modules/<package>`, built natively (`cargo build -p
/// <package> --bins`) once per test process per package, like
/// [`binaries`]: its path.
pub fn module_binary(package: &str) -> PathBuf {
    static BUILT: BuiltOnce = BuiltOnce::new(Vec::new());
    built_once(&BUILT, package, || {
        let profile_dir = binaries().modhost.parent().expect("modhost's folder");
        let mut args = vec!["build", "--quiet", "-p", package, "--bins"];
        if profile_dir.file_name() == Some(OsStr::new("release")) {
            args.push("--release");
        }
        cargo(&args);
        profile_dir.join(package)
    })
}

/// The component of `modules/<package>`, built for `wasm32-wasip2` with the
/// components' profile once per test process per package: its path.
pub fn module_component(package: &str) -> PathBuf {
    static BUILT: BuiltOnce = BuiltOnce::new(Vec::new());
    built_once(&BUILT, package, || {
        let target_dir = cargo(&[
            "build",
            "--quiet",
            "--target",
            "wasm32-wasip2",
            "--profile",
            COMPONENT_PROFILE,
            "-p",
            package,
            "--bins",
        ]);
        target_dir
            .join("wasm32-wasip2")
            .join(COMPONENT_PROFILE)
            .join(format!("{package}.wasm"))
    })
}

/// What was built, by package.
type BuiltOnce = std::sync::Mutex<Vec<(String, PathBuf)>>;

/// `build`'s path for `package`, run the first time only; the file must exist.
fn built_once(built: &BuiltOnce, package: &str, build: impl FnOnce() -> PathBuf) -> PathBuf {
    let mut built = built
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    if let Some((_, path)) = built.iter().find(|(p, _)| p == package) {
        return path.clone();
    }
    let path = build();
    assert!(
        path.is_file(),
        "cargo built, but {} is not there",
        path.display()
    );
    built.push((package.to_owned(), path.clone()));
    path
}

/// Run `$CARGO <args>` in the workspace root into this test's target
/// directory (returned); fails the test with cargo's stderr.
fn cargo(args: &[&str]) -> PathBuf {
    let exe = std::env::current_exe().expect("current_exe of the test binary");
    let target_dir = std::env::var_os("CARGO_TARGET_DIR")
        .map(PathBuf::from)
        .or_else(|| exe.ancestors().nth(3).map(Path::to_path_buf))
        .expect("a target directory");
    let cargo = std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
    let workspace_root = crate::support::tests_dir()
        .parent()
        .expect("tests/ lives in the workspace root")
        .to_path_buf();
    let output = Command::new(&cargo)
        .current_dir(workspace_root)
        .args(args)
        .env("CARGO_TARGET_DIR", &target_dir)
        .stdin(Stdio::null())
        .output()
        .unwrap_or_else(|e| panic!("could not run {cargo:?} {args:?}: {e}"));
    assert!(
        output.status.success(),
        "`cargo {}` failed ({}); for a wasm32-wasip2 build, `rustup target add wasm32-wasip2`. cargo said:\n{}",
        args.join(" "),
        output.status,
        String::from_utf8_lossy(&output.stderr)
    );
    target_dir
}

impl Home {
    /// Install the native build of `modules/<package>` as module `<package>`
    /// in its own folder, pinned.
    pub fn install_module(&self, package: &str) -> PathBuf {
        self.install_binary(&module_binary(package), package, Layout::Folder)
    }

    /// Install the component build of `modules/<package>` as module
    /// `<package>`, pinned.
    pub fn install_module_component(&self, package: &str) -> PathBuf {
        let target = self.modules().join(package).join(format!("{package}.wasm"));
        std::fs::create_dir_all(target.parent().expect("module parent")).expect("module dir");
        let source = module_component(package);
        std::fs::copy(&source, &target)
            .unwrap_or_else(|e| panic!("copy {} to {}: {e}", source.display(), target.display()));
        self.run(&["pin", package]).expect_code(0);
        target
    }
}

impl Run {
    /// For `invoke --json` the host refused (exit 2: the module never ran):
    /// the `error` object, checked as [`Run::invoke_error`] checks it.
    #[track_caller]
    pub fn refusal_error(&self) -> Value {
        self.expect_code(2);
        Run {
            args: self.args.clone(),
            code: 1,
            stdout: self.stdout.clone(),
            stderr: self.stderr.clone(),
        }
        .invoke_error()
    }
}

/// The `tests` package's folder in the checkout under test, as cargo says
/// when it starts the test (not when it compiled it): a target directory
/// shared between checkouts, as CI reuses one, may hold a test binary
/// built from another checkout of the same sources.
pub fn tests_dir() -> PathBuf {
    std::env::var_os("CARGO_MANIFEST_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(env!("CARGO_MANIFEST_DIR")))
}

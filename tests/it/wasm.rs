//! WebAssembly components end to end, through the `modhost` CLI:
//!
//! - the `files` module as a component gives the same outputs as its native
//!   build for the same requests ("one source, two targets");
//! - the hostile guests of `tests/guests`, each installed as a component in
//!   a fresh home, end in their own error kind with nothing changed outside
//!   their grants, and the host answers the next call.
//!
//! The components are built by the test itself ([`crate::support::components`]);
//! a missing `wasm32-wasip2` target fails with how to install it.

use std::path::Path;

use serde_json::{Value, json};

use crate::support::{Home, Run, components, strings, write_file};

/// A home with the same workspace content as the native `files` tests, and
/// `files` installed natively or as a component.
fn files_home(as_component: bool) -> Home {
    let home = Home::new();
    if as_component {
        home.install_component("files");
    } else {
        home.install_files();
    }
    crate::files_module::write_known_content(&home);
    home
}

/// What an invoke printed, minus what legitimately differs between calls
/// (timings, the request id) and between transports (the host's own notes
/// on how the call was confined).
fn outcome(home: &Home, capability: &str, input: &Value) -> Value {
    let mut json = home.invoke("files", capability, input, &[]).json();
    if let Some(object) = json.as_object_mut() {
        object.remove("elapsed_ms");
        object.remove("duration_ms");
        object.remove("request_id");
        object.remove("host_warnings");
    }
    json
}

#[test]
fn files_gives_identical_outputs_native_and_as_a_component() {
    let native = files_home(false);
    let wasm = files_home(true);
    let entry = wasm.entry("files");
    assert_eq!(entry["transport"], "component", "{entry:#}");
    let requests = [
        ("files.search", json!({"pattern": "NEEDLE"})),
        (
            "files.search",
            json!({"pattern": "(?i)needle", "glob": "*.rs"}),
        ),
        ("files.search", json!({"pattern": "("})),
        ("files.read", json!({"path": "src/lib.rs"})),
        (
            "files.read",
            json!({"path": "src/lib.rs", "start_line": 2, "end_line": 2}),
        ),
        ("files.read", json!({"path": "nope.txt"})),
        ("files.read", json!({"path": "../outside/secret.txt"})),
        ("files.list", json!({})),
    ];
    let mut successes = 0;
    for (capability, input) in &requests {
        let expected = outcome(&native, capability, input);
        let got = outcome(&wasm, capability, input);
        assert_eq!(
            got, expected,
            "{capability} {input}: component and native differ"
        );
        successes += usize::from(expected.get("output").is_some());
    }
    // Identical failures alone would prove nothing.
    assert!(successes >= 4, "too few requests succeeded natively");
    assert!(
        !wasm
            .invoke("files", "files.search", &json!({"pattern": "NEEDLE"}), &[])
            .stdout
            .contains("TOP SECRET"),
        "nothing outside the workspace is visible"
    );
}

/// A home with the guest `name` installed (and pinned) as a component, and
/// the limits the hostile tests need.
fn guest_home(name: &str) -> Home {
    let home = Home::new();
    home.write_config(
        "[limits]\n\
         deadline_ms = 1500\n\
         max_output_bytes = 262144\n\
         memory_limit_bytes = 67108864\n",
    );
    home.install_component(name);
    home
}

/// Invoke `<name>.run` with `input`; it must fail with `kind`.
#[track_caller]
fn expect_failure(home: &Home, name: &str, input: &Value, kind: &str) -> Value {
    let run = home.invoke(name, &format!("{name}.run"), input, &[]);
    let error = run.invoke_error();
    assert_eq!(error["kind"], kind, "{run:#?}");
    error
}

/// After any failure, the same home still serves: the next call of a good
/// component answers.
#[track_caller]
fn host_goes_on(home: &Home) {
    home.install_component("echo");
    let run = home.invoke("echo", "echo.run", &json!({"n": 1}), &[]);
    assert_eq!(
        run.invoke_result()["output"],
        json!({"echo": {"n": 1}}),
        "{run:#?}"
    );
}

fn names_in(dir: &Path) -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(dir)
        .unwrap_or_else(|e| panic!("read {}: {e}", dir.display()))
        .map(|e| {
            e.expect("dir entry")
                .file_name()
                .to_string_lossy()
                .into_owned()
        })
        .collect();
    names.sort();
    names
}

#[test]
fn a_component_sees_only_its_grants_at_guest_paths() {
    let home = guest_home("echo");
    let run = home.invoke("echo", "echo.run", &json!({"inspect": true}), &[]);
    let output = run.invoke_result()["output"].clone();
    assert_eq!(output["env"], json!([]), "no environment leaks in");
    assert_eq!(
        output["data_path"], "/roots/data",
        "the request names the guest path"
    );
    assert_eq!(output["data"], true, "the granted workspace is there");
    for elsewhere in ["roots", "slash", "tmp", "cwd"] {
        assert_eq!(
            output[elsewhere], false,
            "{elsewhere}: nothing but the grant is visible: {output:#}"
        );
    }
}

#[test]
fn a_component_is_granted_no_binary_and_told_why() {
    let home = guest_home("spawner");
    home.write_config(
        "[binaries]\n\
         tool = \"/bin/true\"\n",
    );
    // Declaring a program to run makes the default approval `ask`.
    let run = home.invoke("spawner", "spawner.run", &json!({}), &["--approve"]);
    let result = run.invoke_result();
    assert_eq!(
        result["output"]["binaries"],
        json!({}),
        "no host path a component could never run: {result:#}"
    );
    let warnings = strings(&result["host_warnings"]);
    assert!(
        warnings
            .iter()
            .any(|w| w.contains("components cannot run programs, so tool was not granted")),
        "{warnings:?}"
    );
}

#[test]
fn the_first_compile_of_a_component_is_announced_once() {
    let home = Home::new();
    let target = home.modules().join("echo").join("echo.wasm");
    std::fs::create_dir_all(target.parent().unwrap()).unwrap();
    std::fs::copy(components().path("echo"), &target).unwrap();
    let first = home.run(&["pin", "echo"]);
    first.expect_code(0);
    assert!(
        first.stderr.contains("compiling")
            && first.stderr.contains("later runs load it from the cache"),
        "{first:#?}"
    );
    let second = home.run(&["list"]);
    second.expect_code(0);
    assert!(!second.stderr.contains("compiling"), "{second:#?}");
}

#[test]
fn a_spinning_component_times_out() {
    let home = guest_home("spin");
    expect_failure(&home, "spin", &json!({}), "timeout");
    host_goes_on(&home);
}

/// The attack, one-off: a component stuck opening a fifo no writer opens,
/// in its workspace. `modhost invoke` reports the deadline and exits; the
/// stuck open is left behind, not waited for.
#[test]
fn a_component_stuck_opening_a_fifo_times_out_and_the_command_exits() {
    let home = guest_home("echo");
    let made = std::process::Command::new("mkfifo")
        .arg(home.workspace().join("pipe"))
        .status()
        .unwrap();
    assert!(made.success());
    let began = std::time::Instant::now();
    expect_failure(&home, "echo", &json!({"read": "pipe"}), "timeout");
    assert!(
        began.elapsed() < std::time::Duration::from_secs(10),
        "the command waited {:?} for its stuck open",
        began.elapsed()
    );
    host_goes_on(&home);
}

#[test]
fn a_component_blocked_in_a_host_call_times_out() {
    let home = guest_home("sleep");
    expect_failure(&home, "sleep", &json!({}), "timeout");
}

#[test]
fn a_hoarding_component_hits_the_memory_limit() {
    let home = guest_home("alloc");
    let error = expect_failure(&home, "alloc", &json!({}), "memory_limit");
    assert!(
        error["message"]
            .as_str()
            .unwrap_or_default()
            .contains("67108864"),
        "the configured limit applies: {error:#}"
    );
    host_goes_on(&home);
}

#[test]
fn a_flooding_component_hits_the_output_limit() {
    let home = guest_home("flood");
    expect_failure(&home, "flood", &json!({}), "output_limit");
}

#[test]
fn a_panicking_component_is_trapped() {
    let home = guest_home("panic");
    let error = expect_failure(&home, "panic", &json!({}), "trapped");
    assert!(
        error["stderr_tail"]
            .as_str()
            .unwrap_or_default()
            .contains("deliberate panic"),
        "{error:#}"
    );
}

#[test]
fn a_component_that_exits_without_answering_crashed() {
    let home = guest_home("silent_exit");
    let error = expect_failure(&home, "silent_exit", &json!({}), "crashed");
    assert!(
        error["stderr_tail"]
            .as_str()
            .unwrap_or_default()
            .contains("leaving without a word"),
        "{error:#}"
    );
}

#[test]
fn writing_to_a_read_only_grant_is_refused_and_changes_nothing() {
    let home = guest_home("write_readonly");
    let ws = home.workspace();
    write_file(&ws, "existing.txt", "original");
    let before = names_in(&ws);
    expect_failure(&home, "write_readonly", &json!({}), "denied");
    assert_eq!(
        std::fs::read_to_string(ws.join("existing.txt")).unwrap(),
        "original"
    );
    assert_eq!(names_in(&ws), before, "nothing was created or removed");
}

#[test]
fn dot_dot_and_symlink_escapes_are_refused() {
    let home = guest_home("escape");
    let outside = home.outside().join("outside.txt");
    std::fs::write(&outside, "secret").unwrap();
    // The guest's state root is `rw`; plant a symlink to the outside in it.
    let state = home.path().join("state").join("escape");
    std::fs::create_dir_all(&state).unwrap();
    std::os::unix::fs::symlink(&outside, state.join("link")).unwrap();
    let outside_before = names_in(&home.outside());
    let state_parent_before = names_in(&home.path().join("state"));

    let input = json!({"outside": outside});
    let run: Run = home.invoke("escape", "escape.run", &input, &[]);
    let error = run.invoke_error();
    assert_eq!(error["kind"], "path_escape", "{run:#?}");
    assert_eq!(std::fs::read_to_string(&outside).unwrap(), "secret");
    assert_eq!(names_in(&home.outside()), outside_before);
    assert_eq!(
        names_in(&home.path().join("state")),
        state_parent_before,
        "nothing was created beside the root"
    );
}

#[test]
fn doctor_reports_component_support() {
    let home = Home::new();
    home.write_config("[limits]\nmemory_limit_bytes = 1048576\n");
    let report = home.run(&["doctor", "--json"]).expect_code(0).json();
    let components = &report["components"];
    assert_eq!(components["supported"], true, "{report:#}");
    assert_eq!(components["engine"], "ok", "{report:#}");
    assert_eq!(components["memory_limit_bytes"], 1_048_576, "{report:#}");
    let cache = components["cache_dir"].as_str().unwrap_or_default();
    assert!(cache.ends_with("cache/components"), "{report:#}");
}

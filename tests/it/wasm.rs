//! The `files` module as a WebAssembly component: the same requests give the
//! same outputs as the native build (issue 4, "one source, two targets").
//!
//! Needs the component, built by `.ci/run` (never skipped when missing):
//!
//! ```text
//! rustup target add wasm32-wasip2
//! cargo build -p files --target wasm32-wasip2
//! ```

use std::path::PathBuf;

use serde_json::{Value, json};

use crate::support::{Home, write_file};

/// `<target>/wasm32-wasip2/debug/<name>.wasm`, or a failure saying how to
/// build it.
fn component(name: &str, package: &str) -> PathBuf {
    let target = std::env::var_os("CARGO_TARGET_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| {
            let exe = std::env::current_exe().expect("current_exe of the test binary");
            exe.ancestors()
                .nth(3)
                .expect("<target>/<profile>/deps/<test>")
                .to_owned()
        });
    let path = target
        .join("wasm32-wasip2/debug")
        .join(format!("{name}.wasm"));
    assert!(
        path.is_file(),
        "component {} is missing; build it first:\n  rustup target add wasm32-wasip2\n  cargo build -p {package} --target wasm32-wasip2",
        path.display()
    );
    path
}

/// A home with the same workspace content as the native `files` tests, and
/// `files` installed natively or as a component.
fn files_home(as_component: bool) -> Home {
    let home = Home::new();
    if as_component {
        let target = home.modules().join("files").join("files.wasm");
        std::fs::create_dir_all(target.parent().expect("module dir")).expect("module dir");
        std::fs::copy(component("files", "files"), &target).expect("install files.wasm");
    } else {
        home.install_files();
    }
    let ws = home.workspace();
    std::fs::create_dir_all(ws.join(".git")).expect(".git");
    write_file(&ws, ".gitignore", "ignored/\n*.log\n");
    write_file(
        &ws,
        "src/lib.rs",
        "fn alpha() {}\n// NEEDLE one\nfn beta() {}\n",
    );
    write_file(&ws, "docs/guide.md", "Needle two\n");
    write_file(&ws, "ignored/secret.txt", "NEEDLE hidden\n");
    write_file(&ws, "build.log", "NEEDLE in a log\n");
    write_file(
        &home.outside(),
        "secret.txt",
        "TOP SECRET outside the workspace\n",
    );
    home
}

/// What an invoke printed, minus what legitimately differs between hosts
/// (timings).
fn outcome(home: &Home, capability: &str, input: &Value) -> Value {
    let mut json = home.invoke("files", capability, input, &[]).json();
    if let Some(object) = json.as_object_mut() {
        object.remove("elapsed_ms");
        object.remove("duration_ms");
    }
    json
}

#[test]
fn files_gives_identical_outputs_native_and_as_a_component() {
    let native = files_home(false);
    let wasm = files_home(true);
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
    for (capability, input) in &requests {
        let expected = outcome(&native, capability, input);
        let got = outcome(&wasm, capability, input);
        assert_eq!(
            got, expected,
            "{capability} {input}: component and native differ"
        );
    }
}

//! The guest components of `tests/guests` (and the bundled `files`
//! component), built by the first test that needs them: a nested `$CARGO
//! build --target wasm32-wasip2 --profile wasm-test -p files -p
//! modhost-guests`, once per test process. A failed build fails the test
//! with how to fix it, never skips it.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::OnceLock;

/// The target directory the tests were built in.
pub fn target_dir() -> PathBuf {
    if let Some(dir) = std::env::var_os("CARGO_TARGET_DIR") {
        return PathBuf::from(dir);
    }
    // <target>/debug/deps/<test binary>
    let exe = std::env::current_exe().expect("the test binary's path");
    exe.ancestors()
        .nth(3)
        .expect("the test binary lives in <target>/debug/deps")
        .to_owned()
}

/// The workspace root: the nearest folder above the package cargo runs the
/// test in (`CARGO_MANIFEST_DIR` when it runs it, not when it compiled it:
/// a shared target directory may hold another checkout's build) whose
/// `Cargo.toml` has a `[workspace]`.
pub fn workspace_root() -> PathBuf {
    let package =
        PathBuf::from(std::env::var_os("CARGO_MANIFEST_DIR").expect("cargo runs the test"));
    package
        .ancestors()
        .find(|dir| {
            std::fs::read_to_string(dir.join("Cargo.toml"))
                .is_ok_and(|manifest| manifest.lines().any(|l| l.trim() == "[workspace]"))
        })
        .expect("the package lives in a workspace")
        .to_path_buf()
}

/// Where the guests land: the `wasm-test` profile of the root Cargo.toml.
fn guests_dir() -> &'static Path {
    static DIR: OnceLock<PathBuf> = OnceLock::new();
    DIR.get_or_init(|| {
        let cargo = std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
        let args = [
            "build",
            "--quiet",
            "--target",
            "wasm32-wasip2",
            "--profile",
            "wasm-test",
            // The same packages as the end-to-end tests build: another
            // set could unify dependency features differently and
            // overwrite the guests with different bytes mid-run.
            "-p",
            "files",
            "-p",
            "modhost-guests",
            "--bins",
        ];
        let output = Command::new(&cargo)
            .current_dir(workspace_root())
            .args(args)
            .env("CARGO_TARGET_DIR", target_dir())
            .stdin(Stdio::null())
            .output()
            .unwrap_or_else(|e| panic!("could not run {cargo:?} to build the guests: {e}"));
        assert!(
            output.status.success(),
            "building the guest components failed ({}): `cargo {}`
             If the wasm32-wasip2 target is missing, install it with
               rustup target add wasm32-wasip2
             cargo said:
{}",
            output.status,
            args.join(" "),
            String::from_utf8_lossy(&output.stderr)
        );
        target_dir().join("wasm32-wasip2/wasm-test")
    })
}

/// The component `name` (`echo`, `files`, ...), built if need be.
pub fn guest(name: &str) -> PathBuf {
    let path = guests_dir().join(format!("{name}.wasm"));
    assert!(
        path.is_file(),
        "cargo built the guests, but {} is not there",
        path.display()
    );
    path
}

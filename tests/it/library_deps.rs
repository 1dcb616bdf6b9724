//! The library builds without the command line's crates: a user of
//! `modhost` gets no clap, clap_complete, anyhow or tracing-subscriber
//! (they are `modhost-cli`'s, `host/cli/Cargo.toml`). The
//! attack is a regression: a library file that starts using anyhow, or a
//! dependency made non-optional again, puts them back in every user's build.

use std::process::Command;

/// The CLI's own crates, which only `modhost-cli` may bring in.
const CLI_ONLY: &[&str] = &["clap", "clap_complete", "anyhow", "tracing-subscriber"];

/// Every package `cargo tree` lists for `args`, by name.
fn tree(args: &[&str]) -> Vec<String> {
    tree_of("modhost", args)
}

/// Every package `cargo tree` lists for `package` with `args`, by name.
fn tree_of(package: &str, args: &[&str]) -> Vec<String> {
    let cargo = std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
    let workspace = crate::support::tests_dir()
        .parent()
        .expect("tests/ lives in the workspace root")
        .to_path_buf();
    let output = Command::new(&cargo)
        .current_dir(workspace)
        // Proc macros run in the compiler: their own dependencies (anyhow
        // under prost-derive, say) never reach the library's code.
        .args([
            "tree",
            "--offline",
            "-p",
            package,
            "-e",
            "normal,no-proc-macro",
        ])
        .args(["--prefix", "none", "--format", "{p}"])
        .args(args)
        .output()
        .unwrap_or_else(|e| panic!("could not run {cargo:?} tree: {e}"));
    assert!(
        output.status.success(),
        "cargo tree {args:?} failed:\n{}",
        String::from_utf8_lossy(&output.stderr)
    );
    String::from_utf8_lossy(&output.stdout)
        .lines()
        .filter_map(|line| line.split_whitespace().next())
        .map(str::to_owned)
        .collect()
}

#[test]
fn the_library_alone_builds_none_of_the_cli_crates() {
    let packages = tree(&["--no-default-features"]);
    assert!(
        packages.iter().any(|p| p == "tokio"),
        "cargo tree listed nothing useful: {packages:?}"
    );
    let cli: Vec<&String> = packages
        .iter()
        .filter(|p| CLI_ONLY.contains(&p.as_str()))
        .collect();
    assert!(
        cli.is_empty(),
        "modhost --no-default-features depends on {cli:?}, which only modhost-cli may bring in"
    );
}

#[test]
fn the_library_with_wasm_names_no_cli_crate_itself() {
    // wasmtime itself uses anyhow, so with `wasm` only the host's own
    // dependencies are held to it (and clap and tracing-subscriber anywhere).
    let direct = tree(&[
        "--no-default-features",
        "--features",
        "wasm",
        "--depth",
        "1",
    ]);
    let all = tree(&["--no-default-features", "--features", "wasm"]);
    let cli: Vec<&String> = direct
        .iter()
        .filter(|p| CLI_ONLY.contains(&p.as_str()))
        .chain(
            all.iter()
                .filter(|p| *p != "anyhow" && CLI_ONLY.contains(&p.as_str())),
        )
        .collect();
    assert!(
        all.iter().any(|p| p == "wasmtime"),
        "the wasm feature lacks wasmtime: {all:?}"
    );
    assert!(
        cli.is_empty(),
        "modhost with only `wasm` depends on {cli:?}, which only modhost-cli may bring in"
    );
}

#[test]
fn the_command_line_crate_has_them() {
    // The checks above mean something only if the command line really
    // brings them in, and the library with its default features lacks them.
    let cli = tree_of("modhost-cli", &[]);
    for name in ["clap", "anyhow", "tracing-subscriber"] {
        assert!(
            cli.iter().any(|p| p == name),
            "modhost-cli lacks {name}: {cli:?}"
        );
    }
    let library = tree(&["--depth", "1"]);
    let cli_only: Vec<&String> = library
        .iter()
        .filter(|p| CLI_ONLY.contains(&p.as_str()) || *p == "wat")
        .collect();
    assert!(
        cli_only.is_empty(),
        "modhost with default features depends on {cli_only:?} itself"
    );
}

//! The command line follows the conventions people and scripts expect:
//! shell completions, `NO_COLOR` and `--color`, read-only commands that
//! never create a home, one cause per error, `--format`/`--json` alike on
//! every report, and a status line for the first compile of a component.
//!
//! Colour and the status line depend on a terminal, so those runs go
//! through `script(1)` (util-linux), which gives the command a pty.

use std::process::{Command, Stdio};

use serde_json::Value;

use crate::support::{Home, binaries, components};

const ESC: char = '\x1b';

/// Run `modhost ARGS` on a pseudo-terminal with `env`; everything it wrote.
fn run_in_terminal(home: &Home, args: &[&str], env: &[(&str, &str)]) -> String {
    let quote = |s: &str| format!("'{}'", s.replace('\'', r"'\''"));
    let mut line = vec![
        quote(binaries().modhost.to_str().expect("utf-8 path")),
        "--home".into(),
        quote(home.path().to_str().expect("utf-8 path")),
        "--workspace".into(),
        quote(home.workspace().to_str().expect("utf-8 path")),
    ];
    line.extend(args.iter().map(|a| quote(a)));
    let mut command = Command::new("script");
    command
        .args(["-qec", &line.join(" "), "/dev/null"])
        .stdin(Stdio::null())
        .env_remove("NO_COLOR")
        .env_remove("RUST_LOG")
        .env("TERM", "xterm")
        .envs(env.iter().copied());
    let output = command
        .output()
        .expect("run script(1) from util-linux, which every machine of this project has");
    format!(
        "{}{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    )
}

#[test]
fn completions_are_printed_for_every_shell_and_the_bash_one_loads() {
    let home = Home::new();
    for shell in ["bash", "zsh", "fish", "powershell"] {
        let run = home.run(&["completions", shell]);
        run.expect_code(0);
        assert!(
            run.stdout.contains("modhost") && run.stdout.contains("install"),
            "{shell}: {}",
            run.stdout
        );
    }
    let script = home.run(&["completions", "bash"]).stdout.clone();
    let file = home.outside().join("modhost.bash");
    std::fs::write(&file, script).expect("write the completion script");
    let loaded = Command::new("bash")
        .arg("-c")
        .arg(format!("source {} && complete -p modhost", file.display()))
        .output()
        .expect("run bash");
    assert!(
        loaded.status.success() && String::from_utf8_lossy(&loaded.stdout).contains("modhost"),
        "{loaded:?}"
    );
    let run = home.run(&["completions", "tcsh-but-not"]);
    run.expect_code(2);
}

#[test]
fn colour_follows_the_flag_then_no_color_then_the_terminal() {
    let home = Home::new();
    home.install_files();
    // A usage error on a terminal is coloured by default...
    let plain = run_in_terminal(&home, &["list", "--no-such-flag"], &[]);
    assert!(plain.contains(ESC), "a terminal gets colour: {plain:?}");
    // ...not with NO_COLOR, nor with --color never...
    let no_color = run_in_terminal(&home, &["list", "--no-such-flag"], &[("NO_COLOR", "1")]);
    assert!(
        !no_color.contains(ESC),
        "NO_COLOR was ignored: {no_color:?}"
    );
    assert!(no_color.contains("--no-such-flag"), "{no_color}");
    let never = run_in_terminal(&home, &["--color", "never", "list", "--no-such-flag"], &[]);
    assert!(!never.contains(ESC), "--color never was ignored: {never:?}");
    // ...and the flag wins over NO_COLOR.
    let always = run_in_terminal(
        &home,
        &["--color=always", "list", "--no-such-flag"],
        &[("NO_COLOR", "1")],
    );
    assert!(
        always.contains(ESC),
        "--color always lost to NO_COLOR: {always:?}"
    );
    // Not a terminal: no colour unless asked.
    let piped = home.run(&["-v", "list"]);
    assert!(!piped.stderr.contains(ESC), "{:?}", piped.stderr);
}

#[test]
fn read_only_commands_never_create_a_home_and_say_how_to_make_one() {
    let home = Home::new();
    let missing = home.outside().join("no-such-home");
    for command in [
        &["list"][..],
        &["describe", "files"],
        &["tools"],
        &["knowledge", "files"],
        &["doctor"],
        &["mcp"],
    ] {
        let run = Command::new(&binaries().modhost)
            .arg("--home")
            .arg(&missing)
            .args(command)
            .stdin(Stdio::null())
            .env_remove("MODHOST_HOME")
            .output()
            .expect("run modhost");
        assert_eq!(run.status.code(), Some(2), "{command:?}: {run:?}");
        let said = format!(
            "{}{}",
            String::from_utf8_lossy(&run.stdout),
            String::from_utf8_lossy(&run.stderr)
        );
        assert!(
            said.contains(&format!("no modhost home at {}", missing.display()))
                && said.contains("modhost install"),
            "{command:?}: {said}"
        );
        assert!(!missing.exists(), "{command:?} created the home");
    }
    // install is the one that creates it.
    let installed = Command::new(&binaries().modhost)
        .arg("--home")
        .arg(&missing)
        .arg("install")
        .arg(&binaries().files)
        .stdin(Stdio::null())
        .output()
        .expect("run modhost install");
    assert!(installed.status.success(), "{installed:?}");
    assert!(missing.join("modules").is_dir());
}

#[test]
fn an_error_states_its_cause_once() {
    let home = Home::new();
    let run = home.run(&["install", "/nonexistent"]);
    run.expect_code(2);
    let cause = "No such file or directory";
    assert_eq!(
        run.stderr.matches(cause).count(),
        1,
        "the cause is repeated: {}",
        run.stderr
    );
    assert!(run.stderr.contains("/nonexistent"), "{}", run.stderr);
}

#[test]
fn format_json_and_json_are_the_same_on_every_report() {
    let home = Home::new();
    home.install_files();
    for command in [
        &["list"][..],
        &["describe", "files"],
        &["doctor"],
        &["tools"],
    ] {
        let with = |extra: &[&str]| {
            let mut args = command.to_vec();
            args.extend_from_slice(extra);
            let run = home.run(&args);
            run.expect_code(0);
            run.json()
        };
        let mut a = with(&["--json"]);
        let mut b = with(&["--format", "json"]);
        // The doctor and describe report live figures; compare the shape.
        for v in [&mut a, &mut b] {
            if let Value::Object(map) = v {
                map.remove("describe_nonce");
            }
        }
        assert_eq!(
            keys(&a),
            keys(&b),
            "{command:?}: --json and --format json differ"
        );
        let mut both = command.to_vec();
        both.extend_from_slice(&["--json", "--format", "text"]);
        if command[0] != "tools" {
            home.run(&both).expect_code(2);
        }
        let text = home.run(&[command, &["--format", "text"][..]].concat());
        if command[0] != "tools" {
            text.expect_code(0);
            assert!(
                serde_json::from_str::<Value>(&text.stdout).is_err(),
                "{command:?}: text output parsed as JSON"
            );
        }
    }
    let help = home.run(&["--help"]);
    assert!(
        help.stdout.contains("--format json (or --json)"),
        "{}",
        help.stdout
    );
}

fn keys(value: &Value) -> Vec<String> {
    match value {
        Value::Object(map) => map.keys().cloned().collect(),
        Value::Array(items) => items.iter().flat_map(keys).collect(),
        _ => Vec::new(),
    }
}

/// `text` without its ANSI escape sequences (`ESC [ ... letter`).
fn strip_ansi(text: &str) -> String {
    let mut out = String::new();
    let mut chars = text.chars();
    while let Some(c) = chars.next() {
        if c == ESC {
            for c in chars.by_ref() {
                if c.is_ascii_alphabetic() {
                    break;
                }
            }
        } else {
            out.push(c);
        }
    }
    out
}

#[test]
fn the_first_compile_shows_a_status_line_naming_the_module_on_a_terminal_only() {
    let home = Home::new();
    let target = home.modules().join("files/files.wasm");
    std::fs::create_dir_all(target.parent().expect("parent")).expect("module dir");
    std::fs::copy(components().path("files"), &target).expect("copy the component");
    // Pinning describes the component: its first compile, on a terminal.
    let shown = strip_ansi(&run_in_terminal(&home, &["pin", "files"], &[]));
    assert!(
        shown.contains("   Compiling files (") && shown.contains("MB) for this host"),
        "{shown}"
    );
    assert!(
        shown.contains("Compiled files in") && shown.contains('s'),
        "{shown}"
    );
    let home_path = home.path();
    assert!(
        !shown.contains("snapshots") && !shown.contains(".wasm"),
        "a staging or snapshot path was shown: {shown}"
    );
    // Compiled once: the next run loads it from the cache and says nothing.
    let again = run_in_terminal(&home, &["describe", "files"], &[]);
    assert!(!again.contains("Compiling"), "{again}");
    // Not a terminal (a fresh cache): one log line naming the module, no
    // carriage-return redraws.
    std::fs::remove_dir_all(home_path.join("cache/components")).expect("clear the cache");
    let logged = home.invoke("files", "files.list", &serde_json::json!({}), &[]);
    logged.invoke_result();
    assert!(!logged.stderr.contains('\r'), "{:?}", logged.stderr);
    assert!(
        logged.stderr.contains("compiling module files"),
        "{}",
        logged.stderr
    );
    assert!(!logged.stderr.contains("snapshots"), "{}", logged.stderr);
}

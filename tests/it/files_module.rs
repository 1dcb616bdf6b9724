//! End to end with the real `files` module over a workspace of known content.

use serde_json::{Value, json};

use crate::support::{Home, strings, write_file};

/// A home with `files` installed over [`write_known_content`].
fn files_home() -> Home {
    let home = Home::new();
    home.install_files();
    write_known_content(&home);
    home
}

/// A workspace with a match in a kept file, the same text in ignored and
/// binary files, and a secret outside the workspace (shared with the
/// component tests, which compare both transports on it).
pub(crate) fn write_known_content(home: &Home) {
    let ws = home.workspace();
    // `.git` makes the workspace a repository, the case where every tool
    // agrees `.gitignore` applies.
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
        &ws,
        "data.bin",
        b"\x00\x01\x02NEEDLE binary\x00\n".as_slice(),
    );
    write_file(
        &home.outside(),
        "secret.txt",
        "TOP SECRET outside the workspace\n",
    );
}

fn search(home: &Home, input: &Value) -> Value {
    home.invoke("files", "files.search", input, &[])
        .invoke_result()["output"]
        .clone()
}

fn match_paths(output: &Value) -> Vec<(String, u64)> {
    output["matches"]
        .as_array()
        .unwrap_or_else(|| panic!("no matches array: {output:#}"))
        .iter()
        .map(|m| {
            (
                m["path"].as_str().unwrap_or_default().to_owned(),
                m["line"].as_u64().unwrap_or(0),
            )
        })
        .collect()
}

#[test]
fn list_shows_files_enabled_with_its_capabilities() {
    let home = files_home();
    let entry = home.entry("files");
    assert_eq!(entry["status"], "enabled", "{entry:#}");
    assert!(entry["version"].is_string(), "{entry:#}");
    let mut caps = strings(&entry["capabilities"]);
    caps.sort();
    assert_eq!(
        caps,
        ["files.list", "files.read", "files.search"],
        "{entry:#}"
    );
    let path = entry["path"].as_str().unwrap_or_default();
    assert!(path.ends_with("modules/files/files"), "path {path:?}");
    assert!(
        entry["warnings"].is_array() && entry["host_warnings"].is_array(),
        "{entry:#}"
    );
}

#[test]
fn describe_shows_the_descriptor_with_a_read_only_workspace_root() {
    let home = files_home();
    let json = home
        .run(&["describe", "files", "--json"])
        .expect_code(0)
        .json();
    // The descriptor may be the document itself or nested under `descriptor`.
    let descriptor = json.get("descriptor").unwrap_or(&json);
    assert_eq!(descriptor["id"], "files", "{json:#}");
    let workspace = descriptor["roots"]
        .as_array()
        .and_then(|roots| roots.iter().find(|r| r["name"] == "workspace"))
        .unwrap_or_else(|| panic!("no workspace root: {json:#}"));
    assert_eq!(workspace["kind"], "workspace");
    assert_eq!(workspace["access"], "read");
    let capabilities = descriptor["capabilities"].as_array().expect("capabilities");
    assert_eq!(capabilities.len(), 3, "{json:#}");
    for cap in capabilities {
        assert_eq!(cap["input_schema"]["type"], "object", "{cap:#}");
        assert!(
            !cap["description"].as_str().unwrap_or_default().is_empty(),
            "{cap:#}"
        );
        assert!(
            strings(&cap["effects"]["writes"]).is_empty(),
            "files is read-only: {cap:#}"
        );
    }
    // Human output names the module and its capabilities.
    let human = home
        .run(&["describe", "files"])
        .expect_code(0)
        .stdout
        .clone();
    assert!(human.contains("files.search"), "{human}");
}

#[test]
fn search_finds_matches_and_respects_gitignore_and_binary_files() {
    let home = files_home();
    let output = search(&home, &json!({"pattern": "NEEDLE"}));
    assert_eq!(
        match_paths(&output),
        [("src/lib.rs".to_owned(), 2)],
        "{output:#}"
    );
    assert_eq!(
        output["matches"][0]["text"].as_str().map(str::trim_end),
        Some("// NEEDLE one")
    );
    assert_eq!(output["truncated"], false);

    let output = search(
        &home,
        &json!({"pattern": "needle", "case_insensitive": true}),
    );
    let mut paths = match_paths(&output);
    paths.sort();
    assert_eq!(
        paths,
        [
            ("docs/guide.md".to_owned(), 1),
            ("src/lib.rs".to_owned(), 2)
        ],
        "{output:#}"
    );
}

#[test]
fn search_honours_path_glob_and_max_results() {
    let home = files_home();
    let output = search(
        &home,
        &json!({"pattern": "needle", "case_insensitive": true, "path": "docs"}),
    );
    assert_eq!(
        match_paths(&output),
        [("docs/guide.md".to_owned(), 1)],
        "{output:#}"
    );

    let output = search(&home, &json!({"pattern": "(?i)needle", "glob": "*.rs"}));
    assert_eq!(
        match_paths(&output),
        [("src/lib.rs".to_owned(), 2)],
        "{output:#}"
    );

    let output = search(&home, &json!({"pattern": "fn ", "max_results": 1}));
    assert_eq!(
        output["matches"].as_array().map(Vec::len),
        Some(1),
        "{output:#}"
    );
    assert_eq!(output["truncated"], true, "{output:#}");
}

#[test]
fn search_rejects_an_invalid_regex_without_crashing() {
    let home = files_home();
    let run = home.invoke("files", "files.search", &json!({"pattern": "("}), &[]);
    let error = run.invoke_error();
    assert_eq!(error["kind"], "invalid_input", "{error:#}");
    assert!(
        error["message"].as_str().unwrap_or_default().contains('('),
        "{error:#}"
    );
}

#[test]
fn input_that_violates_the_schema_is_refused_before_the_module_runs() {
    let home = files_home();
    let error = home
        .invoke("files", "files.search", &json!({"pattern": 42}), &[])
        .refusal_error();
    assert_eq!(error["kind"], "invalid_input", "{error:#}");
}

#[test]
fn read_returns_content_and_line_ranges() {
    let home = files_home();
    let output = home
        .invoke("files", "files.read", &json!({"path": "src/lib.rs"}), &[])
        .invoke_result()["output"]
        .clone();
    assert_eq!(output["path"], "src/lib.rs", "{output:#}");
    assert_eq!(
        output["content"], "fn alpha() {}\n// NEEDLE one\nfn beta() {}\n",
        "{output:#}"
    );
    assert_eq!(output["total_lines"], 3, "{output:#}");
    assert_eq!(output["truncated"], false, "{output:#}");

    let input = json!({"path": "src/lib.rs", "start_line": 2, "end_line": 2});
    let output = home
        .invoke("files", "files.read", &input, &[])
        .invoke_result()["output"]
        .clone();
    let content = output["content"].as_str().unwrap_or_default();
    assert_eq!(content.trim_end(), "// NEEDLE one", "{output:#}");
    assert_eq!(output["total_lines"], 3, "{output:#}");
}

#[test]
fn read_of_a_missing_file_fails_with_a_kind() {
    let home = files_home();
    let error = home
        .invoke("files", "files.read", &json!({"path": "nope.txt"}), &[])
        .invoke_error();
    assert_eq!(error["kind"], "not_found", "{error:#}");
}

#[test]
fn list_returns_entries_with_kinds_sizes_and_depth() {
    let home = files_home();
    let output = home
        .invoke("files", "files.list", &json!({}), &[])
        .invoke_result()["output"]
        .clone();
    let entries = output["entries"]
        .as_array()
        .unwrap_or_else(|| panic!("no entries: {output:#}"));
    let find = |path: &str| entries.iter().find(|e| e["path"] == path).cloned();
    let src = find("src").unwrap_or_else(|| panic!("no src: {output:#}"));
    assert_eq!(src["kind"], "dir");
    let lib = find("src/lib.rs").unwrap_or_else(|| panic!("no src/lib.rs: {output:#}"));
    assert_eq!(lib["kind"], "file");
    assert_eq!(lib["bytes"], 41, "{lib:#}");
    assert_eq!(output["truncated"], false);

    let output = home
        .invoke("files", "files.list", &json!({"max_depth": 1}), &[])
        .invoke_result()["output"]
        .clone();
    let entries = output["entries"].as_array().expect("entries");
    assert!(entries.iter().any(|e| e["path"] == "src"), "{output:#}");
    assert!(
        !entries.iter().any(|e| e["path"] == "src/lib.rs"),
        "max_depth 1 went deeper: {output:#}"
    );

    let output = home
        .invoke("files", "files.list", &json!({"path": "docs"}), &[])
        .invoke_result()["output"]
        .clone();
    let paths: Vec<&str> = output["entries"]
        .as_array()
        .expect("entries")
        .iter()
        .filter_map(|e| e["path"].as_str())
        .collect();
    assert_eq!(paths, ["docs/guide.md"], "{output:#}");
}

/// A path that leaves the workspace is refused with exit 1 and an escape
/// kind, and nothing of the outside file reaches the caller.
#[track_caller]
fn assert_escape_refused(home: &Home, capability: &str, input: &Value) {
    let run = home.invoke("files", capability, input, &[]);
    let error = run.invoke_error();
    let kind = error["kind"].as_str().unwrap_or_default();
    assert!(
        kind == "path_escape" || kind == "denied",
        "{capability} {input}: kind {kind:?}, {error:#}"
    );
    assert!(
        !run.stdout.contains("TOP SECRET"),
        "{capability} {input} leaked: {}",
        run.stdout
    );
}

#[test]
fn paths_that_leave_the_workspace_are_refused() {
    let home = files_home();
    let outside = home.outside().join("secret.txt");
    std::os::unix::fs::symlink(&outside, home.workspace().join("link.txt")).expect("symlink");
    std::os::unix::fs::symlink(home.outside(), home.workspace().join("linkdir")).expect("symlink");

    assert_escape_refused(
        &home,
        "files.read",
        &json!({"path": "../outside/secret.txt"}),
    );
    assert_escape_refused(
        &home,
        "files.read",
        &json!({"path": "src/../../outside/secret.txt"}),
    );
    assert_escape_refused(
        &home,
        "files.read",
        &json!({"path": outside.to_string_lossy()}),
    );
    assert_escape_refused(&home, "files.read", &json!({"path": "link.txt"}));
    assert_escape_refused(&home, "files.read", &json!({"path": "linkdir/secret.txt"}));
    assert_escape_refused(&home, "files.list", &json!({"path": ".."}));
    assert_escape_refused(
        &home,
        "files.search",
        &json!({"pattern": "SECRET", "path": "../outside"}),
    );
    assert_escape_refused(
        &home,
        "files.search",
        &json!({"pattern": "SECRET", "path": "linkdir"}),
    );

    // And the host goes on: a good call right after works.
    home.invoke(
        "files",
        "files.read",
        &json!({"path": "docs/guide.md"}),
        &[],
    )
    .invoke_result();
}

#[test]
fn search_does_not_follow_a_symlink_out_of_the_workspace() {
    let home = files_home();
    std::os::unix::fs::symlink(home.outside(), home.workspace().join("linkdir")).expect("symlink");
    let run = home.invoke("files", "files.search", &json!({"pattern": "SECRET"}), &[]);
    let output = run.invoke_result()["output"].clone();
    assert_eq!(output["matches"], json!([]), "{output:#}");
}

/// A workspace is anybody's checkout: a link in it to a fifo no writer
/// opens must neither hang `files.search` (natively or as a component,
/// whose runtime opens without `O_NONBLOCK`) nor be opened at all, since
/// opening what a link leads to is already an effect on it (here it would
/// let a waiting writer through; for a device node, run its driver's open).
#[test]
fn a_linked_fifo_in_the_workspace_is_neither_waited_on_nor_opened() {
    for component in [false, true] {
        let home = Home::new();
        if component {
            home.install_component("files");
        } else {
            home.install_files();
        }
        home.write_config("[limits]\ndeadline_ms = 20000\n");
        let ws = home.workspace();
        write_file(&ws, "src/a.txt", "needle\n");
        let fifo = ws.join("pipe");
        let made = std::process::Command::new("mkfifo")
            .arg(&fifo)
            .status()
            .expect("mkfifo");
        assert!(made.success());
        std::os::unix::fs::symlink("pipe", ws.join("pipe.txt")).expect("link");
        let (sender, receiver) = std::sync::mpsc::channel();
        let writer_fifo = fifo.clone();
        std::thread::spawn(move || {
            // Blocks until something opens the fifo for reading.
            let opened = std::fs::OpenOptions::new().write(true).open(&writer_fifo);
            let _ = sender.send(opened.is_ok());
        });

        let run = home.invoke("files", "files.search", &json!({"pattern": "needle"}), &[]);
        let output = run.invoke_result()["output"].clone();
        assert_eq!(
            output["matches"],
            json!([{"path": "src/a.txt", "line": 1, "text": "needle"}]),
            "component={component}: {output:#}"
        );
        let let_through = receiver.recv_timeout(std::time::Duration::from_millis(300));
        if let_through.is_err() {
            // Release the waiting writer: it is there, so this open returns.
            let _ = std::fs::File::open(&fifo);
        }
        assert!(
            let_through.is_err(),
            "component={component}: files.search opened the fifo behind a link"
        );
    }
}

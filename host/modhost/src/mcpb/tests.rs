//! How a bundle's `manifest.json` becomes an MCP server module's command
//! line, and what is refused.

use std::path::Path;

use super::error::McpbError;
use super::id_from_name;
use super::manifest::{Launch, Manifest};

fn manifest(server: &str, extra: &str) -> Manifest {
    Manifest::parse(&format!(
        r#"{{"manifest_version": "0.3", "name": "Tiny Server", "version": "1.0.0",
            "description": "d", "author": {{"name": "a"}}, "server": {server} {extra}}}"#
    ))
    .expect("parses")
}

fn launch(server: &str, extra: &str) -> Result<Launch, McpbError> {
    manifest(server, extra).launch(Path::new("/nonexistent"), true)
}

#[track_caller]
fn refused(result: Result<Launch, McpbError>, says: &str) {
    match result {
        Ok(launch) => panic!("installed {launch:?}, expected a refusal saying {says:?}"),
        Err(error) => {
            let text = error.to_string();
            assert!(text.contains(says), "{text}");
        }
    }
}

#[test]
fn dirname_is_the_module_folder() {
    let launch = launch(
        r#"{"type": "node", "entry_point": "server/index.js",
            "mcp_config": {"command": "node", "args": ["${__dirname}/server/index.js"],
                           "env": {"DATA": "${__dirname}${/}data"}}}"#,
        "",
    )
    .unwrap();
    assert_eq!(launch.command, "node");
    assert_eq!(launch.args, ["{module}/server/index.js"]);
    assert_eq!(launch.env["DATA"], "{module}/data");
}

#[test]
fn without_mcp_config_the_entry_point_runs_under_its_interpreter() {
    let launch = launch(r#"{"type": "python", "entry_point": "server/main.py"}"#, "").unwrap();
    assert_eq!(launch.command, "python3");
    assert_eq!(launch.args, ["{module}/server/main.py"]);
}

#[test]
fn python_is_python3_when_only_python3_is_granted() {
    let server =
        r#"{"type": "python", "mcp_config": {"command": "python", "args": ["-m", "srv"]}}"#;
    assert_eq!(launch(server, "").unwrap().command, "python3");
    let kept = manifest(server, "").launch(Path::new("/nonexistent"), false);
    assert_eq!(kept.unwrap().command, "python");
}

#[test]
fn the_linux_override_applies() {
    let launch = launch(
        r#"{"type": "node", "mcp_config": {"command": "node", "args": ["a.js"],
            "platform_overrides": {"linux": {"args": ["${__dirname}/linux.js"]},
                                   "win32": {"command": "node.exe"}}}}"#,
        "",
    )
    .unwrap();
    assert_eq!(launch.command, "node");
    assert_eq!(launch.args, ["{module}/linux.js"]);
}

#[test]
fn a_relative_file_argument_names_the_bundles_file() {
    let tree = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(tree.path().join("server")).unwrap();
    std::fs::write(tree.path().join("server/index.js"), "").unwrap();
    let launch = manifest(
        r#"{"type": "node", "mcp_config": {"command": "node",
            "args": ["server/index.js", "--verbose", "not/there.js"]}}"#,
        "",
    )
    .launch(tree.path(), true)
    .unwrap();
    assert_eq!(
        launch.args,
        ["{module}/server/index.js", "--verbose", "not/there.js"]
    );
}

#[test]
fn user_config_defaults_are_used_and_unset_optional_values_dropped() {
    let launch = launch(
        r#"{"type": "node", "mcp_config": {"command": "node",
            "args": ["${__dirname}/i.js", "${user_config.dirs}", "${user_config.quiet}",
                     "--limit=${user_config.limit}"],
            "env": {"TOKEN": "${user_config.token}", "MODE": "${user_config.mode}"}}}"#,
        r#", "user_config": {
            "dirs": {"type": "directory", "multiple": true, "default": ["/srv/a", "/srv/b"]},
            "quiet": {"type": "boolean"},
            "limit": {"type": "number", "default": 10},
            "token": {"type": "string", "sensitive": true},
            "mode": {"type": "string", "default": "fast"}}"#,
    )
    .unwrap();
    assert_eq!(
        launch.args,
        ["{module}/i.js", "/srv/a", "/srv/b", "--limit=10"]
    );
    assert_eq!(launch.env.get("TOKEN"), None);
    assert_eq!(launch.env["MODE"], "fast");
}

#[test]
fn a_required_user_config_without_default_is_refused_with_the_remedy() {
    refused(
        launch(
            r#"{"type": "node", "mcp_config": {"command": "node", "args": ["x.js"],
                "env": {"API_KEY": "${user_config.api_key}"}}}"#,
            r#", "user_config": {"api_key": {"type": "string", "title": "API Key",
                                             "required": true, "sensitive": true}}"#,
        ),
        "modhost install --mcp FOLDER",
    );
}

#[test]
fn the_users_folders_are_refused() {
    for variable in ["${HOME}", "${DOCUMENTS}", "${DESKTOP}", "${DOWNLOADS}"] {
        refused(
            launch(
                &format!(
                    r#"{{"type": "node", "mcp_config": {{"command": "node", "args": ["{variable}/x"]}}}}"#
                ),
                "",
            ),
            "a folder of the user's",
        );
    }
    // Through a default too.
    refused(
        launch(
            r#"{"type": "node", "mcp_config": {"command": "node", "args": ["${user_config.d}"]}}"#,
            r#", "user_config": {"d": {"type": "directory", "default": "${HOME}/Desktop"}}"#,
        ),
        "a folder of the user's",
    );
}

#[test]
fn defaults_naming_each_other_are_refused_not_followed() {
    refused(
        launch(
            r#"{"type": "node", "mcp_config": {"command": "node", "args": ["--a=${user_config.a}"]}}"#,
            r#", "user_config": {"a": {"type": "string", "default": "x${user_config.b}"},
                                 "b": {"type": "string", "default": "y${user_config.a}"}}"#,
        ),
        "naming another",
    );
}

#[test]
fn binary_uv_and_foreign_bundles_are_refused_with_what_to_do() {
    refused(
        launch(
            r#"{"type": "binary", "mcp_config": {"command": "${__dirname}/server/srv"}}"#,
            "",
        ),
        "[binaries]",
    );
    refused(
        launch(r#"{"type": "uv", "entry_point": "src/server.py"}"#, ""),
        "pip install --target",
    );
    refused(
        launch(
            r#"{"type": "node", "entry_point": "i.js"}"#,
            r#", "compatibility": {"platforms": ["darwin", "win32"]}"#,
        ),
        "not on Linux",
    );
    refused(
        launch(
            r#"{"type": "node", "mcp_config": {"command": "/usr/bin/node", "args": []}}"#,
            "",
        ),
        "[binaries]",
    );
}

#[test]
fn a_manifest_without_a_version_or_with_a_repeated_key_is_refused() {
    assert!(Manifest::parse(r#"{"name": "x", "server": {"type": "node"}}"#).is_err());
    assert!(
        Manifest::parse(
            r#"{"manifest_version": "0.3", "name": "x", "name": "y", "server": {"type": "node"}}"#
        )
        .is_err()
    );
    // The older name of the version field.
    assert!(
        Manifest::parse(r#"{"dxt_version": "0.1", "name": "x", "server": {"type": "node"}}"#)
            .is_ok()
    );
}

#[test]
fn module_ids_from_bundle_names() {
    assert_eq!(id_from_name("Tiny Server").as_deref(), Some("tiny-server"));
    assert_eq!(id_from_name("weather_mcp").as_deref(), Some("weather_mcp"));
    assert_eq!(
        id_from_name("@scope/My.Server!").as_deref(),
        Some("scope-my-server")
    );
    assert_eq!(id_from_name("123"), None);
    assert_eq!(id_from_name(""), None);
}

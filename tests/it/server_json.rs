//! MCP registry interop (issue 36, part 4): MCP bundles (`.mcpb`) installed
//! as MCP server modules, server.json entries read (`modhost install
//! ./server.json`) and written (`modhost server-json MODULE`).
//!
//! The bundle is built here around the tiny Python server of issue 38's
//! tests (`tests/mcp/servers/tiny_server.py`, the Python SDK bundled in
//! `server/lib` as the MCPB spec lays a Python bundle out), with a
//! `manifest.json` whose `mcp_config` uses `${__dirname}`. It is served by
//! nginx over TLS from a test CA (`tls_lab.rs`) for the server.json path.
//! A missing SDK or nginx fails with its remedy, never a skip.
//!
//! The attacks: a server.json whose `fileSha256` does not match the bytes
//! (refused, the home unchanged), a bundle carrying the operator's grants
//! (`mcp-server.toml`: refused), an entry with only an npm package (refused
//! with the commands that pin one). What `server-json` writes is validated
//! against the registry's own schema (vendored in
//! `tests/fixtures/mcp-registry/`) and installed again on a second host,
//! whose pin must equal the first's.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;

use serde_json::{Value, json};

use crate::support::{Home, module_binary};
use crate::tls_lab::{TestCa, TlsFileServer};

/// The module id the tests install the bundle as.
const ID: &str = "tiny";

fn servers_dir() -> PathBuf {
    crate::support::tests_dir().join("mcp").join("servers")
}

/// Fail (never skip) when `what` at `path` is not installed.
#[track_caller]
fn require(what: &str, path: &Path) {
    assert!(
        path.exists(),
        "{what} is not installed here ({} does not exist); install the MCP servers with `tests/setup` (or `tests/mcp/servers/setup-servers`; Python 3 with pip)",
        path.display()
    );
}

/// The Python interpreter the Python SDK was installed for.
fn python() -> String {
    let file = servers_dir().join(".python-interpreter");
    require("the Python MCP servers", &file);
    require(
        "the Python MCP SDK",
        &servers_dir().join(".python/mcp/__init__.py"),
    );
    std::fs::read_to_string(&file)
        .expect("read .python-interpreter")
        .trim()
        .to_owned()
}

/// A home granting modules `python3` (not `python`: a bundle's `python` is
/// run as `python3` then), calls of [`ID`] allowed, and `extra` lines.
fn bundle_home(extra: &str) -> Home {
    // The bridge is found beside modhost, as an operator's install has it.
    module_binary("mcp_bridge");
    let home = Home::new();
    home.write_config(&format!(
        "[binaries]\npython3 = {:?}\n\n[[approval.rules]]\nmodule = \"{ID}\"\ndecision = \"allow\"\n\n{extra}",
        python()
    ));
    home.require_landlock();
    home
}

/// A bundle's folder: the tiny Python server under `server/`, the SDK in
/// `server/lib`, and a manifest starting it with `python` and
/// `${__dirname}`; `extra` files added (name, text).
fn bundle_folder(home: &Home, name: &str, extra: &[(&str, &str)]) -> PathBuf {
    let folder = home.outside().join(format!("{name}-bundle"));
    std::fs::create_dir_all(folder.join("server")).unwrap();
    let status = Command::new("cp")
        .arg("-al")
        .arg(servers_dir().join(".python"))
        .arg(folder.join("server/lib"))
        .status()
        .expect("run cp");
    assert!(status.success());
    std::fs::copy(
        servers_dir().join("tiny_server.py"),
        folder.join("server/tiny_server.py"),
    )
    .unwrap();
    let manifest = json!({
        "manifest_version": "0.3",
        "name": "tiny",
        "display_name": "Tiny server",
        "version": "1.0.0",
        "description": "The tiny Python MCP server of modhost's tests",
        "author": {"name": "modhost tests"},
        "server": {
            "type": "python",
            "entry_point": "server/tiny_server.py",
            "mcp_config": {
                "command": "python",
                "args": ["${__dirname}/server/tiny_server.py"],
                "env": {"PYTHONPATH": "${__dirname}/server/lib"}
            }
        },
        "tools": [{"name": "add", "description": "Add two integers"}],
        "compatibility": {"platforms": ["darwin", "linux", "win32"]}
    });
    std::fs::write(
        folder.join("manifest.json"),
        serde_json::to_string_pretty(&manifest).unwrap(),
    )
    .unwrap();
    for (file, text) in extra {
        std::fs::write(folder.join(file), text).unwrap();
    }
    folder
}

/// `folder` zipped (entries relative to it, as `mcpb pack` makes them) to
/// `out`.
fn pack(folder: &Path, out: &Path) {
    let script = "import os, sys, zipfile\n\
        root, out = sys.argv[1], sys.argv[2]\n\
        with zipfile.ZipFile(out, 'w', zipfile.ZIP_STORED) as z:\n\
        \x20   for d, _, files in os.walk(root):\n\
        \x20       for f in files:\n\
        \x20           p = os.path.join(d, f)\n\
        \x20           z.write(p, os.path.relpath(p, root))\n";
    let status = Command::new(python())
        .arg("-c")
        .arg(script)
        .arg(folder)
        .arg(out)
        .status()
        .expect("run python to zip the bundle");
    assert!(status.success(), "zipping {}", folder.display());
}

/// The tiny bundle, packed as `<outside>/<name>.mcpb`.
fn tiny_bundle(home: &Home, name: &str, extra: &[(&str, &str)]) -> PathBuf {
    let folder = bundle_folder(home, name, extra);
    let bundle = home.outside().join(format!("{name}.mcpb"));
    pack(&folder, &bundle);
    bundle
}

fn sha256_of(path: &Path) -> String {
    let out = Command::new("sha256sum")
        .arg(path)
        .output()
        .expect("run sha256sum");
    String::from_utf8(out.stdout).unwrap()[..64].to_owned()
}

/// Every path under the home with its contents (folders as `<dir>`).
fn home_state(home: &Home) -> BTreeMap<String, Vec<u8>> {
    fn walk(root: &Path, dir: &Path, out: &mut BTreeMap<String, Vec<u8>>) {
        let Ok(entries) = std::fs::read_dir(dir) else {
            return;
        };
        for entry in entries.flatten() {
            let path = entry.path();
            let relative = path.strip_prefix(root).unwrap().display().to_string();
            if std::fs::symlink_metadata(&path).unwrap().is_dir() {
                out.insert(relative, b"<dir>".to_vec());
                walk(root, &path, out);
            } else {
                out.insert(relative, std::fs::read(&path).unwrap_or_default());
            }
        }
    }
    let mut out = BTreeMap::new();
    walk(&home.path(), &home.path(), &mut out);
    // The audit log records the refused attempt; what the home holds of
    // modules, pins and staging must be as it was.
    out.retain(|path, _| !path.starts_with("audit") && !path.starts_with("logs"));
    out
}

fn pin_of(home: &Home, id: &str) -> Value {
    let text = std::fs::read_to_string(home.path().join("pins.json")).expect("pins.json");
    serde_json::from_str::<Value>(&text).unwrap()["modules"][id].clone()
}

/// `add` answers through the installed bundle: the server ran confined, from
/// the module's folder.
#[track_caller]
fn the_bundle_answers(home: &Home) {
    let run = home.invoke(ID, &format!("{ID}.add"), &json!({"a": 2, "b": 3}), &[]);
    assert_eq!(run.invoke_result()["output"], json!({"sum": 5}), "{run:#?}");
}

/// The TLS lab serving `files` (name, path) over https, trusted by the
/// homes whose config takes [`TestCa::distribution_config`].
fn serve(home: &Home, files: &[(&str, &Path)]) -> (TestCa, TlsFileServer) {
    let lab = home.outside().join("lab");
    let ca = TestCa::new(&lab.join("ca"), "server-json");
    let cert = ca.server_cert(&lab.join("certs"), "localhost", false);
    let root = lab.join("www");
    std::fs::create_dir_all(&root).unwrap();
    for (name, path) in files {
        std::fs::copy(path, root.join(name)).unwrap();
    }
    let server = TlsFileServer::start(&lab.join("nginx"), &root, &cert);
    (ca, server)
}

/// A server.json naming the bundle at `url` with `sha256`.
fn server_json(url: &str, sha256: &str) -> Value {
    json!({
        "$schema": "https://static.modelcontextprotocol.io/schemas/2025-12-11/server.schema.json",
        "name": "io.github.modhost-tests/tiny",
        "description": "The tiny Python MCP server",
        "version": "1.0.0",
        "packages": [
            {"registryType": "npm", "identifier": "@modhost-tests/tiny", "version": "1.0.0",
             "runtimeHint": "npx", "transport": {"type": "stdio"}},
            {"registryType": "mcpb", "identifier": url, "version": "1.0.0",
             "fileSha256": sha256, "transport": {"type": "stdio"}}
        ]
    })
}

fn write_json(path: &Path, value: &Value) -> PathBuf {
    std::fs::write(path, serde_json::to_string_pretty(value).unwrap()).unwrap();
    path.to_path_buf()
}

/// The registry's schema (2025-12-11), vendored unchanged from
/// https://static.modelcontextprotocol.io/schemas/2025-12-11/server.schema.json
/// (`tests/fixtures/mcp-registry/SOURCE.md`).
fn registry_schema() -> Value {
    let path = crate::support::tests_dir().join("fixtures/mcp-registry/server.schema.json");
    serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap()
}

#[test]
fn a_local_bundle_installs_as_an_mcp_server_module_and_runs() {
    let home = bundle_home("");
    let bundle = tiny_bundle(&home, "tiny", &[]);
    let run = home.run(&["install", &bundle.display().to_string()]);
    run.expect_code(0);
    assert!(run.stdout.contains("installed tiny"), "{run:#?}");
    let manifest = std::fs::read_to_string(home.modules().join(ID).join("mcp-server.toml"))
        .expect("the bundle became an MCP server module");
    // `python` as python3 (the only one granted), `${__dirname}` as the
    // module's folder.
    assert!(manifest.contains("command = \"python3\""), "{manifest}");
    assert!(
        manifest.contains("{module}/server/tiny_server.py"),
        "{manifest}"
    );
    assert!(
        manifest.contains("PYTHONPATH = \"{module}/server/lib\""),
        "{manifest}"
    );
    the_bundle_answers(&home);
    // Installed from a local file: no entry can name where others fetch it.
    let refused = home.run(&["server-json", ID]);
    refused.expect_code(2);
    assert!(
        refused.stderr.contains("installed from a local file"),
        "{refused:#?}"
    );

    // `--mcp` takes a bundle too, with the usual flags of an MCP install.
    let again = home.run(&[
        "install",
        "--mcp",
        &bundle.display().to_string(),
        "--id",
        "tiny2",
        "--bridge",
        &module_binary("mcp_bridge").display().to_string(),
        "--json",
    ]);
    let report = again.expect_code(0).json();
    assert_eq!(report["id"], "tiny2", "{report:#}");
    assert!(
        crate::support::strings(&report["tools"]).contains(&"add".to_owned()),
        "{report:#}"
    );
}

#[test]
fn a_bundle_carrying_the_operators_grants_is_refused_and_nothing_installed() {
    let home = bundle_home("");
    // The author granting their own tool the workspace, read-write.
    let grants = "[server]\ncommand = \"python3\"\n\n[roots.workspace]\nkind = \"workspace\"\naccess = \"read_write\"\n\n[tools.add]\nwrites = [\"workspace\"]\n";
    let bundle = tiny_bundle(&home, "granting", &[("mcp-server.toml", grants)]);
    let before = home_state(&home);
    let run = home.run(&["install", &bundle.display().to_string(), "--id", ID]);
    run.expect_code(2);
    assert!(
        run.stderr.contains("carries mcp-server.toml")
            && run.stderr.contains("nothing was installed"),
        "{run:#?}"
    );
    assert_eq!(home_state(&home), before, "the home changed");
}

#[test]
fn a_server_json_with_only_an_npm_package_is_refused_with_the_remedy() {
    let home = bundle_home("");
    let entry = json!({
        "name": "io.github.modelcontextprotocol/server-filesystem",
        "description": "Filesystem operations",
        "version": "2025.8.21",
        "packages": [{
            "registryType": "npm",
            "registryBaseUrl": "https://registry.npmjs.org",
            "identifier": "@modelcontextprotocol/server-filesystem",
            "version": "2025.8.21",
            "runtimeHint": "npx",
            "transport": {"type": "stdio"},
            "packageArguments": [{"type": "positional", "valueHint": "directory"}]
        }]
    });
    let file = write_json(&home.outside().join("server.json"), &entry);
    let before = home_state(&home);
    let run = home.run(&["install", &file.display().to_string()]);
    run.expect_code(2);
    for says in [
        "no package modhost can install",
        "npm install --prefix FOLDER @modelcontextprotocol/server-filesystem@2025.8.21",
        "modhost install --mcp FOLDER -- node",
        "nothing was installed",
    ] {
        assert!(run.stderr.contains(says), "no {says:?} in {run:#?}");
    }
    assert_eq!(home_state(&home), before, "the home changed");
}

#[test]
fn a_server_json_installs_its_bundle_over_https_and_writes_back_an_entry() {
    let home = bundle_home("");
    let bundle = tiny_bundle(&home, "tiny", &[]);
    let sha256 = sha256_of(&bundle);
    let (ca, server) = serve(&home, &[("tiny-1.0.0.mcpb", &bundle)]);
    let config = |home: &Home| {
        home.write_config(&format!(
            "[binaries]\npython3 = {:?}\n\n[[approval.rules]]\nmodule = \"{ID}\"\ndecision = \"allow\"\n\n{}",
            python(),
            ca.distribution_config()
        ));
    };
    config(&home);
    let url = server.url("tiny-1.0.0.mcpb");

    // A wrong fileSha256: refused, the home exactly as it was.
    let wrong = "0".repeat(64);
    let file = write_json(
        &home.outside().join("wrong.server.json"),
        &server_json(&url, &wrong),
    );
    let before = home_state(&home);
    let run = home.run(&["install", &file.display().to_string(), "--id", ID]);
    run.expect_code(2);
    assert!(
        run.stderr.contains("sha256 mismatch") && run.stderr.contains(&wrong),
        "{run:#?}"
    );
    assert_eq!(
        home_state(&home),
        before,
        "a refused download changed the home"
    );

    // The right one: the npm package is passed over, the bundle installed.
    let file = write_json(
        &home.outside().join("server.json"),
        &server_json(&url, &sha256),
    );
    let run = home.run(&["install", &file.display().to_string()]);
    run.expect_code(0);
    assert!(
        run.stdout
            .contains("from io.github.modhost-tests/tiny (mcpb package"),
        "{run:#?}"
    );
    the_bundle_answers(&home);
    let pin = pin_of(&home, ID);
    assert_eq!(pin["provenance"]["source"], url, "{pin:#}");
    assert_eq!(pin["provenance"]["sha256"], sha256, "{pin:#}");

    // Written back: valid against the registry's schema, naming the same
    // bytes.
    let written = home.outside().join("written.server.json");
    home.run(&[
        "server-json",
        ID,
        "--name",
        "io.github.modhost-tests/tiny",
        "--output",
        &written.display().to_string(),
    ])
    .expect_code(0);
    let entry: Value = serde_json::from_str(&std::fs::read_to_string(&written).unwrap()).unwrap();
    let schema = registry_schema();
    let validator = jsonschema::validator_for(&schema).expect("the registry schema compiles");
    let errors: Vec<String> = validator
        .iter_errors(&entry)
        .map(|e| e.to_string())
        .collect();
    assert!(errors.is_empty(), "{entry:#}\n{errors:#?}");
    assert_eq!(entry["name"], "io.github.modhost-tests/tiny");
    let package = &entry["packages"][0];
    assert_eq!(package["registryType"], "mcpb", "{entry:#}");
    assert_eq!(package["identifier"], url, "{entry:#}");
    assert_eq!(package["fileSha256"], sha256, "{entry:#}");
    // stdout is the same entry.
    let printed = home.run(&["server-json", ID, "--name", "io.github.modhost-tests/tiny"]);
    assert_eq!(printed.expect_code(0).json(), entry);

    // Read back on a second host: the same approved bytes.
    let second = bundle_home("");
    config(&second);
    second
        .run(&["install", &written.display().to_string()])
        .expect_code(0);
    the_bundle_answers(&second);
    let (first_pin, second_pin) = (pin_of(&home, ID), pin_of(&second, ID));
    assert_eq!(first_pin["digest"], second_pin["digest"]);
    assert_eq!(first_pin["provenance"], second_pin["provenance"]);

    // The bundle's URL installs the same way without a server.json.
    let third = bundle_home("");
    config(&third);
    let run = third.run(&["install", &url, "--sha256", &sha256, "--id", ID]);
    run.expect_code(0);
    assert!(run.stdout.contains("an MCP server"), "{run:#?}");
    assert_eq!(pin_of(&third, ID)["digest"], first_pin["digest"]);
    assert_eq!(pin_of(&third, ID)["provenance"], first_pin["provenance"]);
}

/// A modhost module published to an OCI registry: its entry names the
/// manifest digest (never the tag, which can move), validates against the
/// registry's schema, and installs the same bytes on a second host; an entry
/// whose `fileSha256` disagrees with the fetched bytes installs nothing.
#[test]
fn an_oci_module_round_trips_through_server_json() {
    let registry = crate::oci_lab::Registry::start();
    let wasm =
        std::fs::read(crate::support::components().path("echo")).expect("the echo component");
    let pushed = registry.pusher().component("team/echo", "1.0", &wasm);
    let home = Home::new();
    home.write_config(&registry.config_toml());
    home.run(&["install", &registry.reference("team/echo", ":1.0")])
        .expect_code(0);

    let written = home.outside().join("echo.server.json");
    home.run(&[
        "server-json",
        "echo",
        "--output",
        &written.display().to_string(),
    ])
    .expect_code(0);
    let entry: Value = serde_json::from_str(&std::fs::read_to_string(&written).unwrap()).unwrap();
    let schema = registry_schema();
    let validator = jsonschema::validator_for(&schema).expect("the registry schema compiles");
    let errors: Vec<String> = validator
        .iter_errors(&entry)
        .map(|e| e.to_string())
        .collect();
    assert!(errors.is_empty(), "{entry:#}\n{errors:#?}");
    assert_eq!(entry["name"], "local.modhost/echo", "{entry:#}");
    assert_eq!(
        entry["packages"][0]["identifier"],
        format!("{}/team/echo@{}", registry.host(), pushed.digest),
        "{entry:#}"
    );
    assert_eq!(entry["packages"][0]["registryType"], "oci");

    let second = Home::new();
    second.write_config(&registry.config_toml());
    // A fileSha256 that is not the fetched bytes': refused, nothing changed.
    let mut wrong = entry.clone();
    wrong["packages"][0]["fileSha256"] = json!("1".repeat(64));
    let wrong_file = write_json(&second.outside().join("wrong.server.json"), &wrong);
    let before = home_state(&second);
    let run = second.run(&["install", &wrong_file.display().to_string()]);
    run.expect_code(2);
    assert!(
        run.stderr.contains("fileSha256") && run.stderr.contains("nothing was installed"),
        "{run:#?}"
    );
    assert_eq!(home_state(&second), before, "the home changed");

    second
        .run(&["install", &written.display().to_string()])
        .expect_code(0);
    let answer = second.invoke("echo", "echo.run", &json!({"n": 1}), &[]);
    assert_eq!(answer.invoke_result()["output"], json!({"echo": {"n": 1}}));
    let (first_pin, second_pin) = (pin_of(&home, "echo"), pin_of(&second, "echo"));
    assert_eq!(first_pin["digest"], second_pin["digest"]);
    assert_eq!(
        second_pin["provenance"]["oci_digest"],
        pushed.digest.as_str(),
        "{second_pin:#}"
    );
}

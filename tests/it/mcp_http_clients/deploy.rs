//! `deploy/`, taken at its word without a container engine or a cluster
//! (neither runs here):
//!
//! - the Containerfile copies only what the repository has, every
//!   workspace member (cargo loads them all), builds and ships every module
//!   the README calls bundled, runs as a numeric non-root user, and starts
//!   `modhost mcp --http 0.0.0.0:8750`;
//! - the Kubernetes manifests parse as Kubernetes parses them (YAML 1.1,
//!   with the npm `yaml` package `tests/setup` installs in
//!   tests/mcp/conformance) and agree with each other and with the image:
//!   names, keys, ports, probes, the drain within the grace period, the
//!   securityContext, the user;
//! - the ConfigMap's config.toml is one modhost accepts, and the Secret's
//!   placeholders are ones it refuses (a Secret applied unfilled stops the
//!   pods rather than serve with a known key or token);
//! - the image's entrypoint, run for real, makes a home modhost serves from
//!   a ConfigMap and a Secret laid out as Kubernetes mounts them (files
//!   behind symbolic links, group-readable), and the image's command then
//!   serves the bundled tools to a token holder and no one else, and
//!   refuses to start with the Secret's placeholder key;
//! - nginx accepts deploy/nginx.conf (`nginx -t`);
//! - the README's "Serving over HTTP" names files that exist.

use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use serde_json::Value;

use crate::mcp_clients::which;
use crate::support::{binaries, module_binary, write_file};

/// The repository's root.
fn root() -> PathBuf {
    crate::support::tests_dir()
        .parent()
        .expect("tests/ lives in the repository's root")
        .to_path_buf()
}

fn deploy() -> PathBuf {
    root().join("deploy")
}

fn read(path: &Path) -> String {
    std::fs::read_to_string(path).unwrap_or_else(|e| panic!("read {}: {e}", path.display()))
}

/// The Containerfile's instructions, continuation lines joined, comments
/// dropped.
fn instructions() -> Vec<String> {
    let mut out = Vec::new();
    let mut current = String::new();
    for line in read(&deploy().join("Containerfile")).lines() {
        let trimmed = line.trim();
        if trimmed.starts_with('#') || (trimmed.is_empty() && current.is_empty()) {
            continue;
        }
        match trimmed.strip_suffix('\\') {
            Some(part) => {
                current.push_str(part);
                current.push(' ');
            }
            None => {
                current.push_str(trimmed);
                if !current.trim().is_empty() {
                    out.push(current.trim().to_owned());
                }
                current.clear();
            }
        }
    }
    out
}

/// The bundled modules: those README.md's "Bundled modules" lists
/// (`- `name`: ...`), each a crate of `modules/`.
pub(super) fn bundled_modules() -> Vec<String> {
    let readme = read(&root().join("README.md"));
    let start = readme
        .find("## Bundled modules")
        .expect("README.md has a \"Bundled modules\" section");
    let rest = &readme[start + 3..];
    let section = &rest[..rest.find("\n## ").unwrap_or(rest.len())];
    let mut names: Vec<String> = section
        .lines()
        .filter_map(|l| l.strip_prefix("- `"))
        .filter_map(|l| l.split_once("`:").map(|(name, _)| name.to_owned()))
        .collect();
    for name in &names {
        assert!(
            root()
                .join("modules")
                .join(name)
                .join("Cargo.toml")
                .is_file(),
            "README.md bundles {name}, which modules/ does not have"
        );
    }
    assert!(names.len() >= 5, "the README's bundled modules: {names:?}");
    names.sort();
    names
}

/// The JSON array form of an exec-form instruction's argument.
fn exec_form(instruction: &str, keyword: &str) -> Vec<String> {
    let rest = instruction
        .strip_prefix(keyword)
        .unwrap_or_else(|| panic!("{instruction:?} is not {keyword}"));
    serde_json::from_str(rest.trim())
        .unwrap_or_else(|e| panic!("{keyword} is not in exec form (a JSON array): {e}: {rest}"))
}

#[test]
fn the_container_recipe_builds_from_what_the_repository_has_and_runs_the_http_server_unprivileged()
{
    let instructions = instructions();
    let stages: Vec<&String> = instructions
        .iter()
        .filter(|i| i.starts_with("FROM "))
        .collect();
    assert!(
        stages.len() >= 2,
        "a multi-stage build (a build stage and a small run stage): {stages:?}"
    );

    // Every COPY from the build context names something the repository has.
    let mut copied = Vec::new();
    for copy in instructions.iter().filter(|i| i.starts_with("COPY ")) {
        let words: Vec<&str> = copy.split_whitespace().skip(1).collect();
        if words.iter().any(|w| w.starts_with("--from=")) {
            continue;
        }
        let paths: Vec<&str> = words
            .iter()
            .copied()
            .filter(|w| !w.starts_with("--"))
            .collect();
        let (sources, _destination) = paths.split_at(paths.len() - 1);
        for source in sources {
            assert!(
                root().join(source).exists(),
                "deploy/Containerfile copies {source}, which the repository does not have: {copy}"
            );
            copied.push((*source).to_owned());
        }
    }
    // Cargo loads every member's manifest: each must be copied.
    let manifest = read(&root().join("Cargo.toml"));
    let members = manifest
        .lines()
        .find_map(|l| l.trim().strip_prefix("members = "))
        .expect("the workspace's members line");
    let members: Vec<String> = serde_json::from_str(members).expect("members as a list");
    for member in members {
        let dir = member.trim_end_matches("/*");
        assert!(
            copied
                .iter()
                .any(|c| dir == c || dir.starts_with(&format!("{c}/"))),
            "workspace member {member} is not copied into the build stage (copied: {copied:?})"
        );
    }
    for file in ["Cargo.toml", "Cargo.lock", "deploy/entrypoint.sh"] {
        assert!(copied.iter().any(|c| c == file), "{file} is not copied");
    }

    // Every bundled module is built and shipped.
    let build = instructions
        .iter()
        .find(|i| i.starts_with("RUN cargo build"))
        .expect("a RUN cargo build");
    assert!(
        build.contains("--release") && build.contains("--locked"),
        "{build}"
    );
    assert!(build.contains("-p modhost-cli"), "{build}");
    let shipped: Vec<&str> = build
        .split("for module in ")
        .nth(1)
        .and_then(|rest| rest.split(';').next())
        .expect("a `for module in ...;` loop that ships the modules")
        .split_whitespace()
        .collect();
    let mut shipped_sorted = shipped.clone();
    shipped_sorted.sort_unstable();
    assert_eq!(
        shipped_sorted,
        bundled_modules(),
        "the image ships every bundled module: {build}"
    );
    assert!(build.contains("/out/modules/$module"), "{build}");
    for module in bundled_modules() {
        assert!(
            build.contains(&format!("-p {module} ")),
            "the bundled module {module} is not built: {build}"
        );
        if root()
            .join("modules")
            .join(&module)
            .join("knowledge")
            .is_dir()
        {
            assert!(
                build.contains(&format!(
                    "modules/{module}/knowledge /out/modules/{module}/"
                )),
                "{module} ships knowledge, which the image leaves out: {build}"
            );
        }
    }

    // A numeric non-root user (Kubernetes' runAsNonRoot can check a number only).
    let user = instructions
        .iter()
        .rev()
        .find_map(|i| i.strip_prefix("USER "))
        .expect("a USER");
    let uid: u32 = user
        .split(':')
        .next()
        .and_then(|u| u.parse().ok())
        .unwrap_or_else(|| panic!("USER {user} is not numeric"));
    assert_ne!(uid, 0, "the image runs as root");

    let cmd = instructions
        .iter()
        .rev()
        .find(|i| i.starts_with("CMD "))
        .expect("a CMD");
    assert_eq!(
        exec_form(cmd, "CMD"),
        ["modhost", "mcp", "--http", "0.0.0.0:8750"]
    );
    let entrypoint = instructions
        .iter()
        .rev()
        .find(|i| i.starts_with("ENTRYPOINT "))
        .expect("an ENTRYPOINT");
    assert_eq!(
        exec_form(entrypoint, "ENTRYPOINT"),
        ["/usr/local/bin/modhost-entrypoint"]
    );
    assert!(
        read(&deploy().join("Containerfile.dockerignore"))
            .lines()
            .any(|l| l.trim() == "target"),
        "the build context would carry the target folder"
    );
}

/// The `ENV` of the Containerfile: name -> value.
fn image_env() -> Vec<(String, String)> {
    let mut env = Vec::new();
    for instruction in instructions().iter().filter(|i| i.starts_with("ENV ")) {
        for pair in instruction["ENV ".len()..].split_whitespace() {
            let (name, value) = pair.split_once('=').expect("ENV NAME=VALUE");
            env.push((name.to_owned(), value.to_owned()));
        }
    }
    env
}

/// Every YAML document of deploy/k8s/, parsed as Kubernetes parses YAML
/// (1.1: `0440` is octal), as JSON: file name -> documents.
fn manifests() -> serde_json::Map<String, Value> {
    let parser_dir = crate::support::tests_dir().join("mcp/conformance");
    let parser = parser_dir.join("node_modules/yaml/package.json");
    if !parser.is_file() {
        let remedy = "install it with `tests/setup` (npm ci in tests/mcp/conformance)";
        panic!(
            "the YAML parser this test reads deploy/k8s/ with is not installed ({} does not exist); {remedy}",
            parser.display()
        );
    }
    const TO_JSON: &str = r#"
const { createRequire } = require('node:module');
const fs = require('node:fs');
const path = require('node:path');
const YAML = createRequire(process.argv[1])('yaml');
const out = {};
for (const file of fs.readdirSync(process.argv[2]).filter((f) => f.endsWith('.yaml')).sort()) {
  out[file] = YAML.parseAllDocuments(fs.readFileSync(path.join(process.argv[2], file), 'utf8'), { version: '1.1', uniqueKeys: true })
    .map((doc) => {
      if (doc.errors.length) throw new Error(`${file}: ${doc.errors.map(String).join('; ')}`);
      return doc.toJSON();
    });
}
process.stdout.write(JSON.stringify(out));
"#;
    let output = Command::new(which(Path::new("node")))
        .args(["-e", TO_JSON])
        .arg(parser_dir.join("package.json"))
        .arg(deploy().join("k8s"))
        .stdin(Stdio::null())
        .output()
        .expect("run node (Node 20, which tests/setup needs)");
    assert!(
        output.status.success(),
        "deploy/k8s/ does not parse as YAML:\n{}",
        String::from_utf8_lossy(&output.stderr)
    );
    match serde_json::from_slice(&output.stdout).expect("the parser's JSON") {
        Value::Object(map) => map,
        other => panic!("not an object: {other}"),
    }
}

/// The one document of `kind` in the manifests.
fn document<'a>(manifests: &'a serde_json::Map<String, Value>, kind: &str) -> &'a Value {
    let found: Vec<&Value> = manifests
        .values()
        .flat_map(|docs| docs.as_array().into_iter().flatten())
        .filter(|d| d["kind"] == kind)
        .collect();
    assert_eq!(found.len(), 1, "one {kind} in deploy/k8s/: {found:#?}");
    found[0]
}

/// `KEY = <integer>` of a config.toml's text.
fn toml_integer(text: &str, key: &str) -> u64 {
    text.lines()
        .find_map(|l| {
            let (k, v) = l.split_once('=')?;
            (k.trim() == key).then(|| v.split('#').next().unwrap_or("").trim().to_owned())
        })
        .and_then(|v| v.parse().ok())
        .unwrap_or_else(|| panic!("no `{key} = <integer>` in:\n{text}"))
}

#[test]
fn the_kubernetes_manifests_parse_and_agree_with_each_other_and_with_the_image() {
    let manifests = manifests();
    let kustomization = &manifests["kustomization.yaml"][0];
    let mut listed: Vec<String> = kustomization["resources"]
        .as_array()
        .expect("kustomization resources")
        .iter()
        .map(|r| r.as_str().expect("a file name").to_owned())
        .collect();
    listed.sort();
    let mut files: Vec<String> = manifests
        .keys()
        .filter(|f| *f != "kustomization.yaml")
        .cloned()
        .collect();
    files.sort();
    assert_eq!(listed, files, "kustomization.yaml lists every manifest");

    let config_map = document(&manifests, "ConfigMap");
    let secret = document(&manifests, "Secret");
    let deployment = document(&manifests, "Deployment");
    let service = document(&manifests, "Service");

    assert_eq!(deployment["spec"]["replicas"], 2);
    let pod = &deployment["spec"]["template"];
    let labels = &pod["metadata"]["labels"];
    for (key, value) in deployment["spec"]["selector"]["matchLabels"]
        .as_object()
        .expect("matchLabels")
    {
        assert_eq!(&labels[key], value, "the selector matches the pods");
    }
    for (key, value) in service["spec"]["selector"].as_object().expect("selector") {
        assert_eq!(&labels[key], value, "the Service selects the pods");
    }

    let spec = &pod["spec"];
    let containers = spec["containers"].as_array().expect("containers");
    assert_eq!(containers.len(), 1, "one container");
    let container = &containers[0];
    assert_eq!(
        container["args"],
        serde_json::json!(["modhost", "mcp", "--http", "0.0.0.0:8750"])
    );
    let port = &container["ports"][0];
    assert_eq!(port["containerPort"], 8750);
    let port_name = port["name"].as_str().expect("a named port");
    assert_eq!(service["spec"]["ports"][0]["targetPort"], port_name);
    for (probe, path) in [
        ("readinessProbe", "/readyz"),
        ("livenessProbe", "/healthz"),
        ("startupProbe", "/healthz"),
    ] {
        let get = &container[probe]["httpGet"];
        assert_eq!(get["path"], path, "{probe}");
        assert_eq!(get["port"], port_name, "{probe}");
    }

    // Unprivileged, as the image is.
    let pod_security = &spec["securityContext"];
    assert_eq!(pod_security["runAsNonRoot"], true);
    let image_user = instructions()
        .iter()
        .rev()
        .find_map(|i| i.strip_prefix("USER ").map(str::to_owned))
        .expect("USER");
    assert_eq!(
        pod_security["runAsUser"].to_string(),
        image_user.split(':').next().expect("uid"),
        "the pod runs as the image's user"
    );
    assert_eq!(pod_security["seccompProfile"]["type"], "RuntimeDefault");
    let security = &container["securityContext"];
    assert_eq!(security["allowPrivilegeEscalation"], false);
    assert_eq!(security["readOnlyRootFilesystem"], true);
    assert_eq!(security["capabilities"]["drop"], serde_json::json!(["ALL"]));
    assert_eq!(spec["automountServiceAccountToken"], false);

    // Volumes: every mount has its volume; the ConfigMap and Secret are the
    // manifests' own; the home and /tmp are writable (the root is not).
    let volumes = spec["volumes"].as_array().expect("volumes");
    let volume = |name: &str| -> &Value {
        volumes
            .iter()
            .find(|v| v["name"] == name)
            .unwrap_or_else(|| panic!("no volume {name}"))
    };
    let mut mounts = Vec::new();
    for mount in container["volumeMounts"].as_array().expect("volumeMounts") {
        let name = mount["name"].as_str().expect("a mount's volume");
        mounts.push((
            mount["mountPath"].as_str().expect("mountPath").to_owned(),
            volume(name).clone(),
            mount["readOnly"] == true,
        ));
    }
    let mounted_at = |path: &str| -> &(String, Value, bool) {
        mounts
            .iter()
            .filter(|(at, _, _)| path == at || path.starts_with(&format!("{at}/")))
            .max_by_key(|(at, _, _)| at.len())
            .unwrap_or_else(|| panic!("nothing is mounted at {path}"))
    };
    let env = |name: &str| -> String {
        container["env"]
            .as_array()
            .expect("env")
            .iter()
            .find(|e| e["name"] == name)
            .and_then(|e| e["value"].as_str())
            .unwrap_or_else(|| panic!("no env {name}"))
            .to_owned()
    };
    let config_name = config_map["metadata"]["name"].as_str().expect("name");
    let secret_name = secret["metadata"]["name"].as_str().expect("name");
    let parts = env("MODHOST_CONFIG_PARTS");
    let parts: Vec<&str> = parts.split(':').collect();
    assert_eq!(parts.len(), 2, "config.toml then tokens.toml: {parts:?}");
    let file_of = |path: &str, kind: &str| -> String {
        let (at, volume, read_only) = mounted_at(path);
        assert!(*read_only, "{path} is mounted read-only");
        let key = path[at.len() + 1..].to_owned();
        match kind {
            "ConfigMap" => {
                assert_eq!(volume["configMap"]["name"], config_name, "{path}");
                config_map["data"][&key]
                    .as_str()
                    .unwrap_or_else(|| panic!("the ConfigMap has no {key}"))
                    .to_owned()
            }
            _ => {
                assert_eq!(volume["secret"]["secretName"], secret_name, "{path}");
                assert_eq!(
                    volume["secret"]["defaultMode"], 0o440,
                    "the Secret's files are readable by the pod's group only"
                );
                secret["stringData"][&key]
                    .as_str()
                    .unwrap_or_else(|| panic!("the Secret has no {key}"))
                    .to_owned()
            }
        }
    };
    let config = file_of(parts[0], "ConfigMap");
    let _tokens = file_of(parts[1], "Secret");
    let _key = file_of(&env("MODHOST_SIGNING_KEY_SOURCE"), "Secret");
    assert_eq!(
        pod_security["fsGroup"], pod_security["runAsGroup"],
        "the Secret's group is the server's"
    );
    let image_env = image_env();
    let home = &image_env
        .iter()
        .find(|(k, _)| k == "MODHOST_HOME")
        .expect("the image sets MODHOST_HOME")
        .1;
    let (at, home_volume, read_only) = mounted_at(home);
    assert!(
        !read_only && home_volume.get("emptyDir").is_some(),
        "the home ({home}) is a writable emptyDir: {at} {home_volume}"
    );
    let (_, tmp, read_only) = mounted_at("/tmp");
    assert!(
        !read_only && tmp.get("emptyDir").is_some(),
        "/tmp is writable"
    );
    let workspace = &image_env
        .iter()
        .find(|(k, _)| k == "MODHOST_WORKSPACE")
        .expect("the image sets MODHOST_WORKSPACE")
        .1;
    mounted_at(workspace);

    // The grace period covers the preStop pause and the drain.
    let pause: u64 = container["lifecycle"]["preStop"]["exec"]["command"]
        .as_array()
        .filter(|c| c.first().is_some_and(|w| w == "sleep"))
        .and_then(|c| c.get(1))
        .and_then(|s| s.as_str())
        .and_then(|s| s.parse().ok())
        .expect("preStop: sleep N");
    let drain = toml_integer(&config, "drain_timeout_secs");
    let grace = spec["terminationGracePeriodSeconds"]
        .as_u64()
        .expect("terminationGracePeriodSeconds");
    assert!(
        grace > pause + drain,
        "terminationGracePeriodSeconds {grace} must exceed the preStop pause {pause} s plus the drain {drain} s"
    );
}

/// The ConfigMap's config.toml and the Secret's values, as files.
fn config_map_and_secret() -> (String, String, String) {
    let manifests = manifests();
    let config = document(&manifests, "ConfigMap")["data"]["config.toml"]
        .as_str()
        .expect("config.toml")
        .to_owned();
    let secret = &document(&manifests, "Secret")["stringData"];
    (
        config,
        secret["tokens.toml"]
            .as_str()
            .expect("tokens.toml")
            .to_owned(),
        secret["signing-key"]
            .as_str()
            .expect("signing-key")
            .to_owned(),
    )
}

/// A token's `[[http.tokens]]` entry, its digest by `sha256sum`.
fn token_entry(principal: &str, token: &str) -> String {
    let mut child = Command::new("sha256sum")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .expect("sha256sum");
    std::io::Write::write_all(child.stdin.as_mut().expect("stdin"), token.as_bytes())
        .expect("write token");
    let output = child.wait_with_output().expect("sha256sum");
    let digest = String::from_utf8_lossy(&output.stdout)
        .split_whitespace()
        .next()
        .expect("a digest")
        .to_owned();
    format!(
        "[[http.tokens]]\nprincipal = \"{principal}\"\nsha256 = \"{digest}\"\nscopes = [\"mcp:tools\"]\n"
    )
}

/// Lay out `files` (name -> content) as Kubernetes mounts a Secret: the
/// files in `..data/`, each name a symbolic link into it, mode 0440.
fn secret_volume(dir: &Path, files: &[(&str, &str)]) {
    let data = dir.join("..data");
    for (name, content) in files {
        write_file(&data, name, content);
        std::fs::set_permissions(data.join(name), std::fs::Permissions::from_mode(0o440))
            .expect("chmod");
        std::os::unix::fs::symlink(Path::new("..data").join(name), dir.join(name))
            .expect("symlink");
    }
}

/// The image's file system, as far as the entrypoint sees it.
struct ImageLayout {
    _dir: tempfile::TempDir,
    home: PathBuf,
    bundled: PathBuf,
    config: PathBuf,
    secret: PathBuf,
    workspace: PathBuf,
}

fn image_layout(config: &str, tokens: &str, key: &str) -> ImageLayout {
    let dir = tempfile::tempdir().expect("temp dir");
    let bundled = dir.path().join("opt/modhost/modules");
    for module in ["files", "sessions"] {
        let target = bundled.join(module);
        std::fs::create_dir_all(&target).expect("module folder");
        std::fs::copy(module_binary(module), target.join(module)).expect("copy module");
    }
    let knowledge = root().join("modules/sessions/knowledge");
    let copied = Command::new("cp")
        .arg("-r")
        .arg(&knowledge)
        .arg(bundled.join("sessions"))
        .status()
        .expect("cp -r");
    assert!(copied.success(), "copy the sessions knowledge");
    let config_dir = dir.path().join("etc/modhost");
    write_file(&config_dir, "config.toml", config);
    let secret = dir.path().join("etc/modhost-secret");
    std::fs::create_dir_all(&secret).expect("secret dir");
    secret_volume(&secret, &[("tokens.toml", tokens), ("signing-key", key)]);
    let workspace = dir.path().join("workspace");
    std::fs::create_dir_all(&workspace).expect("workspace");
    ImageLayout {
        home: dir.path().join("var/lib/modhost/home"),
        bundled,
        config: config_dir.join("config.toml"),
        secret,
        workspace,
        _dir: dir,
    }
}

/// Run deploy/entrypoint.sh with `command`, as the pod does.
fn entrypoint(layout: &ImageLayout, parts: &str, command: &[&str]) -> std::process::Output {
    entrypoint_command(layout, parts, command)
        .output()
        .expect("run deploy/entrypoint.sh")
}

/// deploy/entrypoint.sh with `command` and the pod's environment.
fn entrypoint_command(layout: &ImageLayout, parts: &str, command: &[&str]) -> Command {
    let bin_dir = binaries().modhost.parent().expect("bin dir").to_owned();
    let mut run = Command::new("sh");
    run.arg(deploy().join("entrypoint.sh"))
        .args(command)
        .env_clear()
        .env("PATH", format!("{}:/usr/bin:/bin", bin_dir.display()))
        .env("MODHOST_HOME", &layout.home)
        .env("MODHOST_WORKSPACE", &layout.workspace)
        .env("MODHOST_CONFIG_PARTS", parts)
        .env(
            "MODHOST_SIGNING_KEY_SOURCE",
            layout.secret.join("signing-key"),
        )
        .env("MODHOST_BUNDLED_MODULES", &layout.bundled)
        .stdin(Stdio::null());
    run
}

#[test]
fn the_image_entrypoint_makes_a_served_home_from_the_config_map_the_secret_and_the_bundled_modules()
{
    let (config, _, _) = config_map_and_secret();
    let tokens = token_entry("ci-bot", "a-test-token-of-enough-length-0123456789");
    let key = "a-signing-key-for-this-test-only-0123456789abcdef\n";
    let layout = image_layout(&config, &tokens, key);
    let parts = format!(
        "{}:{}",
        layout.config.display(),
        layout.secret.join("tokens.toml").display()
    );
    let command = [
        "sh",
        "-c",
        r#"printf '%s\n' "$MODHOST_SIGNING_KEY_FILE" && exec modhost list --json"#,
    ];
    for start in ["first", "second"] {
        let run = entrypoint(&layout, &parts, &command);
        let stdout = String::from_utf8_lossy(&run.stdout);
        let stderr = String::from_utf8_lossy(&run.stderr);
        assert!(
            run.status.success(),
            "{start} start: the entrypoint failed ({}):\n{stdout}\n{stderr}",
            run.status
        );
        let (key_path, list) = stdout
            .split_once('\n')
            .expect("the key's path, then the list");
        let key_path = Path::new(key_path);
        assert_eq!(
            key_path,
            layout
                .home
                .parent()
                .expect("home's parent")
                .join("signing-key")
        );
        let meta = std::fs::symlink_metadata(key_path).expect("the key copy");
        assert!(
            meta.file_type().is_file(),
            "the key copy is a file, not a link"
        );
        assert_eq!(meta.permissions().mode() & 0o777, 0o400, "{start} start");
        assert_eq!(read(key_path), key);
        assert_eq!(
            read(&layout.home.join("config.toml")),
            format!("{config}\n{tokens}\n"),
            "config.toml is the ConfigMap's, then the Secret's tokens"
        );
        let entries: Value = serde_json::from_str(list).unwrap_or_else(|e| panic!("{e}: {list}"));
        for module in ["files", "sessions"] {
            let entry = entries
                .as_array()
                .into_iter()
                .flatten()
                .find(|e| e["id"] == module)
                .unwrap_or_else(|| panic!("{start} start: {module} is not installed: {entries:#}"));
            assert_eq!(entry["status"], "enabled", "{entry:#}");
        }
        if start == "first" {
            assert!(stderr.contains("installed files"), "{stderr}");
        } else {
            assert!(
                !stderr.contains("installed"),
                "a restart installs nothing again: {stderr}"
            );
        }
    }

    // A part that is not there stops the start, naming it.
    let missing = layout.secret.join("no-such-file.toml");
    let run = entrypoint(
        &layout,
        &format!("{}:{}", layout.config.display(), missing.display()),
        &["true"],
    );
    assert!(
        !run.status.success(),
        "a missing config part must stop the start"
    );
    assert!(
        String::from_utf8_lossy(&run.stderr).contains(&missing.display().to_string()),
        "{}",
        String::from_utf8_lossy(&run.stderr)
    );
}

#[test]
fn an_unfilled_secret_stops_modhost_rather_than_serve_with_its_placeholders() {
    let (config, tokens, key) = config_map_and_secret();
    let layout = image_layout(&config, &tokens, "unused");
    let parts = format!(
        "{}:{}",
        layout.config.display(),
        layout.secret.join("tokens.toml").display()
    );
    let run = entrypoint(&layout, &parts, &["modhost", "list", "--json"]);
    let stderr = String::from_utf8_lossy(&run.stderr);
    assert!(
        !run.status.success(),
        "the Secret's placeholder token digest was accepted:\n{stderr}"
    );
    assert!(
        stderr.contains("sha256"),
        "the refusal names the digest: {stderr}"
    );

    // Real tokens, the placeholder key: the server does not start.
    let tokens = token_entry("ci-bot", "a-test-token-of-enough-length-0123456789");
    let layout = image_layout(&config, &tokens, &key);
    let parts = format!(
        "{}:{}",
        layout.config.display(),
        layout.secret.join("tokens.toml").display()
    );
    let mut server = entrypoint_command(
        &layout,
        &parts,
        &["modhost", "mcp", "--http", "127.0.0.1:0"],
    )
    .stdout(Stdio::null())
    .stderr(Stdio::piped())
    .spawn()
    .expect("run the entrypoint");
    let started = std::time::Instant::now();
    let status = loop {
        if let Some(status) = server.try_wait().expect("wait") {
            break status;
        }
        if started.elapsed() > std::time::Duration::from_secs(60) {
            let _ = server.kill();
            let _ = server.wait();
            panic!("modhost mcp --http kept running with the Secret's placeholder signing key");
        }
        std::thread::sleep(std::time::Duration::from_millis(50));
    };
    let mut said = String::new();
    std::io::Read::read_to_string(&mut server.stderr.take().expect("stderr"), &mut said)
        .expect("read stderr");
    assert!(
        !status.success(),
        "the placeholder signing key was accepted:\n{said}"
    );
    assert!(
        said.contains("signing-key") && said.contains("openssl rand -base64 48"),
        "the refusal names the key file and how to make a key: {said}"
    );
}

#[test]
fn the_image_entrypoint_starts_a_server_that_serves_the_bundled_tools_to_a_token_holder() {
    let (config, _, _) = config_map_and_secret();
    let token = "a-test-token-of-enough-length-0123456789";
    let tokens = token_entry("ci-bot", token);
    let layout = image_layout(
        &config,
        &tokens,
        "a-signing-key-for-this-test-only-0123456789abcdef\n",
    );
    let parts = format!(
        "{}:{}",
        layout.config.display(),
        layout.secret.join("tokens.toml").display()
    );
    let output = tempfile::tempdir().expect("temp dir");
    let stderr_path = output.path().join("stderr");
    // The image's command, on the loopback of this machine.
    let server = entrypoint_command(
        &layout,
        &parts,
        &["modhost", "mcp", "--http", "127.0.0.1:0"],
    )
    .stdout(Stdio::null())
    .stderr(std::fs::File::create(&stderr_path).expect("stderr file"))
    .spawn()
    .expect("run the entrypoint");
    struct Stop(std::process::Child);
    impl Drop for Stop {
        fn drop(&mut self) {
            let _ = self.0.kill();
            let _ = self.0.wait();
        }
    }
    let mut server_guard = Stop(server);
    let started = std::time::Instant::now();
    let url = loop {
        let said = std::fs::read_to_string(&stderr_path).unwrap_or_default();
        if let Some(url) = said
            .lines()
            .find_map(|l| l.strip_prefix("modhost mcp: serving MCP over HTTP at "))
        {
            break url.trim().to_owned();
        }
        if let Some(status) = server_guard.0.try_wait().expect("wait") {
            panic!("the server exited ({status}) before serving:\n{said}");
        }
        assert!(
            started.elapsed() < std::time::Duration::from_secs(120),
            "the server did not start:\n{said}"
        );
        std::thread::sleep(std::time::Duration::from_millis(50));
    };
    let agent: ureq::Agent = ureq::Agent::config_builder()
        .http_status_as_error(false)
        .timeout_global(Some(std::time::Duration::from_secs(60)))
        .build()
        .into();
    let ready = agent
        .get(url.replace("/mcp", "/readyz"))
        .call()
        .expect("GET /readyz");
    assert_eq!(ready.status(), 200);
    let list = r#"{"jsonrpc":"2.0","id":1,"method":"tools/list","params":{"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{}}}}"#;
    let post = |token: Option<&str>| -> (u16, String) {
        let mut request = agent
            .post(&url)
            .header("Content-Type", "application/json")
            .header("Accept", "application/json, text/event-stream")
            .header("MCP-Protocol-Version", "2026-07-28")
            .header("Mcp-Method", "tools/list");
        if let Some(token) = token {
            request = request.header("Authorization", &format!("Bearer {token}"));
        }
        let mut reply = request.send(list).expect("POST /mcp");
        let status = reply.status().as_u16();
        (
            status,
            reply.body_mut().read_to_string().unwrap_or_default(),
        )
    };
    let (status, body) = post(None);
    assert_eq!(status, 401, "a request without the token: {body}");
    let (status, body) = post(Some(token));
    assert_eq!(status, 200, "{body}");
    for tool in ["files__files_list", "sessions__sessions_list"] {
        assert!(body.contains(tool), "{tool} is not served: {body}");
    }
    drop(server_guard);
}

#[test]
fn nginx_accepts_the_example_configuration() {
    let nginx = ["/usr/sbin/nginx", "/usr/bin/nginx"]
        .into_iter()
        .map(PathBuf::from)
        .find(|p| p.is_file())
        .unwrap_or_else(|| which(Path::new("nginx")));
    assert!(
        nginx.is_file(),
        "nginx is needed to check deploy/nginx.conf; install it with `tests/setup` (Debian's package)"
    );
    let prefix = tempfile::tempdir().expect("nginx prefix");
    let output = Command::new(&nginx)
        .arg("-t")
        .arg("-p")
        .arg(prefix.path())
        .arg("-c")
        .arg(deploy().join("nginx.conf"))
        .arg("-g")
        .arg(format!(
            "pid {0}/nginx.pid; error_log {0}/error.log;",
            prefix.path().display()
        ))
        .stdin(Stdio::null())
        .output()
        .expect("run nginx -t");
    let said = String::from_utf8_lossy(&output.stderr);
    assert!(
        output.status.success(),
        "nginx -t refused deploy/nginx.conf:\n{said}"
    );
    let conf = read(&deploy().join("nginx.conf"));
    assert!(
        conf.contains("proxy_buffering off;"),
        "SSE must not be buffered"
    );
    assert!(
        conf.contains("# hash $http_mcp_session_id consistent;"),
        "the handshake era's affinity is shown, off"
    );
}

#[test]
fn the_readme_section_on_serving_over_http_names_files_that_exist() {
    let readme = read(&root().join("README.md"));
    let start = readme
        .find("## Serving over HTTP")
        .expect("README.md has a \"Serving over HTTP\" section");
    let rest = &readme[start + 3..];
    let section = &rest[..rest.find("\n## ").unwrap_or(rest.len())];
    assert!(section.contains("modhost mcp --http"), "{section}");
    let mut named = 0;
    for word in section.split(|c: char| c.is_whitespace() || "`(),".contains(c)) {
        let word = word.trim_end_matches(['.', ':', ';']);
        if word.starts_with("deploy/") {
            named += 1;
            assert!(
                root().join(word).exists(),
                "README.md's \"Serving over HTTP\" names {word}, which does not exist"
            );
        }
    }
    assert!(named >= 3, "the section points at deploy/: {section}");

    // Its config.toml, with a real token's digest for the placeholder, is
    // one modhost accepts.
    let toml = section
        .split("```toml\n")
        .nth(1)
        .and_then(|rest| rest.split("```").next())
        .expect("the section's config.toml");
    let digest = token_entry("ci-bot", "a-test-token-of-enough-length-0123456789");
    let digest = digest
        .lines()
        .find_map(|l| l.strip_prefix("sha256 = "))
        .expect("a digest");
    assert!(toml.contains("\"<from modhost token new>\""), "{toml}");
    let home = crate::support::Home::new();
    home.write_config(&toml.replace("\"<from modhost token new>\"", digest));
    home.run(&["list", "--json"]).expect_code(0);
}

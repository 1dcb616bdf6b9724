//! `modhost install --bundled [NAME...] [--upgrade] [--from DIR]`: the
//! modules shipped with modhost, each with its knowledge files, in one
//! command.
//!
//! Design decisions:
//!
//! - **The binaries built or packaged with this `modhost`, nothing built on
//!   the fly.** The bundled modules are looked for, in order: in `--from DIR`
//!   (or `$MODHOST_BUNDLED_DIR`); in `<prefix>/lib/modhost/modules/`, beside
//!   the `bin/` holding this `modhost` (a package or release archive, each
//!   module a folder with its knowledge); beside this `modhost` when that
//!   folder is a cargo target profile (it holds `.fingerprint/`), where
//!   `cargo build` puts every workspace binary. Nothing else beside the
//!   binary is looked at: `/usr/bin/git` is not the git module. A module not
//!   found is named with the command that builds it, and then nothing is
//!   installed.
//! - **Knowledge compiled in.** Cargo builds executables, not folders, so
//!   the knowledge files under `modules/<name>/knowledge/` are embedded into
//!   `modhost` at build time (`build.rs`) and written beside the executable
//!   in a folder assembled for the install. A packaged module folder carries
//!   its own knowledge and is installed as it is.
//! - **The ordinary install, every check and the pin.** Each module goes
//!   through `Host::install` (described confined, checked by the conformance
//!   kit, its tree pinned), the pin naming where the bytes came from. An
//!   installed one is left alone and said so, with the `--upgrade` that
//!   replaces it (its state kept): running the command again is harmless.
//! - **Installing grants nothing, here too.** The git module runs the
//!   operator's git; when `[binaries]` does not grant one yet, the line to
//!   add is printed (the path found in `/usr/bin` or `/bin`), not written.
//! - **`mcp_bridge` is not among them:** it is not a module of its own but
//!   the program `install --mcp` stages with an MCP server (found beside
//!   `modhost` the same way).

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::{Context, bail};
use modhost::{Host, HostError, InstallRequest};

use super::super::exit_code::EXIT_REFUSED;

include!(concat!(env!("OUT_DIR"), "/bundled_knowledge.rs"));

/// The bundled modules, in the order they are installed.
pub(crate) const BUNDLED: &[&str] = &["files", "sessions", "notes", "git", "fetch"];

/// Folders under `modules/` that are not modules of their own (the unit
/// test holds `BUNDLED` and this to every folder there).
const NOT_MODULES: &[&str] = &["mcp_bridge"];

/// The `--bundled` flags of `modhost install`.
#[derive(Debug, Clone, clap::Args)]
pub struct BundledArgs {
    /// Install the modules shipped with modhost (files, sessions, notes,
    /// git, fetch) with their knowledge files, or only the NAMEs given:
    /// those built beside this modhost by cargo, or packaged with it.
    /// Installed ones are left alone (--upgrade replaces them).
    #[arg(long, value_name = "NAME", num_args = 0.., conflicts_with_all = ["path", "id", "sha256", "force", "mcp", "signature", "allow_unsigned"])]
    pub(super) bundled: Option<Vec<String>>,
    /// With --bundled: the folder holding the bundled modules (executables,
    /// or module folders), instead of beside this modhost.
    #[arg(
        long,
        value_name = "DIR",
        env = "MODHOST_BUNDLED_DIR",
        requires = "bundled"
    )]
    from: Option<PathBuf>,
}

/// Where one bundled module was found.
enum Found {
    /// An executable (cargo's output): its knowledge comes from `modhost`.
    Executable(PathBuf),
    /// A module folder (a package): installed as it is.
    Folder(PathBuf),
}

impl Found {
    fn path(&self) -> &Path {
        match self {
            Found::Executable(path) | Found::Folder(path) => path,
        }
    }
}

pub async fn run(host: &Host, args: &BundledArgs, upgrade: bool) -> anyhow::Result<ExitCode> {
    let names: Vec<&str> = match args.bundled.as_deref() {
        None | Some([]) => BUNDLED.to_vec(),
        Some(names) => {
            for name in names {
                if NOT_MODULES.contains(&name.as_str()) {
                    bail!(
                        "{name} is not a module of its own: `modhost install --mcp` stages it with an MCP server (nothing was installed)"
                    );
                }
                if !BUNDLED.contains(&name.as_str()) {
                    bail!(
                        "{name:?} is not a bundled module; the bundled modules are {} (nothing was installed)",
                        BUNDLED.join(", ")
                    );
                }
            }
            names.iter().map(String::as_str).collect()
        }
    };
    let places = search_places(args.from.as_deref())?;
    // Every module found before any is installed: a missing one installs
    // nothing, rather than half the set.
    let mut found = Vec::new();
    let mut missing = Vec::new();
    for name in &names {
        match find(&places, name) {
            Some(hit) => found.push((*name, hit)),
            None => missing.push(*name),
        }
    }
    if !missing.is_empty() {
        let looked = places
            .iter()
            .map(|p| p.display().to_string())
            .collect::<Vec<_>>()
            .join(", ");
        bail!(
            "the bundled module{} {} {} not in {}: build {} with `cargo build{}` (from the modhost repository; plain `cargo build` builds all of them), or name the folder holding them with --from DIR (nothing was installed)",
            if missing.len() == 1 { "" } else { "s" },
            missing.join(", "),
            if missing.len() == 1 { "is" } else { "are" },
            if looked.is_empty() {
                "any place this modhost knows".to_owned()
            } else {
                looked
            },
            if missing.len() == 1 { "it" } else { "them" },
            missing
                .iter()
                .map(|m| format!(" -p {m}"))
                .collect::<String>()
        );
    }

    let mut refused = 0;
    for (name, hit) in found {
        match install_one(host, name, &hit, upgrade).await {
            Ok(()) => {}
            Err(error) => {
                refused += 1;
                eprintln!("error: {name}: {error:#}");
            }
        }
    }
    if refused > 0 {
        eprintln!(
            "{refused} bundled module{} not installed (see above)",
            if refused == 1 { " was" } else { "s were" }
        );
        return Ok(ExitCode::from(EXIT_REFUSED));
    }
    Ok(ExitCode::SUCCESS)
}

/// Install (or upgrade, or leave alone) one bundled module.
async fn install_one(host: &Host, name: &str, hit: &Found, upgrade: bool) -> anyhow::Result<()> {
    match host.module(name).await {
        Ok(installed) if !upgrade => {
            outln!(
                "{name}: already installed at {} (left as it is; `modhost install --bundled {name} --upgrade` replaces it with the bundled build, keeping its state)",
                installed
                    .folder
                    .as_deref()
                    .unwrap_or(&installed.path)
                    .display()
            );
            return Ok(());
        }
        Ok(_) | Err(HostError::UnknownModule { .. }) => {}
        Err(other) => return Err(other.into()),
    }
    // A folder cargo's output and the embedded knowledge make one module of;
    // removed once installed (install copies it into the home).
    let assembled = match hit {
        Found::Executable(executable) => Some(assemble(name, executable)?),
        Found::Folder(_) => None,
    };
    let source = match &assembled {
        Some(dir) => dir.path().join(name),
        None => hit.path().to_path_buf(),
    };
    let report = host
        .install_with_origin(
            InstallRequest {
                source,
                id: Some(name.to_owned()),
                upgrade,
                ..InstallRequest::default()
            },
            format!("bundled {name}: {}", hit.path().display()),
        )
        .await?;
    for finding in &report.findings {
        eprintln!("{finding}");
    }
    let module = &report.module;
    let version = module.version.as_deref().unwrap_or("-");
    let at = module.folder.as_deref().unwrap_or(&module.path).display();
    match &report.replaced {
        Some(old) => outln!(
            "upgraded {name} {} -> {version} at {at}",
            old.version.as_deref().unwrap_or("-")
        ),
        None => outln!("installed {name} {version} at {at}"),
    }
    if let Some(note) = binary_notes(host, module) {
        outln!("{note}");
    }
    Ok(())
}

/// For a module that runs programs the operator has not granted, the line
/// that grants each (installing grants nothing).
fn binary_notes(host: &Host, module: &modhost::InstalledModule) -> Option<String> {
    let descriptor = module.descriptor.as_ref()?;
    let config = host.layout().config_path();
    let lines: Vec<String> = descriptor
        .binaries
        .iter()
        .filter(|b| !host.config().binaries.contains_key(&b.name))
        .map(|b| {
            let path = system_program(&b.name)
                .map(|p| p.display().to_string())
                .unwrap_or_else(|| "/absolute/path".into());
            format!(
                "  note: {} runs `{}`, which is not granted yet: add `{} = \"{path}\"` under [binaries] in {}",
                module.id,
                b.name,
                b.name,
                config.display()
            )
        })
        .collect();
    (!lines.is_empty()).then(|| lines.join("\n"))
}

/// `name` in the system's own program folders (`/usr/bin`, `/bin`), which
/// only the system's administrator writes: the path to suggest.
pub(crate) fn system_program(name: &str) -> Option<PathBuf> {
    // A declared name is the module author's: `/tmp/x` or `../../tmp/x`
    // joined to `/usr/bin` would name a program outside those folders.
    if name.is_empty() || name == "." || name == ".." || name.contains('/') {
        return None;
    }
    ["/usr/bin", "/bin"]
        .iter()
        .map(|dir| Path::new(dir).join(name))
        .find(|path| path.is_file())
}

/// `<dir>/<name>/<name>` plus the module's embedded knowledge files, in a
/// new temporary folder.
fn assemble(name: &str, executable: &Path) -> anyhow::Result<tempfile::TempDir> {
    let dir = tempfile::Builder::new()
        .prefix("modhost-bundled-")
        .tempdir()
        .context("creating a folder to assemble a bundled module in")?;
    let folder = dir.path().join(name);
    std::fs::create_dir(&folder).with_context(|| format!("creating {}", folder.display()))?;
    let program = folder.join(name);
    std::fs::copy(executable, &program)
        .with_context(|| format!("copying {} to {}", executable.display(), program.display()))?;
    for (module, relative, bytes) in KNOWLEDGE {
        if *module != name {
            continue;
        }
        let path = folder.join(relative);
        if let Some(parent) = path.parent() {
            std::fs::create_dir_all(parent)
                .with_context(|| format!("creating {}", parent.display()))?;
        }
        std::fs::write(&path, bytes).with_context(|| format!("writing {}", path.display()))?;
    }
    Ok(dir)
}

/// The places bundled modules are looked for, in order.
fn search_places(from: Option<&Path>) -> anyhow::Result<Vec<PathBuf>> {
    if let Some(from) = from {
        anyhow::ensure!(
            from.is_dir(),
            "--from {}: not a folder (nothing was installed)",
            from.display()
        );
        return Ok(vec![from.to_path_buf()]);
    }
    let exe = std::env::current_exe()
        .and_then(std::fs::canonicalize)
        .context("could not tell where modhost runs from, to find the bundled modules beside it; name their folder with --from DIR")?;
    let Some(bin) = exe.parent() else {
        return Ok(Vec::new());
    };
    let mut places = Vec::new();
    if let Some(prefix) = bin.parent() {
        let packaged = prefix.join("lib/modhost/modules");
        if packaged.is_dir() {
            places.push(packaged);
        }
    }
    // A cargo target profile folder (`target/debug`): every workspace
    // binary lands there, next to `.fingerprint/`.
    if bin.join(".fingerprint").is_dir() {
        places.push(bin.to_path_buf());
    }
    Ok(places)
}

/// Module `name` in the first place that holds it: a folder (a packaged
/// module), or an executable file.
fn find(places: &[PathBuf], name: &str) -> Option<Found> {
    places.iter().find_map(|place| {
        let path = place.join(name);
        let meta = std::fs::metadata(&path).ok()?;
        if meta.is_dir() {
            Some(Found::Folder(path))
        } else if meta.is_file() {
            Some(Found::Executable(path))
        } else {
            None
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A module folder added to the workspace is either bundled or named
    /// as not a module, and every bundled module is a folder there.
    #[test]
    fn every_module_folder_is_bundled_or_named_as_not_a_module() {
        let mut expected: Vec<&str> = BUNDLED.iter().chain(NOT_MODULES).copied().collect();
        expected.sort_unstable();
        assert_eq!(MODULE_FOLDERS, expected.as_slice());
    }

    /// The knowledge embedded is the knowledge in the tree (sessions has
    /// some today).
    #[test]
    fn the_embedded_knowledge_is_the_modules_knowledge() {
        let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../modules");
        assert!(
            KNOWLEDGE
                .iter()
                .any(|(module, path, _)| *module == "sessions" && path.starts_with("knowledge/")),
            "sessions' knowledge is embedded"
        );
        for (module, relative, bytes) in KNOWLEDGE {
            let on_disk = std::fs::read(root.join(module).join(relative)).unwrap();
            assert_eq!(&on_disk, bytes, "{module}/{relative}");
        }
    }

    #[test]
    fn a_folder_is_found_before_an_executable_and_nothing_else_is() {
        let dir = tempfile::tempdir().unwrap();
        let first = dir.path().join("first");
        let second = dir.path().join("second");
        std::fs::create_dir_all(first.join("files")).unwrap();
        std::fs::create_dir_all(&second).unwrap();
        std::fs::write(second.join("notes"), b"").unwrap();
        let places = [first.clone(), second.clone()];
        assert!(
            matches!(find(&places, "files"), Some(Found::Folder(p)) if p == first.join("files"))
        );
        assert!(
            matches!(find(&places, "notes"), Some(Found::Executable(p)) if p == second.join("notes"))
        );
        assert!(find(&places, "git").is_none());
    }
}

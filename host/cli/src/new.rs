//! `modhost new NAME --lang rust|python|node|sh [--dir PARENT] [--sdk PATH]`:
//! write a module skeleton that installs, passes `modhost conformance` and
//! answers `modhost invoke` unchanged.
//!
//! Every skeleton has one capability (`NAME.greet`) with input and output
//! schemas, a `state` root it reads and writes (a greeting counter), an
//! example (in the descriptor, and `example-input.json` for `invoke
//! --input @example-input.json`). Python, Node and sh modules declare
//! themselves in `descriptor.json` and get a small helper beside their
//! entry file that reads the request and writes the response, standard
//! library (or shell builtins) only, so the folder is the whole module:
//! `modhost install DIR`. A Rust module uses `modsdk`.
//!
//! Design decisions:
//!
//! - **Where modsdk comes from.** modsdk is not published yet, so the
//!   Rust skeleton depends on it by path: `--sdk PATH`, else the `sdk/`
//!   of the source tree this modhost was built from when it is still
//!   there, else the version dependency `modsdk = "0.1"` (what works once
//!   it is published), with a comment saying so.
//! - **Nothing half-written, nothing overwritten.** An existing NAME is
//!   refused; the skeleton is written into a hidden sibling folder and
//!   renamed into place.
//! - **No host home.** `new` touches only the folder it creates.

use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::Context;

/// The languages a skeleton is written in.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Lang {
    Rust,
    Python,
    Node,
    Sh,
}

#[derive(Debug, clap::Args)]
pub struct Args {
    /// The module id, and the name of the folder created (lowercase letters,
    /// digits, '-' and '_', starting with a letter).
    name: String,
    /// The language of the skeleton.
    #[arg(long, value_enum)]
    lang: Lang,
    /// The folder to create it in (default: the current directory).
    #[arg(long, value_name = "PARENT", default_value = ".")]
    dir: PathBuf,
    /// Rust only: the modsdk source folder to depend on by path.
    #[arg(long, value_name = "PATH")]
    sdk: Option<PathBuf>,
}

const DESCRIPTOR: &str = include_str!("new/descriptor.json");
const EXAMPLE_INPUT: &str = include_str!("new/example-input.json");

/// One file of a skeleton: its path in the module folder, its text, and
/// whether it is the executable entry.
struct File {
    path: &'static str,
    text: String,
    executable: bool,
}

pub fn run(args: &Args) -> anyhow::Result<ExitCode> {
    let name = &args.name;
    anyhow::ensure!(
        modhost::module_id::is_module_id(name),
        "{name:?} is not a valid module id: lowercase letters, digits, '-' and '_', starting with a letter, at most 64 characters"
    );
    let target = args.dir.join(name);
    anyhow::ensure!(
        std::fs::symlink_metadata(&target).is_err(),
        "{} already exists; nothing was written (choose another NAME or --dir)",
        target.display()
    );
    let files = skeleton(name, args.lang, args.sdk.as_deref())?;
    write_atomically(&target, &files)?;
    outln!(
        "created {} ({:?} module {name})",
        target.display(),
        args.lang
    );
    let dir = target.display();
    match args.lang {
        Lang::Rust => outln!(
            "next: cd {dir} && cargo build --release && modhost install target/release/{name}"
        ),
        _ => outln!("next: modhost install {dir}"),
    }
    outln!(
        "then: modhost conformance {name} && modhost invoke {name} greet --input @{dir}/example-input.json"
    );
    Ok(ExitCode::SUCCESS)
}

/// The files of a `lang` skeleton named `name`.
fn skeleton(name: &str, lang: Lang, sdk: Option<&Path>) -> anyhow::Result<Vec<File>> {
    let fill = |text: &str| text.replace("{{NAME}}", name);
    let file = |path, text: &str, executable| File {
        path,
        text: fill(text),
        executable,
    };
    let entry = |text: &str| File {
        path: "",
        text: fill(text),
        executable: true,
    };
    let mut files = vec![file("example-input.json", EXAMPLE_INPUT, false)];
    match lang {
        Lang::Rust => {
            let cargo =
                include_str!("new/rust_Cargo.toml").replace("{{MODSDK}}", &modsdk_dependency(sdk)?);
            files.push(file("Cargo.toml", &cargo, false));
            files.push(file("src/main.rs", include_str!("new/rust_main.rs"), false));
        }
        Lang::Python => {
            files.push(file("descriptor.json", DESCRIPTOR, false));
            files.push(file(
                "modhost_module.py",
                include_str!("new/python_helper.py"),
                false,
            ));
            files.push(entry(include_str!("new/python_entry.py")));
        }
        Lang::Node => {
            files.push(file("descriptor.json", DESCRIPTOR, false));
            files.push(file(
                "modhost_module.js",
                include_str!("new/node_helper.js"),
                false,
            ));
            files.push(entry(include_str!("new/node_entry.js")));
        }
        Lang::Sh => {
            files.push(file("descriptor.json", DESCRIPTOR, false));
            files.push(file("module.sh", include_str!("new/sh_helper.sh"), false));
            files.push(entry(include_str!("new/sh_entry.sh")));
        }
    }
    Ok(files)
}

/// The `modsdk = ...` line of the Rust skeleton's Cargo.toml.
fn modsdk_dependency(sdk: Option<&Path>) -> anyhow::Result<String> {
    let built_from = Path::new(env!("CARGO_MANIFEST_DIR")).join("../sdk");
    let path = match sdk {
        Some(path) => {
            Some(std::fs::canonicalize(path).with_context(|| format!("--sdk {}", path.display()))?)
        }
        None => std::fs::canonicalize(&built_from).ok(),
    };
    Ok(match path {
        Some(path) => {
            anyhow::ensure!(
                path.join("Cargo.toml").is_file(),
                "{} holds no Cargo.toml: --sdk must name modsdk's source folder",
                path.display()
            );
            format!("modsdk = {{ path = {:?} }}", path.display().to_string())
        }
        None => "# modsdk from crates.io; until it is published, point at a checkout:\n# modsdk = { path = \"/path/to/modhost/sdk\" }\nmodsdk = \"0.1\"".to_owned(),
    })
}

/// Write `files` into a hidden sibling of `target`, then rename it into
/// place: `target` appears whole or not at all.
fn write_atomically(target: &Path, files: &[File]) -> anyhow::Result<()> {
    let parent = target.parent().unwrap_or(Path::new("."));
    let name = target
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    std::fs::create_dir_all(parent).with_context(|| format!("creating {}", parent.display()))?;
    let temp = tempfile::Builder::new()
        .prefix(&format!(".{name}.new-"))
        .tempdir_in(parent)
        .with_context(|| format!("creating a folder in {}", parent.display()))?;
    for file in files {
        let path = if file.path.is_empty() {
            temp.path().join(&name)
        } else {
            temp.path().join(file.path)
        };
        if let Some(dir) = path.parent() {
            std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
        }
        std::fs::write(&path, &file.text).with_context(|| format!("writing {}", path.display()))?;
        let mode = if file.executable { 0o755 } else { 0o644 };
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(mode))
            .with_context(|| format!("setting the mode of {}", path.display()))?;
    }
    std::fs::set_permissions(temp.path(), std::fs::Permissions::from_mode(0o755))
        .with_context(|| format!("setting the mode of {}", temp.path().display()))?;
    let temp = temp.keep();
    // rename(2) replaces an empty folder created meanwhile, never a full one.
    if let Err(e) = std::fs::rename(&temp, target) {
        let _ = std::fs::remove_dir_all(&temp);
        return Err(e).with_context(|| format!("moving the skeleton to {}", target.display()));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_existing_folder_is_refused_and_left_alone() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir(dir.path().join("taken")).unwrap();
        std::fs::write(dir.path().join("taken/mine"), "keep").unwrap();
        let args = Args {
            name: "taken".into(),
            lang: Lang::Sh,
            dir: dir.path().to_path_buf(),
            sdk: None,
        };
        let err = run(&args).unwrap_err();
        assert!(err.to_string().contains("already exists"), "{err}");
        assert_eq!(
            std::fs::read_to_string(dir.path().join("taken/mine")).unwrap(),
            "keep"
        );
        let names: Vec<_> = std::fs::read_dir(dir.path()).unwrap().flatten().collect();
        assert_eq!(names.len(), 1, "nothing else may be written: {names:?}");
    }

    #[test]
    fn every_skeleton_names_its_module_everywhere() {
        for lang in [Lang::Rust, Lang::Python, Lang::Node, Lang::Sh] {
            let files = skeleton("greeter", lang, None).unwrap();
            for file in &files {
                assert!(
                    !file.text.contains("{{"),
                    "{lang:?} {}: unfilled",
                    file.path
                );
            }
            assert!(
                files.iter().any(|f| f.text.contains("greeter.greet")),
                "{lang:?}"
            );
        }
    }
}
